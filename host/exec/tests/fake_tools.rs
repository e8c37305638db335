//! The executor's rules on fake tools: no WebAssembly anywhere (this crate
//! cannot even depend on wasmtime). Each fake is a closure from a call to
//! a report, so a test states exactly what its tools do.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use gadget_core::call::{CallError, CallReport, FailureKind, GadgetSpec, Outcome, OutcomeKind};
use gadget_core::ledger::CallEvent;
use gadget_core::limits::OwnTimeout;
use gadget_core::params::ParamSchema;
use gadget_core::schedule::DependencyPolicy;
use gadget_core::tool::{BoxFuture, Tool, ToolCall, Toolbox};
use gadget_exec::{
    AfterExecution, Answer, BeforeExecution, CallView, Controller, ExecConfig, ExecEvent, Executor,
    Failure, HumanInput, ResponseSummary,
};

type Behaviour = dyn Fn(ToolCall) -> BoxFuture<'static, CallReport> + Send + Sync;

struct Fake {
    spec: GadgetSpec,
    schema: ParamSchema,
    own_timeout: OwnTimeout,
    instant: bool,
    behaviour: Box<Behaviour>,
}

impl Tool for Fake {
    fn spec(&self) -> &GadgetSpec {
        &self.spec
    }
    fn schema(&self) -> &ParamSchema {
        &self.schema
    }
    fn own_timeout(&self) -> OwnTimeout {
        self.own_timeout
    }
    fn run(&self, call: ToolCall) -> BoxFuture<'_, CallReport> {
        (self.behaviour)(call)
    }
    fn is_instant(&self) -> bool {
        self.instant
    }
}

fn spec(name: &str, schema: &str) -> GadgetSpec {
    GadgetSpec {
        name: name.into(),
        label: None,
        description: format!("The fake {name}."),
        parameters_schema: schema.into(),
        examples: Vec::new(),
        timeout_ms: None,
        exclusive: false,
        max_concurrent: None,
    }
}

fn fake(
    spec: GadgetSpec,
    behaviour: impl Fn(ToolCall) -> BoxFuture<'static, CallReport> + Send + Sync + 'static,
) -> Arc<dyn Tool> {
    let schema = ParamSchema::compile(&spec.parameters_schema).unwrap();
    Arc::new(Fake {
        spec,
        schema,
        own_timeout: OwnTimeout::Default(Duration::from_secs(30)),
        instant: false,
        behaviour: Box::new(behaviour),
    })
}

fn report(outcome: Result<Outcome, CallError>, cost: f64) -> CallReport {
    CallReport {
        cost,
        ..CallReport::of(outcome, Duration::from_millis(1))
    }
}

fn result(text: impl Into<String>) -> Result<Outcome, CallError> {
    Ok(Outcome::Result {
        result: text.into(),
        details: None,
    })
}

/// Echo: returns its `text` after `delay_ms`.
fn echo() -> Arc<dyn Tool> {
    let schema = r#"{"type":"object","properties":{"text":{"type":"string"},"delay_ms":{"type":"integer","default":0}},"required":["text"]}"#;
    fake(spec("Echo", schema), |call| {
        Box::pin(async move {
            let delay = call.params["delay_ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            report(
                result(call.params["text"].as_str().unwrap_or_default()),
                0.0,
            )
        })
    })
}

/// Fail: reports a cost, then fails.
fn fail() -> Arc<dyn Tool> {
    fake(spec("Fail", ""), |_| {
        Box::pin(async move {
            report(
                Err(CallError::Failed {
                    message: "it broke".into(),
                }),
                0.25,
            )
        })
    })
}

