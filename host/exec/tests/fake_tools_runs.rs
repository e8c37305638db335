//! How the executor runs calls on fake tools: exclusivity, instant tools,
//! panics, batching, abandoned responses and the history's bound.

mod support;

use support::*;

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
            ExecEvent::CallWaiting { id, reason, .. } => Some((id.clone(), reason.to_string())),
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
            card: ToolCard::new(
                spec(name, ""),
                ParamSchema::compile("").unwrap(),
                OwnTimeout::None,
            ),
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

/// The one call path on its own (what `gadget call` and MCP use): a
/// tool's panic is its call's `crashed` failure, and a question goes to
/// the handler when there is one.
#[tokio::test]
async fn the_one_call_path_contains_panics_and_asks_the_handler() {
    use gadget_core::scope::CallScope;
    use gadget_core::tool::ToolCall;
    use gadget_exec::call;
    let panicking = fake(spec("Boom", ""), |_| {
        Box::pin(async {
            tokio::task::yield_now().await;
            panic!("the tool broke")
        })
    });
    let finished = call::run(panicking, ToolCall::new("c1", json!({}))).await;
    let Err(error) = finished.report.outcome else {
        panic!("a panic must fail the call")
    };
    assert_eq!(error.kind(), FailureKind::Crashed);
    assert!(error.to_string().contains("the tool broke"), "{error}");

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
    let mut with_person = ToolCall::new("c2", json!({}));
    with_person.scope = Arc::new(CallScope {
        human: Some(Arc::new(Answers)),
        ..CallScope::default()
    });
    let answered = call::run(asker(), with_person).await;
    assert_eq!(answered.answer, Some(Ok("yes to proceed?".to_string())));
    let unanswered = call::run(asker(), ToolCall::new("c3", json!({}))).await;
    assert!(unanswered.answer.is_none());
}
