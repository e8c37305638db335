//! Completions from the host's LLM: `ctx.complete(Request::new().user("..."))`.
//!
//! The plugin's manifest asks with `[permissions] llm = true`; the
//! operator grants models and a per-call budget (`[plugins.NAME] llm =
//! { models = ["openai:gpt-4o-mini"], max-usd-per-call = 0.05 }`). The
//! host adds each completion's cost to the call, checks the budget
//! before sending, and ends a completion at the call's deadline.

use crate::__bindings::gadget::plugin::llm as wit;

/// A completion to ask for: messages (oldest first) and options.
#[derive(Debug, Clone, Default)]
pub struct Request {
    messages: Vec<(wit::Role, String)>,
    model: Option<String>,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
}

impl Request {
    pub fn new() -> Request {
        Request::default()
    }

    /// Adds a system message (instructions).
    pub fn system(mut self, text: impl Into<String>) -> Request {
        self.messages.push((wit::Role::System, text.into()));
        self
    }

    /// Adds a user message.
    pub fn user(mut self, text: impl Into<String>) -> Request {
        self.messages.push((wit::Role::User, text.into()));
        self
    }

    /// Adds an earlier answer of the model.
    pub fn assistant(mut self, text: impl Into<String>) -> Request {
        self.messages.push((wit::Role::Assistant, text.into()));
        self
    }

    /// `provider:model`, one the operator granted; default: the first.
    pub fn model(mut self, model: impl Into<String>) -> Request {
        self.model = Some(model.into());
        self
    }

    /// The answer's token cap (default 1024).
    pub fn max_tokens(mut self, tokens: u32) -> Request {
        self.max_tokens = Some(tokens);
        self
    }

    pub fn temperature(mut self, temperature: f32) -> Request {
        self.temperature = Some(temperature);
        self
    }
}

/// The answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    /// The `provider:model` that answered.
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// USD, already added to the call's cost.
    pub cost: f64,
}

/// Why there is no completion.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmError {
    /// Not granted, or not this model; the message says what would allow it.
    Denied(String),
    /// It could cost more than what is left of the call's budget.
    BudgetExceeded(String),
    /// The provider failed.
    Provider(String),
    /// The call's deadline passed, or it was cancelled.
    Deadline,
}

impl std::fmt::Display for LlmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LlmError::Denied(m) => write!(f, "LLM denied: {m}"),
            LlmError::BudgetExceeded(m) => write!(f, "LLM budget exceeded: {m}"),
            LlmError::Provider(m) => write!(f, "LLM provider failed: {m}"),
            LlmError::Deadline => write!(f, "the call's deadline passed during a completion"),
        }
    }
}

/// `?` in `invoke`: the deadline is the abort signal (the host reports a
/// timeout or a cancellation), anything else a failure with the message.
/// (Not `std::error::Error`, so this mapping is the one `?` uses.)
impl From<LlmError> for crate::GadgetError {
    fn from(error: LlmError) -> Self {
        match error {
            LlmError::Deadline => crate::GadgetError::Cancelled,
            other => crate::GadgetError::Failed(other.to_string()),
        }
    }
}

/// Runs one completion.
pub fn complete(request: Request) -> Result<Completion, LlmError> {
    let messages: Vec<wit::Message> = request
        .messages
        .into_iter()
        .map(|(role, content)| wit::Message { role, content })
        .collect();
    let answer = wit::complete(&wit::CompletionRequest {
        messages,
        model: request.model,
        max_tokens: request.max_tokens,
        temperature: request.temperature,
    });
    match answer {
        Ok(c) => Ok(Completion {
            text: c.text,
            model: c.model,
            input_tokens: c.input_tokens,
            output_tokens: c.output_tokens,
            cost: c.cost,
        }),
        Err(wit::LlmError::Denied(m)) => Err(LlmError::Denied(m)),
        Err(wit::LlmError::BudgetExceeded(m)) => Err(LlmError::BudgetExceeded(m)),
        Err(wit::LlmError::Provider(m)) => Err(LlmError::Provider(m)),
        Err(wit::LlmError::Deadline) => Err(LlmError::Deadline),
    }
}
