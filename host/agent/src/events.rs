//! What an agent session tells its observer as it goes ([`AgentEvent`],
//! in order) and what it comes to ([`AgentOutcome`]): the figures of each
//! iteration and why the loop stopped.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use gadget_exec::ExecEvent;

use crate::provider::{ChatMessage, ProviderError, Usage};

/// Something that happened, in order.
#[derive(Debug, Clone)]
pub enum AgentEvent {
    /// A request is about to be sent. `messages` are the ones added since
    /// the previous request (all of them, system included, the first time).
    Request {
        iteration: usize,
        provider: String,
        model: String,
        system: Option<Vec<String>>,
        messages: Vec<ChatMessage>,
        estimated_input_tokens: u64,
    },
    /// A request failed and will be sent again after `delay`.
    Retry {
        iteration: usize,
        attempt: u32,
        delay: Duration,
        error: String,
    },
    /// A request failed after its retries and the error controller
    /// decided: `action` is `fallback` (to `model`), `recover` (a given
    /// response) or `rethrow`.
    LlmError {
        iteration: usize,
        error: String,
        action: &'static str,
        model: Option<String>,
    },
    /// A person's message reached the conversation (it goes with the next
    /// request).
    Steered { iteration: usize, text: String },
    /// Text of the answer, as it streams.
    Text { iteration: usize, content: String },
    /// What the executor reports (the events of `gadget run`).
    Exec(ExecEvent),
    /// The whole answer and its tokens, once it has ended.
    Response {
        iteration: usize,
        text: String,
        usage: Usage,
        cost: Option<f64>,
    },
    /// One iteration's figures.
    IterationEnd(IterationRecord),
}

/// A sub-agent's events travel inside its call's events as themselves.
impl gadget_core::ledger::InnerEvent for AgentEvent {
    fn to_json(&self) -> Value {
        AgentEvent::to_json(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl AgentEvent {
    /// The event as one JSON object: the executor's events as `gadget
    /// run --json` writes them, the loop's with `type`s of their own.
    pub fn to_json(&self) -> Value {
        match self {
            AgentEvent::Exec(event) => serde_json::to_value(event).unwrap_or(Value::Null),
            AgentEvent::Request {
                iteration,
                provider,
                model,
                system,
                messages,
                estimated_input_tokens,
            } => {
                let mut value = json!({
                    "type": "llm_request", "iteration": iteration, "provider": provider,
                    "model": model, "messages": messages,
                    "estimated_input_tokens": estimated_input_tokens,
                });
                if let Some(system) = system {
                    value["system"] = json!(system);
                }
                value
            }
            AgentEvent::Retry {
                iteration,
                attempt,
                delay,
                error,
            } => json!({
                "type": "llm_retry", "iteration": iteration, "attempt": attempt,
                "delay_ms": delay.as_millis() as u64, "error": error,
            }),
            AgentEvent::LlmError {
                iteration,
                error,
                action,
                model,
            } => json!({
                "type": "llm_error", "iteration": iteration, "error": error,
                "action": action, "model": model,
            }),
            AgentEvent::Steered { iteration, text } => {
                json!({"type": "human_message", "iteration": iteration, "text": text})
            }
            AgentEvent::Text { iteration, content } => {
                json!({"type": "llm_text", "iteration": iteration, "content": content})
            }
            AgentEvent::Response {
                iteration,
                text,
                usage,
                cost,
            } => json!({
                "type": "llm_response", "iteration": iteration, "text": text,
                "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "cost_usd": cost,
            }),
            AgentEvent::IterationEnd(record) => {
                let mut value = serde_json::to_value(record).unwrap_or(Value::Null);
                value["type"] = json!("iteration");
                value
            }
        }
    }
}

/// One iteration's figures.
#[derive(Debug, Clone, Serialize)]
pub struct IterationRecord {
    pub iteration: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// USD; `None` when the model's price is unknown.
    pub llm_cost: Option<f64>,
    pub gadget_cost: f64,
    pub calls: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub skipped: usize,
    pub duration_ms: f64,
}

/// Why the loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// A response had no calls: its text is the answer.
    Answered,
    /// A gadget said the task is complete.
    Finished,
    MaxIterations,
    MaxCost,
    Interrupted,
    /// The provider failed (after retries) or the stream broke.
    Failed,
}

/// How a session ended.
#[derive(Debug, Clone, Serialize)]
pub struct AgentOutcome {
    pub stop: StopReason,
    /// The text of the response without calls, or the finishing call's
    /// result.
    pub answer: Option<String>,
    pub iterations: Vec<IterationRecord>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// USD; `None` when the model's price is unknown.
    pub llm_cost: Option<f64>,
    pub gadget_cost: f64,
    pub total_cost: f64,
    #[serde(skip)]
    pub error: Option<ProviderError>,
}
