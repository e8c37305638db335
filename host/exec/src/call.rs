//! The one way a call of any tool runs, whoever asked for it: the executor
//! for each call of a response (`gadget run`, `gadget agent`), and `gadget
//! call`, `gadget mcp` and `gadget serve` for one call each. What every
//! call must pass is here, once: [`prepare`] validates its parameters
//! against the tool's schema (defaults filled in), and [`run`] runs it with
//! its deadline, abort signal and observer inside the ordered list of
//! layers its scope asks for ([`crate::layers`]: the span, the journal,
//! the rate limit, the approval), a panic in a tool is that call's `crashed` failure (never
//! a lost answer), and a question it asks goes to the person-facing
//! handler when its caller has one.
//!
//! The approval layer checks the operator's rules on the validated
//! parameters: a deny rule refuses the call; an approve rule makes it wait
//! for the scope's approver (at most the rules' timeout, ended by the abort
//! signal). Only then does the tool run, so its deadline starts when it is
//! approved.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use serde_json::Value;

use gadget_core::approval::{Admission, ApprovalRequest, Approvals};
use gadget_core::call::{CallError, CallReport, Outcome};
use gadget_core::client::ClientId;
use gadget_core::events::Failure;
use gadget_core::scope::CallScope;
use gadget_core::tool::{Tool, ToolCall};

pub use gadget_core::tool::prepare;

use crate::layers::{Admit, Layers, Subject};

/// How one call ended.
#[derive(Debug)]
pub struct Finished {
    pub report: CallReport,
    /// The person's answer (or why there is none) when the tool asked and
    /// the caller had someone to ask.
    pub answer: Option<Result<String, String>>,
    /// The call waits for an approval its caller asks for out of band (an
    /// MCP client that calls again with the person's answer); the report
    /// says it was not run.
    pub deferred: Option<ApprovalRequest>,
}

/// What the operator's rules say of a call of `tool` with validated
/// `params` (the executor asks ahead, to know whether the call will wait).
pub fn admission(
    tool: &dyn Tool,
    params: &Value,
    approvals: Option<&Approvals>,
    client: &ClientId,
) -> Admission {
    match approvals {
        Some(approvals) if !approvals.rules.is_empty() => approvals.rules.check_for(
            tool.name(),
            params,
            tool.schema().schema_for_rules(),
            client,
        ),
        _ => Admission::Run,
    }
}

/// A call refused before it reached a tool (no such gadget, a gadget the
/// operator denies, parameters that do not fit): every layer of `scope`
/// that keeps refusals is told. `name` is as the caller wrote it.
pub fn refused(scope: &CallScope, id: &str, name: &str, failure: &Failure) {
    Layers::refused(scope, id, name, failure);
}

/// Runs one `call` of `tool` (its parameters validated by [`prepare`]).
/// The call's question (an ask-human outcome) goes to the scope's person
/// when that person answers such questions
/// ([`gadget_core::scope::HumanInput::answers_outcome`]); else it is the caller's to handle.
pub async fn run(tool: Arc<dyn Tool>, call: ToolCall) -> Finished {
    let scope = &call.scope;
    let admission = admission(
        &*tool,
        &call.params,
        scope.approvals.as_deref(),
        &scope.client,
    );
    run_admitted(tool, call, admission).await
}

/// Runs one call whose [`admission`] is known, inside its scope's layers.
pub async fn run_admitted(tool: Arc<dyn Tool>, call: ToolCall, admission: Admission) -> Finished {
    if Layers::passive(&call.scope, &admission) {
        // No layer: the call as it is (no box, no list).
        return run_inside(&*tool, call, &Layers::none()).await;
    }
    let layers = Layers::open(Subject::Tool(&*tool), &call.scope, &call.id, admission);
    // Boxed: a layered call's state stays out of every plain call's
    // future.
    let finished = Box::pin(run_inside(&*tool, call, &layers)).await;
    layers.finished(&finished.report, tool.is_instant());
    finished
}

/// The layers' admission, then (when the call may run) the call.
async fn run_inside(tool: &dyn Tool, mut call: ToolCall, layers: &Layers) -> Finished {
    call.observer = layers.observe(call.observer.take());
    match layers
        .admit(
            Subject::Tool(tool),
            &call.id,
            &call.params,
            call.signal.as_ref(),
            &call.observer,
        )
        .await
    {
        Admit::Run => {}
        Admit::Refused(why) => return not_run(tool, why, None),
        Admit::Limited(limited) => {
            let error = CallError::RateLimited {
                gadget: tool.name().to_string(),
                reason: limited.reason(),
                retry_after_ms: limited.retry_after.as_millis() as u64,
            };
            return Finished {
                report: CallReport::of(Err(error), Duration::ZERO),
                answer: None,
                deferred: None,
            };
        }
        Admit::Deferred(request) => {
            let why = "it waits for a person's approval".to_string();
            return not_run(tool, why, Some(*request));
        }
    }
    layers.started(&call.params, call.deadline);
    call.scope = layers.scope(call.scope);
    // Who answers the call's own question, if it asks one; the id
    // outlives the call only then.
    let answers = (call.scope.human.as_ref())
        .filter(|human| human.answers_outcome())
        .cloned();
    let id = answers.as_ref().map(|_| call.id.clone());
    let report = if tool.is_instant() {
        run_at_once(tool, call)
    } else {
        contained(tool, tool.run(call)).await
    };
    let answer = match (&report.outcome, &answers, &id) {
        (Ok(Outcome::AskHuman { question }), Some(human), Some(id)) => {
            Some(human.ask(id, tool.name(), question).await)
        }
        _ => None,
    };
    Finished {
        report,
        answer,
        deferred: None,
    }
}

/// A call that did not run, and why.
fn not_run(tool: &dyn Tool, reason: String, deferred: Option<ApprovalRequest>) -> Finished {
    Finished {
        report: CallReport::of(
            Err(CallError::NotApproved {
                gadget: tool.name().to_string(),
                reason,
            }),
            Duration::ZERO,
        ),
        answer: None,
        deferred,
    }
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
