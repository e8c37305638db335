//! OpenAI's Chat Completions API with `stream: true`, and so every server
//! that speaks it (vLLM, llama.cpp's server, Ollama, LM Studio,
//! OpenRouter) through a base URL.
//!
//! The stream is server-sent events: `data: {chunk}` lines whose
//! `choices[0].delta.content` is the next text, a last chunk with `usage`
//! (asked for with `stream_options.include_usage`) and empty `choices`,
//! then `data: [DONE]`. An `error` object in a chunk is an error the API
//! reports mid-response.

use std::time::Duration;

use serde_json::{Value, json};

use crate::provider::{
    BoxFuture, ChatRequest, ProviderError, ResponseStream, Role, StreamItem, Usage, error_message,
    status_error,
};
use crate::sse::{Decode, Item};

/// OpenAI's own endpoint; `--base-url` points elsewhere.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// How long connecting may take before the server counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A Chat Completions endpoint.
pub struct OpenAi {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
}

impl OpenAi {
    /// `api_key` may be absent for local servers that need none.
    pub fn new(base_url: &str, api_key: Option<String>) -> OpenAi {
        OpenAi {
            client: crate::http_client(CONNECT_TIMEOUT),
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
        }
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

/// The request body.
pub fn body(request: &ChatRequest) -> Value {
    let mut messages: Vec<Value> = request
        .system
        .iter()
        .map(|text| json!({"role": "system", "content": text}))
        .collect();
    // A tool message carries text only: the images of a turn's results
    // follow its tool messages, in one user message.
    let mut tool_images: Vec<(&str, &[gadget_core::content::Media])> = Vec::new();
    for (i, m) in request.messages.iter().enumerate() {
        if let Some(id) = &m.tool_call_id {
            // The tool message has no error flag: its text says it.
            let content = if m.is_error && !m.content.starts_with("Error:") {
                format!("Error: {}", m.content)
            } else {
                m.content.clone()
            };
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            if !m.images.is_empty() {
                tool_images.push((id, &m.images));
            }
            let turn_ends = request
                .messages
                .get(i + 1)
                .is_none_or(|next| next.tool_call_id.is_none());
            if turn_ends && !tool_images.is_empty() {
                messages.push(images_of_results(&std::mem::take(&mut tool_images)));
            }
            continue;
        }
        messages.push(message(m));
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": request.max_tokens,
    });
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(temperature);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }})
            })
            .collect();
    }
    body
}

/// A user or assistant message (with its calls, or its images).
fn message(m: &crate::provider::ChatMessage) -> Value {
    let content = match m.images.is_empty() {
        true => json!(m.content),
        false => crate::images::openai_parts(&m.content, &m.images),
    };
    let mut message = json!({
        "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
        "content": content,
    });
    if !m.tool_calls.is_empty() {
        message["tool_calls"] = m
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments.to_string()},
                })
            })
            .collect();
    }
    message
}

/// The user message that shows a turn's result images, each after a line
/// naming its call.
fn images_of_results(results: &[(&str, &[gadget_core::content::Media])]) -> Value {
    let mut parts = vec![json!({"type": "text", "text": "The images the calls above returned:"})];
    for (id, images) in results {
        let shown = crate::images::openai_parts(&format!("call {id}:"), images);
        parts.extend(shown.as_array().into_iter().flatten().cloned());
    }
    json!({"role": "user", "content": parts})
}

impl crate::provider::Provider for OpenAi {
    fn name(&self) -> &str {
        "openai"
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ResponseStream, ProviderError>> {
        Box::pin(async move {
            let url = self.url();
            let mut builder = self.client.post(&url).json(&body(request));
            if let Some(key) = &self.api_key {
                builder = builder.bearer_auth(key);
            }
            let response = crate::send("openai", &url, builder).await?;
            let status = response.status();
            if !status.is_success() {
                let headers = response.headers().clone();
                let body = crate::read_error_body(response).await;
                return Err(status_error(
                    "openai",
                    &request.model,
                    &url,
                    status,
                    &headers,
                    &body,
                ));
            }
            let response = crate::expect_event_stream("openai", &url, response).await?;
            Ok(crate::sse::decode(
                "openai",
                response.bytes_stream(),
                Decoder::default(),
            ))
        })
    }
}

/// Turns the `data` of each event into stream items.
#[derive(Debug, Default)]
pub struct Decoder {
    /// A chunk said why the answer ended.
    finished: bool,
    done: bool,
    /// Native tool calls, put together as their arguments stream.
    calls: crate::tool_calls::Assembler,
}

impl Decoder {
    /// One chunk's `delta.tool_calls`: the calls whose arguments it
    /// completed.
    fn tool_calls(&mut self, deltas: &[Value], items: &mut Vec<Item>) -> Result<(), ProviderError> {
        for delta in deltas {
            let index = delta.get("index").and_then(Value::as_u64).unwrap_or(0);
            let id = delta.get("id").and_then(Value::as_str);
            let name = delta.pointer("/function/name").and_then(Value::as_str);
            self.calls.named(index, id, name).map_err(broken)?;
            if let Some(fragment) = delta.pointer("/function/arguments").and_then(Value::as_str)
                && let Some(call) = self.calls.arguments(index, fragment).map_err(broken)?
            {
                items.push(Item::Stream(StreamItem::ToolCall(call)));
            }
        }
        Ok(())
    }
}

fn broken(error: crate::tool_calls::ToolCallError) -> ProviderError {
    ProviderError::StreamBroken {
        provider: "openai".into(),
        cause: error.to_string(),
    }
}

impl Decode for Decoder {
    /// The items one event's data carries (OpenAI's events have no type).
    fn event(&mut self, _event: &str, data: &str) -> Result<Vec<Item>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(vec![Item::End]);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| ProviderError::StreamBroken {
            provider: "openai".into(),
            cause: format!(
                "an event is not JSON ({e}): {}",
                crate::provider::cut(data, 200)
            ),
        })?;
        if let Some(error) = chunk.get("error") {
            return Err(ProviderError::Api {
                provider: "openai".into(),
                message: error_message(&json!({"error": error}).to_string()),
            });
        }
        let mut items = Vec::new();
        if let Some(choice) = chunk.pointer("/choices/0") {
            if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str)
                && !text.is_empty()
            {
                items.push(Item::Stream(StreamItem::Text(text.to_string())));
            }
            if let Some(deltas) = choice
                .pointer("/delta/tool_calls")
                .and_then(Value::as_array)
            {
                self.tool_calls(deltas, &mut items)?;
            }
            if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
                self.finished = true;
                // The calls not handed over yet end with the message.
                for call in self.calls.finish().map_err(broken)? {
                    items.push(Item::Stream(StreamItem::ToolCall(call)));
                }
                if let Some(reason) = reason.as_str() {
                    items.push(Item::Stream(crate::provider::finish_reason(reason)));
                }
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            items.push(Item::Stream(StreamItem::Usage(Usage {
                input_tokens: count("prompt_tokens"),
                output_tokens: count("completion_tokens"),
            })));
        }
        Ok(items)
    }

    /// Whether the stream may end here without `[DONE]`: some compatible
    /// servers close after the chunk with `finish_reason`.
    fn complete(&self) -> bool {
        self.done || self.finished
    }
}
