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
pub mod models;
pub mod openai;
pub mod provider;
pub mod sse;
pub mod subagent;

use std::time::Duration;

pub use agent::{
    Agent, AgentConfig, AgentEvent, AgentOutcome, IterationRecord, Observer, RetryPolicy,
    StopHandle, StopReason,
};
pub use models::{ModelInfo, ModelTable};
pub use provider::{ChatMessage, ChatRequest, Provider, ProviderError, Role, StreamItem, Usage};

/// The HTTP client of a provider: rustls, no proxy from the environment
/// (an API key must not go to a proxy nobody configured here), a bounded
/// connect time, no overall timeout (a long answer streams for minutes).
pub(crate) fn http_client(connect_timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .no_proxy()
        .build()
        .unwrap_or_default()
}

/// The body of an error response, cut to what a message quotes.
pub(crate) async fn read_error_body(response: reqwest::Response) -> String {
    use futures_util::StreamExt;
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        body.extend_from_slice(&chunk);
        if body.len() > provider::MAX_ERROR_BODY_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}
