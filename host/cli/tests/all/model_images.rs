//! A gadget's image reaches the model as an image: `gadget agent` with the
//! palette's `Swatch` (it asks twice, answered by `--answers`, then returns
//! a PNG) against scripted providers, checking the bytes each request
//! carries: an OpenAI `image_url` part after a block-format result, and an
//! Anthropic `image` block inside a native `tool_result`.

use std::process::{Command, Output};

use serde_json::json;

use crate::agent::{events, stderr, summary};
use crate::common;
use crate::llm_server::{LlmServer, Reply, anthropic_reply, block, openai_reply};
use crate::native::anthropic_text;

/// `gadget agent` with the palette against `server`, answering Swatch's
/// two questions (green, 8 pixels).
fn agent_with_palette(base_url: &str, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let answers = home.path().join("answers.txt");
    std::fs::write(&answers, "{\"colour\": \"green\"}\n8\n").unwrap();
    Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::workspace().join("examples/palette"))
        .env_remove("GADGET_CONFIG")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env("TEST_LLM_KEY", "sk-test")
        .args(["agent", "Draw me a swatch", "--json", "--answers"])
        .arg(&answers)
        .args(["--api-key-env", "TEST_LLM_KEY", "--base-url", base_url])
        .args(args)
        .output()
        .unwrap()
}

/// The PNG the model was sent, from base64, and the size the result's
/// text gives for it.
fn png_of(base64: &str, text: &str) -> Vec<u8> {
    let bytes = decode(base64);
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert!(
        text.contains(&format!("[image: image/png, {} bytes]", bytes.len())),
        "the text names another image: {text}"
    );
    bytes
}

fn decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    } as u32;
    let mut out = Vec::new();
    for chunk in text.trim_end_matches('=').as_bytes().chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0, |n, (i, &c)| n | value(c) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

#[test]
fn a_block_format_result_image_reaches_an_openai_model_as_an_image_url() {
    let server = LlmServer::start(vec![
        openai_reply(&[(&block("Swatch:s", &[]), 0)], (100, 20)),
        openai_reply(&[("A green square.", 0)], (900, 5)),
    ]);
    let out = agent_with_palette(&(server.url() + "/v1"), &["--model", "openai:gpt-4o-mini"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(summary(&events(&out))["answer"], "A green square.");
    let requests = server.requests();
    let messages = requests[1].body["messages"].as_array().unwrap();
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "user", "{result}");
    let parts = result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"));
    let text = parts[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Result (s): A 8x8 green swatch."),
        "{text}"
    );
    assert_eq!(parts[1]["type"], "image_url", "{result}");
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    let base64 = url
        .strip_prefix("data:image/png;base64,")
        .unwrap_or_else(|| panic!("{url}"));
    png_of(base64, text);
    // The saved events say which image went, not its bytes again.
    let request_event = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "llm_request")
        .nth(1)
        .unwrap();
    let shown = request_event["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(shown["images"][0]["mime_type"], "image/png", "{shown}");
    assert!(shown["images"][0]["bytes"].as_u64().unwrap() > 8, "{shown}");
}

/// An Anthropic turn that calls Swatch natively.
fn anthropic_swatch_call() -> Reply {
    anthropic_reply(
        vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_s", "name": "Swatch", "input": {}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
            json!({"type": "content_block_stop", "index": 0}),
        ],
        "tool_use",
    )
}

#[test]
fn a_native_result_image_reaches_an_anthropic_model_as_an_image_block() {
    let server = LlmServer::start(vec![anthropic_swatch_call(), anthropic_text("Green.")]);
    let out = agent_with_palette(
        &server.url(),
        &[
            "--model",
            "anthropic:claude-sonnet-4-20250514",
            "--tool-format",
            "native",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = server.requests();
    let messages = requests[1].body["messages"].as_array().unwrap();
    let results = messages.last().unwrap();
    let block = &results["content"][0];
    assert_eq!(block["type"], "tool_result", "{results}");
    assert_eq!(block["tool_use_id"], "toolu_s", "{results}");
    let content = block["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{block}"));
    let text = content[0]["text"].as_str().unwrap();
    assert_eq!(content[1]["type"], "image", "{block}");
    assert_eq!(content[1]["source"]["type"], "base64", "{block}");
    assert_eq!(content[1]["source"]["media_type"], "image/png", "{block}");
    png_of(content[1]["source"]["data"].as_str().unwrap(), text);
}
