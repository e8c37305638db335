//! Executor benchmarks, printed as a table with their baselines measured
//! in the same run.
//!
//! 1. Throughput: a 10,000-call response of a trivial gadget (Calculator
//!    `add`, a fresh WebAssembly instance per call), parsed, scheduled and
//!    run; calls per second, beside the bare runtime making the same
//!    10,000 calls with no parser and no scheduler.
//! 2. Scheduler overhead per call: the same 10,000 calls to the built-in
//!    viewer (no WebAssembly): what parsing, scheduling, events and history
//!    cost per call; and the pure scheduler alone. The same under 20
//!    approval rules that match no call, and with every call waiting for
//!    an approval given at once (what the rules cost the host).
//!    Throughput with the audit journal on (runs alternating with it
//!    off), its bytes per call, the same with a recorder that keeps
//!    nothing (what the layers cost before the journal's own work), and
//!    the journal alone: wall time and CPU, its writer thread's included.
//! 3. Mid-stream start latency: a response sent block by block; the time
//!    from sending the chunk that ends a block to its call starting.
//! 4. 100 independent calls to a gadget that sleeps 200 ms: the wall time
//!    should be near one sleep, not a hundred.
//! 5. Rows 1 and 2 again with OpenTelemetry tracing on (a span per call,
//!    the batch processor configured as the binary configures it): its
//!    share of throughput in runs alternating with tracing paused, its
//!    cost per call, and how many of the spans the exporter received.
//!
//! Run: `cargo bench -p gadget-exec --bench executor` (needs the guests
//! built: `scripts/build-guests.sh`).

/// The `gadget` binary's allocator (host/cli/src/main.rs), so the figures
/// are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gadget_core::approval::{
    ApprovalRequest, Approvals, Approver, Decider, RuleAction, RuleSpec, Rules, Verdict,
    VerdictFuture,
};
use gadget_core::schedule::{CallSpec, DependencyPolicy, ScheduleConfig, Scheduler};
use gadget_core::scope::{CallRecord, CallScope, Origin, Recorder};
use gadget_exec::audit::{Journal, JournalOptions};
use gadget_exec::{ExecConfig, ExecEvent, Executor};
use gadget_runtime::loader::{self, LoadOptions, NoProgress, Registry};
use gadget_runtime::{Runtime, RuntimeConfig};
use serde_json::json;

const CALLS: usize = 10_000;

fn plugins_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plugins"))
}

async fn registry() -> Arc<Registry> {
    let runtime = Arc::new(Runtime::new(&RuntimeConfig::default()).expect("runtime"));
    let (registry, errors) = loader::load_dirs(
        runtime,
        &[plugins_dir()],
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "build the guests first: {errors:?}");
    Arc::new(registry)
}

fn response(calls: usize, block: impl Fn(usize) -> String) -> String {
    (0..calls).map(block).collect()
}

fn calculator_block(i: usize) -> String {
    format!(
        "!!!GADGET_START:Calculator:c{i}\n!!!ARG:operation\nadd\n!!!ARG:a\n{i}\n!!!ARG:b\n1\n!!!GADGET_END\n"
    )
}

/// Runs a whole response (sent in 4 KiB chunks) and returns the wall time
/// and the number of successful calls.
async fn run(registry: &Arc<Registry>, config: ExecConfig, text: &str) -> (Duration, usize) {
    run_with(registry, config, text, None, None).await
}

async fn run_with(
    registry: &Arc<Registry>,
    config: ExecConfig,
    text: &str,
    approvals: Option<Arc<Approvals>>,
    recorder: Option<Arc<dyn Recorder>>,
) -> (Duration, usize) {
    // On a worker thread, as `gadget run` runs its commands (cli.rs).
    let (registry, text) = (registry.clone(), text.to_string());
    tokio::spawn(async move { run_here(&registry, config, &text, approvals, recorder).await })
        .await
        .unwrap()
}

/// Keeps no record: a call's layers with nothing in them to do, which is
/// what the journal's layer costs before the journal's own work.
struct NoRecord;

