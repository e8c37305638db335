//! Runtime benchmarks, printed with their baselines measured in the same run.
//!
//! 1. Call overhead: the full `call` path (validate, fresh instance, invoke,
//!    collect) of a trivial Rust gadget, beside bare wasmtime (`InstancePre`,
//!    instantiate and call of the same component, no validation, no limits,
//!    no ledger). Goal: ratio at most 1.5.
//! 2. Throughput with calls in parallel on every core. Goal: 20,000 calls/s on 2 cores.
//! 3. Deadline precision: a loop-forever gadget with 100 ms and 1 s timeouts
//!    gets its error no later than grace + 5 ms after the deadline; the
//!    ticker costs under 1% of a core.
//! 4. Start-up: `gadget list` over the shipped plugins, cold and warm cache.
//! 5. Grants: a call of a gadget with grants (a preopened directory, two
//!    environment variables, an HTTP origin) beside the same call with
//!    none; and a GET to a local server through the host (a fresh instance,
//!    the policy checks, reqwest behind wasi:http) beside the same GET with
//!    reqwest directly.
//!
//! Run: `cargo bench -p gadget-host --bench runtime` (builds the guests first).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gadget_host::limits::Limits;
use gadget_host::loader::{self, LoadOptions, NoProgress, PluginSource, Registry};
use gadget_host::runtime::{CallRequest, Runtime, RuntimeConfig};
use serde_json::{Value, json};
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

mod bare {
    wasmtime::component::bindgen!({
        path: "../../wit/gadget@0.1.0",
        world: "plugin",
        exports: { default: async },
    });
}

/// The same for `gadget:plugin@0.2.0` components (0.1.0 plus `llm`), which
/// is what the SDKs build now.
mod bare2 {
    wasmtime::component::bindgen!({
        path: "../../wit/gadget@0.2.0",
        world: "plugin",
        exports: { default: async },
        with: { "gadget:plugin/types@0.2.0": super::bare::gadget::plugin::types },
    });
}

/// The same for `gadget:plugin@0.3.0` components (results in parts,
/// `ask`, the catalog), which is what the SDKs build now. Its types are
/// its own.
mod bare3 {
    wasmtime::component::bindgen!({
        path: "../../wit/gadget@0.3.0",
        world: "plugin",
        exports: { default: async },
    });
}

/// A bare instance-pre of any contract version.
enum BarePre {
    V1(bare::PluginPre<Bare>),
    V2(bare2::PluginPre<Bare>),
    V3(bare3::PluginPre<Bare>),
}

impl BarePre {
    fn new(linker: &Linker<Bare>, component: &wasmtime::component::Component) -> BarePre {
        let pre = linker.instantiate_pre(component).unwrap();
        if let Ok(pre) = bare3::PluginPre::new(pre.clone()) {
            return BarePre::V3(pre);
        }
        match bare2::PluginPre::new(pre.clone()) {
            Ok(pre) => BarePre::V2(pre),
            Err(_) => BarePre::V1(bare::PluginPre::new(pre).unwrap()),
        }
    }

    /// Instantiates and invokes; whether the gadget answered `ok`.
    async fn invoke(&self, store: &mut Store<Bare>, gadget: &str, params: &str) -> bool {
        // The two versions' generated types differ; the calls are the same.
        macro_rules! invoke {
            ($pre:expr) => {{
                let plugin = $pre.instantiate_async(&mut *store).await.unwrap();
                let out = plugin.gadget_plugin_gadget();
                out.call_invoke(&mut *store, "b", gadget, params)
                    .await
                    .unwrap()
                    .is_ok()
            }};
        }
        match self {
            BarePre::V1(pre) => invoke!(pre),
            BarePre::V2(pre) => invoke!(pre),
            BarePre::V3(pre) => invoke!(pre),
        }
    }
}

/// Store data of the bare baseline: WASI and wasi:http (components import
/// them) and no-op host imports.
struct Bare {
    wasi: WasiCtx,
    table: ResourceTable,
    http: wasmtime_wasi_http::WasiHttpCtx,
    hooks: NoHttp,
}

