//! An upstream server's elicitation (`elicitation/create`, a form) goes to
//! the person who answers the running call's questions, the same handler
//! as a gadget's ask-human. Their answer fills the form: a JSON object as
//! is, else the text as the form's one text field (its first required
//! one). No person, an error, or a URL elicitation: declined.

use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::Value;

use gadget_core::ask::{fill_form, form_prompt};
use gadget_core::ledger::truncate;
use gadget_core::tool::HumanInput;

/// Longest question shown to a person, in bytes.
pub const MAX_QUESTION_BYTES: usize = 4 << 10;

/// Who answers for one running call.
#[derive(Clone)]
pub struct Asker {
    pub human: Arc<dyn HumanInput>,
    pub call_id: String,
    pub gadget: String,
}

/// Asks `asker` what the server wants; what to send back.
pub(super) async fn ask(
    server: &str,
    asker: Option<Asker>,
    request: ElicitRequestParams,
) -> ElicitResult {
    let decline = || ElicitResult::new(ElicitationAction::Decline);
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = request
    else {
        return decline();
    };
    let Some(asker) = asker else {
        tracing::info!(
            mcp_server = server,
            "declined an elicitation: no one answers this call's questions"
        );
        return decline();
    };
    let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
    let question = format!(
        "{server} asks: {}",
        form_prompt(&truncate(message.to_string(), MAX_QUESTION_BYTES), &schema)
    );
    match asker
        .human
        .ask(&asker.call_id, &asker.gadget, &question)
        .await
    {
        Ok(answer) => match fill_form(&schema, &answer) {
            Some(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            None => decline(),
        },
        Err(_) => decline(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_fills_the_form() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"]
        });
        assert_eq!(
            fill_form(&schema, "Ada"),
            Some(serde_json::json!({"name": "Ada"}))
        );
        assert_eq!(
            fill_form(&schema, r#"{"name": "Ada", "age": 36}"#),
            Some(serde_json::json!({"name": "Ada", "age": 36}))
        );
        let one = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        assert_eq!(
            fill_form(&one, "yes"),
            Some(serde_json::json!({"ok": true}))
        );
        let none = serde_json::json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}});
        assert_eq!(fill_form(&none, "three"), None);
    }
}
