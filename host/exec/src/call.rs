//! The one way a call of any tool runs, whoever asked for it: the executor
//! for each call of a response (`gadget run`, `gadget agent`), and `gadget
//! call`, `gadget mcp` and `gadget serve` for one call each. What every
//! call must pass is here, once: its parameters are validated against the
//! tool's schema (defaults filled in), it runs with its deadline, abort
//! signal and observer, a panic in a tool is that call's `crashed` failure
//! (never a lost answer), and a question it asks goes to the person-facing
//! handler when its caller has one.
//!
//! Before it runs, the operator's approval rules are checked on the
//! validated parameters: a deny rule refuses it; an approve rule makes it
//! wait for the caller's approver (at most the rules' timeout, ended by the
//! abort signal). Only then does the tool run, so its deadline starts when
//! it is approved.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use serde_json::Value;

use gadget_core::approval::{
    Admission, ApprovalEvent, ApprovalRequest, Approvals, Decider, Verdict,
};
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
    /// Answers what a tool asks a person while it runs (an upstream MCP
    /// server's elicitation); `None`: `human`, if any.
    pub ask: Option<Arc<dyn HumanInput>>,
    /// The operator's approval rules and who approves; `None`: no rules.
    pub approvals: Option<Arc<Approvals>>,
    /// The audit journal the call is recorded in, if any.
    pub journal: Option<Arc<crate::audit::Journal>>,
    /// The span the call's `execute_tool` span is a child of (an agent's,
    /// an MCP client's); `None`: a new trace. Read only when tracing is on.
    pub trace: Option<crate::telemetry::TraceContext>,
}

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

/// How often a call waiting for approval looks at its abort signal.
const APPROVAL_CANCEL_POLL: Duration = Duration::from_millis(20);

/// What the operator's rules say of a call of `tool` with validated
/// `params` (the executor asks ahead, to know whether the call will wait).
pub fn admission(tool: &dyn Tool, params: &Value, approvals: Option<&Approvals>) -> Admission {
    match approvals {
        Some(approvals) if !approvals.rules.is_empty() => {
            approvals
                .rules
                .check(tool.name(), params, tool.schema().schema_for_rules())
        }
        _ => Admission::Run,
    }
}

/// The tool's parameters, validated against its schema with its defaults
/// filled in.
pub fn validate(tool: &dyn Tool, params: Value) -> Result<Value, ValidationFailure> {
    tool.schema().validate(tool.name(), params)
}

/// Runs one call of `tool` with validated `params`.
pub async fn run(tool: Arc<dyn Tool>, params: Arc<Value>, options: CallOptions) -> Finished {
    let admission = admission(&*tool, &params, options.approvals.as_deref());
    run_admitted(tool, params, options, admission).await
}

/// Runs one call whose [`admission`] is known.
pub async fn run_admitted(
    tool: Arc<dyn Tool>,
    params: Arc<Value>,
    mut options: CallOptions,
    admission: Admission,
) -> Finished {
    let Some(telemetry) = crate::telemetry::active() else {
        return journaled(tool, params, options, admission, None).await;
    };
    let span = telemetry.tool_span(options.trace.as_ref(), &*tool, &options.invocation_id);
    options.observer = Some(span.observe(options.observer.take()));
    let trace_parent = crate::telemetry::trace_parent_of(span.context()).map(Arc::from);
    let name = tool.name().to_string();
    // Boxed: a traced call's state stays out of every untraced call's
    // future.
    let finished = Box::pin(journaled(tool, params, options, admission, trace_parent)).await;
    span.finish(telemetry, &name, &finished.report);
    finished
}

/// The call, recorded in the audit journal when there is one.
async fn journaled(
    tool: Arc<dyn Tool>,
    params: Arc<Value>,
    mut options: CallOptions,
    admission: Admission,
    trace_parent: Option<Arc<str>>,
) -> Finished {
    let Some(journal) = &options.journal else {
        return decide_and_run(tool, params, options, admission, None, trace_parent).await;
    };
    // A journal that cannot be written is no licence to run unrecorded.
    if let Some(why) = journal.failure() {
        let reason = format!(
            "the audit journal {} cannot be written ({why}), and no call runs unrecorded",
            journal.path().display()
        );
        return not_run(&*tool, reason, None);
    }
    let recorder = Arc::new(journal.call(&options.invocation_id, &*tool));
    options.observer = Some(recorded(recorder.clone(), options.observer.take()));
    let instant = tool.is_instant();
    let finished = decide_and_run(
        tool,
        params,
        options,
        admission,
        Some(&recorder),
        trace_parent,
    )
    .await;
    recorder.finished(&finished.report, instant);
    finished
}

