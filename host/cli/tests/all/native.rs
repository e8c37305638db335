//! `gadget agent --tool-format native` against scripted OpenAI and
//! Anthropic streams: the gadgets go out as the provider's tools, each tool
//! call starts the moment its arguments JSON is complete (the first ones
//! close 1.5 s before the message ends, and have finished by then), and
//! the results go back as the provider's tool-result messages.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::{agent, events, stderr, summary};
use crate::common;
use crate::llm_server::{LlmServer, Reply, openai_reply};

/// How long the scripted model keeps writing after its first calls are
/// complete.
const STILL_WRITING: Duration = Duration::from_millis(1500);

fn sse(data: Value) -> String {
    format!("data: {data}\n\n")
}

/// An OpenAI stream: two Calculator calls whose arguments close at once,
/// then prose 1.5 s later, then a third call, then the end.
fn openai_calls() -> Reply {
    let calls = |calls: Value| {
        sse(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": null}]}),
        )
    };
    let call = |index: u64, id: &str, args: &str| {
        calls(json!([{"index": index, "id": id, "type": "function",
                       "function": {"name": "Calculator", "arguments": args}}]))
    };
    Reply::Events {
        events: vec![
            (
                Duration::ZERO,
                call(0, "call_a", r#"{"operation": "add", "a": 2,"#),
            ),
            (
                Duration::ZERO,
                calls(json!([{"index": 0, "function": {"arguments": r#" "b": 3}"#}}])),
            ),
            (
                Duration::ZERO,
                call(1, "call_b", r#"{"operation": "multiply", "a": 4, "b": 5}"#),
            ),
            (
                STILL_WRITING,
                sse(
                    json!({"choices": [{"index": 0, "delta": {"content": "(still writing)"}, "finish_reason": null}]}),
                ),
            ),
            (
                Duration::ZERO,
                call(2, "call_c", r#"{"operation": "divide", "a": 1, "b": 0}"#),
            ),
            (
                Duration::ZERO,
                sse(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            ),
            (
                Duration::ZERO,
                sse(
                    json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 40}}),
                ) + "data: [DONE]\n\n",
            ),
        ],
        broken: false,
    }
}

/// Each call's finish came before the text written 1.5 s after the
/// calls were complete.
fn finished_before_the_message_ended(events: &[Value], ids: &[&str]) {
    let position = |pred: &dyn Fn(&Value) -> bool| {
        events
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("{events:#?}"))
    };
    let late_text = position(&|e| e["type"] == "llm_text" && e["content"] == "(still writing)");
    for id in ids {
        let finished = position(&|e| e["type"] == "call_finished" && e["id"] == *id);
        assert!(finished < late_text, "{id}: {events:#?}");
    }
}

#[test]
fn openai_tool_calls_start_as_their_arguments_close() {
    let server = LlmServer::start(vec![
        openai_calls(),
        openai_reply(&[("5, 20, and no quotient.", 0)], (90, 8)),
    ]);
    let out = agent(
        &server,
        None,
        &[
            "Work these out.",
            "--model",
            "openai:gpt-4o-mini",
            "--tool-format",
            "native",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = events(&out);
    finished_before_the_message_ended(&events, &["call_a", "call_b"]);
    assert_eq!(summary(&events)["answer"], "5, 20, and no quotient.");

    let requests = server.requests();
    // The gadgets went out as tools; no block-format instructions.
    let first = &requests[0].body;
    let tools = first["tools"].as_array().unwrap();
    let calculator = tools
        .iter()
        .find(|t| t["function"]["name"] == "Calculator")
        .unwrap_or_else(|| panic!("{tools:#?}"));
    assert_eq!(calculator["type"], "function");
    assert_eq!(calculator["function"]["parameters"]["type"], "object");
    assert!(!first.to_string().contains("GADGET_START"), "{first}");
    // The results went back as tool messages under the calls' ids, the
    // error one the model's to read.
    let messages = requests[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_a", "call_b", "call_c"]);
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "Calculator");
    let result = |id: &str| {
        messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("{messages:#?}"))["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(result("call_a"), "5");
    assert_eq!(result("call_b"), "20");
    // The failure says it is one: the tool message has no error flag.
    assert!(
        result("call_c").starts_with("Error: ") && result("call_c").contains("zero"),
        "{}",
        result("call_c")
    );
}

/// An Anthropic stream: text, a tool_use block whose input closes at once,
/// prose 1.5 s later in a second text block, then a second tool_use.
fn anthropic_calls() -> Reply {
    let event = |delay: Duration, name: &str, data: Value| {
        (delay, format!("event: {name}\ndata: {data}\n\n"))
    };
    let now = Duration::ZERO;
    Reply::Events {
        events: vec![
            event(
                now,
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 40, "output_tokens": 1}}}),
            ),
            event(
                now,
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Calculator", "input": {}}}),
            ),
            event(
                now,
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": r#"{"operation": "add", "#}}),
            ),
            event(
                now,
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": r#""a": 40, "b": 2}"#}}),
            ),
            event(
                STILL_WRITING,
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            event(
                now,
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            ),
            event(
                now,
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "(still writing)"}}),
            ),
            event(
                now,
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
            event(
                now,
                "content_block_start",
                json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "CurrentTime", "input": {}}}),
            ),
            event(
                now,
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 2}),
            ),
            event(
                now,
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
            ),
            event(now, "message_stop", json!({"type": "message_stop"})),
        ],
        broken: false,
    }
}