/// wasi:http with every request refused: none leaves the bare baseline.
struct NoHttp;

type BodyDone = Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>;

impl wasmtime_wasi_http::WasiHttpHooks for NoHttp {
    fn send_request(
        &mut self,
        _: http::Request<wasmtime_wasi_http::WasiBody>,
        _: Option<wasmtime_wasi_http::RequestOptions>,
        _: BodyDone,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (http::Response<wasmtime_wasi_http::WasiBody>, BodyDone),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}

impl wasmtime_wasi_http::WasiHttpView for Bare {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl bare::gadget::plugin::types::Host for Bare {}
/// No-op host imports, for each contract version (their types are
/// shared, their traits are not).
macro_rules! no_op_host {
    ($host:path) => {
        impl $host for Bare {
            fn log(&mut self, _: bare::gadget::plugin::types::Level, _: String, _: String) {}
            fn report_cost(&mut self, _: f64) {}
            fn progress(&mut self, _: String) {}
            fn update(&mut self, _: String, _: Option<String>) {}
            fn cancelled(&mut self) -> bool {
                false
            }
            fn call_info(&mut self) -> bare::gadget::plugin::types::InvocationInfo {
                bare::gadget::plugin::types::InvocationInfo {
                    invocation_id: String::new(),
                    gadget_name: String::new(),
                    time_left_ms: 0,
                }
            }
        }
    };
}

no_op_host!(bare::gadget::plugin::host::Host);
no_op_host!(bare2::gadget::plugin::host::Host);

impl bare2::gadget::plugin::llm::Host for Bare {
    fn complete(
        &mut self,
        _: bare2::gadget::plugin::llm::CompletionRequest,
    ) -> Result<bare2::gadget::plugin::llm::Completion, bare2::gadget::plugin::llm::LlmError> {
        Err(bare2::gadget::plugin::llm::LlmError::Denied(
            "no llm in the bare baseline".into(),
        ))
    }
}

impl bare3::gadget::plugin::types::Host for Bare {}

impl bare3::gadget::plugin::host::Host for Bare {
    fn log(&mut self, _: bare3::gadget::plugin::types::Level, _: String, _: String) {}
    fn report_cost(&mut self, _: f64) {}
    fn progress(&mut self, _: String) {}
    fn report_progress(&mut self, _: f64, _: Option<f64>, _: Option<String>) {}
    fn update(&mut self, _: String, _: Option<String>) {}
    fn cancelled(&mut self) -> bool {
        false
    }
    fn call_info(&mut self) -> bare3::gadget::plugin::types::InvocationInfo {
        bare3::gadget::plugin::types::InvocationInfo {
            invocation_id: String::new(),
            gadget_name: String::new(),
            time_left_ms: 0,
        }
    }
}

impl bare3::gadget::plugin::llm::Host for Bare {
    fn complete(
        &mut self,
        _: bare3::gadget::plugin::llm::CompletionRequest,
    ) -> Result<bare3::gadget::plugin::llm::Completion, bare3::gadget::plugin::llm::LlmError> {
        Err(bare3::gadget::plugin::llm::LlmError::Denied(
            "no llm in the bare baseline".into(),
        ))
    }
}

impl bare3::gadget::plugin::ask::Host for Bare {
    fn answerable(&mut self) -> bare3::gadget::plugin::ask::Kinds {
        bare3::gadget::plugin::ask::Kinds::empty()
    }
    fn ask(
        &mut self,
        _: Vec<bare3::gadget::plugin::ask::InputRequest>,
    ) -> Result<Vec<bare3::gadget::plugin::ask::Answer>, bare3::gadget::plugin::ask::AskError> {
        Err(bare3::gadget::plugin::ask::AskError::Unavailable(
            "no one answers in the bare baseline".into(),
        ))
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a complete rusage into the buffer we own.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

const ITERATIONS: usize = 5_000;
const PARALLEL_CALLS: usize = 40_000;

fn main() {
    let status = Command::new("bash")
        .arg(workspace().join("scripts/build-guests.sh"))
        .status()
        .unwrap();
    assert!(status.success());
    let component = workspace().join("target/wasm32-wasip2/guest/fixture_misbehave.wasm");
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // GADGET_BENCH=overhead,deadlines,ticker,startup runs only those sections.
    let only = std::env::var("GADGET_BENCH").unwrap_or_default();
    let run = |section: &str| only.is_empty() || only.split(',').any(|s| s == section);
    tokio.block_on(async {
        if run("overhead") {
            call_overhead(&component, "Echo", json!({ "text": "hello" })).await;
        }
        // A Python gadget, where the interpreter's start dominates a call.
        let python = workspace().join("examples/python-gadget/python-words.wasm");
        if run("python") && python.is_file() {
            call_overhead(
                &python,
                "WordFrequency",
                json!({ "text": "the cat and the hat" }),
            )
            .await;
        }
        if run("deadlines") {
            deadlines(&component).await;
        }
        if run("grants") {
            grants().await;
        }
    });
    drop(tokio);
    if run("ticker") {
        ticker_cost();
    }
    if run("startup") {
        startup();
    }
}

/// A local HTTP/1.1 server answering every request with a short body
/// (one thread per connection, `connection: close`), for the HTTP
/// benchmark; it lives as long as the process.
fn local_server() -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    line.clear();
                }
                let mut stream = stream;
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                );
            });
        }
    });
    port
}