fn toolbox(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Arc<Toolbox> {
    let mut toolbox = Toolbox::new();
    for tool in tools {
        toolbox.insert(tool).map_err(|_| "duplicate").unwrap();
    }
    Arc::new(toolbox)
}

/// Runs `response` (fed whole) and collects the events.
async fn run(executor: &mut Executor, response: &str) -> (Vec<ExecEvent>, ResponseSummary) {
    let (tx, rx) = mpsc::channel(4);
    tx.send(response.to_string()).await.unwrap();
    drop(tx);
    let mut events = Vec::new();
    let summary = executor.run_response(rx, |e| events.push(e)).await;
    (events, summary)
}

fn finished(events: &[ExecEvent], wanted: &str) -> (OutcomeKind, Option<String>, Option<Failure>) {
    events
        .iter()
        .find_map(|e| match e {
            ExecEvent::CallFinished {
                id,
                outcome,
                result,
                error,
                ..
            } if id == wanted => Some((*outcome, result.clone(), error.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no call_finished for {wanted}: {events:#?}"))
}

fn block(name: &str, id: &str, deps: &str, args: &[(&str, &str)]) -> String {
    let header = if deps.is_empty() {
        format!("!!!GADGET_START:{name}:{id}\n")
    } else {
        format!("!!!GADGET_START:{name}:{id}:{deps}\n")
    };
    let args: String = args
        .iter()
        .map(|(k, v)| format!("!!!ARG:{k}\n{v}\n"))
        .collect();
    format!("{header}{args}!!!GADGET_END\n")
}

#[tokio::test]
async fn a_call_starts_while_the_model_is_still_writing() {
    let mut executor = Executor::new(toolbox([echo()]), ExecConfig::default()).unwrap();
    let (tx, rx) = mpsc::channel(4);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let driver = tokio::spawn(async move {
        executor
            .run_response(rx, move |e| sink_events.lock().unwrap().push(e))
            .await
    });
    tx.send(block("Echo", "a", "", &[("text", "hi")]))
        .await
        .unwrap();
    // The stream stays open: the call must finish before it ends.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let done = events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, ExecEvent::CallFinished { id, .. } if id == "a"));
        if done {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never ran mid-stream"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tx.send("the end".into()).await.unwrap();
    drop(tx);
    let summary = driver.await.unwrap();
    assert_eq!(summary.succeeded, 1);
}

#[tokio::test]
async fn dependents_wait_and_failures_skip_them_with_llmists_text() {
    let mut executor = Executor::new(toolbox([echo(), fail()]), ExecConfig::default()).unwrap();
    let response = [
        block("Echo", "slow", "", &[("text", "first"), ("delay_ms", "50")]),
        block("Echo", "after", "slow", &[("text", "second")]),
        block("Fail", "broken", "", &[]),
        block("Echo", "orphan", "broken", &[("text", "never")]),
        block("Echo", "grandchild", "orphan", &[("text", "never")]),
    ]
    .concat();
    let (events, summary) = run(&mut executor, &response).await;
    let order: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ExecEvent::CallFinished { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let position = |id| order.iter().position(|o| *o == id).unwrap();
    assert!(position("slow") < position("after"), "{order:?}");
    let (kind, _, error) = finished(&events, "broken");
    assert_eq!(kind, OutcomeKind::Error);
    assert_eq!(error.unwrap().kind, FailureKind::Failed);
    let skipped: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            ExecEvent::CallSkipped { id, reason, .. } => Some((id.clone(), reason.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(
        skipped,
        [
            ("orphan".to_string(), "it broke".to_string()),
            ("grandchild".to_string(), "Dependency failed".to_string()),
        ]
    );
    assert_eq!(
        (summary.succeeded, summary.failed, summary.skipped),
        (2, 1, 2)
    );
    // The failed call's reported cost is kept.
    assert_eq!(summary.cost, 0.25);
}

#[tokio::test]
async fn a_fallback_policy_gives_the_dependent_a_result() {
    let config = ExecConfig {
        dependency_policy: DependencyPolicy::UseFallback("n/a".into()),
        ..ExecConfig::default()
    };
    let mut executor = Executor::new(toolbox([echo(), fail()]), config).unwrap();
    let response = [
        block("Fail", "broken", "", &[]),
        block("Echo", "child", "broken", &[("text", "x")]),
    ]
    .concat();
    let (events, _) = run(&mut executor, &response).await;
    assert_eq!(
        finished(&events, "child"),
        (OutcomeKind::Fallback, Some("n/a".into()), None)
    );
}

#[tokio::test]
async fn unknown_tools_and_invalid_parameters_are_results_the_model_reads() {
    let mut executor = Executor::new(toolbox([echo()]), ExecConfig::default()).unwrap();
    let response = [
        block("Nope", "a", "", &[]),
        block("Echo", "b", "", &[("delay_ms", "5")]),
    ]
    .concat();
    let (events, summary) = run(&mut executor, &response).await;
    let (_, _, error) = finished(&events, "a");
    let error = error.unwrap();
    assert_eq!(error.kind, FailureKind::UnknownGadget);
    assert_eq!(
        error.message,
        "Error: Gadget 'Nope' not found.\n\nAvailable gadgets: Echo, GadgetOutputViewer"
    );
    let (_, _, error) = finished(&events, "b");
    let error = error.unwrap();
    assert_eq!(error.kind, FailureKind::InvalidParameters);
    assert!(error.message.contains("text"), "{}", error.message);
    assert!(error.message.contains("Gadget Usage"), "{}", error.message);
    assert_eq!(summary.failed, 2);
}

#[tokio::test]
async fn timeouts_are_resolved_once_and_given_to_the_tool() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_tool = seen.clone();
    let mut declared = spec("Declared", "");
    declared.timeout_ms = Some(500);
    let schema = ParamSchema::compile("").unwrap();
    let declared: Arc<dyn Tool> = Arc::new(Fake {
        spec: declared,
        schema,
        own_timeout: OwnTimeout::Declared(Duration::from_millis(500)),
        instant: false,
        behaviour: Box::new(move |call: ToolCall| {
            seen_by_tool.lock().unwrap().push(call.timeout);
            Box::pin(async { report(result("ok"), 0.0) })
        }),
    });
    let mut config = ExecConfig::default();
    config.timeouts.default = Some(Duration::from_millis(100));
    config.timeouts.cap = Some(Duration::from_millis(300));
    let mut executor = Executor::new(toolbox([echo(), declared]), config).unwrap();
    let response = [
        block("Echo", "a", "", &[("text", "x")]),
        block("Declared", "b", "", &[]),
    ]
    .concat();
    let (events, _) = run(&mut executor, &response).await;
    let started = |wanted: &str| {
        events
            .iter()
            .find_map(|e| match e {
                ExecEvent::CallStarted { id, timeout_ms, .. } if id == wanted => Some(*timeout_ms),
                _ => None,
            })
            .unwrap()
    };
    // The run's default replaces Echo's default; the cap bounds the declared 500.
    assert_eq!(started("a"), 100);
    assert_eq!(started("b"), 300);
    assert_eq!(*seen.lock().unwrap(), [Some(Duration::from_millis(300))]);
}

#[tokio::test]
async fn an_oversized_result_is_stored_and_read_back_through_the_viewer_tool() {
    let big = fake(spec("Big", ""), |_| {
        Box::pin(async {
            let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
            report(result(text), 0.0)
        })
    });
    let config = ExecConfig {
        output_limit: Some(100),
        ..ExecConfig::default()
    };
    let mut executor = Executor::new(toolbox([big]), config).unwrap();
    let (events, _) = run(&mut executor, &block("Big", "a", "", &[])).await;
    let (_, text, _) = finished(&events, "a");
    let text = text.unwrap();
    assert!(text.contains("returned too much data"), "{text}");
    let id = text.split('"').nth(3).unwrap().to_string();
    let read = block(
        "GadgetOutputViewer",
        "v",
        "",
        &[("id", &id), ("limit", "2-3")],
    );
    let (events, _) = run(&mut executor, &read).await;
    let (kind, text, _) = finished(&events, "v");
    assert_eq!(kind, OutcomeKind::Result);
    let text = text.unwrap();
    assert!(text.contains("line 2\nline 3"), "{text}");
    assert!(!text.contains("line 4\n"), "{text}");
    // The viewer has no deadline of its own.
    assert!(events.iter().any(
        |e| matches!(e, ExecEvent::CallStarted { gadget, timeout_ms: 0, .. } if gadget == "GadgetOutputViewer")
    ));
}

struct SkipEchoRecoverFail;

impl Controller for SkipEchoRecoverFail {
    fn before_execution(&self, call: &CallView<'_>) -> BeforeExecution {
        if call.gadget == "Echo" {
            BeforeExecution::Skip {
                result: format!("skipped {}", call.parameters["text"]),
            }
        } else {
            BeforeExecution::Proceed
        }
    }

    fn after_execution(
        &self,
        _call: &CallView<'_>,
        outcome: &Result<String, Failure>,
    ) -> AfterExecution {
        match outcome {
            Err(failure) => AfterExecution::Recover {
                result: format!("recovered from {}", failure.message),
            },
            Ok(_) => AfterExecution::Keep,
        }
    }
}

#[tokio::test]
async fn controllers_skip_before_and_recover_after() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = ran.clone();
    let counting_echo = fake(
        spec(
            "Echo",
            r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
        ),
        move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { report(result("ran"), 0.0) })
        },
    );
    let mut executor = Executor::new(toolbox([counting_echo, fail()]), ExecConfig::default())
        .unwrap()
        .with_controller(Arc::new(SkipEchoRecoverFail));
    let response = [
        block("Echo", "a", "", &[("text", "hi")]),
        block("Fail", "b", "", &[]),
        block("Echo", "c", "b", &[("text", "after")]),
    ]
    .concat();
    let (events, summary) = run(&mut executor, &response).await;
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a skipped call never runs");
    assert_eq!(
        finished(&events, "a"),
        (OutcomeKind::Synthetic, Some("skipped \"hi\"".into()), None)
    );
    assert_eq!(
        finished(&events, "b"),
        (
            OutcomeKind::Recovered,
            Some("recovered from it broke".into()),
            None
        )
    );
    // A recovered dependency lets its dependent run.
    assert_eq!(finished(&events, "c").0, OutcomeKind::Synthetic);
    assert_eq!(summary.failed, 0);
}

struct Answers;

impl HumanInput for Answers {
    fn ask<'a>(&'a self, _call_id: &'a str, _gadget: &'a str, question: &'a str) -> Answer<'a> {
        Box::pin(async move { Ok(format!("yes to {question}")) })
    }
}

#[tokio::test]
async fn ask_human_goes_to_the_handler_or_fails_without_one() {
    let asker = || {
        fake(spec("Ask", ""), |_| {
            Box::pin(async {
                report(
                    Ok(Outcome::AskHuman {
                        question: "proceed?".into(),
                    }),
                    0.0,
                )
            })
        })
    };
    let mut without = Executor::new(toolbox([asker()]), ExecConfig::default()).unwrap();
    let (events, _) = run(&mut without, &block("Ask", "q", "", &[])).await;
    let (_, _, error) = finished(&events, "q");
    assert_eq!(error.unwrap().kind, FailureKind::HumanInput);

    let mut with = Executor::new(toolbox([asker()]), ExecConfig::default())
        .unwrap()
        .with_human_input(Arc::new(Answers));
    let (events, _) = run(&mut with, &block("Ask", "q", "", &[])).await;
    assert_eq!(
        finished(&events, "q"),
        (OutcomeKind::AskHuman, Some("yes to proceed?".into()), None)
    );
}

#[tokio::test]
async fn live_events_arrive_before_the_call_finishes_and_ids_stay_unique() {
    let chatty = fake(spec("Chatty", ""), |call| {
        Box::pin(async move {
            let observer = call.observer.unwrap();
            observer(&CallEvent::Progress("half way".into()));
            observer(&CallEvent::Cost(0.5));
            report(result("done"), 0.5)
        })
    });
    let mut executor = Executor::new(toolbox([chatty]), ExecConfig::default()).unwrap();
    let response = [block("Chatty", "a", "", &[]), block("Chatty", "a", "", &[])].concat();
    let (events, summary) = run(&mut executor, &response).await;
    let kinds: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap()["type"].clone())
        .collect();
    let progress = kinds.iter().position(|k| k == "progress").unwrap();
    // The duplicate fails at once, when parsed; the call that ran reports
    // its progress before it finishes.
    let ran_finish = events
        .iter()
        .position(|e| {
            matches!(
                e,
                ExecEvent::CallFinished {
                    outcome: OutcomeKind::Result,
                    ..
                }
            )
        })
        .unwrap();
    assert!(progress < ran_finish, "{kinds:?}");
    let duplicate = events
        .iter()
        .filter_map(|e| match e {
            ExecEvent::CallFinished { error: Some(f), .. } => Some(f.kind),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(duplicate, [FailureKind::DuplicateId]);
    assert_eq!(summary.cost, 0.5);
    assert_eq!(json!(summary.session_cost), json!(0.5));
}

#[tokio::test]
async fn an_exclusive_tool_never_runs_beside_another_call() {
    let running = Arc::new(AtomicUsize::new(0));
    let overlap = Arc::new(AtomicUsize::new(0));
    let make = |name: &str, exclusive: bool| {
        let (running, overlap) = (running.clone(), overlap.clone());
        let mut s = spec(name, "");
        s.exclusive = exclusive;
        fake(s, move |_| {
            let (running, overlap) = (running.clone(), overlap.clone());
            Box::pin(async move {
                if running.fetch_add(1, Ordering::SeqCst) > 0 && exclusive {
                    overlap.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                if running.load(Ordering::SeqCst) > 1 && exclusive {
                    overlap.fetch_add(1, Ordering::SeqCst);
                }
                running.fetch_sub(1, Ordering::SeqCst);
                report(result("ok"), 0.0)
            })
        })
    };
    let mut executor = Executor::new(
        toolbox([make("Alone", true), make("Crowd", false)]),
        ExecConfig::default(),
    )
    .unwrap();
    let response: String = (0..6)
        .map(|i| {
            let name = if i % 2 == 0 { "Crowd" } else { "Alone" };
            block(name, &format!("c{i}"), "", &[])
        })
        .collect();
    let (events, summary) = run(&mut executor, &response).await;
    assert_eq!(summary.succeeded, 6);
    assert_eq!(overlap.load(Ordering::SeqCst), 0);
    // The hold is visible: the first exclusive call waits for the running
    // one, and the call after it waits for the exclusive one.
    let waiting: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            ExecEvent::CallWaiting { id, reason, .. } => Some((id.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        waiting.first(),
        Some(&(
            "c1".to_string(),
            "exclusive: waits for 1 running call(s) to end, then runs alone".to_string()
        )),
        "{waiting:?}"
    );
}

/// An instant tool answers in place, and may still ask a person; one
/// that claims to be instant but has to wait is a crash, not a hang.
#[tokio::test]
async fn instant_tools_answer_in_place_and_a_false_claim_is_a_crash() {
    let instant = |name: &str, behaviour: Box<Behaviour>| -> Arc<dyn Tool> {
        Arc::new(Fake {
            spec: spec(name, ""),
            schema: ParamSchema::compile("").unwrap(),
            own_timeout: OwnTimeout::None,
            instant: true,
            behaviour,
        })
    };
    let quick = instant(
        "Quick",
        Box::new(|_| Box::pin(async { report(result("at once"), 0.0) })),
    );
    let asks = instant(
        "Asks",
        Box::new(|_| {
            Box::pin(async {
                report(
                    Ok(Outcome::AskHuman {
                        question: "ok?".into(),
                    }),
                    0.0,
                )
            })
        }),
    );
    let waits = instant(
        "Waits",
        Box::new(|_| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                report(result("late"), 0.0)
            })
        }),
    );
    let mut executor = Executor::new(toolbox([quick, asks, waits]), ExecConfig::default())
        .unwrap()
        .with_human_input(Arc::new(Answers));
    let response = [
        block("Quick", "q", "", &[]),
        block("Asks", "a", "", &[]),
        block("Waits", "w", "", &[]),
    ]
    .concat();
    let (events, _) = run(&mut executor, &response).await;
    assert_eq!(
        finished(&events, "q"),
        (OutcomeKind::Result, Some("at once".into()), None)
    );
    assert_eq!(
        finished(&events, "a"),
        (OutcomeKind::AskHuman, Some("yes to ok?".into()), None)
    );
    let (_, _, error) = finished(&events, "w");
    let error = error.unwrap();
    assert_eq!(error.kind, FailureKind::Crashed);
    assert!(error.message.contains("had to wait"), "{}", error.message);
}

/// A tool that panics (a bug in the host's own code, never a gadget's: the
/// runtime contains those) ends its call as crashed; the calls running
/// beside it keep their results and the response ends normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_fails_its_call_and_loses_no_other_result() {
    let buggy = fake(spec("Buggy", ""), |_| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            panic!("index out of bounds")
        })
    });
    let fine = fake(spec("Fine", ""), |_| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            report(result("ok"), 0.0)
        })
    });
    let mut executor = Executor::new(toolbox([buggy, fine]), ExecConfig::default()).unwrap();
    let response: String = (0..4)
        .map(|i| {
            block(
                if i == 1 { "Buggy" } else { "Fine" },
                &format!("c{i}"),
                "",
                &[],
            )
        })
        .collect();
    let (events, summary) = run(&mut executor, &response).await;
    assert_eq!((summary.succeeded, summary.failed), (3, 1));
    let crashed = events
        .iter()
        .find_map(|e| match e {
            ExecEvent::CallFinished {
                id,
                error: Some(error),
                ..
            } if id == "c1" => Some(error.clone()),
            _ => None,
        })
        .expect("c1 ended");
    assert_eq!(crashed.kind, FailureKind::Crashed);
    assert!(
        crashed.message.contains("index out of bounds"),
        "{}",
        crashed.message
    );
}

