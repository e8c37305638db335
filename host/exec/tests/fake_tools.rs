//! The executor's rules on fake tools: no WebAssembly anywhere (this crate
//! cannot even depend on wasmtime). Each fake is a closure from a call to
//! a report, so a test states exactly what its tools do.

mod support;

use support::*;

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
        card: ToolCard::new(
            declared,
            schema,
            OwnTimeout::Declared(Duration::from_millis(500)),
        ),
        instant: false,
        behaviour: Box::new(move |call: ToolCall| {
            seen_by_tool.lock().unwrap().push(call.deadline);
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

/// A provider's native tool call reaches the executor complete, with JSON
/// parameters: it runs at once, before the response ends, through the same
/// path as a block (schema, defaults, errors the model reads, history).
#[tokio::test]
async fn a_native_call_runs_the_moment_it_arrives() {
    use gadget_core::parser::GadgetCall;
    use gadget_exec::ResponseInput;
    let mut executor = Executor::new(toolbox([echo()]), ExecConfig::default()).unwrap();
    let (tx, rx) = mpsc::channel::<ResponseInput>(4);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let driver = tokio::spawn(async move {
        let summary = executor
            .run_response(rx, move |e| sink_events.lock().unwrap().push(e))
            .await;
        (executor, summary)
    });
    let params = json!({"text": "native"}).as_object().unwrap().clone();
    tx.send(ResponseInput::Call(GadgetCall::native(
        "Echo", "call_1", params,
    )))
    .await
    .unwrap();
    // The stream stays open: the call must finish before it ends.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, ExecEvent::CallFinished { id, .. } if id == "call_1"))
    {
        assert!(tokio::time::Instant::now() < deadline, "the call never ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Invalid JSON parameters are the model's error, as a block's are.
    let params = json!({"text": 5}).as_object().unwrap().clone();
    tx.send(ResponseInput::Call(GadgetCall::native(
        "Echo", "call_2", params,
    )))
    .await
    .unwrap();
    drop(tx);
    let (executor, summary) = driver.await.unwrap();
    assert_eq!((summary.succeeded, summary.failed), (1, 1));
    let history: Vec<_> = executor.history().iter().cloned().collect();
    let first = history.iter().find(|h| h.id == "call_1").unwrap();
    assert_eq!(first.result, "native");
    assert_eq!(first.parameters, json!({"text": "native", "delay_ms": 0}));
    let second = history.iter().find(|h| h.id == "call_2").unwrap();
    assert!(
        second.result.contains("is not of type"),
        "{}",
        second.result
    );
}
