//! The executor end to end on the shipped plugins: a response streamed in
//! small chunks, with a dependency chain, a failure and its skipped
//! dependents, an unknown gadget, invalid parameters and a reused id.

use std::sync::Arc;

use gadget_host::executor::{
    AfterExecution, BeforeExecution, CallView, Controller, ExecConfig, ExecEvent, Executor,
    Failure, ResponseSummary,
};
use gadget_host::loader::{self, LoadOptions, NoProgress};
use gadget_host::runtime::EpochMode;
use gadget_host::schedule::{DependencyPolicy, ScheduleConfig};

use crate::common;

const RESPONSE: &str = "Let me compute.
!!!GADGET_START:Calculator:a
!!!ARG:operation
add
!!!ARG:a
15
!!!ARG:b
27
!!!GADGET_END
!!!GADGET_START:calculator:b:a
!!!ARG:operation
divide
!!!ARG:a
1
!!!ARG:b
0
!!!GADGET_END
!!!GADGET_START:Calculator:c:b
!!!ARG:operation
add
!!!ARG:a
1
!!!ARG:b
2
!!!GADGET_END
!!!GADGET_START:Nope:d
!!!GADGET_END
!!!GADGET_START:Calculator:e
!!!ARG:operation
add
!!!ARG:a
not a number
!!!ARG:b
2
!!!GADGET_END
!!!GADGET_START:Calculator:a
!!!ARG:operation
add
!!!ARG:a
1
!!!ARG:b
1
!!!GADGET_END
Done.";

/// Runs `response`, streamed in 9-byte chunks, on the shipped plugins.
async fn execute(response: &'static str) -> (Vec<ExecEvent>, ResponseSummary) {
    execute_with(response, ExecConfig::default(), None).await
}

async fn execute_with(
    response: &'static str,
    config: ExecConfig,
    controller: Option<Arc<dyn Controller>>,
) -> (Vec<ExecEvent>, ResponseSummary) {
    let runtime = common::runtime(EpochMode::Ticker);
    let (registry, errors) = loader::load_dirs(
        runtime,
        &[common::shipped_plugins()],
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    let mut executor = Executor::new(Arc::new(registry), config).unwrap();
    if let Some(controller) = controller {
        executor = executor.with_controller(controller);
    }
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        for piece in response.as_bytes().chunks(9) {
            tx.send(String::from_utf8(piece.to_vec()).unwrap())
                .await
                .unwrap();
        }
    });
    let mut events = Vec::new();
    let summary = executor.run_response(rx, |event| events.push(event)).await;
    (events, summary)
}

#[tokio::test]
async fn a_question_for_a_person_without_one_is_llmists_error_and_a_finish_is_reported() {
    let (events, summary) = execute(
        "!!!GADGET_START:AskUser:q\n!!!ARG:question\nOverwrite?\n!!!GADGET_END\n!!!GADGET_START:TaskComplete:t\n!!!ARG:summary\nall done\n!!!GADGET_END",
    )
    .await;
    let q = events.iter().find_map(|e| match e {
        ExecEvent::CallFinished { id, error, .. } if id == "q" => error.clone(),
        _ => None,
    });
    let q = q.expect("q failed");
    assert_eq!(q.kind, "human-input");
    assert_eq!(
        q.message,
        "Human input required but not available (stdin is not interactive)"
    );
    assert!(summary.finished, "{events:#?}");
    assert_eq!((summary.succeeded, summary.failed), (1, 1));
}

