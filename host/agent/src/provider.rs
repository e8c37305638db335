//! What the agent loop needs from an LLM: send a conversation, get its
//! answer back as a stream of text deltas and token usage. The two real
//! providers ([`OpenAi`](crate::openai::OpenAi) for every Chat
//! Completions-compatible server, [`Anthropic`](crate::anthropic::Anthropic))
//! implement [`Provider`]; tests add scripted ones.
//!
//! Errors are classified once, here, so the loop can decide what to retry
//! (rate limits, server errors, connection failures before the first byte)
//! and the command line can say each in one line.

use std::pin::Pin;
use std::time::Duration;

use futures_util::Stream;
use serde::Serialize;

/// Who said a message of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One message of the conversation (the system prompt is apart: the two
/// APIs carry it differently).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// An assistant message's native tool calls, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<crate::tool_calls::NativeCall>,
    /// A tool result's call id (a user message that answers a native tool
    /// call: OpenAI's `tool` message, Anthropic's `tool_result` block).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A tool result that is the call's error (Anthropic's `is_error`;
    /// OpenAI's tool message has no such field, so its text says it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Images the message shows the model (a result's, [`crate::images`]).
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "crate::images::summaries"
    )]
    pub images: Vec<gadget_core::content::Media>,
}

impl ChatMessage {
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::User,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
            images: Vec::new(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
            images: Vec::new(),
        }
    }

    /// The model's message with the native tool calls it made.
    pub fn assistant_calls(
        content: impl Into<String>,
        calls: Vec<crate::tool_calls::NativeCall>,
    ) -> ChatMessage {
        ChatMessage {
            tool_calls: calls,
            ..ChatMessage::assistant(content)
        }
    }

    /// The message with `images` (those a model can be sent).
    pub fn with_images(mut self, images: Vec<gadget_core::content::Media>) -> ChatMessage {
        self.images = images;
        self
    }

    /// The result of native tool call `id`; `failed`: it is the call's
    /// error.
    pub fn tool_result(
        id: impl Into<String>,
        content: impl Into<String>,
        failed: bool,
    ) -> ChatMessage {
        ChatMessage {
            tool_call_id: Some(id.into()),
            is_error: failed,
            ..ChatMessage::user(content)
        }
    }
}

/// A tool offered natively: its name, description and JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// The parameters' JSON Schema (an object schema).
    pub parameters: serde_json::Value,
}

/// One request: the model, the system prompt's parts (llmist sends the
/// operator's text and the gadget instructions as separate system
/// messages), the conversation, and the answer's token cap.
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub system: Vec<String>,
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
    /// Sampling temperature; `None`: the provider's default.
    pub temperature: Option<f32>,
    /// Tools offered natively (`--tool-format native`); empty: none, the
    /// block format's instructions are in the system prompt instead.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
}

/// The bytes of `request`: system parts, messages, the native tools and
/// calls it carries, and its images as base64.
pub fn request_bytes(request: &ChatRequest) -> usize {
    // Native tools are input too: their names, descriptions and schemas
    // (the block format's instructions are in the system text instead).
    let tools: usize = request
        .tools
        .iter()
        .map(|tool| tool.name.len() + tool.description.len() + tool.parameters.to_string().len())
        .sum();
    let calls: usize = request
        .messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .map(|call| call.name.len() + call.arguments.to_string().len())
        .sum();
    let text: usize = request.messages.iter().map(|m| m.content.len()).sum();
    request.system.iter().map(String::len).sum::<usize>()
        + text
        + tools
        + calls
        + image_bytes(request)
}

fn image_bytes(request: &ChatRequest) -> usize {
    request
        .messages
        .iter()
        .map(|m| crate::images::request_bytes(&m.images))
        .sum()
}

/// About how many tokens `request` is, before any tokenizer sees it: its
/// text by bytes, each image at [`crate::images::IMAGE_TOKENS_ESTIMATE`].
pub fn estimate_tokens(request: &ChatRequest) -> u64 {
    let images: usize = request.messages.iter().map(|m| m.images.len()).sum();
    let text = request_bytes(request) - image_bytes(request);
    gadget_core::llm::estimate_tokens(text)
        .saturating_add(images as u64 * crate::images::IMAGE_TOKENS_ESTIMATE)
}

/// Tokens one response used, as the provider reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    /// Adds what a later event of the same response reports: each field
    /// is the larger of the two (Anthropic repeats cumulative counts; a
    /// count never goes down).
    pub fn merge(&mut self, later: Usage) {
        self.input_tokens = self.input_tokens.max(later.input_tokens);
        self.output_tokens = self.output_tokens.max(later.output_tokens);
    }
}

