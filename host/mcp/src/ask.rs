//! Asking the client's person: the elicitation form a question goes out
//! in, the answer it comes back with, and [`ClientPerson`], the person a
//! tool's mid-call question (an upstream server's elicitation) goes to.

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, ProtocolVersion,
};
use rmcp::service::RequestContext;
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
fn answer_text(content: Option<Value>) -> String {
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

/// Whether the client can show a person a form (`elicitation/create`).
pub(crate) fn can_elicit(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// Whether the session speaks protocol 2026-07-28 or later, where the
/// server asks only through a call's input-required result.
pub(crate) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// Whether the client can be asked while a call runs.
pub(crate) fn elicits_mid_call(context: &RequestContext<RoleServer>) -> bool {
    can_elicit(context) && !is_modern(context)
}

/// The client's person, asked over elicitation: who answers what an
/// upstream MCP server asks while one of its tools runs.
pub(crate) struct ClientPerson {
    pub(crate) peer: rmcp::Peer<RoleServer>,
}

impl gadget_exec::HumanInput for ClientPerson {
    fn ask<'a>(
        &'a self,
        _call_id: &'a str,
        gadget: &'a str,
        question: &'a str,
    ) -> gadget_exec::Answer<'a> {
        Box::pin(async move {
            let result = self
                .peer
                .create_elicitation(elicitation(gadget, question))
                .await
                .map_err(|e| format!("the client could not ask a person: {e}"))?;
            match result.action {
                ElicitationAction::Accept => Ok(answer_text(result.content)),
                ElicitationAction::Decline => Err("the person declined".into()),
                _ => Err("the person dismissed the question".into()),
            }
        })
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
