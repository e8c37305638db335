//! The trace a tool call belongs to, as its client says: `_meta.traceparent`
//! (and `tracestate`), the MCP way (SEP-414), else the HTTP request's own
//! `traceparent` header under `gadget serve` (a gateway's or load
//! balancer's). Read only when tracing is on; a malformed value is no
//! parent, never an error.

use rmcp::RoleServer;
use rmcp::model::RequestMetaObject;
use rmcp::service::RequestContext;

use gadget_core::scope::TraceParent;
use gadget_exec::telemetry;

/// The parent of this request's `execute_tool` span, if its client named
/// one (read by the span layer: a malformed one starts a new trace).
pub(crate) fn parent_of(context: &RequestContext<RoleServer>) -> Option<TraceParent> {
    let no_headers = http::HeaderMap::new();
    let headers = context
        .extensions
        .get::<http::request::Parts>()
        .map_or(&no_headers, |parts| &parts.headers);
    parent_from(&context.meta, headers)
}

/// The same, from a request's `_meta` and its HTTP headers.
pub(crate) fn parent_from(
    meta: &RequestMetaObject,
    headers: &http::HeaderMap,
) -> Option<TraceParent> {
    telemetry::active()?;
    let trace = |parent: &str, state: Option<&str>| TraceParent {
        traceparent: parent.into(),
        tracestate: state.map(Into::into),
    };
    if let Some(parent) = meta.get_traceparent() {
        return Some(trace(parent, meta.get_tracestate()));
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    Some(trace(header("traceparent")?, header("tracestate")))
}