/// What a response stream carries.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// The next piece of the answer's text.
    Text(String),
    /// Token usage so far (the last one wins).
    Usage(Usage),
    /// Why the model stopped, in the provider's words (`stop`, `length`,
    /// `end_turn`, ...), at most [`MAX_FINISH_REASON_BYTES`].
    Finish(String),
    /// A native tool call whose arguments are complete (sent the moment
    /// they are, not at the message's end).
    ToolCall(crate::tool_calls::NativeCall),
}

/// The most of a finish reason kept: the providers' own are a word; a
/// hostile server's could be anything.
pub const MAX_FINISH_REASON_BYTES: usize = 64;

/// A provider's finish reason, bounded.
pub fn finish_reason(reason: &str) -> StreamItem {
    StreamItem::Finish(cut(reason, MAX_FINISH_REASON_BYTES))
}

/// A response as it streams.
pub type ResponseStream = Pin<Box<dyn Stream<Item = Result<StreamItem, ProviderError>> + Send>>;

/// A boxed future, so the trait stays object-safe without a macro.
pub type BoxFuture<'a, T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// An LLM API.
pub trait Provider: Send + Sync {
    /// `openai`, `anthropic`, ...: named in errors and events.
    fn name(&self) -> &str;

    /// Sends `request`; resolves once the response has started (status
    /// and headers read), to the stream of its text and usage.
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ResponseStream, ProviderError>>;
}

/// Why a request or a stream failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    #[error("{provider}: no API key: set {variable} (or --api-key-env VAR, or [llm] api-key-env)")]
    MissingKey { provider: String, variable: String },
    #[error("{provider}: the API key was refused ({status}): {message}")]
    Unauthorized {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider}: unknown model '{model}': {message}")]
    UnknownModel {
        provider: String,
        model: String,
        message: String,
    },
    /// A 404 whose body does not say the model is unknown: most often a
    /// base URL without the API's path.
    #[error(
        "{provider}: {url} answered 404 Not Found: {message} (is the base URL right? OpenAI-compatible servers usually serve the API under /v1, e.g. http://127.0.0.1:11434/v1)"
    )]
    NotFound {
        provider: String,
        url: String,
        message: String,
    },
    /// Nothing listens at a loopback address: a server that is not
    /// running, which retrying will not start.
    #[error(
        "{provider}: nothing is listening at {url} (connection refused): is the server running?"
    )]
    NothingListening { provider: String, url: String },
    /// A 200 that is not an event stream (an HTML page, a JSON object).
    #[error(
        "{provider}: {url} answered 200 with {content_type}, not an event stream (text/event-stream): {start}"
    )]
    NotAStream {
        provider: String,
        url: String,
        content_type: String,
        start: String,
    },
    #[error("{provider}: cannot reach {url}: {cause}")]
    Unreachable {
        provider: String,
        url: String,
        cause: String,
    },
    #[error("{provider}: rate limited (429){}: {message}", retry_after.map(|d| format!(", retry after {} ms", d.as_millis())).unwrap_or_default())]
    RateLimited {
        provider: String,
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("{provider}: server error {status}: {message}")]
    Server {
        provider: String,
        status: u16,
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("{provider}: request refused ({status}): {message}")]
    Refused {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider}: the response stream broke: {cause}")]
    StreamBroken { provider: String, cause: String },
    #[error("{provider}: the API reported an error mid-response: {message}")]
    Api { provider: String, message: String },
    #[error(
        "{provider}: the conversation is {bytes} bytes, over the {limit} a request may carry (MAX_REQUEST_BYTES): not sent"
    )]
    RequestTooLarge {
        provider: String,
        bytes: usize,
        limit: usize,
    },
}

impl ProviderError {
    /// Worth sending again (after a pause): the server was busy or not
    /// there yet. Auth, unknown models and bad requests never are, and a
    /// stream that broke midway is not (its calls have started).
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::Server { .. }
                | ProviderError::Unreachable { .. }
        )
    }

    /// How long the server asked us to wait.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::RateLimited { retry_after, .. }
            | ProviderError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A setup problem (key, model, address) rather than a failure of the
    /// task: the command line exits with 2 for these.
    pub fn is_setup(&self) -> bool {
        matches!(
            self,
            ProviderError::MissingKey { .. }
                | ProviderError::Unauthorized { .. }
                | ProviderError::UnknownModel { .. }
                | ProviderError::Unreachable { .. }
                | ProviderError::NotFound { .. }
                | ProviderError::NothingListening { .. }
                | ProviderError::NotAStream { .. }
        )
    }
}

/// The longest error body quoted in a message, in bytes: enough for any
/// API's error text, never a whole HTML error page.
pub const MAX_ERROR_BODY_BYTES: usize = 2_000;

