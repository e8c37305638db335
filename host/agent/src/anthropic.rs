//! Anthropic's Messages API with `stream: true`.
//!
//! The stream is named server-sent events: `message_start` (with the
//! input token count), `content_block_start`, `content_block_delta`
//! (`text_delta`s are the text), `content_block_stop`, `message_delta`
//! (cumulative output tokens), `message_stop`; `ping` at any time; `error`
//! for an error mid-response (`overloaded_error`, ...).

use std::time::Duration;

use serde_json::{Value, json};

use crate::provider::{
    BoxFuture, ChatRequest, ProviderError, ResponseStream, Role, StreamItem, Usage, error_message,
    status_error,
};
use crate::sse::{Decode, Item};

/// Anthropic's own endpoint; `--base-url` points elsewhere.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The API version the events above are documented for.
pub const API_VERSION: &str = "2023-06-01";

/// How long connecting may take before the server counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A Messages endpoint.
pub struct Anthropic {
    client: reqwest::Client,
    base_url: String,
    api_key: String,
}

impl Anthropic {
    pub fn new(base_url: &str, api_key: String) -> Anthropic {
        Anthropic {
            client: crate::http_client(CONNECT_TIMEOUT),
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
        }
    }

    fn url(&self) -> String {
        format!("{}/v1/messages", self.base_url)
    }
}

/// The request body: the system parts joined (the API takes one system
/// text), the conversation as it is.
pub fn body(request: &ChatRequest) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for m in &request.messages {
        if let Some(id) = &m.tool_call_id {
            // Results of one turn's calls go together, in one user message.
            let content = match m.images.is_empty() {
                true => json!(m.content),
                false => crate::images::anthropic_blocks(&m.content, &m.images),
            };
            let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": content});
            if m.is_error {
                block["is_error"] = json!(true);
            }
            match messages.last_mut() {
                Some(last)
                    if last["role"] == "user" && last["content"][0]["type"] == "tool_result" =>
                {
                    if let Some(blocks) = last["content"].as_array_mut() {
                        blocks.push(block);
                    }
                }
                _ => messages.push(json!({"role": "user", "content": [block]})),
            }
            continue;
        }
        if !m.tool_calls.is_empty() {
            let mut blocks = Vec::new();
            if !m.content.is_empty() {
                blocks.push(json!({"type": "text", "text": m.content}));
            }
            blocks.extend(m.tool_calls.iter().map(|call| {
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
            }));
            messages.push(json!({"role": "assistant", "content": blocks}));
            continue;
        }
        let content = match m.images.is_empty() {
            true => json!(m.content),
            false => crate::images::anthropic_blocks(&m.content, &m.images),
        };
        messages.push(json!({
            "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
            "content": content,
        }));
    }
    let mut body = json!({
        "model": request.model,
        "system": request.system.join("\n\n"),
        "messages": messages,
        "max_tokens": request.max_tokens,
        "stream": true,
    });
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(temperature);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
    }
    body
}

impl crate::provider::Provider for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ResponseStream, ProviderError>> {
        Box::pin(async move {
            let url = self.url();
            let builder = self
                .client
                .post(&url)
                .header("x-api-key", &self.api_key)
                .header("anthropic-version", API_VERSION)
                .json(&body(request));
            let response = crate::send("anthropic", &url, builder).await?;
            let status = response.status();
            if !status.is_success() {
                let headers = response.headers().clone();
                let body = crate::read_error_body(response).await;
                return Err(status_error(
                    "anthropic",
                    &request.model,
                    &url,
                    status,
                    &headers,
                    &body,
                ));
            }
            let response = crate::expect_event_stream("anthropic", &url, response).await?;
            Ok(crate::sse::decode(
                "anthropic",
                response.bytes_stream(),
                Decoder::default(),
            ))
        })
    }
}

/// Turns each named event into stream items.
#[derive(Debug, Default)]
pub struct Decoder {
    usage: Usage,
    stopped: bool,
    /// Native tool calls (`tool_use` blocks), put together as their input
    /// streams.
    calls: crate::tool_calls::Assembler,
}

fn broken(error: crate::tool_calls::ToolCallError) -> ProviderError {
    ProviderError::StreamBroken {
        provider: "anthropic".into(),
        cause: error.to_string(),
    }
}

