//! The layers around every call, one ordered list (Spin's `ExecutorHooks`
//! shape): the span (when tracing is on), the journal (when the scope has
//! a recorder), the rate limit (when one of the operator's counts the
//! gadget), the approval (when the operator's rules ask something of the
//! call). The rate limit comes before the approval: nobody is asked to
//! approve a call that would then be refused for its rate. A new concern
//! is one more element of the list, not one more nesting.
//!
//! Each layer of one call may admit it (or refuse it, or defer it), sees
//! its events first through the observer it wraps, gives the tool the
//! scope it runs in (the span: its own trace parent), is told when the
//! call starts and when it ends; refusals before a call reached a tool are
//! told to the layers that keep them ([`Layers::refused`]). Layers are
//! opened in order, admit in order, and are told the end in reverse order
//! (the journal's last record is written before the span ends).
//!
//! A call with no layer to open (no recorder, no tracing, nothing the
//! rules ask) opens none: [`Layers::passive`] is what the executor's fast
//! path asks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use gadget_core::access::Access;
use gadget_core::approval::{
    Admission, ApprovalEvent, ApprovalRequest, Approvals, Decider, Verdict,
};
use gadget_core::call::CallReport;
use gadget_core::client::ClientId;
use gadget_core::events::Failure;
use gadget_core::ledger::{CallEvent, CallObserver};
use gadget_core::rate::{RateLimited, RateLimits};
use gadget_core::scope::{CallRecord, CallScope, Entry, EntryKind, Origin, TraceParent};
use gadget_core::signal::AbortSignal;
use gadget_core::tool::Tool;

use crate::telemetry::{self, Telemetry, ToolSpan};

/// What a layer says of a call before it runs.
pub(crate) enum Admit {
    Run,
    /// It does not run, for this reason (in the operator's words).
    Refused(String),
    /// It does not run: over one of the operator's rate limits.
    Limited(RateLimited),
    /// It waits for an approval its caller asks for out of band.
    Deferred(Box<ApprovalRequest>),
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the layers wrap: a call of a tool, or a request to a plugin's
/// catalog (a resource read, a prompt, a completion), which enters the
/// same plugin code and so passes the same layers.
#[derive(Clone, Copy)]
pub(crate) enum Subject<'a> {
    Tool(&'a dyn Tool),
    Catalog(&'a CatalogSubject<'a>),
}

/// A catalog request as the layers see it.
pub(crate) struct CatalogSubject<'a> {
    pub kind: EntryKind,
    /// What it names (`resource:URI`, `prompt:NAME`, ...): what rules and
    /// rate limits match, what the journal and span call it.
    pub name: &'a str,
    /// Its plugin's gadgets: a rate limit on any of them counts the
    /// plugin's catalog too.
    pub gadgets: &'a [String],
    pub origin: Option<Arc<Origin>>,
}

impl<'a> Subject<'a> {
    pub fn name(&self) -> &'a str {
        match self {
            Subject::Tool(tool) => tool.name(),
            Subject::Catalog(catalog) => catalog.name,
        }
    }

    fn kind(&self) -> EntryKind {
        match self {
            Subject::Tool(_) => EntryKind::Call,
            Subject::Catalog(catalog) => catalog.kind,
        }
    }

    fn origin(&self) -> Option<Arc<Origin>> {
        match self {
            Subject::Tool(tool) => tool.origin(),
            Subject::Catalog(catalog) => catalog.origin.clone(),
        }
    }

    /// `f` of the names rate limits count it under: a tool's own name
    /// (no allocation on a call's path), or a catalog request's and its
    /// plugin's gadgets'.
    fn counted_as<R>(&self, f: impl FnOnce(&[&str]) -> R) -> R {
        match self {
            Subject::Tool(tool) => f(&[tool.name()]),
            Subject::Catalog(catalog) => {
                let names: Vec<&str> = std::iter::once(catalog.name)
                    .chain(catalog.gadgets.iter().map(String::as_str))
                    .collect();
                f(&names)
            }
        }
    }

    fn access(&self) -> Access {
        match self {
            Subject::Tool(tool) => tool.access(),
            Subject::Catalog(_) => Access::default(),
        }
    }
}

