//! `gadget agent` against scripted LLM servers on 127.0.0.1
//! ([`crate::llm_server`]): the real binary, an OpenAI-compatible and an
//! Anthropic-compatible server.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use crate::llm_server::{LlmServer, Reply, block, openai_reply};

fn add(id: &str, a: u32, b: u32) -> String {
    block(
        &format!("Calculator:{id}"),
        &[
            ("operation", "add"),
            ("a", &a.to_string()),
            ("b", &b.to_string()),
        ],
    )
}

/// Runs `gadget agent` with the shipped plugins against `server`.
pub(crate) fn agent(server: &LlmServer, policy: Option<&str>, args: &[&str]) -> Output {
    let (mut command, _home) = agent_command(server, policy, args);
    command.output().expect("run gadget agent")
}

/// `gadget agent` with the shipped plugins against `server`, and the
/// temporary home it runs in (kept while the command runs).
pub(crate) fn agent_command(
    server: &LlmServer,
    policy: Option<&str>,
    args: &[&str],
) -> (Command, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env("TEST_LLM_KEY", "sk-test")
        .stdin(Stdio::null());
    if let Some(policy) = policy {
        let file = home.path().join("policy.toml");
        std::fs::write(&file, policy).unwrap();
        command.arg("--config").arg(file);
    }
    command
        .args(["agent", "--base-url"])
        .arg(server.url() + "/v1")
        .args(["--api-key-env", "TEST_LLM_KEY"])
        .args(args);
    (command, home)
}

pub(crate) fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

