//! What a running gadget asks (the contract's `ask` import) and what it
//! gets back: questions with keys ([`InputRequest`]), the kinds a call can
//! have answered ([`Kinds`]), the answers ([`Reply`]) and why there are
//! none ([`AskFailure`]). Who answers is a [`crate::scope::HumanInput`]:
//! the person at the terminal, an MCP client mid-call, or the signed
//! replay of a stateless MCP call.
//!
//! The checks every asker relies on live here too ([`check_requests`]),
//! so a malformed ask is refused the same way whoever would answer it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::LlmRole;

/// The most questions one `ask` may carry: a form a person fills in, not
/// a survey; and each becomes a request the client must answer.
pub const MAX_QUESTIONS_PER_ASK: usize = 16;

/// The longest key of a question, in bytes (keys travel in every MCP
/// input request and the signed state).
pub const MAX_KEY_BYTES: usize = 64;

/// The most bytes the questions of one `ask` may hold (texts, schemas,
/// messages): what a person reads, or a client model is given.
pub const MAX_ASK_BYTES: usize = 64 << 10;

/// What is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Question {
    /// A question answered in words.
    Text { text: String },
    /// A form: a message and the JSON Schema of the answer object.
    Form { message: String, schema: Value },
    /// A completion by the client's model (MCP sampling).
    Sample {
        messages: Vec<(LlmRole, String)>,
        system_prompt: Option<String>,
        max_tokens: u32,
    },
    /// The client's roots.
    Roots,
}

impl Question {
    /// The kind of this question.
    pub fn kind(&self) -> Kinds {
        match self {
            Question::Text { .. } => Kinds::TEXT,
            Question::Form { .. } => Kinds::FORM,
            Question::Sample { .. } => Kinds::SAMPLE,
            Question::Roots => Kinds::ROOTS,
        }
    }

    fn size_bytes(&self) -> usize {
        match self {
            Question::Text { text } => text.len(),
            Question::Form { message, schema } => message.len() + schema.to_string().len(),
            Question::Sample {
                messages,
                system_prompt,
                ..
            } => {
                messages.iter().map(|(_, m)| m.len()).sum::<usize>()
                    + system_prompt.as_ref().map_or(0, String::len)
            }
            Question::Roots => 0,
        }
    }
}

/// One question and the key its answer is filed under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    pub key: String,
    pub question: Question,
}

/// A root the client named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Root {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "value")]
pub enum Reply {
    Text(String),
    /// The JSON object answering a form.
    Form(Value),
    Sample(String),
    Roots(Vec<Root>),
    Declined,
    Cancelled,
}

/// Why no answers came.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskFailure {
    #[error("no one can answer here: {0}")]
    Unavailable(String),
    #[error("no answer came within {0} s")]
    Timeout(u64),
    #[error("the call was cancelled while waiting for an answer")]
    Cancelled,
    #[error("the questions are not well formed: {0}")]
    Invalid(String),
    /// The questions go to the client with the call's result, and the
    /// call ends here (a stateless MCP call: the client calls again with
    /// the answers, and the gadget runs again). Not the gadget's to see:
    /// the host stops the instance.
    #[error("the call ends here, to be called again with the answers")]
    Suspended,
}

/// The kinds of question a call can have answered (the contract's
/// `kinds` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kinds(u8);

impl Kinds {
    pub const NONE: Kinds = Kinds(0);
    pub const TEXT: Kinds = Kinds(1);
    pub const FORM: Kinds = Kinds(2);
    pub const SAMPLE: Kinds = Kinds(4);
    pub const ROOTS: Kinds = Kinds(8);

    pub const fn contains(self, other: Kinds) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn with(self, other: Kinds) -> Kinds {
        Kinds(self.0 | other.0)
    }

    /// The kind's name, as the contract spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kinds::TEXT => "text",
            Kinds::FORM => "form",
            Kinds::SAMPLE => "sample",
            Kinds::ROOTS => "roots",
            _ => "several kinds",
        }
    }
}