/// What a layer is shown of a call it admits.
pub(crate) struct Admitting<'a> {
    pub subject: Subject<'a>,
    pub id: &'a str,
    pub params: &'a Arc<Value>,
    pub signal: Option<&'a AbortSignal>,
    pub observer: &'a Option<CallObserver>,
}

/// One concern around one call.
pub(crate) trait Layer: Send + Sync {
    /// Whether the call may run.
    fn admit<'a>(&'a self, _call: &'a Admitting<'a>) -> BoxFuture<'a, Admit> {
        Box::pin(std::future::ready(Admit::Run))
    }

    /// The call's observer, with this layer shown each event first.
    fn observe(&self, observer: Option<CallObserver>) -> Option<CallObserver> {
        observer
    }

    /// The scope the tool runs in; `None`: the caller's.
    fn scope(&self, _scope: &Arc<CallScope>) -> Option<Arc<CallScope>> {
        None
    }

    /// The call is about to run.
    fn started(&self, _params: &Value, _deadline: Option<Duration>) {}

    /// The call ended (ran, or was refused before it ran).
    fn finished(&self, _report: &CallReport, _instant: bool) {}
}

/// The layers of one call, in order.
pub(crate) struct Layers(Vec<Box<dyn Layer>>);

impl Layers {
    pub fn none() -> Layers {
        Layers(Vec::new())
    }

    /// Whether a call in `scope` with this admission has no layer at all.
    pub fn passive(scope: &CallScope, admission: &Admission) -> bool {
        scope.recorder.is_none()
            && scope.rates.is_none()
            && *admission == Admission::Run
            && telemetry::active().is_none()
    }

    /// The layers `scope` asks for, opened for entry `id` of `subject`.
    pub fn open(subject: Subject<'_>, scope: &CallScope, id: &str, admission: Admission) -> Layers {
        let mut layers: Vec<Box<dyn Layer>> = Vec::with_capacity(4);
        if let Some(telemetry) = telemetry::active() {
            layers.push(Box::new(SpanLayer::open(telemetry, scope, subject, id)));
        }
        if let Some(recorder) = &scope.recorder {
            let record = match recorder.failure() {
                Some(why) => Err(why),
                None => {
                    let entry = Entry {
                        id,
                        name: subject.name(),
                        kind: subject.kind(),
                    };
                    Ok(recorder.call(entry, subject.origin(), &scope.client))
                }
            };
            layers.push(Box::new(JournalLayer { record }));
        }
        if let Some(rates) = scope
            .rates
            .as_ref()
            .filter(|r| subject.counted_as(|names| r.applies_to_any(names)))
        {
            layers.push(Box::new(RateLayer {
                rates: rates.clone(),
                client: scope.client.clone(),
            }));
        }
        if admission != Admission::Run {
            layers.push(Box::new(ApprovalLayer {
                admission,
                approvals: scope.approvals.clone(),
            }));
        }
        Layers(layers)
    }

    /// A call refused before it reached a tool, told to the layers that
    /// keep refusals: the journal records it, tracing counts it.
    pub fn refused(scope: &CallScope, id: &str, name: &str, failure: &Failure) {
        if let Some(recorder) = &scope.recorder {
            recorder.refused(id, name, failure, &scope.client);
        }
        if let Some(telemetry) = telemetry::active() {
            telemetry.refused(gadget_core::effect::Door::Call);
        }
    }

    pub fn observe(&self, observer: Option<CallObserver>) -> Option<CallObserver> {
        self.0
            .iter()
            .fold(observer, |observer, layer| layer.observe(observer))
    }

    /// Each layer's admission in order; the first that does not admit the
    /// call decides.
    pub async fn admit(
        &self,
        subject: Subject<'_>,
        id: &str,
        params: &Arc<Value>,
        signal: Option<&AbortSignal>,
        observer: &Option<CallObserver>,
    ) -> Admit {
        let call = Admitting {
            subject,
            id,
            params,
            signal,
            observer,
        };
        for layer in &self.0 {
            match layer.admit(&call).await {
                Admit::Run => {}
                other => return other,
            }
        }
        Admit::Run
    }

