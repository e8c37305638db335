//! The audit journal through the executor, with fake tools: every call
//! that reaches a tool is recorded with what it reported, the chain
//! verifies, a flood of reports is capped per call with one record saying
//! how many were dropped, and secrets never reach the file.

mod support;

use gadget_core::audit::{MAX_RECORDS_PER_CALL, Record, verify};
use gadget_exec::audit::{Journal, JournalOptions};
use support::*;

/// Reports `n` costs of $0.001 each, then answers with its `text`.
fn flooder(n: usize) -> Arc<dyn Tool> {
    let schema = r#"{"type":"object","properties":{"text":{"type":"string"}}}"#;
    fake(spec("Flood", schema), move |call| {
        if let Some(observer) = &call.observer {
            for _ in 0..n {
                observer(&CallEvent::Cost(0.001));
            }
        }
        let text = call.params["text"].as_str().unwrap_or_default().to_string();
        Box::pin(async move { report(result(text), 0.0) })
    })
}

fn records(path: &std::path::Path) -> Vec<Record> {
    let text = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        verify(&text, None),
        Ok(text.lines().count()),
        "the chain holds"
    );
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_flood_of_reports_is_capped_per_call_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let journal = Arc::new(
        Journal::open(
            &path,
            JournalOptions {
                session: "test".into(),
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let mut executor = Executor::new(toolbox([flooder(1500), echo()]), ExecConfig::default())
        .unwrap()
        .with_journal(journal.clone());
    let response = block("Flood", "flood", "", &[("text", "done")])
        + &block("Echo", "quiet", "", &[("text", "hi")]);
    let (_, summary) = run(&mut executor, &response).await;
    assert_eq!(summary.succeeded, 2);
    drop(executor);
    journal.flush();
    let records = records(&path);
    let of = |call: &str, event: &str| {
        records
            .iter()
            .filter(|r| r.call.as_deref() == Some(call) && r.event == event)
            .count()
    };
    assert_eq!(of("flood", "cost") as u64, MAX_RECORDS_PER_CALL);
    let dropped = records
        .iter()
        .find(|r| r.event == "records_dropped")
        .expect("a records_dropped record");
    assert_eq!(dropped.detail["count"], 500);
    assert_eq!(
        (of("flood", "call_started"), of("flood", "call_finished")),
        (1, 1)
    );
    assert_eq!(
        (of("quiet", "call_started"), of("quiet", "call_finished")),
        (1, 1)
    );
    // The last record of the flooding call is its end, after the count.
    let flood: Vec<&Record> = records
        .iter()
        .filter(|r| r.call.as_deref() == Some("flood"))
        .collect();
    assert_eq!(flood.last().unwrap().event, "call_finished");
}

#[tokio::test]
async fn parameters_are_a_shape_unless_asked_and_secrets_never_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for record_params in [false, true] {
        let path = dir.path().join(format!("audit-{record_params}.jsonl"));
        let journal = Arc::new(
            Journal::open(
                &path,
                JournalOptions {
                    session: "test".into(),
                    record_params,
                    secrets: vec!["hunter2-secret".into()],
                    key: None,
                },
            )
            .unwrap(),
        );
        let mut executor = Executor::new(toolbox([echo()]), ExecConfig::default())
            .unwrap()
            .with_journal(journal.clone());
        let response = block("Echo", "leak", "", &[("text", "the key is hunter2-secret")]);
        let _ = run(&mut executor, &response).await;
        drop(executor);
        journal.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("hunter2-secret"), "{text}");
        let started = records(&path)
            .into_iter()
            .find(|r| r.event == "call_started")
            .unwrap();
        if record_params {
            assert_eq!(started.detail["params"]["text"], "the key is [redacted]");
        } else {
            assert_eq!(
                started.detail["params_shape"]["text"],
                json!({"type": "string", "chars": 25})
            );
        }
    }
}

#[tokio::test]
async fn a_journal_goes_on_from_its_last_line_and_refuses_a_file_that_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    for _ in 0..2 {
        let journal = Arc::new(Journal::open(&path, JournalOptions::default()).unwrap());
        let mut executor = Executor::new(toolbox([echo()]), ExecConfig::default())
            .unwrap()
            .with_journal(journal.clone());
        let _ = run(&mut executor, &block("Echo", "e", "", &[("text", "x")])).await;
    }
    let records = records(&path);
    assert_eq!(records.len(), 4);
    assert_eq!(records[3].seq, 4);
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "some notes\n").unwrap();
    let error = Journal::open(&other, JournalOptions::default()).unwrap_err();
    assert!(
        error.to_string().contains("not a journal record"),
        "{error}"
    );
}

#[tokio::test]
async fn a_journal_that_cannot_be_written_lets_no_call_run_unrecorded() {
    /// A disk that is full.
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left",
            ))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let journal = Arc::new(
        Journal::to_writer("full.jsonl", Box::new(Full), JournalOptions::default()).unwrap(),
    );
    let mut executor = Executor::new(toolbox([echo()]), ExecConfig::default())
        .unwrap()
        .with_journal(journal.clone());
    let (_, first) = run(&mut executor, &block("Echo", "a", "", &[("text", "x")])).await;
    assert_eq!(first.succeeded, 1);
    journal.flush();
    assert!(journal.failure().is_some(), "the write failed");
    let (events, later) = run(&mut executor, &block("Echo", "b", "", &[("text", "x")])).await;
    assert_eq!(later.failed, 1, "{events:#?}");
    let (_, _, error) = finished(&events, "b");
    let error = error.unwrap();
    assert_eq!(error.kind, FailureKind::NotApproved);
    assert!(
        error.message.contains("cannot be written") && error.message.contains("unrecorded"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn a_journal_has_one_writer_and_keeps_one_kind_of_chain() {
    use gadget_exec::audit::{JournalError, JournalKey};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let keyed = || JournalOptions {
        key: Some(JournalKey(b"secret".to_vec())),
        ..JournalOptions::default()
    };
    let first = Arc::new(Journal::open(&path, keyed()).unwrap());
    // A second writer would fork the chain: refused while the first lives.
    let second = Journal::open(&path, keyed()).expect_err("a second writer");
    assert!(matches!(second, JournalError::Busy { .. }), "{second}");
    let mut executor = Executor::new(toolbox([echo()]), ExecConfig::default())
        .unwrap()
        .with_journal(first.clone());
    let _ = run(&mut executor, &block("Echo", "e", "", &[("text", "x")])).await;
    drop(executor);
    drop(first);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(verify(&text, Some(b"secret")), Ok(2));
    assert!(verify(&text, Some(b"other")).is_err());
    assert!(verify(&text, None).is_err());
    // A forged whole, unkeyed, with a valid plain chain: refused by the key.
    let unkeyed: Vec<String> = text
        .lines()
        .map(|l| {
            let mut record: Record = serde_json::from_str(l).unwrap();
            record.mac = None;
            serde_json::to_string(&record).unwrap()
        })
        .collect();
    assert!(verify(&unkeyed.join("\n"), Some(b"secret")).is_err());
    // Going on unkeyed would mix two kinds of chain in one file.
    let mixed = Journal::open(&path, JournalOptions::default()).expect_err("refused");
    assert!(matches!(mixed, JournalError::ChainKind { .. }), "{mixed}");
    // Keyed again, it goes on, and the whole file still verifies.
    drop(Journal::open(&path, keyed()).unwrap());
}
