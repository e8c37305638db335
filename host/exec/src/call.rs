//! The one way a call of any tool runs, whoever asked for it: the executor
//! for each call of a response (`gadget run`, `gadget agent`), and `gadget
//! call`, `gadget mcp` and `gadget serve` for one call each. What every
//! call must pass is here, once: its parameters are validated against the
//! tool's schema (defaults filled in), it runs with its deadline, abort
//! signal and observer, a panic in a tool is that call's `crashed` failure
//! (never a lost answer), and a question it asks goes to the person-facing
//! handler when its caller has one.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use serde_json::Value;

use gadget_core::call::{CallError, CallReport, Outcome};
use gadget_core::ledger::CallObserver;
use gadget_core::params::ValidationFailure;
use gadget_core::tool::{Tool, ToolCall};

use crate::HumanInput;

/// What only the caller of one call knows.
#[derive(Clone, Default)]
pub struct CallOptions {
    pub invocation_id: String,
    /// The deadline, resolved by the caller's [`crate::Timeouts`]; `None`:
    /// the tool's own.
    pub timeout: Option<Duration>,
    /// The abort signal from outside.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Sees the call's logs, progress, updates and costs as they happen.
    pub observer: Option<CallObserver>,
    /// Answers the tool's question; without one, the question is the
    /// call's outcome for the caller to handle.
    pub human: Option<Arc<dyn HumanInput>>,
}

/// How one call ended.
#[derive(Debug)]
pub struct Finished {
    pub report: CallReport,
    /// The person's answer (or why there is none) when the tool asked and
    /// the caller had someone to ask.
    pub answer: Option<Result<String, String>>,
}

/// The tool's parameters, validated against its schema with its defaults
/// filled in.
pub fn validate(tool: &dyn Tool, params: Value) -> Result<Value, ValidationFailure> {
    tool.schema().validate(tool.name(), params)
}

/// Runs one call of `tool` with validated `params`.
pub async fn run(tool: Arc<dyn Tool>, params: Arc<Value>, options: CallOptions) -> Finished {
    let CallOptions {
        invocation_id,
        timeout,
        cancel,
        observer,
        human,
    } = options;
    let call = ToolCall {
        invocation_id: invocation_id.clone(),
        params,
        timeout,
        cancel,
        observer,
    };
    let report = if tool.is_instant() {
        run_at_once(&*tool, call)
    } else {
        contained(&*tool, tool.run(call)).await
    };
    let answer = match (&report.outcome, &human) {
        (Ok(Outcome::AskHuman { question }), Some(human)) => {
            Some(human.ask(&invocation_id, tool.name(), question).await)
        }
        _ => None,
    };
    Finished { report, answer }
}

/// A tool computed in the host answers in its first poll: no task, no
/// wait. One that had to wait broke its word, and says so.
pub(crate) fn run_at_once(tool: &dyn Tool, call: ToolCall) -> CallReport {
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
        tool.run(call)
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
    }));
    match polled {
        Ok(Poll::Ready(report)) => report,
        Ok(Poll::Pending) => crashed(
            tool,
            "it says it answers at once, but its run had to wait".into(),
            Duration::ZERO,
        ),
        Err(panic) => crashed(tool, bug(panic.as_ref()), Duration::ZERO),
    }
}

/// A tool's run whose panic is the call's `crashed` failure.
async fn contained(tool: &dyn Tool, run: impl Future<Output = CallReport>) -> CallReport {
    let started = Instant::now();
    match AssertUnwindSafe(run).catch_unwind().await {
        Ok(report) => report,
        Err(panic) => crashed(tool, bug(panic.as_ref()), started.elapsed()),
    }
}

fn crashed(tool: &dyn Tool, reason: String, duration: Duration) -> CallReport {
    CallReport::of(
        Err(CallError::Crashed {
            gadget: tool.name().to_string(),
            reason,
        }),
        duration,
    )
}

/// What a panic said, as the reason of a `crashed` failure.
pub(crate) fn bug(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    format!("the host's call failed with a bug: {message}")
}