async fn grants() {
    let port = local_server();
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("probe");
    std::fs::create_dir(&plugin).unwrap();
    std::fs::copy(
        workspace().join("tests/fixtures/probe/plugin.toml"),
        plugin.join("plugin.toml"),
    )
    .unwrap();
    std::fs::copy(
        workspace().join("target/wasm32-wasip2/guest/fixture_probe.wasm"),
        plugin.join("probe.wasm"),
    )
    .unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let registry = |policy: gadget_host::runtime::policy::Policy| {
        let dir = dir.path().to_path_buf();
        async move {
            let runtime = Arc::new(Runtime::new(&RuntimeConfig::default()).unwrap());
            let (registry, errors) = loader::load_dirs(
                runtime,
                &[dir],
                &LoadOptions::from_policy(&policy, None),
                Arc::new(NoProgress),
            )
            .await;
            assert!(errors.is_empty(), "{errors:?}");
            registry
        }
    };
    let none = registry(Default::default()).await;
    let mut policy = gadget_host::runtime::policy::Policy::default();
    for grant in [
        format!("probe:files={}:/data", data.display()),
        "probe:config=UNITS=value:metric".to_string(),
        "probe:config=SECRET_TOKEN=value:not-a-secret".to_string(),
        format!("probe:http=http://127.0.0.1:{port}"),
    ] {
        policy.add_grant(&grant).unwrap();
    }
    let granted = registry(policy).await;
    const CALLS: usize = 2000;
    let median_call = |registry: &Registry, gadget: &'static str, params: Value, calls: usize| {
        let gadget = registry.get(gadget).unwrap().clone();
        async move {
            let mut times = Vec::with_capacity(calls);
            for _ in 0..calls {
                let started = Instant::now();
                let report = gadget.invoke(params.to_string(), "b", None).await;
                times.push(started.elapsed());
                assert!(report.outcome.is_ok(), "{:?}", report.outcome);
            }
            times.sort();
            percentile(&times, 0.5)
        }
    };
    let _warm = median_call(&none, "Env", json!({}), 100).await;
    let bare = median_call(&none, "Env", json!({}), CALLS).await;
    let with = median_call(&granted, "Env", json!({}), CALLS).await;
    const GETS: usize = 300;
    let url = format!("http://127.0.0.1:{port}/");
    let through_host = median_call(&granted, "Fetch", json!({ "url": url.clone() }), GETS).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut direct = Vec::with_capacity(GETS);
    for _ in 0..GETS {
        let started = Instant::now();
        let body = client
            .get(&url)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        direct.push(started.elapsed());
        assert_eq!(&body[..], b"hello");
    }
    direct.sort();
    let direct = percentile(&direct, 0.5);
    println!("| grants | gadget-host | baseline (same run) |");
    println!("|---|---|---|");
    println!(
        "| a call with grants (preopened directory, 2 environment variables, an HTTP origin) | median {:.1} µs | the same call with no grants: {:.1} µs ({:.2}x) |",
        with.as_secs_f64() * 1e6,
        bare.as_secs_f64() * 1e6,
        with.as_secs_f64() / bare.as_secs_f64()
    );
    println!(
        "| a GET to a local server through the host (fresh instance, policy checks, wasi:http, reqwest) | median {:.1} µs | the same GET with reqwest directly: {:.1} µs ({:.2}x) |",
        through_host.as_secs_f64() * 1e6,
        direct.as_secs_f64() * 1e6,
        through_host.as_secs_f64() / direct.as_secs_f64()
    );
    println!();
}

