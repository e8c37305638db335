//! The operator's `[[rate-limits]]` with the shipped gadgets, as `gadget
//! run` and `gadget serve` apply them: the eleventh call of ten per second
//! is refused at once as `rate-limited` (not queued) and journaled; over
//! MCP a gadget-wide limit is the call's error result, a per-client one
//! refuses the whole request with HTTP 429 and `Retry-After`; concurrent
//! calls cannot slip past a limit; the metrics count both.

use serde_json::Value;

use crate::capabilities::run;
use crate::common;
use crate::serve::Server;

/// Eleven independent Calculator calls in one response.
fn eleven_calls() -> String {
    (1..=11)
        .map(|i| {
            format!(
                "!!!GADGET_START:Calculator:c{i}\n!!!ARG:operation\nadd\n!!!ARG:a\n{i}\n!!!ARG:b\n1\n!!!GADGET_END\n"
            )
        })
        .collect()
}

#[test]
fn the_eleventh_call_of_ten_per_second_is_refused_at_once_and_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let response = dir.path().join("response.txt");
    std::fs::write(&response, eleven_calls()).unwrap();
    let journal = dir.path().join("audit.jsonl");
    let policy = "[[rate-limits]]\ngadget = \"calc*\"\ncalls = 10\nper-seconds = 1\n";
    let run = run(
        Some(policy),
        &[],
        &[
            "--audit",
            journal.to_str().unwrap(),
            "run",
            "--json",
            response.to_str().unwrap(),
        ],
    );
    let events: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "call_finished")
        .collect();
    assert_eq!(finished.len(), 11, "{events:#?}");
    let refused: Vec<&&Value> = finished
        .iter()
        .filter(|e| e["error"]["kind"] == "rate-limited")
        .collect();
    // Ten calls within far less than a second: one is refused, whichever
    // came last, and none waited for a place.
    assert_eq!(refused.len(), 1, "{finished:#?}");
    let message = refused[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Gadget 'Calculator' was not run: rate-limits[1] allows 10 calls per 1 s; retry after"
        ),
        "{message}"
    );
    assert_eq!(run.status.code(), Some(1), "a call failed");
    let records = std::fs::read_to_string(&journal).unwrap();
    let limited = records
        .lines()
        .filter(|line| line.contains(r#""kind":"rate-limited""#))
        .count();
    assert_eq!(limited, 1, "{records}");
}

/// A policy of two limits: every client's Calculator calls together, and
/// each client's AddDays calls apart.
fn served_with_limits() -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("policy.toml");
    std::fs::write(
        &config,
        "[[rate-limits]]\ngadget = \"Calculator\"\ncalls = 5\nper-seconds = 600\n\n\
         [[rate-limits]]\ngadget = \"AddDays\"\ncalls = 2\nper-seconds = 600\nscope = \"client\"\n",
    )
    .unwrap();
    let server = Server::start_config(&common::shipped_plugins(), &config, &[], "s3cret", &[]);
    (server, dir)
}

fn call(server: &Server, name: &str, arguments: &str) -> (u16, String, String) {
    server.call_tool(Some("Bearer s3cret"), name, arguments)
}

#[test]
fn over_mcp_a_limit_is_the_calls_error_and_a_client_limit_refuses_the_request_with_429() {
    let (server, _dir) = served_with_limits();
    // Twenty calls at once against a limit of five: exactly five run.
    let add = r#"{"operation":"add","a":1,"b":2}"#;
    let answers: Vec<(u16, String)> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..20)
            .map(|_| {
                s.spawn(|| {
                    let (status, _, body) = call(&server, "Calculator", add);
                    (status, body)
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert!(
        answers.iter().all(|(status, _)| *status == 200),
        "{answers:?}"
    );
    let ran = answers
        .iter()
        .filter(|(_, body)| body.contains(r#""text":"3""#))
        .count();
    let limited: Vec<&String> = answers
        .iter()
        .map(|(_, body)| body)
        .filter(|body| body.contains("rate-limits[1] allows 5 calls per 600 s"))
        .collect();
    assert_eq!((ran, limited.len()), (5, 15), "{answers:?}");
    assert!(limited[0].contains(r#""isError":true"#), "{}", limited[0]);

    // Per client: two AddDays calls, then the request itself is refused.
    let days = r#"{"date":"2026-01-30","days":2}"#;
    for _ in 0..2 {
        let (status, _, body) = call(&server, "AddDays", days);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("2026-02-01"), "{body}");
    }
    let (status, head, body) = call(&server, "AddDays", days);
    assert_eq!(status, 429, "{head}\n{body}");
    let retry_after: u64 = head
        .lines()
        .find_map(|line| line.strip_prefix("retry-after: "))
        .and_then(|secs| secs.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {head}"));
    assert!((590..=600).contains(&retry_after), "{head}");
    assert!(
        body.contains("rate-limits[2] allows 2 calls per 600 s for client '(anonymous)'"),
        "{body}"
    );
    // Other gadgets are not held by it.
    let (status, _, body) = call(
        &server,
        "DaysBetween",
        r#"{"from":"2026-01-01","to":"2026-01-03"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("2 days"), "{body}");

    let metrics = server.metrics();
    for line in [
        "gadget_requests_refused_total{reason=\"rate-limited\"} 1",
        "gadget_rate_limited_total{rule=\"1\",gadget=\"Calculator\",scope=\"gadget\"} 15",
        "gadget_calls_total{gadget=\"Calculator\",outcome=\"rate-limited\"} 15",
        "gadget_rate_limited_total{rule=\"2\",gadget=\"AddDays\",scope=\"client\"} 1",
        "gadget_calls_total{gadget=\"AddDays\",outcome=\"ok\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
}

#[test]
fn a_rate_limit_outside_its_bounds_stops_the_host_naming_it() {
    let policy = "[[rate-limits]]\ngadget = \"Calculator\"\ncalls = 0\nper-seconds = 1\n";
    let add = r#"{"operation":"add","a":1,"b":2}"#;
    let run = run(Some(policy), &[], &["call", "Calculator", "--params", add]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("rate-limits[1].calls: 0 is not between 1 and 100000"),
        "{stderr}"
    );
}

/// What the operator reads is what holds: `describe` names the client a
/// rule is for, and the rate limits that count the gadget's calls.
#[test]
fn describe_shows_whose_calls_a_rule_holds_for_and_the_rate_limits() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        r#"
[[rules]]
gadget = "Calculator"
action = "deny"
client = "bob"
param = "/operation"
matches = "divide"

[[rate-limits]]
gadget = "Calc*"
calls = 10
per-seconds = 60
scope = "client"
"#,
    )
    .unwrap();
    let describe = |json: bool| {
        let mut command = std::process::Command::new(common::gadget_bin());
        command
            .arg("--plugins")
            .arg(common::shipped_plugins())
            .arg("--config")
            .arg(&policy)
            .args(["describe", "Calculator"])
            .env("XDG_CACHE_HOME", dir.path());
        if json {
            command.arg("--json");
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let text = describe(false);
    assert!(
        text.contains("Approval: a call by client bob is refused when /operation matches"),
        "{text}"
    );
    assert!(
        text.contains(
            "Rate limits: at most 10 calls per 60 s for each caller apart (rate-limits[1], gadget = \"Calc*\")"
        ),
        "{text}"
    );
    let json: Value = serde_json::from_str(&describe(true)).unwrap();
    assert_eq!(json["rate_limits"].as_array().unwrap().len(), 1, "{json}");
}
