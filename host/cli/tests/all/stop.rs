//! A stop that stops: Ctrl-C (or SIGTERM) in `gadget run` and `gadget
//! agent` skips every call not started yet, cancels the running ones and
//! drops the model's stream at once.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use crate::llm_server::{LlmServer, block};

/// A Sleep, then a WriteFile that can only start once the Sleep is done
/// (one call at a time).
fn sleep_then_write() -> String {
    block("Sleep:nap", &[("ms", "2500")])
        + &block(
            "WriteFile:late",
            &[
                ("path", "/out/late.txt"),
                ("content", "written after the stop"),
            ],
        )
}

fn interrupt(child: &Child, signal: i32) {
    // SAFETY: kill(2) on our own child's pid, with a valid signal.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
}

/// The events of a `--json` run, each parsed.
pub(crate) fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub(crate) fn gadget(out: &std::path::Path) -> Command {
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .arg("--grant")
        .arg(format!("files:files={}:/out:rw", out.display()));
    command
}

#[test]
fn a_call_queued_behind_a_running_one_never_starts_after_ctrl_c_or_sigterm() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let out = tempfile::tempdir().unwrap();
        let mut child = gadget(out.path())
            .args(["run", "-", "--json", "--max-parallel", "1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(sleep_then_write().as_bytes()).unwrap();
        stdin.flush().unwrap();
        // The Sleep is running and the WriteFile queued; the stream is
        // still open.
        std::thread::sleep(Duration::from_millis(800));
        let stopped = Instant::now();
        interrupt(&child, signal);
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        assert_eq!(output.status.code(), Some(130), "signal {signal}");
        assert!(
            stopped.elapsed() < Duration::from_secs(2),
            "the stop took {:?}",
            stopped.elapsed()
        );
        assert!(
            !out.path().join("late.txt").exists(),
            "the queued WriteFile ran after the stop (signal {signal})"
        );
        let events = events(&output.stdout);
        let skipped = events
            .iter()
            .find(|e| e["type"] == "call_skipped" && e["id"] == "late")
            .unwrap_or_else(|| panic!("no skip for the WriteFile: {events:#?}"));
        assert!(
            skipped["reason"].as_str().unwrap().contains("interrupted"),
            "{skipped}"
        );
        let nap = events
            .iter()
            .find(|e| e["type"] == "call_finished" && e["id"] == "nap")
            .unwrap();
        assert_eq!(nap["error"]["kind"], "cancelled", "{nap}");
    }
}

#[test]
fn ctrl_c_in_an_agent_drops_the_stream_at_once_and_skips_queued_calls() {
    // The model writes both blocks, then stays silent for ten seconds
    // before it would end its answer.
    let text = sleep_then_write();
    let chunk = |content: &str, delay: u64| {
        let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
        (Duration::from_millis(delay), format!("data: {chunk}\n\n"))
    };
    let server = LlmServer::start(vec![crate::llm_server::Reply::Events {
        events: vec![chunk(&text, 0), chunk("and more", 10_000)],
        broken: false,
    }]);
    let out = tempfile::tempdir().unwrap();
    let child = gadget(out.path())
        .env("TEST_LLM_KEY", "sk-test")
        .args(["agent", "--model", "openai:m", "--base-url"])
        .arg(server.url() + "/v1")
        .args([
            "--api-key-env",
            "TEST_LLM_KEY",
            "--max-parallel",
            "1",
            "--json",
        ])
        .arg("Nap, then write.")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let stopped = Instant::now();
    interrupt(&child, libc::SIGINT);
    let output = child.wait_with_output().unwrap();
    assert!(
        stopped.elapsed() < Duration::from_secs(3),
        "the stop waited for the stream: {:?}",
        stopped.elapsed()
    );
    assert!(!out.path().join("late.txt").exists());
    let events = events(&output.stdout);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "call_skipped" && e["id"] == "late"),
        "{events:#?}"
    );
    // The cut-off response reported no usage: its tokens are estimated
    // from what was sent and received, never counted as nothing.
    let summary = events
        .iter()
        .find(|e| e["type"] == "agent_summary")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert!(summary["input_tokens"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["output_tokens"].as_u64().unwrap() > 0, "{summary}");
}
