//! One gadget call, as every part of the host sees it: the spec a tool
//! declares, how a call ended ([`Outcome`] or [`CallError`]) and the
//! [`CallReport`] with everything it produced.
//!
//! These are the domain types. The runtime converts the WIT bindings into
//! them at its edge, the executor and the front ends only ever see these.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::content::Rich;
use crate::ledger::{LogEntry, Update};

/// A gadget's spec as it declared it (read once, at load time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GadgetSpec {
    pub name: String,
    pub label: Option<String>,
    pub description: String,
    /// JSON Schema as text; empty means the gadget takes no parameters.
    pub parameters_schema: String,
    pub examples: Vec<Example>,
    pub timeout_ms: Option<u32>,
    pub exclusive: bool,
    pub max_concurrent: Option<u32>,
}

/// One example call of a gadget, as it declared it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// The parameters, JSON text (checked against the schema at load time).
    pub params: String,
    pub output: Option<String>,
    pub comment: Option<String>,
}

/// How a call ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Outcome {
    /// A result for the model.
    Result {
        /// What the model reads (for a result in parts, [`crate::content::model_text`] of them).
        result: String,
        details: Option<Value>,
        /// The result in parts, when the gadget gave more than one text
        /// (contract 0.3.0); what MCP clients get.
        #[serde(skip_serializing_if = "Option::is_none")]
        rich: Option<Box<Rich>>,
    },
    /// Task complete: the agent loop ends after this response.
    Finish {
        result: String,
        details: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        rich: Option<Box<Rich>>,
    },
    /// A question for a person.
    AskHuman { question: String },
}

impl Outcome {
    /// A plain text result.
    pub fn text(result: impl Into<String>) -> Outcome {
        Outcome::Result {
            result: result.into(),
            details: None,
            rich: None,
        }
    }

    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Result { .. } => OutcomeKind::Result,
            Outcome::Finish { .. } => OutcomeKind::Finish,
            Outcome::AskHuman { .. } => OutcomeKind::AskHuman,
        }
    }
}

/// How a call ended, as the executor reports it (`outcome` of
/// `call_finished` in docs/events.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    /// The gadget's result.
    Result,
    /// The gadget's result, and the task is complete.
    Finish,
    /// The gadget asked a person, who answered.
    AskHuman,
    /// A dependency failed; the dependency policy gave this result.
    Fallback,
    /// A controller skipped the call with this result.
    Synthetic,
    /// A controller turned the call's failure into this result.
    Recovered,
    /// The call failed (see its failure kind).
    Error,
}

impl OutcomeKind {
    /// The name in events and JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Result => "result",
            OutcomeKind::Finish => "finish",
            OutcomeKind::AskHuman => "ask-human",
            OutcomeKind::Fallback => "fallback",
            OutcomeKind::Synthetic => "synthetic",
            OutcomeKind::Recovered => "recovered",
            OutcomeKind::Error => "error",
        }
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call failed, as a kind (`error.kind` in docs/events.md): the
/// executor's own kinds and the runtime's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The block could not be parsed into parameters.
    Parse,
    /// No gadget of that name is loaded.
    UnknownGadget,
    /// The parameters do not match the gadget's schema.
    InvalidParameters,
    /// The invocation id was already used in the session.
    DuplicateId,
    /// The gadget asked a person and no answer came.
    HumanInput,
    /// The gadget said its arguments were unusable.
    InvalidArguments,
    /// The gadget said it failed.
    Failed,
    /// The gadget stopped on the abort signal raised from outside.
    Cancelled,
    /// The deadline (plus grace) passed.
    Timeout,
    /// The instance asked for more memory than its limit.
    MemoryLimit,
    /// The host's memory budget for all running calls was spent.
    MemoryBudget,
    /// The result was larger than the limit.
    ResultTooLarge,
    /// A trap: a panic, `unreachable`, stack overflow, bad memory access.
    Crashed,
    /// The gadget called `exit` (WASI `exit`, `sys.exit`, `process.exit`).
    Exited,
    /// The instance could not be created.
    Instantiate,
    /// The operator's rules refused the call, or nobody approved it.
    NotApproved,
    /// The operator's rate limits refused the call (retry later).
    RateLimited,
}

