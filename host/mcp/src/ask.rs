//! Asking the client's person: the elicitation form a question goes out
//! in, the answer it comes back with, and what the session can ask
//! (`crate::inputs::ClientPerson` asks it while a call runs).

use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema,
};
use serde_json::Value;

/// The key of the one input request an ask-human outcome makes, and of
/// the answer the client sends back.
pub const ASK_HUMAN_KEY: &str = "ask_human";

/// The field of the elicitation form that holds the person's answer.
pub const ANSWER_FIELD: &str = "answer";

/// Longest question put in an elicitation, in bytes: what a person reads
/// in a dialog; the gadget's whole question stays in the error text of a
/// client that cannot ask.
pub const MAX_QUESTION_BYTES: usize = 16 << 10;

/// The form that asks a person a gadget's question: one required text.
pub(crate) fn elicitation(gadget: &str, question: &str) -> ElicitRequestParams {
    let question = gadget_core::ledger::truncate(question.to_string(), MAX_QUESTION_BYTES);
    let schema = ElicitationSchema::builder()
        .required_string_property(ANSWER_FIELD, |s| s.title("Answer"))
        .build_unchecked();
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("{gadget} asks: {question}"),
        requested_schema: schema,
    }
}

/// The text of an accepted form: its answer field, or whatever JSON the
/// client sent.
pub(crate) fn answer_text(content: Option<Value>) -> String {
    match content {
        Some(Value::Object(mut fields)) => match fields.remove(ANSWER_FIELD) {
            Some(Value::String(text)) => text,
            Some(other) => other.to_string(),
            None => Value::Object(fields).to_string(),
        },
        Some(Value::String(text)) => text,
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// A person's reply as the call's result: their answer (a text field, or
/// whatever JSON they sent), or an error when they declined.
pub(crate) fn answer_result(gadget: &str, result: ElicitResult) -> CallToolResult {
    match result.action {
        ElicitationAction::Accept => {
            CallToolResult::success(vec![ContentBlock::text(answer_text(result.content))])
        }
        ElicitationAction::Decline => CallToolResult::error(vec![ContentBlock::text(format!(
            "The person declined to answer gadget '{gadget}''s question."
        ))]),
        // Cancel, and whatever a later protocol adds.
        _ => CallToolResult::error(vec![ContentBlock::text(format!(
            "The person dismissed gadget '{gadget}''s question without answering."
        ))]),
    }
}
