//! The trace a tool call belongs to, as its client says: `_meta.traceparent`
//! (and `tracestate`), the MCP way (SEP-414), else the HTTP request's own
//! `traceparent` header under `gadget serve` (a gateway's or load
//! balancer's). Read only when tracing is on; a malformed value is no
//! parent, never an error.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use gadget_exec::telemetry::{self, TraceContext};

/// The parent of this request's `execute_tool` span, if its client named one.
pub(crate) fn parent_of(context: &RequestContext<RoleServer>) -> Option<TraceContext> {
    telemetry::active()?;
    if let Some(parent) = context.meta.get_traceparent() {
        return telemetry::context_from(parent, context.meta.get_tracestate());
    }
    let parts = context.extensions.get::<http::request::Parts>()?;
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    telemetry::context_from(header("traceparent")?, header("tracestate"))
}