impl FailureKind {
    /// The name in events and JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Parse => "parse",
            FailureKind::UnknownGadget => "unknown-gadget",
            FailureKind::InvalidParameters => "invalid-parameters",
            FailureKind::DuplicateId => "duplicate-id",
            FailureKind::HumanInput => "human-input",
            FailureKind::InvalidArguments => "invalid-arguments",
            FailureKind::Failed => "failed",
            FailureKind::Cancelled => "cancelled",
            FailureKind::Timeout => "timeout",
            FailureKind::MemoryLimit => "memory-limit",
            FailureKind::MemoryBudget => "memory-budget",
            FailureKind::ResultTooLarge => "result-too-large",
            FailureKind::Crashed => "crashed",
            FailureKind::Exited => "exited",
            FailureKind::Instantiate => "instantiate",
            FailureKind::NotApproved => "not-approved",
            FailureKind::RateLimited => "rate-limited",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// Kinds compare with the names they serialise to, so a test or a
// consumer reading JSON can write `kind == "timeout"`.
impl PartialEq<&str> for OutcomeKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<&str> for FailureKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Why a call failed while it ran. The message is what the model sees.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The gadget said its arguments were unusable.
    #[error("{message}")]
    InvalidArguments { message: String },
    /// The gadget said it failed.
    #[error("{message}")]
    Failed { message: String },
    /// The gadget stopped on the abort signal.
    #[error("Gadget '{gadget}' was cancelled")]
    Cancelled { gadget: String },
    /// The deadline (plus grace) passed.
    #[error("Gadget '{gadget}' execution exceeded timeout of {timeout_ms}ms")]
    Timeout { gadget: String, timeout_ms: u64 },
    /// The instance asked for more memory than its limit.
    #[error("Gadget '{gadget}' exceeded its memory limit of {limit_bytes} bytes ({} MiB)", limit_bytes >> 20)]
    MemoryLimit { gadget: String, limit_bytes: u64 },
    /// Memory within the call's own limit was refused: the host's budget
    /// for all running calls together was in use.
    #[error("Gadget '{gadget}' was refused memory: the host's budget of {} MiB for all running calls is in use; try again with fewer calls at once", budget_bytes >> 20)]
    MemoryBudget { gadget: String, budget_bytes: u64 },
    /// The result text was larger than the limit.
    #[error(
        "Gadget '{gadget}' returned {size_bytes} bytes, over its result limit of {limit_bytes} bytes"
    )]
    ResultTooLarge {
        gadget: String,
        size_bytes: u64,
        limit_bytes: u64,
    },
    /// A trap: a panic, `unreachable`, stack overflow, out-of-bounds access.
    #[error("Gadget '{gadget}' crashed: {reason}")]
    Crashed { gadget: String, reason: String },
    /// The gadget called `exit` instead of returning.
    #[error("Gadget '{gadget}' exited with status {status} instead of returning a result")]
    Exited { gadget: String, status: i32 },
    /// The instance could not be created.
    #[error("Gadget '{gadget}' could not be started: {reason}")]
    Instantiate { gadget: String, reason: String },
    /// The call did not run: a deny rule matched, or it needed a person's
    /// approval and did not get it. `reason` says which, in the
    /// operator's words.
    #[error("Gadget '{gadget}' was not run: {reason}")]
    NotApproved { gadget: String, reason: String },
    /// The call did not run: an operator's rate limit (`[[rate-limits]]`)
    /// was reached; `reason` names it, and a call may succeed after
    /// `retry_after_ms`.
    #[error("Gadget '{gadget}' was not run: {reason}")]
    RateLimited {
        gadget: String,
        reason: String,
        retry_after_ms: u64,
    },
    /// The gadget asked what only the caller can answer, and the call
    /// ended so that the caller can ask and call again with the answers
    /// (a stateless MCP call; the front end turns this into its own
    /// result, such as MCP's `input_required`).
    #[error("Gadget '{gadget}' waits for answers to {}: call it again with them", keys.join(", "))]
    AwaitingAnswers { gadget: String, keys: Vec<String> },
}