/// Calls that end in their first poll, calls that wait, and calls that
/// panic in their first poll, many more than one runner's turn: each ends
/// exactly once, with its own result (runners hand calls and ends over in
/// batches; none is lost or given to another call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_starts_and_ends_lose_nothing_and_mix_nothing_up() {
    let bang = fake(spec("Bang", ""), |_| {
        Box::pin(async { panic!("bang at the first poll") })
    });
    let mut executor = Executor::new(toolbox([echo(), bang]), ExecConfig::default()).unwrap();
    const CALLS: usize = 300;
    let response: String = (0..CALLS)
        .map(|i| {
            if i % 7 == 3 {
                block("Bang", &format!("c{i}"), "", &[])
            } else {
                let delay = if i % 5 == 0 {
                    (i % 3 + 1).to_string()
                } else {
                    "0".into()
                };
                block(
                    "Echo",
                    &format!("c{i}"),
                    "",
                    &[("text", &format!("text {i}")), ("delay_ms", &delay)],
                )
            }
        })
        .collect();
    let (events, summary) = run(&mut executor, &response).await;
    let panics = (0..CALLS).filter(|i| i % 7 == 3).count();
    assert_eq!(
        (summary.succeeded, summary.failed),
        (CALLS - panics, panics)
    );
    let mut ended = std::collections::HashMap::new();
    for event in &events {
        if let ExecEvent::CallFinished {
            id, result, error, ..
        } = event
        {
            let previous = ended.insert(id.clone(), (result.clone(), error.clone()));
            assert!(previous.is_none(), "{id} ended twice");
        }
    }
    assert_eq!(ended.len(), CALLS);
    for i in 0..CALLS {
        let (result, error) = &ended[&format!("c{i}")];
        if i % 7 == 3 {
            let error = error.as_ref().expect("a crash");
            assert_eq!(error.kind, FailureKind::Crashed);
            assert!(
                error.message.contains("bang at the first poll"),
                "{}",
                error.message
            );
        } else {
            assert_eq!(result.as_deref(), Some(format!("text {i}").as_str()));
        }
    }
}

