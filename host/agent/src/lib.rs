//! gadget-agent: the agent loop of gadget-host. An [`Agent`] sends a task
//! to an LLM through a [`Provider`] (OpenAI-compatible Chat Completions or
//! Anthropic Messages, both streamed over reqwest), feeds each response
//! into the executor as it streams (so calls start mid-response), and
//! carries llmist's history into the next request until the model
//! answers, a gadget finishes the task, or a cap is reached.
//!
//! Data flows one way: provider stream -> executor -> history -> the next
//! request. This crate prints nothing; the command line renders its
//! [`AgentEvent`]s.

pub mod agent;
pub mod anthropic;
pub mod backend;
mod events;
pub mod images;
pub mod models;
pub mod native;
pub mod openai;
pub mod provider;
pub mod recovery;
mod retry;
pub(crate) mod sse;
mod steering;
pub mod subagent;
pub(crate) mod tool_calls;

use std::time::Duration;

pub use agent::{
    Agent, AgentConfig, AgentEvent, AgentOutcome, IterationRecord, Observer, RetryPolicy,
    StopHandle, StopReason,
};
pub use models::{ModelInfo, ModelTable};
pub use provider::{ChatMessage, ChatRequest, Provider, ProviderError, Role, StreamItem, Usage};

/// How long a provider may take to answer a request with its headers: a
/// model may think a while before its first token, never this long.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(300);

/// How long an error response's body may take to arrive whole: it is a
/// short JSON object; a body dripped a byte a second is cut off here.
pub const ERROR_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client of a provider: rustls, no proxy from the environment
/// (an API key must not go to a proxy nobody configured here), no
/// redirects (a 307 would replay the conversation and its key to another
/// origin, a 303 make the host fetch any URL the server names), a bounded
/// connect time, no overall timeout (a long answer streams for minutes).
/// Silence is bounded where it is read: [`send`] for the headers, the
/// event stream's idle timeout for the body, [`read_error_body`] for an
/// error's body (a client-wide read timeout would cut the first-byte wait
/// short).
pub(crate) fn http_client(connect_timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap_or_default()
}

/// Sends a provider request: its headers must arrive within
/// [`FIRST_BYTE_TIMEOUT`].
pub(crate) async fn send(
    provider: &str,
    url: &str,
    builder: reqwest::RequestBuilder,
) -> Result<reqwest::Response, ProviderError> {
    match tokio::time::timeout(FIRST_BYTE_TIMEOUT, builder.send()).await {
        // Refused, not unreachable: sending it again would get the same
        // redirect.
        Ok(Ok(response)) if response.status().is_redirection() => Err(ProviderError::Refused {
            provider: provider.to_string(),
            status: response.status().as_u16(),
            message: format!(
                "{url} answered with a redirect; provider requests never follow redirects: set the API's final URL as the base URL"
            ),
        }),
        Ok(Ok(response)) => Ok(response),
        Ok(Err(e)) => Err(provider::send_error(provider, url, &e)),
        Err(_) => Err(ProviderError::Unreachable {
            provider: provider.to_string(),
            url: url.to_string(),
            cause: format!("no response within {} s", FIRST_BYTE_TIMEOUT.as_secs()),
        }),
    }
}

/// A successful response, if it is an event stream: a 200 with an HTML
/// page (a web server at the base URL) or a JSON object (a server that
/// ignored `stream: true`) says what came back instead.
pub(crate) async fn expect_event_stream(
    provider: &str,
    url: &str,
    response: reqwest::Response,
) -> Result<reqwest::Response, ProviderError> {
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    // No content type at all is tolerated: some minimal servers stream
    // events without saying so.
    if content_type.is_empty() || content_type.contains("text/event-stream") {
        return Ok(response);
    }
    let body = read_error_body(response).await;
    Err(ProviderError::NotAStream {
        provider: provider.to_string(),
        url: url.to_string(),
        content_type,
        start: provider::cut(body.trim(), 200),
    })
}

/// The body of an error response, cut to what a message quotes, read
/// within [`ERROR_BODY_TIMEOUT`].
pub(crate) async fn read_error_body(response: reqwest::Response) -> String {
    use futures_util::StreamExt;
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    let read = async {
        while let Some(Ok(chunk)) = chunks.next().await {
            body.extend_from_slice(&chunk);
            if body.len() > provider::MAX_ERROR_BODY_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(ERROR_BODY_TIMEOUT, read).await;
    String::from_utf8_lossy(&body).into_owned()
}