pub(crate) fn anthropic_text(text: &str) -> Reply {
    crate::llm_server::anthropic_reply(
        vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            json!({"type": "content_block_stop", "index": 0}),
        ],
        "end_turn",
    )
}

#[test]
fn anthropic_tool_use_blocks_start_as_their_input_closes() {
    let server = LlmServer::start(vec![anthropic_calls(), anthropic_text("42, and the time.")]);
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
            "go",
            "--model",
            "anthropic:claude-sonnet-4-20250514",
            "--tool-format",
            "native",
            "--json",
            "--base-url",
        ])
        .arg(server.url())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let events = events(&out);
    finished_before_the_message_ended(&events, &["toolu_1"]);
    assert_eq!(summary(&events)["answer"], "42, and the time.");

    let requests = server.requests();
    let tools = requests[0].body["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "Calculator" && t["input_schema"]["type"] == "object"),
        "{tools:#?}"
    );
    // The model's turn as tool_use blocks (its text kept), then one user
    // message with both results.
    let messages = requests[1].body["messages"].as_array().unwrap();
    let assistant = &messages[1];
    assert_eq!(assistant["role"], "assistant");
    let blocks = assistant["content"].as_array().unwrap();
    assert_eq!(
        blocks[0],
        json!({"type": "text", "text": "(still writing)"})
    );
    assert_eq!(blocks[1]["type"], "tool_use");
    assert_eq!(
        blocks[1]["input"],
        json!({"operation": "add", "a": 40, "b": 2})
    );
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(
        results[0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"})
    );
    assert_eq!(results[1]["tool_use_id"], "toolu_2");
    assert_eq!(results[1].get("is_error"), None, "{results:#?}");
}

/// Native mode on a terminal: the text the model writes before its calls
/// is shown before them, as it is piped (the live view used to keep the
/// unfinished line below the calls' lines until the turn ended).
#[test]
fn native_mode_on_a_terminal_shows_the_opening_text_before_the_calls() {
    let content = |text: &str| {
        sse(json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}))
    };
    let opening = Reply::Events {
        events: vec![
            (Duration::ZERO, content("Computing. ")),
            (
                Duration::ZERO,
                sse(
                    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                    "function": {"name": "Calculator", "arguments": r#"{"operation": "add", "a": 2, "b": 3}"#}}]}, "finish_reason": null}]}),
                ),
            ),
            (
                Duration::ZERO,
                sse(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            ),
            (
                Duration::ZERO,
                sse(json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 9}}))
                    + "data: [DONE]\n\n",
            ),
        ],
        broken: false,
    };
    let server = LlmServer::start(vec![
        opening,
        openai_reply(&[("The sum is 5.", 0)], (60, 5)),
    ]);
    let (command, _home) = crate::agent::agent_command(
        &server,
        None,
        &[
            "Add them.",
            "--model",
            "openai:gpt-4o-mini",
            "--tool-format",
            "native",
        ],
    );
    let shown = crate::first_hour_again::on_a_terminal(command);
    let text = shown
        .find("Computing.")
        .unwrap_or_else(|| panic!("no opening text:\n{shown}"));
    let call = shown
        .find("✓ Calculator")
        .unwrap_or_else(|| panic!("no call:\n{shown}"));
    assert!(
        text < call,
        "the opening text comes after the call:\n{shown}"
    );
    assert!(shown.contains("The sum is 5."), "{shown}");
}