impl Recorder for NoRecord {
    fn failure(&self) -> Option<String> {
        None
    }
    fn refused(
        &self,
        _: &str,
        _: &str,
        _: &gadget_core::events::Failure,
        _: &gadget_core::client::ClientId,
    ) {
    }
    fn call(
        &self,
        _: gadget_core::scope::Entry<'_>,
        _: Option<Arc<Origin>>,
        _: &gadget_core::client::ClientId,
    ) -> Arc<dyn CallRecord> {
        Arc::new(NoRecord)
    }
}

impl CallRecord for NoRecord {
    fn started(&self, _: &serde_json::Value, _: Option<Duration>) {}
    fn event(&self, _: &gadget_core::ledger::CallEvent) {}
    fn finished(&self, _: &gadget_core::call::CallReport, _: bool) {}
}

/// Approves every call at once: what approval costs the host itself.
struct ApproveAll;

impl Approver for ApproveAll {
    fn decide<'a>(&'a self, _request: &'a ApprovalRequest) -> VerdictFuture<'a> {
        Box::pin(async {
            Verdict::Approved {
                by: Decider::ApproveAll,
                for_session: false,
            }
        })
    }
}

/// The operator's rules: `patterns` approve patterns and as many argument
/// rules (regexes) on the viewer's `/id`, none matching `none`, plus
/// `every` (an approve pattern for the viewer itself) when asked.
fn approvals(patterns: usize, every: bool) -> Arc<Approvals> {
    let mut approve: Vec<String> = (0..patterns).map(|i| format!("Never{i}*")).collect();
    if every {
        approve.push("GadgetOutputViewer".into());
    }
    let rules = (0..patterns)
        .map(|i| RuleSpec {
            gadget: "GadgetOutput*".into(),
            param: "/id".into(),
            matches: None,
            regex: Some(format!("^secret-{i}-[0-9]+$")),
            action: RuleAction::Deny,
            reason: None,
            kind: None,
            client: None,
        })
        .collect();
    let rules = Rules::new(approve, rules, None).unwrap();
    Arc::new(Approvals::new(Arc::new(rules), Arc::new(ApproveAll)))
}

async fn run_here(
    registry: &Arc<Registry>,
    config: ExecConfig,
    text: &str,
    approvals: Option<Arc<Approvals>>,
    recorder: Option<Arc<dyn Recorder>>,
) -> (Duration, usize) {
    let mut executor = Executor::new(registry.clone(), config).unwrap();
    if let Some(approvals) = approvals {
        executor = executor.with_approvals(approvals);
    }
    if let Some(recorder) = recorder {
        let scope = CallScope {
            recorder: Some(recorder),
            ..CallScope::default()
        };
        executor = executor.with_scope(Arc::new(scope));
    }
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let chunks: Vec<String> = text
        .as_bytes()
        .chunks(4096)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let started = Instant::now();
    tokio::spawn(async move {
        for chunk in chunks {
            tx.send(chunk).await.unwrap();
        }
    });
    let summary = executor.run_response(rx, |_| {}).await;
    (started.elapsed(), summary.succeeded)
}

/// CPU time this process's threads have used, ns (each thread's
/// `schedstat`: the journal's writer thread is one of them).
fn process_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Counts the spans it is given and keeps none.
#[derive(Debug)]
struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl opentelemetry_sdk::trace::SpanExporter for Counted {
    fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> impl std::future::Future<Output = opentelemetry_sdk::error::OTelSdkResult> + Send {
        self.0
            .fetch_add(batch.len(), std::sync::atomic::Ordering::Relaxed);
        std::future::ready(Ok(()))
    }
}