    pub fn scope(&self, mut scope: Arc<CallScope>) -> Arc<CallScope> {
        for layer in &self.0 {
            if let Some(own) = layer.scope(&scope) {
                scope = own;
            }
        }
        scope
    }

    pub fn started(&self, params: &Value, deadline: Option<Duration>) {
        for layer in &self.0 {
            layer.started(params, deadline);
        }
    }

    pub fn finished(&self, report: &CallReport, instant: bool) {
        for layer in self.0.iter().rev() {
            layer.finished(report, instant);
        }
    }
}

/// The call's `execute_tool` span, a child of the scope's trace.
struct SpanLayer {
    telemetry: &'static Telemetry,
    span: std::sync::Mutex<Option<ToolSpan>>,
    /// The span as the trace parent of what the call runs inside.
    trace: Option<TraceParent>,
}

impl SpanLayer {
    fn open(
        telemetry: &'static Telemetry,
        scope: &CallScope,
        subject: Subject<'_>,
        id: &str,
    ) -> Self {
        let parent = scope.trace.as_ref().and_then(|parent| {
            telemetry::context_from(&parent.traceparent, parent.tracestate.as_deref())
        });
        let client = scope.client.subject_name();
        let span = match subject {
            Subject::Tool(tool) => telemetry.tool_span(parent.as_ref(), tool, id, client),
            Subject::Catalog(catalog) => {
                let request = telemetry::CatalogRequest {
                    id,
                    kind: catalog.kind,
                    name: catalog.name,
                    origin: catalog.origin.as_deref(),
                };
                telemetry.catalog_span(parent.as_ref(), request, client)
            }
        };
        let trace = telemetry::trace_parent_of(span.context()).map(TraceParent::new);
        SpanLayer {
            telemetry,
            span: std::sync::Mutex::new(Some(span)),
            trace,
        }
    }
}

impl Layer for SpanLayer {
    fn observe(&self, observer: Option<CallObserver>) -> Option<CallObserver> {
        let span = self.span.lock().unwrap_or_else(|p| p.into_inner());
        match span.as_ref() {
            Some(span) => Some(span.observe(observer)),
            None => observer,
        }
    }

    fn scope(&self, scope: &Arc<CallScope>) -> Option<Arc<CallScope>> {
        let mut own = (**scope).clone();
        own.trace = self.trace.clone();
        Some(Arc::new(own))
    }

    fn finished(&self, report: &CallReport, _instant: bool) {
        let span = self.span.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(span) = span {
            span.finish(self.telemetry, report);
        }
    }
}

/// The call's record in the scope's recorder; a recorder that cannot
/// record refuses the call (no call runs unrecorded).
struct JournalLayer {
    record: Result<Arc<dyn CallRecord>, String>,
}

impl Layer for JournalLayer {
    fn admit<'a>(&'a self, _call: &'a Admitting<'a>) -> BoxFuture<'a, Admit> {
        let admit = match &self.record {
            Ok(_) => Admit::Run,
            Err(why) => Admit::Refused(why.clone()),
        };
        Box::pin(std::future::ready(admit))
    }

    fn observe(&self, observer: Option<CallObserver>) -> Option<CallObserver> {
        let Ok(record) = &self.record else {
            return observer;
        };
        let record = record.clone();
        Some(Arc::new(move |event: &CallEvent| {
            record.event(event);
            if let Some(observer) = &observer {
                observer(event);
            }
        }))
    }

    fn started(&self, params: &Value, deadline: Option<Duration>) {
        if let Ok(record) = &self.record {
            record.started(params, deadline);
        }
    }

    fn finished(&self, report: &CallReport, instant: bool) {
        if let Ok(record) = &self.record {
            record.finished(report, instant);
        }
    }
}

/// The operator's rate limits: a call over one is refused at once (never
/// queued), with when it may be retried.
struct RateLayer {
    rates: Arc<RateLimits>,
    client: ClientId,
}