#[tokio::test]
async fn a_streamed_response_runs_with_dependencies_errors_and_skips() {
    let (events, summary) = execute(RESPONSE).await;

    let finished = |id: &str| {
        events
            .iter()
            .filter_map(|e| match e {
                ExecEvent::CallFinished {
                    id: i,
                    result,
                    error,
                    ..
                } if i == id => Some((result.clone(), error.clone())),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(finished("a")[0].0.as_deref(), Some("42"));
    let b = &finished("b")[0].1;
    assert_eq!(b.as_ref().unwrap().kind, "invalid-arguments", "{b:?}");
    let skipped: Vec<(&str, String)> = events
        .iter()
        .filter_map(|e| match e {
            ExecEvent::CallSkipped { id, reason, .. } => Some((id.as_str(), reason.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 1, "{events:#?}");
    assert_eq!(skipped[0].0, "c");
    assert_eq!(
        skipped[0].1,
        b.as_ref().unwrap().message,
        "c is skipped with b's error"
    );
    let d = finished("d")[0].1.clone().unwrap();
    assert_eq!(d.kind, "unknown-gadget");
    assert!(
        d.message.starts_with("Error: Gadget 'Nope' not found."),
        "{}",
        d.message
    );
    assert!(d.message.contains("Calculator"), "{}", d.message);
    let e = finished("e")[0].1.clone().unwrap();
    assert_eq!(e.kind, "invalid-parameters", "{e:?}");
    assert!(
        e.message
            .starts_with("Error: Invalid parameters for 'Calculator':"),
        "{}",
        e.message
    );
    // The reused id fails; the first `a` keeps its result.
    let a = finished("a");
    assert_eq!(a.len(), 2);
    assert_eq!(a[1].1.as_ref().unwrap().kind, "duplicate-id");

    let text: String = events
        .iter()
        .filter_map(|e| match e {
            ExecEvent::Text { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Let me compute.\n\nDone.");
    assert_eq!(
        (
            summary.calls,
            summary.succeeded,
            summary.failed,
            summary.skipped
        ),
        (6, 1, 4, 1),
        "{summary:?}"
    );

    // A call started before the stream ended: `a`'s start comes before the text "Done.".
    let a_started = events
        .iter()
        .position(|e| matches!(e, ExecEvent::CallStarted { id, .. } if id == "a"))
        .unwrap();
    let done_text = events
        .iter()
        .position(|e| matches!(e, ExecEvent::Text { content } if content.contains("Done")))
        .unwrap();
    assert!(a_started < done_text);
}

/// Every controller decision, each checked by its outcome.
struct Steering;

impl Controller for Steering {
    fn before_execution(&self, call: &CallView<'_>) -> BeforeExecution {
        if call.id == "skipme" {
            BeforeExecution::Skip {
                result: format!("synthetic for {}", call.parameters["ms"]),
            }
        } else {
            BeforeExecution::Proceed
        }
    }

    fn after_execution(
        &self,
        call: &CallView<'_>,
        outcome: &Result<String, Failure>,
    ) -> AfterExecution {
        match outcome {
            Err(failure) if call.id == "recover" => AfterExecution::Recover {
                result: format!("recovered from {}", failure.kind),
            },
            _ => AfterExecution::Keep,
        }
    }

    fn on_dependency_skipped(
        &self,
        call: &CallView<'_>,
        failed_dependency: &str,
        error: &str,
    ) -> Option<DependencyPolicy> {
        (call.id == "fallback")
            .then(|| DependencyPolicy::UseFallback(format!("{failed_dependency} said: {error}")))
    }

    /// Stop-on-error's hook: a failure of `tolerated` does not stop the response.
    fn stop_on(&self, call: &CallView<'_>, _failure: &Failure) -> bool {
        call.id != "tolerated"
    }
}

fn outcome_of(events: &[ExecEvent], wanted: &str) -> (String, Option<String>) {
    events
        .iter()
        .find_map(|e| match e {
            ExecEvent::CallFinished {
                id,
                outcome,
                result,
                ..
            } if id == wanted => Some((outcome.to_string(), result.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{wanted} did not finish: {events:#?}"))
}

#[tokio::test]
async fn controllers_skip_recover_and_decide_dependencies() {
    let response = "!!!GADGET_START:Sleep:skipme\n!!!ARG:ms\n60000\n!!!GADGET_END\n\
!!!GADGET_START:Calculator:recover\n!!!ARG:operation\ndivide\n!!!ARG:a\n1\n!!!ARG:b\n0\n!!!GADGET_END\n\
!!!GADGET_START:Calculator:broken\n!!!ARG:operation\ndivide\n!!!ARG:a\n1\n!!!ARG:b\n0\n!!!GADGET_END\n\
!!!GADGET_START:Calculator:fallback:broken\n!!!ARG:operation\nadd\n!!!ARG:a\n1\n!!!ARG:b\n1\n!!!GADGET_END\n\
!!!GADGET_START:Calculator:skipped:broken\n!!!ARG:operation\nadd\n!!!ARG:a\n1\n!!!ARG:b\n1\n!!!GADGET_END\n";
    let (events, summary) =
        execute_with(response, ExecConfig::default(), Some(Arc::new(Steering))).await;
    assert_eq!(
        outcome_of(&events, "skipme"),
        ("synthetic".into(), Some("synthetic for 60000".into()))
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ExecEvent::CallStarted { id, .. } if id == "skipme")),
        "a skipped call never starts"
    );
    assert_eq!(
        outcome_of(&events, "recover"),
        (
            "recovered".into(),
            Some("recovered from invalid-arguments".into())
        )
    );
    assert_eq!(
        outcome_of(&events, "fallback"),
        (
            "fallback".into(),
            Some("broken said: division by zero: b must not be 0".into())
        )
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ExecEvent::CallSkipped { id, .. } if id == "skipped"))
    );
    assert_eq!(
        (summary.succeeded, summary.failed, summary.skipped),
        (3, 1, 1)
    );
}

#[tokio::test]
async fn stop_on_error_asks_the_hook() {
    let config = ExecConfig {
        schedule: ScheduleConfig {
            stop_on_error: true,
            max_parallel: 1,
            ..ScheduleConfig::default()
        },
        ..ExecConfig::default()
    };
    // `tolerated` fails and the hook lets it pass; `fatal` fails and stops
    // the response: `never` is skipped, and nothing after it is read.
    let response = "!!!GADGET_START:Calculator:tolerated\n!!!ARG:operation\ndivide\n!!!ARG:a\n1\n!!!ARG:b\n0\n!!!GADGET_END\n\
!!!GADGET_START:Calculator:fatal:tolerated\n!!!ARG:operation\ndivide\n!!!ARG:a\n1\n!!!ARG:b\n0\n!!!GADGET_END\n\
!!!GADGET_START:Calculator:never:fatal\n!!!ARG:operation\nadd\n!!!ARG:a\n1\n!!!ARG:b\n1\n!!!GADGET_END\n";
    let policy_config = ExecConfig {
        dependency_policy: DependencyPolicy::ExecuteAnyway,
        ..config
    };
    let (events, summary) = execute_with(response, policy_config, Some(Arc::new(Steering))).await;
    assert_eq!(outcome_of(&events, "tolerated").0, "error");
    assert_eq!(outcome_of(&events, "fatal").0, "error", "{events:#?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ExecEvent::CallSkipped { id, .. } if id == "never")),
        "{events:#?}"
    );
    assert_eq!((summary.failed, summary.skipped), (2, 1));
}

/// Costs survive failures and timeouts, reach the events live, and add up
/// per response and per session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_are_kept_on_failure_and_summed_per_response_and_session() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = Arc::new(common::misbehave(&runtime).await);
    let mut executor = Executor::new(registry, ExecConfig::default()).unwrap();
    let mut respond = async |text: &str| {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(text.to_string()).await.unwrap();
        drop(tx);
        let mut events = Vec::new();
        let summary = executor.run_response(rx, |e| events.push(e)).await;
        (events, summary)
    };
    let (events, first) = respond(
        "!!!GADGET_START:CostThenFail:a\n!!!GADGET_END\n!!!GADGET_START:CostThenFail:b\n!!!GADGET_END\n",
    )
    .await;
    for id in ["a", "b"] {
        let finished = events.iter().find_map(|e| match e {
            ExecEvent::CallFinished {
                id: i, cost, error, ..
            } if i == id => Some((*cost, error.clone())),
            _ => None,
        });
        let (cost, error) = finished.expect("finished");
        assert_eq!(cost, 0.01, "the reported cost survives the failure");
        assert_eq!(error.unwrap().message, "the upstream API said no");
        assert!(
            events.iter().any(
                |e| matches!(e, ExecEvent::Cost { id: i, usd, .. } if i == id && *usd == 0.01)
            ),
            "the cost is reported live: {events:#?}"
        );
    }
    assert!((first.cost - 0.02).abs() < 1e-12, "{first:?}");
    assert!((first.session_cost - 0.02).abs() < 1e-12);
    let (_, second) = respond("!!!GADGET_START:CostThenFail:c\n!!!GADGET_END\n").await;
    assert!((second.cost - 0.01).abs() < 1e-12, "{second:?}");
    assert!((second.session_cost - 0.03).abs() < 1e-12, "{second:?}");
}
