//! What a gadget's completion needs from an LLM, as the runtime's `llm`
//! import sees it: a request, an answer, a price, and the [`LlmBackend`]
//! an embedder provides (the agent crate's providers, or a test's). Pure
//! data and one trait, so the runtime that checks grants and the agent
//! that talks to providers need not know each other.

/// Bytes per token when estimating a request before it is sent (budgets
/// and cost caps are checked before a tokenizer sees it): English and
/// code average about four.
pub const BYTES_PER_TOKEN_ESTIMATE: u64 = 4;

/// About how many tokens `bytes` of text are.
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_TOKEN_ESTIMATE)
}

/// The most tokens one byte of text can become: byte-level BPE tokenizers
/// (OpenAI's, Anthropic's, Llama's) give every token at least one byte.
/// A budget checked with this bound is a cap, not a guess (text in a
/// script the tokenizer knows badly can be 3-4 times the estimate).
pub const MAX_TOKENS_PER_BYTE: u64 = 1;

/// Tokens a chat template can add per message (role markers, separators):
/// OpenAI documents 3 to 4; this leaves room for other templates.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 16;

/// The most input tokens a request with these messages can be.
pub fn max_input_tokens(messages: &[(LlmRole, String)]) -> u64 {
    messages
        .iter()
        .fold(MESSAGE_OVERHEAD_TOKENS, |sum, (_, text)| {
            sum.saturating_add((text.len() as u64).saturating_mul(MAX_TOKENS_PER_BYTE))
                .saturating_add(MESSAGE_OVERHEAD_TOKENS)
        })
}

/// Who says a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmRole {
    System,
    User,
    Assistant,
}

/// One completion, as the backend receives it.
#[derive(Debug, Clone)]
pub struct LlmRequest {
    /// `provider:model`.
    pub model: String,
    pub messages: Vec<(LlmRole, String)>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
}

/// What the backend answered.
#[derive(Debug, Clone)]
pub struct LlmAnswer {
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A model's prices, USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlmPrice {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl LlmPrice {
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_per_mtok + output_tokens as f64 * self.output_per_mtok)
            / 1e6
    }
}

/// Where completions go: set on the runtime by the embedder.
pub trait LlmBackend: Send + Sync {
    /// The price of `model` (`provider:model`), when known.
    fn price(&self, model: &str) -> Option<LlmPrice>;

    /// One completion; the error is a message for the gadget.
    fn complete(
        &self,
        request: LlmRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<LlmAnswer, String>> + Send + 'static>>;
}