/// Dropping a response midway (a client gone, a Ctrl-C) cancels the calls
/// it started, and none starts after: the runners drop what they hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_response_cancels_its_calls_and_starts_no_more() {
    /// Counts its drop (the call's future dropped: cancelled).
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let started = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (s, d) = (started.clone(), dropped.clone());
    let slow = fake(spec("Slow", ""), move |_| {
        let (started, dropped) = (s.clone(), d.clone());
        Box::pin(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let _guard = Dropped(dropped);
            tokio::time::sleep(Duration::from_secs(30)).await;
            report(result("too late"), 0.0)
        })
    });
    let mut executor = Executor::new(toolbox([slow]), ExecConfig::default()).unwrap();
    let response: String = (0..300)
        .map(|i| block("Slow", &format!("s{i}"), "", &[]))
        .collect();
    let (tx, rx) = mpsc::channel(4);
    tx.send(response).await.unwrap();
    let abandoned = tokio::time::timeout(
        Duration::from_millis(300),
        executor.run_response(rx, |_| {}),
    )
    .await;
    assert!(abandoned.is_err(), "the calls sleep for 30 s");
    // The runners see their queues closed and drop their calls.
    for _ in 0..500 {
        if dropped.load(Ordering::SeqCst) == started.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let at_end = started.load(Ordering::SeqCst);
    assert!(
        at_end > 0 && at_end <= 128,
        "started {at_end} (the limit is 128)"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        at_end,
        "every started call cancelled"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        at_end,
        "nothing started after"
    );
}

/// A response's history (what the model is sent next) is bounded: past
/// `MAX_HISTORY_BYTES`, later results are replaced by a note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_history_is_bounded_in_bytes() {
    let big = fake(spec("Big", ""), |_| {
        Box::pin(async { report(result("x".repeat(5 << 20)), 0.0) })
    });
    let config = ExecConfig {
        output_limit: None,
        ..ExecConfig::default()
    };
    let mut executor = Executor::new(toolbox([big]), config).unwrap();
    let response: String = (0..6)
        .map(|i| block("Big", &format!("b{i}"), "", &[]))
        .collect();
    let (_, summary) = run(&mut executor, &response).await;
    assert_eq!(summary.succeeded, 6);
    let history = executor.history();
    assert_eq!(history.len(), 6);
    let kept: usize = history.iter().map(|h| h.result.len()).sum();
    assert!(kept <= gadget_exec::MAX_HISTORY_BYTES, "{kept}");
    let noted = history
        .iter()
        .filter(|h| {
            h.result
                .starts_with("[result not kept: this response's history is over")
        })
        .count();
    assert_eq!(
        noted, 3,
        "16 MiB hold three 4 MiB results (and their parameters), not four"
    );
}