impl Layer for RateLayer {
    fn admit<'a>(&'a self, call: &'a Admitting<'a>) -> BoxFuture<'a, Admit> {
        let verdict = |admitted: Result<(), RateLimited>| match admitted {
            Ok(()) => Admit::Run,
            Err(limited) => Admit::Limited(limited),
        };
        // Replicas sharing a store count there (one round trip); alone,
        // under the in-memory lock with no wait.
        if let Some(store) = self.rates.shared() {
            return Box::pin(async move {
                let owned: Vec<String> = call
                    .subject
                    .counted_as(|names| names.iter().map(|n| n.to_string()).collect());
                let names: Vec<&str> = owned.iter().map(String::as_str).collect();
                verdict(
                    self.rates
                        .admit_shared(&**store, &names, &self.client, false)
                        .await,
                )
            });
        }
        let now = std::time::Instant::now();
        let admitted = call
            .subject
            .counted_as(|names| self.rates.admit_any(names, &self.client, now));
        Box::pin(std::future::ready(verdict(admitted)))
    }
}

/// The operator's rules: a deny refuses the call, an approve rule waits
/// for the approver's verdict (bounded by the rules' timeout and the
/// call's abort signal); every step is told to the observer.
struct ApprovalLayer {
    admission: Admission,
    approvals: Option<Arc<Approvals>>,
}

impl Layer for ApprovalLayer {
    fn admit<'a>(&'a self, call: &'a Admitting<'a>) -> BoxFuture<'a, Admit> {
        Box::pin(async move {
            match &self.admission {
                Admission::Run => Admit::Run,
                Admission::Deny { reason } => {
                    tell(
                        call.observer,
                        ApprovalEvent::Decided {
                            approved: false,
                            by: Decider::Rule,
                            reason: Some(reason.clone()),
                        },
                    );
                    Admit::Refused(format!("the operator's rules refuse it: {reason}"))
                }
                Admission::Ask { reasons, named } => match &self.approvals {
                    None => Admit::Run,
                    Some(approvals) => {
                        approve(approvals, call, reasons.clone(), named.clone()).await
                    }
                },
            }
        })
    }
}

/// Waits for the approver's verdict on a call.
async fn approve(
    approvals: &Approvals,
    call: &Admitting<'_>,
    reasons: Vec<String>,
    named: Vec<String>,
) -> Admit {
    let name = call.subject.name();
    if approvals.approved_for_session(name) {
        tell(
            call.observer,
            ApprovalEvent::Decided {
                approved: true,
                by: Decider::Session,
                reason: None,
            },
        );
        return Admit::Run;
    }
    let request = ApprovalRequest {
        call_id: call.id.to_string(),
        gadget: name.to_string(),
        params: call.params.clone(),
        access: call.subject.access(),
        reasons,
        declared: match call.subject {
            Subject::Tool(tool) => tool.declared(),
            Subject::Catalog(_) => Default::default(),
        },
        named,
    };
    tell(
        call.observer,
        ApprovalEvent::Requested {
            reasons: request.reasons.clone(),
            access: request.access.clone(),
        },
    );
    let timeout = approvals.rules.timeout();
    let verdict = tokio::select! {
        verdict = approvals.approver.decide(&request) => verdict,
        _ = tokio::time::sleep(timeout) => Verdict::Denied {
            by: Decider::Timeout,
            why: format!(
                "nobody approved it within {} (the policy's [gadgets] approval-timeout-ms)",
                human_duration(timeout)
            ),
        },
        _ = gadget_core::signal::raised(call.signal) => Verdict::Denied {
            by: Decider::Stopped,
            why: "the call was stopped while it waited for approval".into(),
        },
    };
    match verdict {
        Verdict::Approved { by, for_session } => {
            if for_session {
                approvals.approve_for_session(name);
            }
            tell(
                call.observer,
                ApprovalEvent::Decided {
                    approved: true,
                    by,
                    reason: None,
                },
            );
            Admit::Run
        }
        Verdict::Denied { by, why } => {
            tell(
                call.observer,
                ApprovalEvent::Decided {
                    approved: false,
                    by,
                    reason: Some(why.clone()),
                },
            );
            Admit::Refused(why)
        }
        Verdict::Deferred => Admit::Deferred(Box::new(request)),
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

fn tell(observer: &Option<CallObserver>, event: ApprovalEvent) {
    if let Some(observer) = observer {
        observer(&CallEvent::Approval(event));
    }
}