/// The call's observer, with the journal shown each event first.
fn recorded(
    recorder: Arc<crate::audit::CallRecorder>,
    observer: Option<gadget_core::ledger::CallObserver>,
) -> gadget_core::ledger::CallObserver {
    Arc::new(move |event: &gadget_core::ledger::CallEvent| {
        recorder.event(event);
        if let Some(observer) = &observer {
            observer(event);
        }
    })
}

/// The rules' decision, then (when the call may run) the call.
async fn decide_and_run(
    tool: Arc<dyn Tool>,
    params: Arc<Value>,
    options: CallOptions,
    admission: Admission,
    recorder: Option<&crate::audit::CallRecorder>,
    trace_parent: Option<Arc<str>>,
) -> Finished {
    match admission {
        Admission::Run => {}
        Admission::Deny { reason } => {
            tell(
                &options.observer,
                ApprovalEvent::Decided {
                    approved: false,
                    by: Decider::Rule,
                    reason: Some(reason.clone()),
                },
            );
            return not_run(
                &*tool,
                format!("the operator's rules refuse it: {reason}"),
                None,
            );
        }
        // Boxed: the wait is rare, and its state would make every call's
        // future larger.
        Admission::Ask { reasons, named } => {
            match Box::pin(approve(&tool, &params, &options, reasons, named)).await {
                Ok(()) => {}
                Err(Unapproved::Denied(why)) => return not_run(&*tool, why, None),
                Err(Unapproved::Deferred(request)) => {
                    let why = "it waits for a person's approval".to_string();
                    return not_run(&*tool, why, Some(*request));
                }
            }
        }
    }
    let CallOptions {
        invocation_id,
        timeout,
        cancel,
        observer,
        human,
        ask,
        approvals,
        journal,
        trace: _,
    } = options;
    if let Some(recorder) = recorder {
        recorder.started(&params, timeout);
    }
    let call = ToolCall {
        invocation_id: invocation_id.clone(),
        params,
        timeout,
        cancel,
        observer,
        approvals,
        trace_parent,
        journal,
        human: ask.or_else(|| human.clone()),
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
    Finished {
        report,
        answer,
        deferred: None,
    }
}

/// Why a call that needed approval does not run now.
enum Unapproved {
    Denied(String),
    Deferred(Box<ApprovalRequest>),
}

/// Waits for the approver's verdict on a call: bounded by the rules'
/// timeout and the call's abort signal; every step is told to the
/// observer.
async fn approve(
    tool: &Arc<dyn Tool>,
    params: &Arc<Value>,
    options: &CallOptions,
    reasons: Vec<String>,
    named: Vec<String>,
) -> Result<(), Unapproved> {
    let Some(approvals) = &options.approvals else {
        return Ok(());
    };
    let name = tool.name();
    if approvals.approved_for_session(name) {
        tell(
            &options.observer,
            ApprovalEvent::Decided {
                approved: true,
                by: Decider::Session,
                reason: None,
            },
        );
        return Ok(());
    }
    let request = ApprovalRequest {
        call_id: options.invocation_id.clone(),
        gadget: name.to_string(),
        params: params.clone(),
        access: tool.access(),
        reasons,
        declared: tool.declared(),
        named,
    };
    tell(
        &options.observer,
        ApprovalEvent::Requested {
            reasons: request.reasons.clone(),
            access: request.access.clone(),
        },
    );
    let timeout = approvals.rules.timeout();
    let stopped = async {
        loop {
            if options
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
            {
                return;
            }
            tokio::time::sleep(APPROVAL_CANCEL_POLL).await;
        }
    };
    let verdict = {
        let decide = approvals.approver.decide(&request);
        tokio::select! {
            verdict = decide => verdict,
            _ = tokio::time::sleep(timeout) => Verdict::Denied {
                by: Decider::Timeout,
                why: format!(
                    "nobody approved it within {} (the policy's [gadgets] approval-timeout-ms)",
                    human_duration(timeout)
                ),
            },
            _ = stopped => Verdict::Denied {
                by: Decider::Stopped,
                why: "the call was stopped while it waited for approval".into(),
            },
        }
    };
    match verdict {
        Verdict::Approved { by, for_session } => {
            if for_session {
                approvals.approve_for_session(name);
            }
            tell(
                &options.observer,
                ApprovalEvent::Decided {
                    approved: true,
                    by,
                    reason: None,
                },
            );
            Ok(())
        }
        Verdict::Denied { by, why } => {
            tell(
                &options.observer,
                ApprovalEvent::Decided {
                    approved: false,
                    by,
                    reason: Some(why.clone()),
                },
            );
            Err(Unapproved::Denied(why))
        }
        Verdict::Deferred => Err(Unapproved::Deferred(Box::new(request))),
    }
}

fn human_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

fn tell(observer: &Option<gadget_core::ledger::CallObserver>, event: ApprovalEvent) {
    if let Some(observer) = observer {
        observer(&gadget_core::ledger::CallEvent::Approval(event));
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