/// Refuses an ask that no one should be shown: none or too many
/// questions, a key that is empty, too long, not `[A-Za-z0-9_-]` or said
/// twice, too many bytes in all, a form whose schema is not an object
/// schema, a sample with no messages.
pub fn check_requests(requests: &[InputRequest]) -> Result<(), String> {
    if requests.is_empty() {
        return Err("an ask needs at least one question".into());
    }
    if requests.len() > MAX_QUESTIONS_PER_ASK {
        return Err(format!(
            "{} questions in one ask; at most {MAX_QUESTIONS_PER_ASK}",
            requests.len()
        ));
    }
    let size: usize = requests.iter().map(|r| r.question.size_bytes()).sum();
    if size > MAX_ASK_BYTES {
        return Err(format!(
            "the questions hold {size} bytes; at most {MAX_ASK_BYTES}"
        ));
    }
    for (i, request) in requests.iter().enumerate() {
        let key = &request.key;
        let well_formed = !key.is_empty()
            && key.len() <= MAX_KEY_BYTES
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !well_formed {
            return Err(format!(
                "key {key:?} must be 1 to {MAX_KEY_BYTES} letters, digits, '_' or '-'"
            ));
        }
        if requests[..i].iter().any(|r| &r.key == key) {
            return Err(format!("key {key:?} is used twice"));
        }
        match &request.question {
            Question::Form { schema, .. }
                if schema.get("type").and_then(Value::as_str) != Some("object")
                    || !schema.get("properties").is_some_and(Value::is_object) =>
            {
                return Err(format!(
                    "the form of {key:?} needs a schema with \"type\": \"object\" and \"properties\""
                ));
            }
            Question::Sample { messages, .. } if messages.is_empty() => {
                return Err(format!("the sample of {key:?} has no messages"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The form's field a plain answer fills: its first required string
/// property, else its only property.
pub fn text_field(schema: &Value) -> Option<&str> {
    let properties = schema["properties"].as_object()?;
    let required = schema["required"].as_array();
    required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|name| properties.get(*name).is_some_and(|p| p["type"] == "string"))
        .or_else(|| {
            (properties.len() == 1).then(|| properties.keys().next().map(String::as_str))?
        })
}

/// A form's answer from a person's words: a JSON object as written, else
/// the words as the form's one text field (a yes or no for a boolean, a
/// number for a number); a field left out takes its schema's `default`.
/// `None`: the words fit no field.
pub fn fill_form(schema: &Value, answer: &str) -> Option<Value> {
    let mut form = match serde_json::from_str::<Value>(answer.trim()) {
        Ok(Value::Object(object)) => object,
        _ => {
            let field = text_field(schema)?;
            let value = match schema["properties"][field]["type"].as_str() {
                Some("boolean") => Value::Bool(matches!(
                    answer.trim().to_lowercase().as_str(),
                    "yes" | "y" | "true"
                )),
                Some("number") | Some("integer") => serde_json::from_str(answer.trim()).ok()?,
                _ => Value::String(answer.to_string()),
            };
            serde_json::Map::from_iter([(field.to_string(), value)])
        }
    };
    // What the person left out takes the schema's default, as a form
    // shown with its defaults filled in would (SEP-1034).
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                form.entry(name.clone()).or_insert_with(|| default.clone());
            }
        }
    }
    Some(Value::Object(form))
}

/// The words a person is shown for a form: its message and its fields.
pub fn form_prompt(message: &str, schema: &Value) -> String {
    let fields: Vec<&str> = schema["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    format!(
        "{message} (answer a JSON object with {}, or the text for {})",
        fields.join(", "),
        text_field(schema).unwrap_or("the answer")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_left_out_of_a_form_takes_its_default() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "city": {"type": "string"},
        }});
        assert_eq!(
            fill_form(&schema, r#"{"city": "London"}"#),
            Some(json!({"name": "Ada", "age": 36, "city": "London"}))
        );
        // What the person gave wins over the default.
        assert_eq!(
            fill_form(&schema, r#"{"name": "Grace"}"#).unwrap()["name"],
            "Grace"
        );
    }

    fn text(key: &str) -> InputRequest {
        InputRequest {
            key: key.into(),
            question: Question::Text {
                text: "why?".into(),
            },
        }
    }

    #[test]
    fn malformed_asks_are_refused_with_the_reason() {
        assert!(check_requests(&[]).unwrap_err().contains("at least one"));
        let many: Vec<_> = (0..=MAX_QUESTIONS_PER_ASK)
            .map(|i| text(&format!("k{i}")))
            .collect();
        assert!(check_requests(&many).unwrap_err().contains("at most 16"));
        assert!(
            check_requests(&[text("a b")])
                .unwrap_err()
                .contains("letters")
        );
        assert!(check_requests(&[text("")]).is_err());
        assert!(check_requests(&[text(&"k".repeat(MAX_KEY_BYTES + 1))]).is_err());
        assert!(check_requests(&[text(&"k".repeat(MAX_KEY_BYTES))]).is_ok());
        assert!(
            check_requests(&[text("a"), text("a")])
                .unwrap_err()
                .contains("twice")
        );
        let form = InputRequest {
            key: "f".into(),
            question: Question::Form {
                message: "m".into(),
                schema: json!({"type": "string"}),
            },
        };
        assert!(check_requests(&[form]).unwrap_err().contains("object"));
        let big = InputRequest {
            key: "b".into(),
            question: Question::Text {
                text: "x".repeat(MAX_ASK_BYTES + 1),
            },
        };
        assert!(check_requests(&[big]).unwrap_err().contains("bytes"));
        assert!(check_requests(&[text("name"), text("colour-2")]).is_ok());
    }

    #[test]
    fn words_fill_a_form() {
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"]
        });
        assert_eq!(fill_form(&schema, "Ada"), Some(json!({"name": "Ada"})));
        assert_eq!(
            fill_form(&schema, r#"{"name": "Ada", "age": 36}"#),
            Some(json!({"name": "Ada", "age": 36}))
        );
        let one = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        assert_eq!(fill_form(&one, "yes"), Some(json!({"ok": true})));
        let two = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}});
        assert_eq!(fill_form(&two, "three"), None);
        assert!(form_prompt("Who?", &schema).contains("name, age"));
    }

    #[test]
    fn kinds_combine() {
        let k = Kinds::TEXT.with(Kinds::FORM);
        assert!(k.contains(Kinds::FORM) && !k.contains(Kinds::SAMPLE));
        assert_eq!(Kinds::ROOTS.name(), "roots");
    }
}
