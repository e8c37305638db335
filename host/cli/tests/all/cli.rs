//! The `gadget` binary, run as a user would.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::common;

pub fn gadget(args: &[&str], stdin: Option<&str>) -> Output {
    let cache = tempfile::tempdir().unwrap();
    let plugins = common::shipped_plugins();
    let mut child = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(&plugins)
        .arg("--cache-dir")
        .arg(cache.path())
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run gadget");
    if let Some(input) = stdin {
        let written = child.stdin.take().unwrap().write_all(input.as_bytes());
        // A command may exit before reading its input (a usage error does):
        // then the pipe is closed, which is not the test's failure.
        match written {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.unwrap(),
        }
    }
    child.wait_with_output().unwrap()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn call_prints_the_result_and_exits_zero() {
    let out = gadget(
        &[
            "call",
            "Calculator",
            "--params",
            r#"{"operation":"add","a":15,"b":23}"#,
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "38\n");
}

#[test]
fn call_reads_params_from_stdin_and_prints_json() {
    let out = gadget(
        &["call", "textstats", "--json"],
        Some(r#"{"text": "one two\nthree"}"#),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["gadget"], "TextStats");
    assert_eq!(
        report["result"],
        "lines: 2, words: 3, characters: 13, bytes: 13"
    );
    assert_eq!(report["details"]["words"], 3);
    assert_eq!(report["ok"], true);
    assert!(report["duration_ms"].as_f64().unwrap() > 0.0);
    for key in [
        "cost_usd", "logs", "progress", "updates", "error", "outcome",
    ] {
        assert!(report.get(key).is_some(), "missing {key}");
    }
}

#[test]
fn gadget_errors_invalid_params_and_unknown_names_exit_non_zero() {
    let out = gadget(
        &[
            "call",
            "Calculator",
            "--params",
            r#"{"operation":"divide","a":1,"b":0}"#,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("division by zero"),
        "{}",
        stderr(&out)
    );

    let out = gadget(
        &[
            "call",
            "Calculator",
            "--params",
            r#"{"operation":"add","a":"x","b":1}"#,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("Invalid parameters for 'Calculator':\n  - a: "),
        "{}",
        stderr(&out)
    );

    let out = gadget(&["call", "Nope", "--json"], None);
    assert_eq!(out.status.code(), Some(2));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["error"]["kind"], "unknown-gadget");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Available gadgets: AddDays")
    );

    let out = gadget(&["call", "Calculator", "--params", "[1]"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("must be a JSON object, not an array"),
        "{}",
        stderr(&out)
    );
    // Malformed JSON is bad input too: exit 2, as documented.
    let out = gadget(&["call", "Calculator", "--params", "{bad"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("parameters are not valid JSON"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn parameters_on_stdin_past_the_limit_are_refused() {
    // 16 MiB is the limit; one byte more must be refused, not read on.
    let big = format!("{{\"text\": \"{}\"}}", "x".repeat(16 << 20));
    let out = gadget(&["call", "TextStats"], Some(&big));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("exceed 16777216 bytes"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn list_and_describe_show_the_catalogue() {
    let out = gadget(&["list", "--json"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let list: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for expected in [
        "Calculator",
        "TextStats",
        "RegexReplace",
        "JsonQuery",
        "AddDays",
        "TaskComplete",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }

    let out = gadget(&["describe", "regexfind"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for expected in [
        "RegexFind",
        "max_matches  (integer; optional, default 50)",
        "Examples:",
        "Limits: timeout 5000 ms",
        "Plugin: text 0.1.0",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    let out = gadget(&["describe", "Calculator", "--json"], None);
    let described: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        described["parameters_schema"]["properties"]["operation"]["enum"][3],
        "divide"
    );
    assert_eq!(described["limits"]["memory_bytes"], 16 << 20);
    assert_eq!(described["plugin"]["name"], "calculator");
}

#[test]
fn check_passes_good_plugins_and_fails_bad_ones() {
    let out = gadget(
        &[
            "check",
            common::workspace().join("plugins/text").to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("✓ gadget JsonQuery") && text.ends_with("PASS\n"),
        "{text}"
    );

    let wrong = common::guests().join("fixture-wrong-world.wasm");
    let out = gadget(&["check", wrong.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("built for another world") && stdout(&out).ends_with("FAIL\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn strict_makes_load_errors_fatal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("broken.wasm"), b"not wasm").unwrap();
    let plugins = common::shipped_plugins();
    let run = |strict: bool| {
        let mut cmd = Command::new(common::gadget_bin());
        cmd.arg("--no-cache")
            .arg("--plugins")
            .arg(&plugins)
            .arg("--plugins")
            .arg(dir.path());
        if strict {
            cmd.arg("--strict");
        }
        cmd.arg("list").output().unwrap()
    };
    let lenient = run(false);
    assert!(lenient.status.success());
    assert!(
        stderr(&lenient).contains("warning: ") && stderr(&lenient).contains("broken.wasm"),
        "{}",
        stderr(&lenient)
    );
    let strict = run(true);
    assert_eq!(strict.status.code(), Some(2));
    assert!(
        stderr(&strict).contains("failed to load (--strict)"),
        "{}",
        stderr(&strict)
    );
}

#[test]
fn every_command_has_an_example_in_its_help() {
    for command in ["list", "describe", "call", "check"] {
        let out = Command::new(common::gadget_bin())
            .args([command, "--help"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let help = stdout(&out);
        assert!(
            help.contains("Example"),
            "{command} --help has no example:\n{help}"
        );
    }
}

const RESPONSE: &str = "Two calls and a chain.
!!!GADGET_START:Calculator:sum1
!!!ARG:operation
add
!!!ARG:a
15
!!!ARG:b
27
!!!GADGET_END
!!!GADGET_START:Calculator:div:sum1
!!!ARG:operation
divide
!!!ARG:a
1
!!!ARG:b
0
!!!GADGET_END
!!!GADGET_START:Calculator:after:div
!!!ARG:operation
add
!!!ARG:a
1
!!!ARG:b
1
!!!GADGET_END
Done.
";

#[test]
fn run_executes_a_response_from_stdin_and_reports_failures_in_the_exit_code() {
    let out = gadget(&["run", "--json"], Some(RESPONSE));
    assert_eq!(
        out.status.code(),
        Some(1),
        "a call failed and one was skipped"
    );
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |kind: &'static str| events.iter().filter(move |e| e["type"] == kind);
    assert_eq!(of("call_parsed").count(), 3);
    let finished: Vec<&Value> = of("call_finished").collect();
    assert_eq!(finished[0]["id"], "sum1");
    assert_eq!(finished[0]["result"], "42");
    assert_eq!(finished[1]["error"]["kind"], "invalid-arguments");
    let skipped: Vec<&Value> = of("call_skipped").collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["id"], "after");
    assert_eq!(skipped[0]["failed_dependency"], "div");
    let summary = events.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(
        (
            summary["succeeded"].as_u64(),
            summary["failed"].as_u64(),
            summary["skipped"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );

    // A fallback policy lets the dependent count as a success; the failure still sets the exit code.
    let out = gadget(
        &["run", "--on-dependency-failure", "fallback:n/a", "-"],
        Some(RESPONSE),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("✓ Calculator (after) in 0.0 ms [fallback]: n/a"),
        "{}",
        stdout(&out)
    );

    // Every call succeeding exits 0; a bad option exits 2.
    let ok = RESPONSE.replace("!!!ARG:b\n0", "!!!ARG:b\n4");
    assert_eq!(gadget(&["run"], Some(&ok)).status.code(), Some(0));
    assert_eq!(
        gadget(&["run", "--strategy", "batched:0"], Some(&ok))
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn run_replays_a_file_in_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("response.txt");
    std::fs::write(&file, RESPONSE.replace("!!!ARG:b\n0", "!!!ARG:b\n4")).unwrap();
    let out = gadget(&["run", "--replay", "1", file.to_str().unwrap()], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(text.starts_with("Two calls and a chain.\n"), "{text}");
    assert!(text.contains("✓ Calculator (after)"), "{text}");
    assert!(
        text.contains("3 calls: 3 succeeded, 0 failed, 0 skipped"),
        "{text}"
    );
}

#[test]
fn each_command_keeps_its_own_line_in_the_help() {
    let help = stdout(&gadget(&["--help"], None));
    for (command, about) in [
        ("call", "Run one gadget with JSON parameters"),
        ("audit", "Check or read an audit journal"),
        ("run", "Execute an LLM response"),
        ("list", "List the loaded gadgets"),
    ] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(command) && l.contains(about)),
            "{command}: {help}"
        );
    }
}

/// A reader that stops early (`gadget schemas | head -c 40`) has had what
/// it wanted: the command ends quietly with success, never a panic and a
/// backtrace (1 run in 3 panicked), never `error: Broken pipe` and exit 1.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    use std::io::Read as _;
    for args in [
        &["schemas", "--format", "anthropic"][..],
        &["list", "--json"],
        &["list"],
    ] {
        for _ in 0..3 {
            let mut child = Command::new(common::gadget_bin())
                .arg("--plugins")
                .arg(common::shipped_plugins())
                .args(args)
                .env("RUST_BACKTRACE", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut first = [0u8; 1];
            child.stdout.take().unwrap().read_exact(&mut first).unwrap();
            let out = child.wait_with_output().unwrap();
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{args:?}: {}: {said}", out.status);
            assert!(
                !said.contains("panicked") && !said.contains("Broken pipe"),
                "{args:?}: {said}"
            );
        }
    }
}

/// A sub-agent's gadget pattern that matches nothing is said at start (it
/// loaded as `ready`, silently without the gadget it was meant to call).
#[test]
fn a_sub_agent_pattern_that_matches_nothing_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[agents.Broken]\ndescription = \"d\"\nmodel = \"openai:gpt-4o-mini\"\ngadgets = [\"Calcualtor\", \"Days*\"]\n",
    )
    .unwrap();
    let out = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .arg("--config")
        .arg(&policy)
        .arg("list")
        .env("XDG_CACHE_HOME", dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("agents.Broken: gadgets entry \"Calcualtor\" matches no loaded gadget"),
        "{said}"
    );
    assert!(!said.contains("\"Days*\""), "{said}");
}

/// A response file that does not exist is bad input (exit 2, as the README
/// says), said before anything runs.
#[test]
fn a_missing_response_file_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nosuch.txt");
    let out = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .arg("run")
        .arg(&missing)
        .env("XDG_CACHE_HOME", dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("error: opening") && said.contains("nosuch.txt"),
        "{said}"
    );
}
