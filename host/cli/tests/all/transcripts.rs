//! `gadget run` on the shipped transcripts (`examples/transcripts/`) and
//! `gadget prompt`, through the binary, with the shipped plugins.

use std::path::PathBuf;

use serde_json::Value;

use crate::cli::{gadget, stderr, stdout};
use crate::common;

fn transcript(name: &str) -> String {
    common::workspace()
        .join("examples/transcripts")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `gadget run --json ARGS`: the events, and the exit code.
fn run_json(args: &[&str], stdin: Option<&str>) -> (Vec<Value>, Option<i32>) {
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    let out = gadget(&all, stdin);
    let events = stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    (events, out.status.code())
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn finished<'a>(events: &'a [Value], id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == "call_finished" && e["id"] == id)
        .unwrap_or_else(|| panic!("no call_finished for {id}: {events:#?}"))
}

fn position(events: &[Value], kind: &str, id: &str) -> usize {
    events
        .iter()
        .position(|e| e["type"] == kind && e["id"] == id)
        .unwrap_or_else(|| panic!("no {kind} for {id}"))
}

#[test]
fn independent_calls_run_in_parallel() {
    let (events, code) = run_json(&[&transcript("parallel.txt")], None);
    assert_eq!(code, Some(0), "{events:#?}");
    // Both waits started before either finished: they overlapped.
    let last_start = position(&events, "call_started", "wait_a").max(position(
        &events,
        "call_started",
        "wait_b",
    ));
    let first_end = position(&events, "call_finished", "wait_a").min(position(
        &events,
        "call_finished",
        "wait_b",
    ));
    assert!(last_start < first_end, "{events:#?}");
    let summary = of_type(&events, "summary")[0];
    assert_eq!(summary["succeeded"], 6);
    // Generous: two 800 ms waits one after the other would take 1.6 s.
    assert!(
        summary["duration_ms"].as_f64().unwrap() < 1_500.0,
        "{summary}"
    );
    assert_eq!(
        finished(&events, "nights")["result"],
        "16 days from 2026-12-18 (Friday) to 2027-01-03 (Sunday)"
    );
}

#[test]
fn a_chain_runs_in_dependency_order() {
    let (events, code) = run_json(&[&transcript("chain.txt")], None);
    assert_eq!(code, Some(0));
    assert!(
        position(&events, "call_finished", "pretty") < position(&events, "call_started", "port")
    );
    assert!(
        position(&events, "call_finished", "port") < position(&events, "call_started", "next_port")
    );
    assert_eq!(finished(&events, "port")["result"], "8080");
    assert_eq!(finished(&events, "next_port")["result"], "8081");
}