async fn load(component: &Path) -> Registry {
    let runtime = Arc::new(Runtime::new(&RuntimeConfig::default()).unwrap());
    let (registry, errors) = loader::load_sources(
        runtime.clone(),
        vec![PluginSource::Wasm(component.to_path_buf())],
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    registry
}

async fn call_overhead(component: &Path, gadget: &str, params_value: Value) {
    let registry = load(component).await;
    // Slow guests get fewer iterations (the median settles long before).
    let spec_ms = {
        let started = Instant::now();
        let _ = registry.call(gadget, params_value.clone(), "w", None).await;
        started.elapsed().as_secs_f64() * 1e3
    };
    let iterations = if spec_ms > 1.0 { 300 } else { ITERATIONS };
    let warmup = iterations / 25;
    println!(
        "== call overhead: {gadget} ({}), {iterations} sequential calls each ==",
        component.file_name().unwrap().to_string_lossy()
    );

    // Bare wasmtime, same component, same async calling convention, same
    // pooling allocator; no epoch interruption, no limiter, no validation.
    let mut config = Config::new();
    let pool = gadget_host::runtime::pooling_config();
    config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config).unwrap();
    let mut linker: Linker<Bare> = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    // The Python runtime imports wasi:http (and makes no request here).
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).unwrap();
    bare::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).unwrap();
    bare2::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).unwrap();
    bare3::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).unwrap();
    let bare_component = wasmtime::component::Component::from_file(&engine, component).unwrap();
    let pre = BarePre::new(&linker, &bare_component);
    // The bare call gets the parameters the host would pass (defaults in).
    let params = registry
        .prepare(gadget, params_value.clone())
        .unwrap()
        .1
        .to_string();

    let mut bare_times = Vec::with_capacity(iterations);
    let mut host_times = Vec::with_capacity(iterations);
    // Interleave the two so drift on the machine hits both equally.
    for i in 0..iterations + warmup {
        let start = Instant::now();
        let mut store = Store::new(
            &engine,
            Bare {
                wasi: WasiCtx::builder().build(),
                table: ResourceTable::new(),
                http: wasmtime_wasi_http::WasiHttpCtx::new(),
                hooks: NoHttp,
            },
        );
        let ok = pre.invoke(&mut store, gadget, &params).await;
        drop(store);
        let bare_elapsed = start.elapsed();
        assert!(ok);

        let start = Instant::now();
        let report = registry
            .call(gadget, params_value.clone(), "h", None)
            .await
            .unwrap();
        let host_elapsed = start.elapsed();
        assert!(report.outcome.is_ok(), "{:?}", report.outcome);
        if i >= warmup {
            bare_times.push(bare_elapsed);
            host_times.push(host_elapsed);
        }
    }
    bare_times.sort();
    host_times.sort();
    let (bm, bp) = (percentile(&bare_times, 0.5), percentile(&bare_times, 0.99));
    let (hm, hp) = (percentile(&host_times, 0.5), percentile(&host_times, 0.99));
    println!(
        "bare wasmtime (InstancePre + instantiate + call): median {:.1} µs, p99 {:.1} µs",
        micros(bm),
        micros(bp)
    );
    println!(
        "gadget-host full call path:                       median {:.1} µs, p99 {:.1} µs",
        micros(hm),
        micros(hp)
    );
    println!(
        "ratio host/bare: median {:.2}, p99 {:.2} (goal: <= 1.5)",
        micros(hm) / micros(bm),
        micros(hp) / micros(bp)
    );

    if gadget != "Echo" {
        return;
    }
    let registry = Arc::new(registry);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers * 4 {
        let registry = registry.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..PARALLEL_CALLS / (workers * 4) {
                let report = registry
                    .call(
                        "Echo",
                        json!({ "text": "hello" }),
                        &format!("p{w}_{i}"),
                        None,
                    )
                    .await
                    .unwrap();
                assert!(report.outcome.is_ok());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    println!(
        "parallel: {PARALLEL_CALLS} calls on {workers} cores in {:.2} s = {:.0} calls/s (goal: >= 20,000)",
        elapsed.as_secs_f64(),
        PARALLEL_CALLS as f64 / elapsed.as_secs_f64()
    );
}

async fn deadlines(component: &Path) {
    println!("\n== deadline precision: LoopForever (ignores the abort signal) ==");
    let registry = load(component).await;
    let gadget = registry.get("LoopForever").unwrap().clone();
    for timeout in [Duration::from_millis(100), Duration::from_secs(1)] {
        let mut late = Vec::new();
        for _ in 0..10 {
            let limits = Limits {
                timeout,
                ..gadget.limits.clone()
            };
            let request = CallRequest {
                gadget: gadget.card.spec.name.clone(),
                component_name: None,
                invocation_id: "d".into(),
                params: "{}".into(),
                limits: limits.clone(),
                signal: None,
                observer: None,
                grants: None,
                trace_parent: None,
                request_denials: None,
                human: None,
            };
            let start = Instant::now();
            let report = gadget.invoke_request(request).await;
            let elapsed = start.elapsed();
            assert_eq!(report.outcome.unwrap_err().kind(), "timeout");
            late.push(elapsed.saturating_sub(timeout + limits.grace));
        }
        late.sort();
        println!(
            "timeout {:>4} ms + grace {} ms: error arrives after the grace period ends by median {:.2} ms, max {:.2} ms (goal: <= 5 ms)",
            timeout.as_millis(),
            gadget.limits.grace.as_millis(),
            late[late.len() / 2].as_secs_f64() * 1e3,
            late[late.len() - 1].as_secs_f64() * 1e3
        );
    }
}

fn ticker_cost() {
    println!("\n== epoch ticker cost (idle host, 3 s; the ticker parks while no call runs) ==");
    let measure = |with_runtime: bool| {
        let runtime = with_runtime.then(|| Runtime::new(&RuntimeConfig::default()).unwrap());
        std::thread::sleep(Duration::from_millis(200));
        let (cpu0, wall0) = (cpu_time(), Instant::now());
        std::thread::sleep(Duration::from_secs(3));
        let share = (cpu_time() - cpu0).as_secs_f64() / wall0.elapsed().as_secs_f64();
        drop(runtime);
        share * 100.0
    };
    let idle = measure(false);
    let ticking = measure(true);
    println!(
        "process CPU: {idle:.3}% of a core without a runtime, {ticking:.3}% with the ticker: ticker costs {:.3}% (goal: < 1%)",
        ticking - idle
    );
}

fn startup() {
    println!("\n== start-up: `gadget list` over the shipped plugins ==");
    let bin = env!("CARGO_BIN_EXE_gadget");
    let plugins = workspace().join("plugins");
    let run = |cache: &Path| {
        let start = Instant::now();
        let out = Command::new(bin)
            .arg("--plugins")
            .arg(&plugins)
            .arg("--cache-dir")
            .arg(cache)
            .arg("list")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        start.elapsed()
    };
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..3 {
        let dir = std::env::temp_dir().join(format!(
            "gadget-bench-cache-{}-{}",
            std::process::id(),
            cold.len()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        cold.push(run(&dir));
        for _ in 0..5 {
            warm.push(run(&dir));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    cold.sort();
    warm.sort();
    println!(
        "cold cache (compile 4 components): median {:.0} ms; warm cache: median {:.1} ms, min {:.1} ms",
        cold[1].as_secs_f64() * 1e3,
        percentile(&warm, 0.5).as_secs_f64() * 1e3,
        warm[0].as_secs_f64() * 1e3
    );
}
