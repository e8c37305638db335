//! Questions whose answers the running gadget gets: `ctx.ask([...])`.
//!
//! Under `gadget run` and `gadget agent` the person at the terminal answers
//! (or `--answers`); under `gadget mcp` and `gadget serve` the MCP client
//! does. Over stateless HTTP the host ends the call asking and, when the
//! client calls again with the answers, runs the gadget again from the
//! start and answers its earlier asks from the signed request state, in
//! order. So: **ask before you act**, and ask the same questions in the
//! same order for the same parameters (a different ask fails the call).
//! Time waiting for answers does not count against the call's deadline.
//!
//! ```ignore
//! let answers = ctx.ask([
//!     Question::text("colour", "Which colour?"),
//!     Question::form("size", "How big?", json!({
//!         "type": "object",
//!         "properties": { "width": { "type": "integer" } },
//!         "required": ["width"],
//!     })),
//! ])?;
//! let colour = answers.text("colour").unwrap_or("red");
//! ```

use std::fmt;

use serde_json::Value;

use crate::__bindings::gadget::plugin::ask as wit;
use crate::__bindings::gadget::plugin::llm as wit_llm;

/// One question and the key its answer is filed under (letters, digits,
/// `_` and `-`; unique within one ask).
#[derive(Debug, Clone)]
pub struct Question {
    key: String,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Text(String),
    Form {
        message: String,
        schema: Value,
    },
    Sample {
        messages: Vec<(wit_llm::Role, String)>,
        system: Option<String>,
        max_tokens: u32,
    },
    Roots,
}

impl Question {
    /// The key its answer is filed under.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// A question answered in words.
    pub fn text(key: impl Into<String>, text: impl Into<String>) -> Question {
        Question {
            key: key.into(),
            kind: Kind::Text(text.into()),
        }
    }

    /// A form: a message and the JSON Schema of the answer object (string,
    /// number, integer and boolean properties, as MCP elicitation allows).
    pub fn form(key: impl Into<String>, message: impl Into<String>, schema: Value) -> Question {
        Question {
            key: key.into(),
            kind: Kind::Form {
                message: message.into(),
                schema,
            },
        }
    }

    /// A completion by the MCP client's model (sampling), of one user message.
    pub fn sample(key: impl Into<String>, prompt: impl Into<String>, max_tokens: u32) -> Question {
        Question {
            key: key.into(),
            kind: Kind::Sample {
                messages: vec![(wit_llm::Role::User, prompt.into())],
                system: None,
                max_tokens,
            },
        }
    }

    /// Sets the system prompt of a [`Question::sample`] (ignored otherwise).
    pub fn system(mut self, prompt: impl Into<String>) -> Question {
        if let Kind::Sample { system, .. } = &mut self.kind {
            *system = Some(prompt.into());
        }
        self
    }

    /// The MCP client's roots (the directories or files it works in).
    pub fn roots(key: impl Into<String>) -> Question {
        Question {
            key: key.into(),
            kind: Kind::Roots,
        }
    }

    fn into_wit(self) -> wit::InputRequest {
        let question = match self.kind {
            Kind::Text(text) => wit::Question::Text(text),
            Kind::Form { message, schema } => wit::Question::Form(wit::Form {
                message,
                schema: schema.to_string(),
            }),
            Kind::Sample {
                messages,
                system,
                max_tokens,
            } => wit::Question::Sample(wit::Sample {
                messages: messages
                    .into_iter()
                    .map(|(role, content)| wit_llm::Message { role, content })
                    .collect(),
                system_prompt: system,
                max_tokens,
            }),
            Kind::Roots => wit::Question::Roots,
        };
        wit::InputRequest {
            key: self.key,
            question,
        }
    }
}

/// A root the client named.
#[derive(Debug, Clone, PartialEq)]
pub struct Root {
    pub uri: String,
    pub name: Option<String>,
}

/// One answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The words answering a text question.
    Text(String),
    /// The object answering a form.
    Form(Value),
    /// The client model's answer to a sample.
    Sample(String),
    /// The client's roots.
    Roots(Vec<Root>),
    /// The person declined to answer.
    Declined,
    /// The person dismissed the question without a choice.
    Cancelled,
}

