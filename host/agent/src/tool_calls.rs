//! Native tool calls as they stream: OpenAI's `tool_calls` deltas and
//! Anthropic's `tool_use` blocks arrive as fragments of a JSON arguments
//! text. [`Assembler`] puts each call together and hands it over the
//! moment its arguments JSON is complete (the closing brace of the
//! top-level object, outside any string), not when the message ends: a
//! call can start while the model is still writing the next one.
//!
//! Every bound is explicit: a call's arguments are at most
//! [`MAX_ARGUMENT_BYTES`], a response has at most [`MAX_CALLS`] calls, and
//! ids and names are bounded too. A hostile stream gets an error, never an
//! unbounded buffer.

use serde_json::Value;

/// Largest arguments text of one call, in bytes.
pub const MAX_ARGUMENT_BYTES: usize = 1 << 20;
/// Most tool calls in one response.
pub const MAX_CALLS: usize = 128;
/// Longest call id or tool name kept, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// One complete tool call.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NativeCall {
    /// The provider's id for it (results are sent back under it).
    pub id: String,
    pub name: String,
    /// The arguments: a JSON object.
    pub arguments: Value,
}

/// Where a JSON text is: enough to tell when its top-level value closes.
#[derive(Debug, Default, Clone)]
struct JsonEnd {
    depth: u32,
    in_string: bool,
    escaped: bool,
    started: bool,
    closed: bool,
}

impl JsonEnd {
    /// Reads `text`; whether the top-level object closed in it.
    fn feed(&mut self, text: &str) -> bool {
        for byte in text.bytes() {
            if self.closed {
                break;
            }
            if self.in_string {
                match (self.escaped, byte) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.started = true;
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.started && self.depth == 0 {
                        self.closed = true;
                    }
                }
                _ => {}
            }
        }
        self.closed
    }
}

/// A call still streaming.
#[derive(Debug, Default)]
struct Partial {
    /// The provider's index of the call (OpenAI) or content block
    /// (Anthropic).
    index: u64,
    id: String,
    name: String,
    arguments: String,
    end: JsonEnd,
    /// Handed over already.
    done: bool,
}

/// Why a stream's tool calls cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolCallError {
    #[error("tool call {index}: its arguments are over {MAX_ARGUMENT_BYTES} bytes")]
    TooLarge { index: u64 },
    #[error("the response has more than {MAX_CALLS} tool calls")]
    TooMany,
    #[error("tool call {index} ('{name}'): its arguments are not a JSON object: {reason}")]
    BadArguments {
        index: u64,
        name: String,
        reason: String,
    },
    #[error("tool call {index}: no tool name")]
    NoName { index: u64 },
}

/// Puts streamed tool calls together.
#[derive(Debug, Default)]
pub struct Assembler {
    calls: Vec<Partial>,
}

impl Assembler {
    fn partial(&mut self, index: u64) -> Result<&mut Partial, ToolCallError> {
        if let Some(at) = self.calls.iter().position(|c| c.index == index) {
            return Ok(&mut self.calls[at]);
        }
        if self.calls.len() >= MAX_CALLS {
            return Err(ToolCallError::TooMany);
        }
        self.calls.push(Partial {
            index,
            ..Partial::default()
        });
        Ok(self.calls.last_mut().expect("just pushed"))
    }

    /// A call's id or name (or more of them: OpenAI may split them).
    pub fn named(
        &mut self,
        index: u64,
        id: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), ToolCallError> {
        let partial = self.partial(index)?;
        for (field, more) in [(&mut partial.id, id), (&mut partial.name, name)] {
            if let Some(more) = more
                && field.len() + more.len() <= MAX_ID_BYTES
            {
                field.push_str(more);
            }
        }
        Ok(())
    }

    /// More of a call's arguments; the call, if they are now complete.
    pub fn arguments(
        &mut self,
        index: u64,
        fragment: &str,
    ) -> Result<Option<NativeCall>, ToolCallError> {
        let partial = self.partial(index)?;
        if partial.done {
            return Ok(None);
        }
        if partial.arguments.len() + fragment.len() > MAX_ARGUMENT_BYTES {
            return Err(ToolCallError::TooLarge { index });
        }
        partial.arguments.push_str(fragment);
        if partial.end.feed(fragment) {
            return Self::complete(partial).map(Some);
        }
        Ok(None)
    }