/// Classifies a non-success HTTP status with its body and headers.
pub(crate) fn status_error(
    provider: &str,
    model: &str,
    url: &str,
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: &str,
) -> ProviderError {
    let message = error_message(body);
    let provider = provider.to_string();
    let code = status.as_u16();
    let names_the_model = message.contains("model")
        && (message.contains("not found")
            || message.contains("does not exist")
            || body.contains("not_found"));
    match code {
        401 | 403 => ProviderError::Unauthorized {
            provider,
            status: code,
            message,
        },
        404 if names_the_model => ProviderError::UnknownModel {
            provider,
            model: model.to_string(),
            message,
        },
        404 => ProviderError::NotFound {
            provider,
            url: url.to_string(),
            message,
        },
        429 => ProviderError::RateLimited {
            provider,
            retry_after: retry_after(headers),
            message,
        },
        // 529 is Anthropic's "overloaded". 501 and 505 say the server does
        // not do this at all: asking again cannot help.
        500..=599 if code != 501 && code != 505 => ProviderError::Server {
            provider,
            status: code,
            retry_after: retry_after(headers),
            message,
        },
        _ if names_the_model => ProviderError::UnknownModel {
            provider,
            model: model.to_string(),
            message,
        },
        _ => ProviderError::Refused {
            provider,
            status: code,
            message,
        },
    }
}

/// The human part of an API error body: `error.message` in both APIs'
/// JSON, else the body itself (cut).
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error"))
        })
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| one_line(body));
    cut(&message, MAX_ERROR_BODY_BYTES)
}

/// A body that is not the API's JSON (an HTML error page, a proxy's text)
/// as one line of its words: tags dropped, whitespace collapsed.
fn one_line(body: &str) -> String {
    let mut text = String::with_capacity(body.len().min(MAX_ERROR_BODY_BYTES));
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `max` bytes on a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The longest wait a server's `Retry-After` is read as, seconds: far past
/// any retry policy's cap (which then applies), and far inside what a
/// `Duration` holds, so no number a server sends can overflow a conversion.
pub const MAX_RETRY_AFTER_SECONDS: f64 = 86_400.0;

/// The wait a 429 or 5xx asks for: `retry-after-ms` (OpenAI), else
/// `Retry-After` in seconds. (The HTTP-date form is rare from these APIs;
/// without a parseable value the backoff decides.) Whatever the server
/// sends, the result is a valid, bounded duration: `1e30`, `inf`, `NaN`
/// and negatives never reach a panicking conversion.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let seconds = header("retry-after-ms")
        .map(|ms| ms / 1e3)
        .or_else(|| header("retry-after"))?;
    bounded_seconds(seconds)
}

/// A server-given number of seconds as a duration, clamped to
/// [`MAX_RETRY_AFTER_SECONDS`]; `None` when it is not a number of seconds.
fn bounded_seconds(seconds: f64) -> Option<Duration> {
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(seconds.min(MAX_RETRY_AFTER_SECONDS)).ok()
}

/// A connection-level failure (no status), named by what went wrong.
pub(crate) fn send_error(provider: &str, url: &str, error: &reqwest::Error) -> ProviderError {
    if error.is_connect() && is_loopback(url) && refused(error) {
        return ProviderError::NothingListening {
            provider: provider.to_string(),
            url: url.to_string(),
        };
    }
    let mut cause = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        cause = format!("{cause}: {inner}");
        source = inner.source();
    }
    ProviderError::Unreachable {
        provider: provider.to_string(),
        url: url.to_string(),
        cause,
    }
}

/// A base URL must be an absolute http(s) URL: `127.0.0.1:11434/v1` would
/// otherwise fail as "relative URL without a base" on every retry.
pub fn check_base_url(url: &str) -> Result<(), String> {
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => Ok(()),
        _ if !url.contains("://") => Err(format!(
            "base URL '{url}' has no scheme: write http://{url} (or https://)"
        )),
        _ => Err(format!(
            "base URL '{url}' is not an http:// or https:// URL with a host (for example http://127.0.0.1:11434/v1)"
        )),
    }
}