/// The answers of one ask, by key, in the order of the questions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answers(Vec<(String, Answer)>);

impl Answers {
    /// Answers made without a host ([`crate::testing`]).
    pub(crate) fn from_pairs(pairs: Vec<(String, Answer)>) -> Answers {
        Answers(pairs)
    }

    /// The answer filed under `key`.
    pub fn get(&self, key: &str) -> Option<&Answer> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, a)| a)
    }

    /// The words of a text (or sample) answer; `None` when declined,
    /// cancelled or not asked.
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Answer::Text(text) | Answer::Sample(text) => Some(text),
            _ => None,
        }
    }

    /// The object answering a form; `None` when declined, cancelled or not asked.
    pub fn form(&self, key: &str) -> Option<&Value> {
        match self.get(key)? {
            Answer::Form(value) => Some(value),
            _ => None,
        }
    }

    /// Every answer, in the order asked.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Answer)> {
        self.0.iter().map(|(k, a)| (k.as_str(), a))
    }
}

/// Why no answers came.
#[derive(Debug, Clone, PartialEq)]
pub enum AskError {
    /// Nobody here can answer this kind of question; the message says what would.
    Unavailable(String),
    /// No answer within the host's bound for waiting.
    Timeout,
    /// The call was cancelled while waiting.
    Cancelled,
    /// The questions are not well formed; the message says which.
    Invalid(String),
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskError::Unavailable(m) => write!(f, "no one can answer: {m}"),
            AskError::Timeout => f.write_str("no answer came in time"),
            AskError::Cancelled => f.write_str("cancelled while waiting for an answer"),
            AskError::Invalid(m) => write!(f, "the questions are not well formed: {m}"),
        }
    }
}

/// `?` in `invoke`: a cancellation is the abort signal, anything else a
/// failure with the message. (Not `std::error::Error`, so this mapping is
/// the one `?` uses.)
impl From<AskError> for crate::GadgetError {
    fn from(error: AskError) -> Self {
        match error {
            AskError::Cancelled => crate::GadgetError::Cancelled,
            other => crate::GadgetError::Failed(other.to_string()),
        }
    }
}

/// Which kinds of question this call can have answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kinds {
    pub text: bool,
    pub form: bool,
    pub sample: bool,
    pub roots: bool,
}

pub(crate) fn answerable() -> Kinds {
    let kinds = wit::answerable();
    Kinds {
        text: kinds.contains(wit::Kinds::TEXT),
        form: kinds.contains(wit::Kinds::FORM),
        sample: kinds.contains(wit::Kinds::SAMPLE),
        roots: kinds.contains(wit::Kinds::ROOTS),
    }
}

pub(crate) fn ask(questions: Vec<Question>) -> Result<Answers, AskError> {
    let keys: Vec<String> = questions.iter().map(|q| q.key.clone()).collect();
    let requests: Vec<wit::InputRequest> = questions.into_iter().map(Question::into_wit).collect();
    let answers = wit::ask(&requests).map_err(|error| match error {
        wit::AskError::Unavailable(m) => AskError::Unavailable(m),
        wit::AskError::Timeout => AskError::Timeout,
        wit::AskError::Cancelled => AskError::Cancelled,
        wit::AskError::Invalid(m) => AskError::Invalid(m),
    })?;
    let answers = keys
        .into_iter()
        .zip(answers)
        .map(|(key, answer)| {
            let answer = match answer {
                wit::Answer::Text(text) => Answer::Text(text),
                // The host checked the form against its schema; text that is
                // not JSON cannot come, but stays a string if it did.
                wit::Answer::Form(json) => {
                    Answer::Form(serde_json::from_str(&json).unwrap_or(Value::String(json)))
                }
                wit::Answer::Sample(text) => Answer::Sample(text),
                wit::Answer::Roots(roots) => Answer::Roots(
                    roots
                        .into_iter()
                        .map(|r| Root {
                            uri: r.uri,
                            name: r.name,
                        })
                        .collect(),
                ),
                wit::Answer::Declined => Answer::Declined,
                wit::Answer::Cancelled => Answer::Cancelled,
            };
            (key, answer)
        })
        .collect();
    Ok(Answers(answers))
}