pub(crate) fn summary(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["type"] == "agent_summary")
        .expect("an agent_summary event")
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn calls_start_mid_stream_and_the_next_request_carries_llmists_history() {
    // The first response's block is complete long before the response
    // ends; the second answers in prose.
    let server = LlmServer::start(vec![
        openai_reply(
            &[
                ("Let me add.", 0),
                (&add("sum", 15, 23), 0),
                ("\nStill writing...", 1500),
            ],
            (100, 20),
        ),
        openai_reply(&[("The sum is ", 0), ("38.", 0)], (150, 5)),
    ]);
    let out = agent(
        &server,
        None,
        &[
            "What is 15 + 23?",
            "--model",
            "openai:gpt-4o-mini",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = events(&out);
    // The call finished before the last piece of its response arrived.
    let position = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let finished = position(&|e| e["type"] == "call_finished" && e["id"] == "sum");
    let last_text = position(&|e| e["type"] == "llm_text" && e["content"] == "\nStill writing...");
    assert!(finished < last_text, "{events:#?}");
    let summary = summary(&events);
    assert_eq!(summary["stop"], "answered");
    assert_eq!(summary["answer"], "The sum is 38.");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(requests[0].body["stream"], true);
    assert_eq!(requests[0].body["stream_options"]["include_usage"], true);
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("GADGET: Calculator")
    );
    // llmist's history: the prose around the call is dropped, the call
    // re-rendered from its validated parameters, then its result.
    assert_eq!(
        messages[1..].to_vec(),
        vec![
            json!({"role": "user", "content": "What is 15 + 23?"}),
            json!({"role": "assistant", "content": "!!!GADGET_START:Calculator:sum\n!!!ARG:operation\nadd\n!!!ARG:a\n15\n!!!ARG:b\n23\n!!!GADGET_END"}),
            json!({"role": "user", "content": "Result (sum): 38"}),
        ]
    );
}

#[test]
fn dependencies_reach_across_iterations_and_finish_ends_the_loop() {
    let server = LlmServer::start(vec![
        openai_reply(&[(&add("first", 1, 2), 0)], (10, 10)),
        openai_reply(
            &[(
                &(block(
                    "Calculator:second:first",
                    &[("operation", "multiply"), ("a", "3"), ("b", "4")],
                ) + &block("TaskComplete:done:second", &[("summary", "all done")])),
                0,
            )],
            (10, 10),
        ),
    ]);
    let out = agent(
        &server,
        None,
        &["go", "--model", "openai:gpt-4o-mini", "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = events(&out);
    let second = events
        .iter()
        .find(|e| e["type"] == "call_finished" && e["id"] == "second")
        .unwrap();
    assert_eq!(second["result"], "12");
    let summary = summary(&events);
    assert_eq!(summary["stop"], "finished");
    assert_eq!(server.requests().len(), 2, "finish ends the loop");
}

#[test]
fn ask_human_takes_the_answers_file() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers.txt");
    std::fs::write(&answers, "blue\n").unwrap();
    let server = LlmServer::start(vec![
        openai_reply(
            &[(&block("AskUser:q", &[("question", "Which colour?")]), 0)],
            (10, 10),
        ),
        openai_reply(&[("Blue it is.", 0)], (10, 10)),
    ]);
    let out = agent(
        &server,
        None,
        &[
            "pick",
            "--model",
            "openai:gpt-4o-mini",
            "--json",
            "--answers",
            answers.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let messages = server.requests()[1].body["messages"].clone();
    assert_eq!(
        messages.as_array().unwrap().last().unwrap()["content"],
        "Result (q): blue"
    );
}

#[test]
fn max_iterations_and_max_cost_stop_the_loop_before_the_next_request() {
    let looping = || openai_reply(&[(&add("again", 1, 1), 0)], (1000, 100));
    let server = LlmServer::start(vec![looping(), looping(), looping()]);
    let out = agent(
        &server,
        None,
        &[
            "loop",
            "--model",
            "openai:gpt-4o-mini",
            "--json",
            "--max-iterations",
            "2",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(summary(&events(&out))["stop"], "max-iterations");
    assert_eq!(server.requests().len(), 2);

    // Priced by the policy file: $1 per million tokens each way, so one
    // response costs 11000 / 1e6 = $0.011; a cap of $0.01 lets the first
    // request go (nothing spent, its estimated input of a few thousand
    // tokens is under the cap) and stops the second.
    let policy = "[llm.models.\"openai:local-model\"]\ninput-per-mtok = 1.0\noutput-per-mtok = 1.0\ncontext-window = 32000\n";
    let costly = || openai_reply(&[(&add("again", 1, 1), 0)], (10_000, 1_000));
    let server = LlmServer::start(vec![costly(), costly()]);
    let out = agent(
        &server,
        Some(policy),
        &[
            "loop",
            "--model",
            "openai:local-model",
            "--json",
            "--max-cost",
            "0.01",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let events = events(&out);
    let summary = summary(&events);
    assert_eq!(summary["stop"], "max-cost");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(summary["input_tokens"], 10_000);
    assert_eq!(summary["output_tokens"], 1_000);
    let llm_cost = summary["llm_cost"].as_f64().unwrap();
    assert!((llm_cost - 0.011).abs() < 1e-12, "{summary}");
    let total = summary["total_cost"].as_f64().unwrap();
    assert!((total - llm_cost - summary["gadget_cost"].as_f64().unwrap()).abs() < 1e-12);
}

#[test]
fn a_rate_limit_is_retried_and_auth_and_model_errors_are_one_line_with_exit_2() {
    let server = LlmServer::start(vec![
        Reply::Status {
            status: 429,
            headers: vec![("Retry-After", "0".into())],
            body: r#"{"error":{"message":"Rate limit reached"}}"#.into(),
        },
        Reply::Status {
            status: 503,
            headers: vec![("retry-after-ms", "10".into())],
            body: "upstream busy".into(),
        },
        openai_reply(&[("fine", 0)], (5, 1)),
    ]);
    let out = agent(
        &server,
        None,
        &["hi", "--model", "openai:gpt-4o-mini", "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = events(&out);
    let retries: Vec<&Value> = events.iter().filter(|e| e["type"] == "llm_retry").collect();
    assert_eq!(retries.len(), 2, "{events:#?}");
    assert!(
        retries[0]["error"]
            .as_str()
            .unwrap()
            .contains("Rate limit reached")
    );
    assert_eq!(retries[1]["delay_ms"], 10);
    assert_eq!(summary(&events)["answer"], "fine");

    let server = LlmServer::start(vec![Reply::Status {
        status: 401,
        headers: vec![],
        body: r#"{"error":{"message":"Incorrect API key provided"}}"#.into(),
    }]);
    let out = agent(&server, None, &["hi", "--model", "openai:gpt-4o-mini"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("error: openai: the API key was refused (401): Incorrect API key provided"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.requests().len(), 1, "a 401 is not retried");

    let server = LlmServer::start(vec![Reply::Status {
        status: 404,
        headers: vec![],
        body:
            r#"{"error":{"message":"The model `gpt-9` does not exist","code":"model_not_found"}}"#
                .into(),
    }]);
    let out = agent(&server, None, &["hi", "--model", "openai:gpt-9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown model 'gpt-9'"),
        "{}",
        stderr(&out)
    );

    // Nothing listening on this machine: said at once, exit 2.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let nowhere = LlmServer::nowhere(port);
    let out = agent(
        &nowhere,
        None,
        &["hi", "--model", "openai:m", "--max-retries", "0"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("openai: nothing is listening at http://127.0.0.1:"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_stream_that_breaks_mid_response_is_an_error_and_its_calls_still_end() {
    let chunk = |text: &str| {
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
        (Duration::ZERO, format!("data: {chunk}\n\n"))
    };
    let server = LlmServer::start(vec![Reply::Events {
        events: vec![chunk(&add("before", 2, 2)), chunk("\n!!!GADGET_START:Calc")],
        broken: true,
    }]);
    let out = agent(
        &server,
        None,
        &["hi", "--model", "openai:gpt-4o-mini", "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let events = events(&out);
    let before = events
        .iter()
        .find(|e| e["type"] == "call_finished" && e["id"] == "before")
        .expect("the call that was complete ran");
    assert_eq!(before["result"], "4");
    let summary = summary(&events);
    assert_eq!(summary["stop"], "failed");
    assert!(
        summary["error"]
            .as_str()
            .unwrap()
            .starts_with("openai: the response stream broke"),
        "{summary}"
    );
}

#[test]
fn the_anthropic_provider_speaks_the_messages_api() {
    let event =
        |name: &str, data: Value| (Duration::ZERO, format!("event: {name}\ndata: {data}\n\n"));
    let stream = |text: &str| Reply::Events {
        events: vec![
            event(
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 40, "output_tokens": 1}}}),
            ),
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            event("ping", json!({"type": "ping"})),
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ),
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 30}}),
            ),
            event("message_stop", json!({"type": "message_stop"})),
        ],
        broken: false,
    };
    let server = LlmServer::start(vec![stream(&add("a1", 20, 22)), stream("It is 42.")]);
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .args([
            "agent",
            "add",
            "--model",
            "anthropic:claude-sonnet-4-20250514",
            "--json",
            "--base-url",
        ])
        .arg(server.url())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let events = events(&out);
    let summary = summary(&events);
    assert_eq!(summary["answer"], "It is 42.");
    assert_eq!(summary["input_tokens"], 80);
    assert_eq!(summary["output_tokens"], 60);
    // Built-in price: $3 in and $15 out per million tokens.
    let cost = summary["llm_cost"].as_f64().unwrap();
    assert!(
        (cost - (80.0 * 3.0 + 60.0 * 15.0) / 1e6).abs() < 1e-12,
        "{summary}"
    );
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
    assert!(
        requests[0].body["system"]
            .as_str()
            .unwrap()
            .contains("GADGET: Calculator")
    );
    assert_eq!(
        requests[1].body["messages"][2]["content"],
        "Result (a1): 42"
    );
}

#[test]
fn a_missing_key_is_one_line_and_the_session_file_replays() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .args(["agent", "hi", "--model", "openai:gpt-4o-mini"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).lines().last().unwrap(),
        "error: openai: no API key: set OPENAI_API_KEY (or --api-key-env VAR, or [llm] api-key-env)"
    );

    let server = LlmServer::start(vec![
        openai_reply(&[(&add("x", 2, 3), 0)], (10, 10)),
        openai_reply(&[("5", 0)], (10, 10)),
    ]);
    let session = home.path().join("session.jsonl");
    let out = agent(
        &server,
        None,
        &[
            "add",
            "--model",
            "openai:gpt-4o-mini",
            "--save",
            session.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<Value> = std::fs::read_to_string(&session)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "session");
    let responses: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "llm_response")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(responses.len(), 2);
    // The first response, run again by `gadget run`, makes the same call.
    let replayed = home.path().join("response-1.txt");
    std::fs::write(&replayed, responses[0]).unwrap();
    let run = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .args(["run", "--json"])
        .arg(&replayed)
        .output()
        .unwrap();
    let finished: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "call_finished")
        .collect();
    assert_eq!(finished[0]["result"], "5");
    assert_eq!(lines.last().unwrap()["type"], "agent_summary");
}

#[test]
fn ctrl_c_cancels_the_running_calls_saves_the_session_and_exits_130() {
    // The response starts a long Sleep, then the model "thinks" for ten
    // seconds: the interrupt comes while both are under way.
    let chunk = |text: &str, pause: u64| {
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
        (Duration::from_millis(pause), format!("data: {chunk}\n\n"))
    };
    let server = LlmServer::start(vec![Reply::Events {
        events: vec![
            chunk(&block("Sleep:nap", &[("ms", "2900")]), 0),
            chunk("more", 10_000),
        ],
        broken: false,
    }]);
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("session.jsonl");
    let mut child = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env("TEST_LLM_KEY", "k")
        .args([
            "agent",
            "nap",
            "--model",
            "openai:m",
            "--json",
            "--api-key-env",
            "TEST_LLM_KEY",
        ])
        .arg("--base-url")
        .arg(server.url() + "/v1")
        .arg("--save")
        .arg(&session)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the call has started (bounded wait).
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    for _ in 0..200 {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains("\"call_started\"") {
            break;
        }
    }
    assert!(seen.contains("call_started"), "{seen}");
    let started = std::time::Instant::now();
    // SAFETY: kill(2) on the child's pid with SIGINT, as Ctrl-C would.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped promptly"
    );
    let events: Vec<Value> = rest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let nap = events
        .iter()
        .find(|e| e["type"] == "call_finished" && e["id"] == "nap")
        .expect("the call ended");
    assert!(
        nap["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("cancel"),
        "{nap}"
    );
    assert_eq!(summary(&events)["stop"], "interrupted");
    let saved = std::fs::read_to_string(&session).unwrap();
    assert!(saved.lines().last().unwrap().contains("\"agent_summary\""));
}

/// A model that floods its own history: each response is ten calls with
/// 900 KiB arguments (the history keeps every call, even a refused one),
/// and reports impossible usage. The third request would carry over
/// 16 MiB and is never sent; the token sums saturate.
#[test]
fn a_history_too_big_to_send_stops_the_session_and_token_sums_saturate() {
    let text = "x".repeat(900 << 10);
    let calls: Vec<String> = (0..10)
        .map(|i| block(&format!("NoSuchGadget:f{i}"), &[("text", &text)]))
        .collect();
    let flood = || {
        let pieces: Vec<(&str, u64)> = calls.iter().map(|c| (c.as_str(), 0)).collect();
        openai_reply(&pieces, (u64::MAX, u64::MAX))
    };
    let server = LlmServer::start(vec![flood(), flood(), flood()]);
    let out = agent(
        &server,
        None,
        &["flood", "--model", "openai:gpt-4o-mini", "--json"],
    );
    assert_eq!(server.requests().len(), 2, "{}", stderr(&out));
    let events = events(&out);
    let summary = summary(&events);
    assert_eq!(summary["stop"], "failed", "{summary}");
    assert_eq!(summary["input_tokens"], u64::MAX, "{summary}");
    let error = summary["error"].as_str().unwrap_or_default();
    assert!(error.contains("MAX_REQUEST_BYTES"), "{summary}");
}

/// A model server that redirects: neither a 307 (which would replay the
/// conversation and the key to another origin) nor a 303 (which would make
/// the host fetch any URL) is followed, and neither is retried.
#[test]
fn a_provider_redirect_is_never_followed() {
    for status in [307, 303, 301] {
        let elsewhere = LlmServer::start(vec![openai_reply(&[("stolen", 0)], (1, 1))]);
        let server = LlmServer::start(vec![Reply::Status {
            status,
            headers: vec![("Location", elsewhere.url() + "/v1/chat/completions")],
            body: String::new(),
        }]);
        let out = agent(&server, None, &["hi", "--model", "openai:gpt-4o-mini"]);
        assert_eq!(out.status.code(), Some(1), "{status}: {}", stderr(&out));
        assert!(elsewhere.requests().is_empty(), "{status} was followed");
        assert_eq!(server.requests().len(), 1, "{status} was retried");
        assert!(
            stderr(&out).contains("never follow redirects"),
            "{}",
            stderr(&out)
        );
    }
}

/// `--max-cost` with a model the table has no price for caps only the
/// gadgets: said at start, not left for the bill to show.
#[test]
fn a_cost_cap_on_an_unpriced_model_says_what_it_caps() {
    let server = LlmServer::start(vec![openai_reply(&[("Hi.", 0)], (10, 2))]);
    let out = agent(
        &server,
        None,
        &[
            "--model",
            "openai:llama3.2",
            "--max-cost",
            "0.01",
            "--json",
            "Hi.",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("--max-cost 0.01 caps gadget costs only: openai:llama3.2 has no price"),
        "{}",
        stderr(&out)
    );
}