    /// The call at `index` has ended (Anthropic's `content_block_stop`):
    /// it, unless it was handed over already.
    pub fn ended(&mut self, index: u64) -> Result<Option<NativeCall>, ToolCallError> {
        match self.calls.iter_mut().find(|c| c.index == index) {
            Some(partial) if !partial.done => Self::complete(partial).map(Some),
            _ => Ok(None),
        }
    }

    /// The message ended: every call not handed over yet, in order.
    pub fn finish(&mut self) -> Result<Vec<NativeCall>, ToolCallError> {
        let mut calls = Vec::new();
        for partial in self.calls.iter_mut().filter(|c| !c.done) {
            calls.push(Self::complete(partial)?);
        }
        Ok(calls)
    }

    fn complete(partial: &mut Partial) -> Result<NativeCall, ToolCallError> {
        partial.done = true;
        if partial.name.is_empty() {
            return Err(ToolCallError::NoName {
                index: partial.index,
            });
        }
        // No arguments at all is an empty object (a tool without
        // parameters, as both providers send it).
        let text = partial.arguments.trim();
        let arguments = if text.is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str::<Value>(text).map_err(|e| ToolCallError::BadArguments {
                index: partial.index,
                name: partial.name.clone(),
                reason: e.to_string(),
            })?
        };
        if !arguments.is_object() {
            return Err(ToolCallError::BadArguments {
                index: partial.index,
                name: partial.name.clone(),
                reason: "not an object".into(),
            });
        }
        Ok(NativeCall {
            id: std::mem::take(&mut partial.id),
            name: std::mem::take(&mut partial.name),
            arguments,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_is_handed_over_the_moment_its_arguments_close() {
        let mut calls = Assembler::default();
        calls.named(0, Some("call_1"), Some("Calcu")).unwrap();
        calls.named(0, None, Some("lator")).unwrap();
        let pieces = [
            r#"{"a": 1, "#,
            r#""text": "a } in \" a string {", "#,
            r#""b": [1, {"c": 2}]"#,
        ];
        for piece in pieces {
            assert_eq!(calls.arguments(0, piece).unwrap(), None);
        }
        let call = calls.arguments(0, "}").unwrap().expect("complete");
        assert_eq!(call.id, "call_1");
        assert_eq!(call.name, "Calculator");
        assert_eq!(
            call.arguments,
            json!({"a": 1, "text": "a } in \" a string {", "b": [1, {"c": 2}]})
        );
        // Nothing twice: not at its end, not at the message's.
        assert_eq!(calls.ended(0).unwrap(), None);
        assert!(calls.finish().unwrap().is_empty());
    }

    #[test]
    fn calls_without_arguments_and_at_the_end_of_the_message() {
        let mut calls = Assembler::default();
        calls.named(0, Some("t1"), Some("Now")).unwrap();
        calls.named(1, Some("t2"), Some("Later")).unwrap();
        calls.arguments(1, r#"{"x": 1"#).unwrap();
        let ended = calls.finish();
        // The unclosed one is not guessed at.
        assert!(matches!(
            ended,
            Err(ToolCallError::BadArguments { index: 1, .. })
        ));
        let mut calls = Assembler::default();
        calls.named(3, Some("t1"), Some("Now")).unwrap();
        let call = calls.ended(3).unwrap().unwrap();
        assert_eq!(call.arguments, json!({}));
    }

    #[test]
    fn hostile_streams_get_errors_not_buffers() {
        let mut calls = Assembler::default();
        calls.named(0, Some("x"), Some("Big")).unwrap();
        let chunk = "a".repeat(64 << 10);
        calls.arguments(0, "{\"a\": \"").unwrap();
        let mut result = Ok(None);
        for _ in 0..20 {
            result = calls.arguments(0, &chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(ToolCallError::TooLarge { index: 0 }));
        let mut calls = Assembler::default();
        for index in 0..MAX_CALLS as u64 {
            calls.named(index, Some("i"), Some("n")).unwrap();
        }
        assert_eq!(
            calls.named(MAX_CALLS as u64, Some("i"), Some("n")),
            Err(ToolCallError::TooMany)
        );
        let mut calls = Assembler::default();
        calls.named(0, Some("i"), Some("n")).unwrap();
        assert!(matches!(
            calls.arguments(0, "[1, 2]"),
            Err(ToolCallError::BadArguments { .. })
        ));
        let mut calls = Assembler::default();
        calls.named(0, Some("i"), None).unwrap();
        assert_eq!(
            calls.arguments(0, "{}"),
            Err(ToolCallError::NoName { index: 0 })
        );
    }

    /// Each event through `decoder`: what came out after each, in order.
    fn through(
        mut decoder: impl crate::sse::Decode,
        events: &[(&str, Value)],
    ) -> Vec<Vec<crate::provider::StreamItem>> {
        events
            .iter()
            .map(|(event, data)| {
                decoder
                    .event(event, &data.to_string())
                    .unwrap()
                    .into_iter()
                    .filter_map(|item| match item {
                        crate::sse::Item::Stream(item) => Some(item),
                        _ => None,
                    })
                    .collect()
            })
            .collect()
    }

    fn calls_in(items: &[crate::provider::StreamItem]) -> Vec<&NativeCall> {
        items
            .iter()
            .filter_map(|item| match item {
                crate::provider::StreamItem::ToolCall(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn openai_calls_are_handed_over_mid_stream_in_order() {
        let delta = |calls: Value| json!({"choices": [{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": null}]});
        let out = through(
            crate::openai::Decoder::default(),
            &[
                (
                    "",
                    delta(
                        json!([{"index": 0, "id": "call_a", "type": "function", "function": {"name": "Calculator", "arguments": ""}}]),
                    ),
                ),
                (
                    "",
                    delta(json!([{"index": 0, "function": {"arguments": "{\"a\": 1, "}}])),
                ),
                (
                    "",
                    delta(json!([{"index": 0, "function": {"arguments": "\"b\": 2}"}}])),
                ),
                (
                    "",
                    delta(
                        json!([{"index": 1, "id": "call_b", "type": "function", "function": {"name": "Sleep", "arguments": "{\"ms\""}}]),
                    ),
                ),
                (
                    "",
                    delta(json!([{"index": 1, "function": {"arguments": ": 5}"}}])),
                ),
                (
                    "",
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
                ),
            ],
        );
        // The first call is out the moment its arguments closed, before
        // the second began.
        let first = calls_in(&out[2]);
        assert_eq!(first.len(), 1);
        assert_eq!(
            (first[0].id.as_str(), first[0].name.as_str()),
            ("call_a", "Calculator")
        );
        assert_eq!(first[0].arguments, json!({"a": 1, "b": 2}));
        assert!(calls_in(&out[3]).is_empty());
        assert_eq!(calls_in(&out[4])[0].arguments, json!({"ms": 5}));
        // Nothing is handed over twice at the message's end.
        assert!(calls_in(&out[5]).is_empty());
    }

    #[test]
    fn anthropic_tool_use_blocks_are_handed_over_when_their_input_closes() {
        let out = through(
            crate::anthropic::Decoder::default(),
            &[
                (
                    "content_block_start",
                    json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
                ),
                (
                    "content_block_delta",
                    json!({"index": 0, "delta": {"type": "text_delta", "text": "Let me add."}}),
                ),
                ("content_block_stop", json!({"index": 0})),
                (
                    "content_block_start",
                    json!({"index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Calculator", "input": {}}}),
                ),
                (
                    "content_block_delta",
                    json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": 40,"}}),
                ),
                (
                    "content_block_delta",
                    json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": " \"b\": 2}"}}),
                ),
                ("content_block_stop", json!({"index": 1})),
                (
                    "content_block_start",
                    json!({"index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "CurrentTime", "input": {}}}),
                ),
                ("content_block_stop", json!({"index": 2})),
            ],
        );
        let first = calls_in(&out[5]);
        assert_eq!(first.len(), 1, "{out:?}");
        assert_eq!(first[0].id, "toolu_1");
        assert_eq!(first[0].arguments, json!({"a": 40, "b": 2}));
        assert!(calls_in(&out[6]).is_empty(), "not twice");
        let second = calls_in(&out[8]);
        assert_eq!(second[0].name, "CurrentTime");
        assert_eq!(second[0].arguments, json!({}));
    }
}