/// Whether `url` names this machine (`localhost`, 127.0.0.0/8, `::1`).
fn is_loopback(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether the connection was refused (nothing listening), found in the
/// error's chain of causes.
fn refused(error: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = inner.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finish_reason_is_cut_to_its_bound() {
        let long = "x".repeat(10_000);
        let StreamItem::Finish(kept) = finish_reason(&long) else {
            unreachable!()
        };
        assert!(
            kept.len() <= MAX_FINISH_REASON_BYTES + "…".len(),
            "{}",
            kept.len()
        );
        assert_eq!(finish_reason("stop"), StreamItem::Finish("stop".into()));
    }

    #[test]
    fn any_retry_after_a_server_sends_is_a_bounded_duration() {
        let cap = Duration::from_secs(86_400);
        for (name, value, expected) in [
            ("retry-after", "2", Some(Duration::from_secs(2))),
            ("retry-after-ms", "1500", Some(Duration::from_millis(1500))),
            ("retry-after", "1e20", Some(cap)),
            ("retry-after", "1.8446744073709552e19", Some(cap)),
            ("retry-after-ms", "1e30", Some(cap)),
            ("retry-after", "inf", Some(cap)),
            ("retry-after", "-inf", None),
            ("retry-after", "NaN", None),
            ("retry-after", "-1", None),
            ("retry-after-ms", "-0.5", None),
            ("retry-after", "soon", None),
            ("retry-after", "1e-400", Some(Duration::ZERO)),
        ] {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(name, value.parse().unwrap());
            assert_eq!(retry_after(&headers), expected, "{name}: {value}");
        }
    }

    #[test]
    fn statuses_are_classified_with_the_apis_own_words() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "2".parse().unwrap());
        let body =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        let e = status_error(
            "openai",
            "m",
            "http://127.0.0.1:9/v1/chat/completions",
            reqwest::StatusCode::UNAUTHORIZED,
            &headers,
            body,
        );
        assert_eq!(
            e.to_string(),
            "openai: the API key was refused (401): Incorrect API key provided"
        );
        assert!(e.is_setup() && !e.retryable());
        let e = status_error(
            "openai",
            "m",
            "http://127.0.0.1:9/v1/chat/completions",
            reqwest::StatusCode::TOO_MANY_REQUESTS,
            &headers,
            "slow down",
        );
        assert!(e.retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
        let e = status_error(
            "anthropic",
            "nope",
            "http://127.0.0.1:9/v1/chat/completions",
            reqwest::StatusCode::NOT_FOUND,
            &headers,
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: nope"}}"#,
        );
        assert_eq!(
            e.to_string(),
            "anthropic: unknown model 'nope': model: nope"
        );
        let e = status_error(
            "anthropic",
            "m",
            "http://127.0.0.1:9/v1/chat/completions",
            reqwest::StatusCode::from_u16(529).unwrap(),
            &headers,
            "{}",
        );
        assert!(e.retryable());
        let e = status_error(
            "openai",
            "m",
            "http://127.0.0.1:9/v1/chat/completions",
            reqwest::StatusCode::BAD_REQUEST,
            &headers,
            &"x".repeat(10_000),
        );
        assert!(!e.retryable());
        assert!(e.to_string().len() < MAX_ERROR_BODY_BYTES + 100);
        // Not the API's JSON: one line of the page's words, not retried
        // when the server does not do POST at all.
        let e = status_error(
            "openai",
            "m",
            "http://127.0.0.1:9/chat/completions",
            reqwest::StatusCode::NOT_IMPLEMENTED,
            &headers,
            "<html>\n <body>\n  <h1>Error</h1>\n  <p>Unsupported method ('POST')</p>\n </body></html>",
        );
        assert_eq!(
            e.to_string(),
            "openai: request refused (501): Error Unsupported method ('POST')"
        );
        assert!(!e.retryable());
        // A 404 that does not name the model is a wrong address, said so.
        let e = status_error(
            "openai",
            "m",
            "http://127.0.0.1:9/chat/completions",
            reqwest::StatusCode::NOT_FOUND,
            &headers,
            "404 page not found",
        );
        assert_eq!(
            e.to_string(),
            "openai: http://127.0.0.1:9/chat/completions answered 404 Not Found: 404 page not found (is the base URL right? OpenAI-compatible servers usually serve the API under /v1, e.g. http://127.0.0.1:11434/v1)"
        );
        assert!(e.is_setup() && !e.retryable());
        let e = status_error(
            "openai",
            "gpt-9",
            "http://127.0.0.1:9/v1/chat/completions",
            reqwest::StatusCode::NOT_FOUND,
            &headers,
            r#"{"error":{"message":"The model `gpt-9` does not exist","code":"model_not_found"}}"#,
        );
        assert!(matches!(e, ProviderError::UnknownModel { .. }), "{e}");
    }

    #[test]
    fn base_urls_need_a_scheme_and_a_host() {
        assert!(check_base_url("http://127.0.0.1:11434/v1").is_ok());
        assert!(check_base_url("https://api.example.com").is_ok());
        let e = check_base_url("127.0.0.1:11434/v1").unwrap_err();
        assert_eq!(
            e,
            "base URL '127.0.0.1:11434/v1' has no scheme: write http://127.0.0.1:11434/v1 (or https://)"
        );
        assert!(check_base_url("ftp://example.com").is_err());
        assert!(is_loopback("http://localhost:9/v1"));
        assert!(is_loopback("http://[::1]:9/v1"));
        assert!(is_loopback("http://127.1.2.3/v1"));
        assert!(!is_loopback("http://10.0.0.1/v1"));
    }

    #[test]
    fn retry_after_prefers_milliseconds_and_ignores_nonsense() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "3".parse().unwrap());
        headers.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "-1".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }
}