#[test]
fn a_failure_skips_its_dependents_transitively_with_llmists_reasons() {
    let (events, code) = run_json(&[&transcript("failure.txt")], None);
    assert_eq!(code, Some(1));
    let error = &finished(&events, "span")["error"];
    assert_eq!(error["kind"], "invalid-arguments");
    let skipped = of_type(&events, "call_skipped");
    let reasons: Vec<(&str, &str, &str)> = skipped
        .iter()
        .map(|e| {
            (
                e["id"].as_str().unwrap(),
                e["reason"].as_str().unwrap(),
                e["failed_dependency"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            ("weeks", error["message"].as_str().unwrap(), "span"),
            ("months", "Dependency failed", "weeks"),
        ]
    );
    assert_eq!(
        finished(&events, "independent")["result"],
        "2024-02-29 (Thursday)"
    );
}

#[test]
fn timeouts_default_per_gadget_and_capped() {
    // Sleep declares 3 s; a per-gadget setting overrides it, and the
    // operator's cap bounds everything.
    let (events, code) = run_json(
        &["--gadget-timeout", "sleep=150", &transcript("timeout.txt")],
        None,
    );
    assert_eq!(code, Some(1));
    let started = &events[position(&events, "call_started", "settle")];
    assert_eq!(started["timeout_ms"], 150);
    let error = &finished(&events, "settle")["error"];
    assert_eq!(error["kind"], "timeout");
    assert_eq!(
        error["message"],
        "Gadget 'Sleep' execution exceeded timeout of 150ms"
    );
    let skip = of_type(&events, "call_skipped")[0];
    assert_eq!(skip["id"], "after");
    assert_eq!(skip["reason"], error["message"]);
    // The other call was not disturbed.
    assert_eq!(finished(&events, "meanwhile")["result"], "42");

    let (events, _) = run_json(
        &[
            "--timeout",
            "1234",
            "--max-timeout",
            "100",
            &transcript("timeout.txt"),
        ],
        None,
    );
    let timeout_of = |id: &str| events[position(&events, "call_started", id)]["timeout_ms"].clone();
    // The cap wins over Sleep's own 3 s and Calculator's manifest 2 s.
    assert_eq!(timeout_of("settle"), 100);
    assert_eq!(timeout_of("meanwhile"), 100);

    // A default applies only to gadgets that declare nothing.
    let response = "!!!GADGET_START:CurrentTime:t\n!!!GADGET_END\n!!!GADGET_START:Calculator:c\n!!!ARG:operation\nadd\n!!!ARG:a\n1\n!!!ARG:b\n2\n!!!GADGET_END\n";
    let (events, code) = run_json(&["--timeout", "1234", "-"], Some(response));
    assert_eq!(code, Some(0));
    assert_eq!(
        events[position(&events, "call_started", "t")]["timeout_ms"],
        1234
    );
    assert_eq!(
        events[position(&events, "call_started", "c")]["timeout_ms"],
        2000
    );
}

#[test]
fn an_oversized_output_is_stored_and_read_back_in_the_next_response() {
    let (events, code) = run_json(
        &[
            &transcript("oversized-1.txt"),
            &transcript("oversized-2.txt"),
        ],
        None,
    );
    assert_eq!(code, Some(0), "{events:#?}");
    let numbers = finished(&events, "numbers");
    assert_eq!(numbers["stored_output"], "Sequence_85268fd2");
    assert_eq!(
        numbers["result"],
        "[Gadget \"Sequence\" returned too much data: 108,893 bytes, 20,000 lines. Use GadgetOutputViewer with id \"Sequence_85268fd2\" to read it.]"
    );
    let ends = finished(&events, "ends_999")["result"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ends.starts_with("[Mode: line | Showing 40 of 20,000 lines]\n999\n1000\n1999\n2000\n"),
        "{ends}"
    );
    assert_eq!(
        finished(&events, "tail")["result"],
        "[Mode: line | Showing 3 of 20,000 lines]\n19998\n19999\n20000"
    );
    assert_eq!(
        of_type(&events, "summary").len(),
        2,
        "one summary per response"
    );

    // A smaller context window stores smaller outputs; turning the limit
    // off passes them whole and the viewer is unknown.
    let small = "!!!GADGET_START:Sequence:s\n!!!ARG:start\n1\n!!!ARG:end\n100\n!!!GADGET_END\n";
    let (events, _) = run_json(&["--context-window", "200", "-"], Some(small));
    assert!(finished(&events, "s")["stored_output"].is_string());
    let (events, _) = run_json(&["--no-output-limit", "-"], Some(small));
    assert!(
        finished(&events, "s")["result"]
            .as_str()
            .unwrap()
            .ends_with("\n100")
    );
    let viewer = "!!!GADGET_START:GadgetOutputViewer:v\n!!!ARG:id\nx\n!!!GADGET_END\n";
    let (events, _) = run_json(&["--no-output-limit", "-"], Some(viewer));
    assert_eq!(finished(&events, "v")["error"]["kind"], "unknown-gadget");
}

#[test]
fn finish_ends_the_session_after_its_response() {
    let (events, code) = run_json(&[&transcript("finish.txt"), &transcript("chain.txt")], None);
    assert_eq!(code, Some(0));
    assert_eq!(finished(&events, "done")["outcome"], "finish");
    let summaries = of_type(&events, "summary");
    assert_eq!(summaries.len(), 1, "the second response is not run");
    assert_eq!(summaries[0]["finished"], true);
}

#[test]
fn ask_human_uses_scripted_answers_or_fails_with_llmists_text() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers.txt");
    std::fs::write(&answers, "Lisbon\n").unwrap();
    let (events, code) = run_json(
        &[
            "--answers",
            answers.to_str().unwrap(),
            &transcript("ask.txt"),
        ],
        None,
    );
    assert_eq!(code, Some(0), "{events:#?}");
    assert_eq!(
        of_type(&events, "human_input")[0]["question"],
        "Which city are you flying from?"
    );
    let city = finished(&events, "city");
    assert_eq!(
        (&city["outcome"], &city["result"]),
        (&"ask-human".into(), &"Lisbon".into())
    );

    // No terminal and no answers: llmist's text.
    let (events, code) = run_json(&[&transcript("ask.txt")], None);
    assert_eq!(code, Some(1));
    assert_eq!(
        finished(&events, "city")["error"]["message"],
        "Human input required but not available (stdin is not interactive)"
    );
}

#[test]
fn history_re_renders_finished_calls_in_llmists_form() {
    let out = gadget(&["run", "--history", &transcript("failure.txt")], None);
    let text = stdout(&out);
    // A person reads which dependency failed (the reason alone read as if
    // the skipped call had failed so), and a skip of a skip as one.
    assert!(
        text.contains(
            "⤼ Calculator (weeks) skipped: its dependency span failed: from '2023-02-29'"
        ),
        "{text}"
    );
    assert!(
        text.contains("⤼ Calculator (months) skipped: its dependency weeks did not run"),
        "{text}"
    );
    let history = text
        .split_once("── history (what the model is shown next) ──\n")
        .unwrap_or_else(|| panic!("{text}"))
        .1;
    assert!(
        history.contains("[assistant]\n!!!GADGET_START:AddDays:independent\n!!!ARG:date\n2024-02-28\n!!!ARG:days\n1\n!!!GADGET_END\n\n[user]\nResult (independent): 2024-02-29 (Thursday)\n"),
        "{history}"
    );
    assert!(
        history.contains("Result (span): Error: from '2023-02-29' does not exist"),
        "{history}"
    );
    // Skipped calls are not shown to the model.
    assert!(!history.contains("weeks"), "{history}");
}

#[test]
fn errors_quote_the_gadget_usage() {
    let response = "!!!GADGET_START:Calculator:c\n!!!ARG:operation\npow\n!!!ARG:a\n1\n!!!ARG:b\n2\n!!!GADGET_END\n!!!GADGET_START:Calculator:d\n!!!ARG:a\n1\n!!!ARG:a\n2\n!!!GADGET_END\n";
    let (events, _) = run_json(&["-"], Some(response));
    let invalid = finished(&events, "c")["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        invalid.starts_with("Error: Invalid parameters for 'Calculator':\n  - operation: "),
        "{invalid}"
    );
    assert!(
        invalid.contains("\n\nGadget Usage:\nPerforms arithmetic on two numbers"),
        "{invalid}"
    );
    let parse = finished(&events, "d")["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(parse.starts_with("Error: Failed to parse parameters for 'Calculator':\n  Duplicate pointer: a\n\nGadget Usage:\n"), "{parse}");
    assert!(parse.ends_with("\n\nBlock Format Reference:\n  !!!GADGET_START:Calculator\n  !!!ARG:parameterName\n  parameter value here\n  !!!GADGET_END"), "{parse}");
}

fn snapshot(name: &str) -> PathBuf {
    common::workspace().join("tests/cases/render").join(name)
}

/// Compares with a snapshot file; `UPDATE_SNAPSHOTS=1` rewrites it.
fn assert_snapshot(name: &str, actual: &str) {
    let path = snapshot(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the snapshot at line {}:\n  snapshot: {:?}\n  actual:   {:?}\n(UPDATE_SNAPSHOTS=1 rewrites it after a deliberate change)",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

#[test]
fn prompt_snapshots() {
    // Every shipped plugin granted something, so every shipped gadget is
    // offered (one granted nothing is not: first_hour.rs).
    let dir = tempfile::tempdir().unwrap();
    let files = format!("files:files={}:/data", dir.path().display());
    let grants = [
        "--grant",
        files.as_str(),
        "--grant",
        "web:http=https://example.com",
        "--grant",
        "summarize:llm=openai:gpt-4o-mini",
    ];
    let with_grants = |args: &[&str]| {
        let mut all: Vec<&str> = grants.to_vec();
        all.extend_from_slice(args);
        gadget(&all, None)
    };
    let out = with_grants(&["prompt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_snapshot("prompt-shipped.txt", &text);
    assert!(text.contains("\nGADGET: GadgetOutputViewer\n"));

    let out = with_grants(&[
        "prompt",
        "--no-output-limit",
        "--start-marker",
        "<<<START:",
        "--end-marker",
        "<<<END",
        "--arg-marker",
        "@param:",
    ]);
    let text = stdout(&out);
    assert_snapshot("prompt-shipped-custom-markers.txt", &text);
    assert!(!text.contains("!!!"));
    assert!(!text.contains("GadgetOutputViewer"));
}

#[test]
fn custom_markers_run_too() {
    let response =
        "<<<START:Calculator:c\n@param:operation\nadd\n@param:a\n2\n@param:b\n3\n<<<END\n";
    let (events, code) = run_json(
        &[
            "--start-marker",
            "<<<START:",
            "--end-marker",
            "<<<END",
            "--arg-marker",
            "@param:",
            "-",
        ],
        Some(response),
    );
    assert_eq!(code, Some(0), "{events:#?}");
    assert_eq!(finished(&events, "c")["result"], "5");
}
