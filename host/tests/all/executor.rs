//! The executor end to end on the shipped plugins: a response streamed in
//! small chunks, with a dependency chain, a failure and its skipped
//! dependents, an unknown gadget, invalid parameters and a reused id.

use std::sync::Arc;

use gadget_host::executor::{ExecConfig, ExecEvent, Executor, ResponseSummary};
use gadget_host::plugins::{self, LoadOptions, NoProgress};
use gadget_host::runtime::EpochMode;

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
    let runtime = common::runtime(EpochMode::Ticker);
    let (registry, errors) = plugins::load_dirs(
        runtime,
        &[common::shipped_plugins()],
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    let mut executor = Executor::new(Arc::new(registry), ExecConfig::default()).unwrap();
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
    let skipped: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            ExecEvent::CallSkipped { id, reason, .. } => Some((id.as_str(), reason.as_str())),
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
