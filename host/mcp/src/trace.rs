//! The trace a tool call belongs to, as its client says: `_meta.traceparent`
//! (and `tracestate`), the MCP way (SEP-414), else the HTTP request's own
//! `traceparent` header under `gadget serve` (a gateway's or load
//! balancer's). Read only when tracing is on; a malformed value is no
//! parent, never an error.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use gadget_core::scope::TraceParent;
use gadget_exec::telemetry;

/// The parent of this request's `execute_tool` span, if its client named
/// one (read by the span layer: a malformed one starts a new trace).
pub(crate) fn parent_of(context: &RequestContext<RoleServer>) -> Option<TraceParent> {
    telemetry::active()?;
    let trace = |parent: &str, state: Option<&str>| TraceParent {
        traceparent: parent.into(),
        tracestate: state.map(Into::into),
    };
    if let Some(parent) = context.meta.get_traceparent() {
        return Some(trace(parent, context.meta.get_tracestate()));
    }
    let parts = context.extensions.get::<http::request::Parts>()?;
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    Some(trace(header("traceparent")?, header("tracestate")))
}
