//! An upstream server's elicitation (`elicitation/create`, a form) goes to
//! the person who answers the running call's questions, the same handler
//! as a gadget's ask-human. Their answer fills the form: a JSON object as
//! is, else the text as the form's one text field (its first required
//! one). No person, an error, or a URL elicitation: declined.

use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::Value;

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
    let fields: Vec<String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let question = format!(
        "{} asks: {} (answer a JSON object with {}, or the text for {})",
        server,
        truncate(message.to_string(), MAX_QUESTION_BYTES),
        fields.join(", "),
        text_field(&schema).unwrap_or("the answer")
    );
    match asker
        .human
        .ask(&asker.call_id, &asker.gadget, &question)
        .await
    {
        Ok(answer) => match content(&schema, &answer) {
            Some(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            None => decline(),
        },
        Err(_) => decline(),
    }
}

/// The form's text field a plain answer goes to: its first required
/// string property, else its only property.
fn text_field(schema: &Value) -> Option<&str> {
    let properties = schema["properties"].as_object()?;
    let required = schema["required"].as_array();
    required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|name| properties[*name]["type"] == "string")
        .or_else(|| {
            (properties.len() == 1).then(|| properties.keys().next().map(String::as_str))?
        })
}

/// The form's content from a person's answer.
fn content(schema: &Value, answer: &str) -> Option<Value> {
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(answer.trim()) {
        return Some(Value::Object(object));
    }
    let field = text_field(schema)?;
    let value = match schema["properties"][field]["type"].as_str() {
        Some("boolean") => Value::Bool(matches!(
            answer.trim().to_lowercase().as_str(),
            "yes" | "y" | "true"
        )),
        Some("number") | Some("integer") => serde_json::from_str(answer.trim()).ok()?,
        _ => Value::String(answer.to_string()),
    };
    Some(serde_json::json!({ field: value }))
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
            content(&schema, "Ada"),
            Some(serde_json::json!({"name": "Ada"}))
        );
        assert_eq!(
            content(&schema, r#"{"name": "Ada", "age": 36}"#),
            Some(serde_json::json!({"name": "Ada", "age": 36}))
        );
        let one = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        assert_eq!(content(&one, "yes"), Some(serde_json::json!({"ok": true})));
        let none = serde_json::json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}});
        assert_eq!(content(&none, "three"), None);
    }
}
