//! What the executor reports, in order: the [`ExecEvent`]s that
//! `gadget run --json` prints one per line (schema in docs/events.md), the
//! [`Failure`] of a call, and a response's [`ResponseSummary`].

use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::call::{FailureKind, OutcomeKind};
use crate::ledger::{LogLevel, LogSource};
use crate::schedule::SkipReason;

/// Why a call failed, as a kind and the text the model sees.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

/// What happened, in order. Serialised, one per line, by `gadget run --json`
/// (the schema is documented in `docs/events.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecEvent {
    /// Text outside blocks.
    Text { content: String },
    /// A block is complete.
    CallParsed {
        id: String,
        gadget: String,
        dependencies: Vec<String>,
        parameters_raw: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parse_error: Option<String>,
    },
    /// The call could run but an `exclusive` gadget holds it back: this
    /// one waits for the running calls to end, or an exclusive call is
    /// running and every other call waits for it (at most its timeout).
    CallWaiting {
        id: String,
        gadget: String,
        reason: WaitReason,
    },
    /// The gadget is running.
    CallStarted {
        id: String,
        gadget: String,
        /// The validated parameters, shared with the call (not a copy).
        parameters: Arc<Value>,
        /// 0 for a tool without a deadline (the output viewer).
        timeout_ms: u64,
    },
    /// A status line from a running gadget.
    Progress {
        id: String,
        gadget: String,
        message: String,
    },
    /// A partial result from a running gadget.
    Update {
        id: String,
        gadget: String,
        partial: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<Value>,
    },
    /// A log entry of a running gadget (or of the host about it).
    Log {
        id: String,
        gadget: String,
        level: LogLevel,
        message: String,
        fields: Value,
        source: LogSource,
    },
    /// A running gadget reported a cost (USD).
    Cost {
        id: String,
        gadget: String,
        usd: f64,
    },
    /// Something happened inside a running call (a sub-agent's request,
    /// its calls, its answer): `event` is that loop's own event.
    Nested {
        id: String,
        gadget: String,
        event: crate::ledger::Nested,
    },
    /// The call waits for a person's approval before it starts (the
    /// operator's `[gadgets] approve` or an approve rule): its
    /// `CallStarted` comes once it is approved, and its timeout starts
    /// then.
    ApprovalRequested {
        id: String,
        gadget: String,
        parameters: Arc<Value>,
        /// Why it waits, in the operator's words.
        reasons: Vec<String>,
        /// What the call may touch (its effective grants).
        access: crate::access::Access,
    },
    /// The call's approval was decided: approved (it starts) or not (it
    /// ends as `not-approved`); `by` says who or what decided.
    ApprovalDecided {
        id: String,
        gadget: String,
        approved: bool,
        by: crate::approval::Decider,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A running call used a door: an HTTP request (or its refusal), a
    /// completion. The same record the audit journal keeps.
    Effect {
        id: String,
        gadget: String,
        #[serde(flatten)]
        effect: crate::effect::Effect,
    },
    /// A gadget asked a person; the handler is asking.
    HumanInput {
        id: String,
        gadget: String,
        question: String,
    },
    /// A call ended: its result (with the outcome kind) or its failure
    /// (outcome [`OutcomeKind::Error`]).
    CallFinished {
        id: String,
        gadget: String,
        outcome: OutcomeKind,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<Failure>,
        /// Structured data the gadget returned for people and UIs (never
        /// shown to the model).
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<Value>,
        /// The id under which an oversized output was stored for
        /// `GadgetOutputViewer` (the result says so too).
        #[serde(skip_serializing_if = "Option::is_none")]
        stored_output: Option<String>,
        cost: f64,
        duration_ms: f64,
    },
    /// The call will not run. In JSON, `reason` is the reason's text
    /// (llmist's) and `failed_dependency` the id llmist reports.
    CallSkipped {
        id: String,
        gadget: String,
        #[serde(flatten, serialize_with = "skip_reason_fields")]
        reason: SkipReason,
    },
}

fn skip_reason_fields<S: Serializer>(
    reason: &SkipReason,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Fields<'a> {
        reason: String,
        failed_dependency: &'a str,
    }
    Fields {
        reason: reason.to_string(),
        failed_dependency: reason.failed_dependency(),
    }
    .serialize(serializer)
}

/// Totals of one response.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResponseSummary {
    pub calls: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub skipped: usize,
    /// USD, this response.
    pub cost: f64,
    /// USD, every response of the session so far.
    pub session_cost: f64,
    /// A gadget signalled that the task is complete.
    pub finished: bool,
    pub duration_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_serializes_as_before() {
        let event = ExecEvent::CallSkipped {
            id: "b".into(),
            gadget: "G".into(),
            reason: SkipReason::Missing {
                dependency: "a".into(),
            },
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"type":"call_skipped","id":"b","gadget":"G","reason":"Dependency \"a\" was never executed - check that the invocation ID exists and is spelled correctly","failed_dependency":"a"}"#
        );
    }

    #[test]
    fn a_failure_serializes_as_before() {
        let event = ExecEvent::CallFinished {
            id: "a".into(),
            gadget: "G".into(),
            outcome: OutcomeKind::Error,
            result: None,
            error: Some(Failure::new(FailureKind::InvalidArguments, "no")),
            details: None,
            stored_output: None,
            cost: 0.0,
            duration_ms: 1.5,
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"type":"call_finished","id":"a","gadget":"G","outcome":"error","error":{"kind":"invalid-arguments","message":"no"},"cost":0.0,"duration_ms":1.5}"#
        );
    }
}

/// Why a call that could run waits: an `exclusive` gadget holds it back.
/// Written (and serialized) as the sentence a person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitReason {
    /// An exclusive gadget holding the whole run is running.
    ExclusiveRunning,
    /// This exclusive call waits for the running calls to end.
    ExclusiveWaits { running: usize },
    /// Behind exclusive call `first`, which waits for the running calls.
    BehindExclusive { first: String },
    /// An exclusive gadget of `plugin` is running: its other calls wait.
    PluginHeld { plugin: String },
    /// This exclusive call waits for its plugin's running calls.
    PluginExclusiveWaits { plugin: String, running: u32 },
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitReason::ExclusiveRunning => f.write_str(
                "an exclusive gadget is running; no other call starts until it ends (at most its timeout)",
            ),
            WaitReason::ExclusiveWaits { running } => write!(
                f,
                "exclusive: waits for {running} running call(s) to end, then runs alone"
            ),
            WaitReason::BehindExclusive { first } => write!(
                f,
                "waits behind exclusive call {first}, which waits for the running calls"
            ),
            WaitReason::PluginHeld { plugin } => write!(
                f,
                "an exclusive gadget of plugin '{plugin}' is running; the plugin's other calls wait until it ends"
            ),
            WaitReason::PluginExclusiveWaits { plugin, running } => write!(
                f,
                "exclusive within plugin '{plugin}': waits for its {running} running call(s) to end"
            ),
        }
    }
}

impl Serialize for WaitReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