impl Decode for Decoder {
    fn event(&mut self, event: &str, data: &str) -> Result<Vec<Item>, ProviderError> {
        if self.stopped {
            return Ok(Vec::new());
        }
        let parsed = || -> Result<Value, ProviderError> {
            serde_json::from_str(data).map_err(|e| ProviderError::StreamBroken {
                provider: "anthropic".into(),
                cause: format!(
                    "a '{event}' event is not JSON ({e}): {}",
                    crate::provider::cut(data, 200)
                ),
            })
        };
        let count = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64);
        Ok(match event {
            "message_start" => {
                let value = parsed()?;
                if let Some(usage) = value.pointer("/message/usage") {
                    self.usage.merge(Usage {
                        input_tokens: count(usage, "input_tokens").unwrap_or(0)
                            + count(usage, "cache_read_input_tokens").unwrap_or(0)
                            + count(usage, "cache_creation_input_tokens").unwrap_or(0),
                        output_tokens: count(usage, "output_tokens").unwrap_or(0),
                    });
                }
                vec![Item::Stream(StreamItem::Usage(self.usage))]
            }
            "content_block_start" => {
                let value = parsed()?;
                if value.pointer("/content_block/type").and_then(Value::as_str) == Some("tool_use")
                {
                    let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                    self.calls
                        .named(
                            index,
                            value.pointer("/content_block/id").and_then(Value::as_str),
                            value.pointer("/content_block/name").and_then(Value::as_str),
                        )
                        .map_err(broken)?;
                }
                Vec::new()
            }
            "content_block_stop" => {
                let value = parsed()?;
                let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                match self.calls.ended(index).map_err(broken)? {
                    Some(call) => vec![Item::Stream(StreamItem::ToolCall(call))],
                    None => Vec::new(),
                }
            }
            "content_block_delta" => {
                let value = parsed()?;
                if value.pointer("/delta/type").and_then(Value::as_str) == Some("input_json_delta")
                {
                    let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                    let fragment = value
                        .pointer("/delta/partial_json")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    return Ok(
                        match self.calls.arguments(index, fragment).map_err(broken)? {
                            Some(call) => vec![Item::Stream(StreamItem::ToolCall(call))],
                            None => Vec::new(),
                        },
                    );
                }
                match value.pointer("/delta/text").and_then(Value::as_str) {
                    Some(text)
                        if !text.is_empty()
                            && value.pointer("/delta/type").and_then(Value::as_str)
                                == Some("text_delta") =>
                    {
                        vec![Item::Stream(StreamItem::Text(text.to_string()))]
                    }
                    _ => Vec::new(),
                }
            }
            "message_delta" => {
                let value = parsed()?;
                if let Some(usage) = value.get("usage") {
                    let mut later = self.usage;
                    if let Some(output) = count(usage, "output_tokens") {
                        later.output_tokens = output;
                    }
                    if let Some(input) = count(usage, "input_tokens") {
                        later.input_tokens = input;
                    }
                    self.usage.merge(later);
                }
                let mut items = vec![Item::Stream(StreamItem::Usage(self.usage))];
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    items.push(Item::Stream(crate::provider::finish_reason(reason)));
                }
                items
            }
            "message_stop" => {
                self.stopped = true;
                vec![Item::End]
            }
            "error" => {
                return Err(ProviderError::Api {
                    provider: "anthropic".into(),
                    message: error_message(data),
                });
            }
            // ping, and event types added later.
            _ => Vec::new(),
        })
    }

    fn complete(&self) -> bool {
        self.stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;

    /// A failed call's result is marked as one (`is_error`), a good one
    /// is not; both go in one user message.
    #[test]
    fn failed_tool_results_say_so() {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::user("go"),
                ChatMessage::tool_result("toolu_1", "42", false),
                ChatMessage::tool_result("toolu_2", "division by zero", true),
            ],
            model: "claude-sonnet-4-5".into(),
            system: vec![],
            max_tokens: 100,
            temperature: None,
            tools: vec![],
        };
        let body = body(&request);
        let results = body["messages"][1]["content"].as_array().unwrap();
        assert_eq!(results[0].get("is_error"), None);
        assert_eq!(results[1]["is_error"], true);
        assert_eq!(results[1]["content"], "division by zero");
    }
}