fn percentile(mut values: Vec<f64>, p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let registry = registry().await;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("executor benchmarks ({cores} cores)\n");

    // 1. Throughput of real calls, beside the bare runtime in parallel.
    let text = response(CALLS, calculator_block);
    let _warm = run(&registry, ExecConfig::default(), &text[..text.len() / 10]).await;
    let mut executor_rates = Vec::new();
    for _ in 0..3 {
        let (took, ok) = run(&registry, ExecConfig::default(), &text).await;
        assert_eq!(ok, CALLS);
        executor_rates.push(CALLS as f64 / took.as_secs_f64());
    }
    let mut bare_rates = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        let gadget = registry.get("Calculator").unwrap().clone();
        let per_task = CALLS / cores.max(1);
        for t in 0..cores {
            let gadget = gadget.clone();
            set.spawn(async move {
                for i in 0..per_task {
                    let params = json!({"operation": "add", "a": t * per_task + i, "b": 1});
                    let report = gadget.invoke(params.to_string(), "c", None).await;
                    assert!(report.outcome.is_ok());
                }
            });
        }
        set.join_all().await;
        bare_rates.push((per_task * cores) as f64 / started.elapsed().as_secs_f64());
    }
    let (exec_rate, bare_rate) = (median(executor_rates), median(bare_rates));
    let mut narrow_rates = Vec::new();
    for _ in 0..3 {
        let config = ExecConfig {
            schedule: ScheduleConfig {
                max_parallel: cores,
                ..ScheduleConfig::default()
            },
            ..ExecConfig::default()
        };
        let (took, ok) = run(&registry, config, &text).await;
        assert_eq!(ok, CALLS);
        narrow_rates.push(CALLS as f64 / took.as_secs_f64());
    }
    let narrow_rate = median(narrow_rates);
    // The same with the audit journal on: a start and an end record per
    // call, hash-chained, in a temporary file.
    let journal_dir = tempfile::tempdir().unwrap();
    let mut journal_rates = Vec::new();
    // Each journal run right after a run without it: on two shared cores
    // the machine's speed drifts more than the journal costs.
    let mut unjournaled_rates = Vec::new();
    let mut layered_rates = Vec::new();
    let mut journal_bytes = 0;
    for round in 0..5 {
        let (took, ok) = run(&registry, ExecConfig::default(), &text).await;
        assert_eq!(ok, CALLS);
        unjournaled_rates.push(CALLS as f64 / took.as_secs_f64());
        let path = journal_dir.path().join(format!("audit-{round}.jsonl"));
        let options = JournalOptions {
            session: "bench".into(),
            ..JournalOptions::default()
        };
        let journal = Arc::new(Journal::open(&path, options).unwrap());
        let (took, ok) = run_with(
            &registry,
            ExecConfig::default(),
            &text,
            None,
            Some(journal.recorder()),
        )
        .await;
        assert_eq!(ok, CALLS);
        drop(journal);
        journal_rates.push(CALLS as f64 / took.as_secs_f64());
        let nothing: Arc<dyn Recorder> = Arc::new(NoRecord);
        let (took, ok) =
            run_with(&registry, ExecConfig::default(), &text, None, Some(nothing)).await;
        assert_eq!(ok, CALLS);
        layered_rates.push(CALLS as f64 / took.as_secs_f64());
        journal_bytes = std::fs::metadata(&path).unwrap().len();
    }
    let journal_rate = median(journal_rates);
    let unjournaled_rate = median(unjournaled_rates);
    // What one call's two records cost on one thread, without the runtime
    // around it: the journal's own share of a call.
    let tool: Arc<dyn gadget_core::tool::Tool> = registry.get("Calculator").unwrap().clone();
    let (mut record_costs, mut record_cpu) = (Vec::new(), Vec::new());
    for round in 0..5 {
        let path = journal_dir.path().join(format!("records-{round}.jsonl"));
        let journal = Arc::new(Journal::open(&path, JournalOptions::default()).unwrap());
        let params = json!({"operation": "add", "a": 1, "b": 2});
        let report = gadget_core::call::CallReport::of(
            Ok(gadget_core::call::Outcome::Result {
                result: "3".into(),
                details: None,
                rich: None,
            }),
            Duration::from_micros(20),
        );
        let journal_recorder = journal.recorder();
        let cpu = process_cpu_ns();
        let started = Instant::now();
        for i in 0..CALLS {
            let id = format!("c{i}");
            let entry = gadget_core::scope::Entry {
                id: &id,
                name: tool.name(),
                kind: gadget_core::scope::EntryKind::Call,
            };
            let client = gadget_core::client::ClientId::Local;
            let recorder = journal_recorder.call(entry, tool.origin(), &client);
            recorder.started(&params, None);
            recorder.finished(&report, false);
        }
        journal.flush();
        record_costs.push(started.elapsed().as_secs_f64() * 1e9 / CALLS as f64);
        record_cpu.push((process_cpu_ns() - cpu) as f64 / CALLS as f64);
    }

    // 2. Overhead per call without WebAssembly: the built-in viewer.
    let viewer = response(CALLS, |i| {
        format!("!!!GADGET_START:GadgetOutputViewer:v{i}\n!!!ARG:id\nnone\n!!!GADGET_END\n")
    });
    let mut viewer_costs = Vec::new();
    for _ in 0..5 {
        let (took, ok) = run(&registry, ExecConfig::default(), &viewer).await;
        assert_eq!(ok, CALLS);
        viewer_costs.push(took.as_secs_f64() * 1e9 / CALLS as f64);
    }
    // With the operator's rules: 10 approve patterns and 10 argument
    // regexes that match no call; then every call approved at once.
    let mut ruled_costs = Vec::new();
    let mut approved_costs = Vec::new();
    for _ in 0..5 {
        let ruled = Some(approvals(10, false));
        let (took, ok) = run_with(&registry, ExecConfig::default(), &viewer, ruled, None).await;
        assert_eq!(ok, CALLS);
        ruled_costs.push(took.as_secs_f64() * 1e9 / CALLS as f64);
        let every = Some(approvals(10, true));
        let (took, ok) = run_with(&registry, ExecConfig::default(), &viewer, every, None).await;
        assert_eq!(ok, CALLS);
        approved_costs.push(took.as_secs_f64() * 1e9 / CALLS as f64);
    }
    let mut scheduler_costs = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let mut scheduler = Scheduler::new(ScheduleConfig::default());
        let mut policy = |_: usize, _: &str, _: &str| DependencyPolicy::Skip;
        for i in 0..CALLS {
            let spec = CallSpec {
                invocation_id: format!("c{i}"),
                dependencies: if i > 0 {
                    vec![format!("c{}", i - 1)]
                } else {
                    vec![]
                },
                gadget: None,
            };
            let (ix, _) = scheduler.add(spec, &mut policy);
            let _ = scheduler.finished(ix, Ok(()), false, &mut policy);
        }
        scheduler_costs.push(started.elapsed().as_secs_f64() * 1e9 / CALLS as f64);
    }

    // 3. Mid-stream start latency: one block per chunk, 2 ms apart.
    let mut latencies = Vec::new();
    {
        let mut executor = Executor::new(registry.clone(), ExecConfig::default()).unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let sent: Arc<std::sync::Mutex<Vec<Instant>>> = Arc::default();
        let sent_by_sender = sent.clone();
        tokio::spawn(async move {
            for i in 0..300 {
                let block = calculator_block(i);
                sent_by_sender.lock().unwrap().push(Instant::now());
                tx.send(block).await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        executor
            .run_response(rx, |event| {
                if let ExecEvent::CallStarted { id, .. } = event {
                    let i: usize = id[1..].parse().unwrap();
                    let at = sent.lock().unwrap()[i];
                    latencies.push(at.elapsed().as_secs_f64() * 1e6);
                }
            })
            .await;
    }

    // 4. 100 sleeps of 200 ms.
    let sleeps = response(100, |i| {
        format!("!!!GADGET_START:Sleep:s{i}\n!!!ARG:ms\n200\n!!!GADGET_END\n")
    });
    let (sleep_wall, ok) = run(&registry, ExecConfig::default(), &sleeps).await;
    assert_eq!(ok, 100);

    // 5. Last, since it cannot be undone in a process: tracing on, with
    // the SDK's batch processor (as the binary installs it) and an
    // exporter that counts and drops (what is measured is the cost on
    // the calls' path; exporting runs on the processor's own thread).
    let exported = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // The processor as the binary configures it (host/cli telemetry.rs).
    let processor =
        opentelemetry_sdk::trace::BatchSpanProcessor::builder(Counted(exported.clone()))
            .with_batch_config(
                opentelemetry_sdk::trace::BatchConfigBuilder::default()
                    .with_max_queue_size(gadget_exec::telemetry::SPAN_QUEUE_SPANS)
                    .build(),
            )
            .build();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_span_processor(processor)
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    gadget_exec::telemetry::enable();
    // Each traced run right after one with tracing paused, as the journal's.
    let (mut traced_rates, mut untraced_rates) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        gadget_exec::telemetry::pause(true);
        let (took, ok) = run(&registry, ExecConfig::default(), &text).await;
        assert_eq!(ok, CALLS);
        untraced_rates.push(CALLS as f64 / took.as_secs_f64());
        gadget_exec::telemetry::pause(false);
        let (took, ok) = run(&registry, ExecConfig::default(), &text).await;
        assert_eq!(ok, CALLS);
        traced_rates.push(CALLS as f64 / took.as_secs_f64());
    }
    let mut traced_costs = Vec::new();
    for _ in 0..5 {
        let (took, ok) = run(&registry, ExecConfig::default(), &viewer).await;
        assert_eq!(ok, CALLS);
        traced_costs.push(took.as_secs_f64() * 1e9 / CALLS as f64);
    }
    let _ = provider.shutdown();
    let traced_spans = exported.load(std::sync::atomic::Ordering::Relaxed);

    println!("| measure | gadget-host | baseline (same run) |");
    println!("|---|---|---|");
    println!(
        "| 10,000 Calculator calls in one response (parse, schedule, fresh instance each) | {exec_rate:.0} calls/s | bare runtime, same calls on {cores} tasks: {bare_rate:.0} calls/s ({:.0}%) |",
        exec_rate / bare_rate * 100.0
    );
    println!(
        "| the same with the audit journal on ({:.0} bytes per call; five runs, each after one with it off) | {journal_rate:.0} calls/s | with it off, alternating: {unjournaled_rate:.0} calls/s ({:.0}%) |",
        journal_bytes as f64 / CALLS as f64,
        journal_rate / unjournaled_rate * 100.0
    );
    println!(
        "| the same with a recorder that keeps nothing (the layers' own cost, before the journal's work) | {:.0} calls/s | with it off, alternating: {unjournaled_rate:.0} calls/s ({:.0}%) |",
        median(layered_rates.clone()),
        median(layered_rates) / unjournaled_rate * 100.0
    );
    println!(
        "| the journal alone: a call's start and end records from one thread, until written | {:.2} µs per call ({:.2} µs of CPU, the writer's included) | |",
        median(record_costs) / 1e3,
        median(record_cpu) / 1e3
    );
    println!(
        "| the same with OpenTelemetry tracing on (an `execute_tool` span per call; {traced_spans} of {} spans exported; five runs, each after one with it paused) | {:.0} calls/s | with it paused, alternating: {:.0} calls/s ({:.0}%) |",
        5 * CALLS + 5 * CALLS,
        median(traced_rates.clone()),
        median(untraced_rates.clone()),
        median(traced_rates) / median(untraced_rates) * 100.0
    );
    println!(
        "| the same with `--max-parallel {cores}` | {narrow_rate:.0} calls/s ({:.0}% of bare) | |",
        narrow_rate / bare_rate * 100.0
    );
    println!(
        "| executor overhead per call (10,000 built-in viewer calls: parse, schedule, events, history) | {:.2} µs | pure scheduler alone: {:.2} µs |",
        median(viewer_costs.clone()) / 1e3,
        median(scheduler_costs) / 1e3
    );
    println!(
        "| the same under 20 approval rules matching no call (10 patterns naming other gadgets, 10 argument regexes tried on each call) | {:.2} µs | no rules: {:.2} µs |",
        median(ruled_costs) / 1e3,
        median(viewer_costs.clone()) / 1e3
    );
    println!(
        "| the same, every call waiting for approval (approved at once) | {:.2} µs | no rules: {:.2} µs |",
        median(approved_costs) / 1e3,
        median(viewer_costs.clone()) / 1e3
    );
    println!(
        "| the same with tracing on (a span per call, through the SDK's batch processor) | {:.2} µs | off: {:.2} µs |",
        median(traced_costs) / 1e3,
        median(viewer_costs.clone()) / 1e3
    );
    println!(
        "| mid-stream start latency, block terminator sent → call started (300 blocks) | median {:.0} µs, p99 {:.0} µs | — |",
        median(latencies.clone()),
        percentile(latencies, 0.99)
    );
    println!(
        "| 100 independent calls sleeping 200 ms | {:.0} ms wall | one sleep: 200 ms; sequential: 20,000 ms |",
        sleep_wall.as_secs_f64() * 1e3
    );
}
