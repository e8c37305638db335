//! `--tool-format native`: the gadgets are offered as the provider's own
//! tools (the definitions `gadget schemas` prints), the model's tool calls
//! are read as they stream ([`crate::tool_calls`]) and each runs the moment
//! its arguments are complete, through the same executor, limits,
//! approvals and journal as a block. What the model is shown next is the
//! provider's own form: its message with the calls, then one result per
//! call, under the call's id.

use gadget_core::render::{GadgetDoc, HistoryEntry};

use crate::provider::{ChatMessage, ToolDefinition};
use crate::tool_calls::NativeCall;

/// How the model is told about tools and calls them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolFormat {
    /// The llmist block format in the text (the default): calls start as
    /// their blocks end.
    #[default]
    Block,
    /// The provider's native tool calling.
    Native,
}

/// The tools as the provider's definitions.
pub fn definitions(docs: &[GadgetDoc]) -> Vec<ToolDefinition> {
    docs.iter()
        .map(|doc| ToolDefinition {
            name: doc.name.clone(),
            description: doc.description.clone(),
            parameters: doc
                .schema
                .clone()
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
        })
        .collect()
}

/// The text a call that never ran is answered with (every call the model
/// made needs a result, or the provider refuses the next request).
pub const NOT_RUN: &str = "the call did not run (the response was cut short before it could start)";

/// What follows a turn with native calls: the model's message with its
/// calls, then each call's result, in the order the calls were made.
pub fn turn_messages<'a>(
    text: &str,
    calls: Vec<NativeCall>,
    history: impl IntoIterator<Item = &'a HistoryEntry>,
) -> Vec<ChatMessage> {
    let history: Vec<&HistoryEntry> = history.into_iter().collect();
    let results: Vec<ChatMessage> = calls
        .iter()
        .map(|call| {
            let entry = history.iter().find(|entry| entry.id == call.id);
            let result = entry.map_or(NOT_RUN, |entry| entry.result.as_str());
            // A call that did not run did not succeed either.
            let failed = entry.is_none_or(|entry| entry.failed);
            let images = entry.map(|e| crate::images::for_the_model(&e.images));
            ChatMessage::tool_result(call.id.clone(), result, failed)
                .with_images(images.unwrap_or_default())
        })
        .collect();
    let mut messages = vec![ChatMessage::assistant_calls(text, calls)];
    messages.extend(results);
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_call_gets_its_result_under_its_id_in_call_order() {
        let calls = vec![
            NativeCall {
                id: "a".into(),
                name: "Calculator".into(),
                arguments: json!({"a": 1}),
            },
            NativeCall {
                id: "b".into(),
                name: "Sleep".into(),
                arguments: json!({}),
            },
        ];
        // Finished in the other order; one never ran.
        let history = [HistoryEntry {
            id: "a".into(),
            gadget: "Calculator".into(),
            parameters: json!({"a": 1}),
            result: "1".into(),
            failed: false,
            images: Vec::new(),
        }];
        let messages = turn_messages("thinking", calls, &history);
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0].tool_calls.len(), 2);
        assert_eq!(messages[0].content, "thinking");
        assert_eq!(
            (
                messages[1].tool_call_id.as_deref(),
                messages[1].content.as_str()
            ),
            (Some("a"), "1")
        );
        assert_eq!(
            (
                messages[2].tool_call_id.as_deref(),
                messages[2].content.as_str()
            ),
            (Some("b"), NOT_RUN)
        );
        // A call that never ran is no success: the provider is told.
        assert!(!messages[1].is_error && messages[2].is_error);
    }
}