impl CallError {
    /// The kind of error, for JSON and exit codes.
    pub fn kind(&self) -> FailureKind {
        match self {
            CallError::InvalidArguments { .. } => FailureKind::InvalidArguments,
            CallError::Failed { .. } => FailureKind::Failed,
            CallError::Cancelled { .. } => FailureKind::Cancelled,
            CallError::Timeout { .. } => FailureKind::Timeout,
            CallError::MemoryLimit { .. } => FailureKind::MemoryLimit,
            CallError::MemoryBudget { .. } => FailureKind::MemoryBudget,
            CallError::ResultTooLarge { .. } => FailureKind::ResultTooLarge,
            CallError::Crashed { .. } => FailureKind::Crashed,
            CallError::Exited { .. } => FailureKind::Exited,
            CallError::Instantiate { .. } => FailureKind::Instantiate,
            CallError::NotApproved { .. } => FailureKind::NotApproved,
            CallError::RateLimited { .. } => FailureKind::RateLimited,
            CallError::AwaitingAnswers { .. } => FailureKind::HumanInput,
        }
    }
}

/// What a pipe (a gadget's stdout or stderr) captured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub bytes: Vec<u8>,
    /// Bytes written past the capacity and discarded.
    pub dropped: u64,
}

/// Everything a call produced, whether it succeeded or not.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    pub outcome: Result<Outcome, CallError>,
    /// Reported plus returned cost, USD; reported costs survive failures.
    pub cost: f64,
    pub logs: Vec<LogEntry>,
    pub progress: Vec<String>,
    pub updates: Vec<Update>,
    pub dropped_log_entries: u64,
    pub stdout: Captured,
    pub stderr: Captured,
    pub duration: Duration,
}

impl CallReport {
    /// A report of a call that ran in the host itself (nothing logged or
    /// captured): a built-in tool, a fake in a test.
    pub fn of(outcome: Result<Outcome, CallError>, duration: Duration) -> CallReport {
        CallReport {
            outcome,
            cost: 0.0,
            logs: Vec::new(),
            progress: Vec::new(),
            updates: Vec::new(),
            dropped_log_entries: 0,
            stdout: Captured::default(),
            stderr: Captured::default(),
            duration,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds serialise to the strings docs/events.md documents.
    #[test]
    fn kinds_serialize_as_documented() {
        for kind in [
            OutcomeKind::Result,
            OutcomeKind::Finish,
            OutcomeKind::AskHuman,
            OutcomeKind::Fallback,
            OutcomeKind::Synthetic,
            OutcomeKind::Recovered,
            OutcomeKind::Error,
        ] {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                Value::String(kind.as_str().into())
            );
        }
        for kind in [
            FailureKind::Parse,
            FailureKind::UnknownGadget,
            FailureKind::InvalidParameters,
            FailureKind::DuplicateId,
            FailureKind::HumanInput,
            FailureKind::InvalidArguments,
            FailureKind::Failed,
            FailureKind::Cancelled,
            FailureKind::Timeout,
            FailureKind::MemoryLimit,
            FailureKind::ResultTooLarge,
            FailureKind::Crashed,
            FailureKind::Instantiate,
            FailureKind::NotApproved,
        ] {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                Value::String(kind.as_str().into())
            );
        }
        let documented =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/events.md"))
                .unwrap();
        for kind in [
            "fallback",
            "synthetic",
            "recovered",
            "ask-human",
            "duplicate-id",
            "not-approved",
        ] {
            assert!(documented.contains(kind), "docs/events.md names {kind}");
        }
    }
}
