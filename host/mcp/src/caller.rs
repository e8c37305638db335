//! What one request (a `tools/call`, a catalog request) needs of itself that made it and of the
//! client behind it, whichever way the request came: through rmcp (stdio,
//! sessions, every request `gadget serve`'s direct path leaves to it), or
//! the direct path itself ([`crate::direct`]), which answers the common
//! stateless call without rmcp's per-request service. The call's steps
//! (call.rs) read only this, so both ways run the very same code.

// MCP log messages are what clients show today (see server.rs).
#![allow(deprecated, reason = "MCP logging has no replacement yet (SEP-2577)")]

use std::time::Instant;

use rmcp::model::{
    ClientCapabilities, LoggingMessageNotificationParam, Notification, ProgressNotificationParam,
    ProgressToken, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, model::ProtocolVersion};
use tokio_util::sync::CancellationToken;

use gadget_core::ask::Kinds;
use gadget_core::client::ClientId;
use gadget_core::scope::TraceParent;

use crate::inputs::kinds_of;

/// The client of one call, as the call sees it.
#[derive(Clone)]
pub(crate) struct Caller {
    /// What the client declared it can do (this request's `_meta`, or its
    /// session's `initialize`).
    pub(crate) capabilities: Option<ClientCapabilities>,
    /// Protocol 2026-07-28 or later: the server asks only through a
    /// call's input-required result.
    pub(crate) modern: bool,
    /// Progress notifications go out only when the client sent a token.
    pub(crate) progress_token: Option<ProgressToken>,
    /// The trace the call's span belongs to, when tracing is on.
    pub(crate) trace: Option<TraceParent>,
    /// Cancelled when the client cancels the call or goes away.
    pub(crate) gone: CancellationToken,
    /// Where the call's notifications go.
    pub(crate) out: Outbound,
    /// Who the client is: the subject the server authenticated, else
    /// anonymous on its session or connection. What rules and rate limits
    /// see, and who owns the tasks and states made for it.
    pub(crate) client: ClientId,
    /// When the request arrived: every latency the server counts for it
    /// (waiting for the plugins to load included) starts here.
    pub(crate) started: Instant,
}

/// Where a call's notifications (progress, logs) go.
#[derive(Clone)]
pub(crate) enum Outbound {
    /// rmcp's peer of the session or the request: it can also carry
    /// requests to the client (elicitation on older protocols).
    Peer(Peer<RoleServer>),
    /// The direct path's response: the messages are written to the HTTP
    /// response (as an SSE stream once there is more than the result).
    Direct(tokio::sync::mpsc::UnboundedSender<ServerJsonRpcMessage>),
}

impl Outbound {
    pub(crate) async fn progress(&self, param: ProgressNotificationParam) {
        let notification = ServerNotification::ProgressNotification(Notification::new(param));
        self.notify(notification).await;
    }

    pub(crate) async fn log(&self, param: LoggingMessageNotificationParam) {
        let notification = ServerNotification::LoggingMessageNotification(Notification::new(param));
        self.notify(notification).await;
    }

    async fn notify(&self, notification: ServerNotification) {
        match self {
            Outbound::Peer(peer) => {
                let _ = peer.send_notification(notification).await;
            }
            // The response is gone when the receiver is: nothing to tell.
            Outbound::Direct(messages) => {
                let _ = messages.send(ServerJsonRpcMessage::notification(notification));
            }
        }
    }

    /// The peer requests to the client can be sent through, if any.
    pub(crate) fn peer(&self) -> Option<&Peer<RoleServer>> {
        match self {
            Outbound::Peer(peer) => Some(peer),
            Outbound::Direct(_) => None,
        }
    }
}

impl Caller {
    /// The caller of a request rmcp handed to the server.
    pub(crate) fn of(context: &RequestContext<RoleServer>) -> Caller {
        Caller {
            capabilities: context.client_capabilities(),
            modern: context
                .protocol_version()
                .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28),
            progress_token: context.meta.get_progress_token(),
            trace: crate::trace::parent_of(context),
            gone: context.ct.clone(),
            out: Outbound::Peer(context.peer.clone()),
            client: client_of(context),
            started: Instant::now(),
        }
    }

    /// Whether the client can show a person a form (`elicitation/create`).
    pub(crate) fn can_elicit(&self) -> bool {
        self.capabilities
            .as_ref()
            .and_then(|c| c.elicitation.as_ref())
            .is_some_and(|e| e.form.is_some() || e.url.is_none())
    }

    /// What the client can ask a person for a gadget.
    pub(crate) fn kinds(&self) -> Kinds {
        kinds_of(self.capabilities.as_ref())
    }

    /// Whether the client declared the Tasks extension.
    pub(crate) fn supports_tasks(&self) -> bool {
        self.capabilities
            .as_ref()
            .is_some_and(|c| c.supports_tasks())
    }
}

/// Who made a request rmcp handed over: the authenticated subject; else
/// anonymous on its MCP session (HTTP), or on the one connection a stdio
/// server serves; a lone stateless HTTP request has neither.
pub(crate) fn client_of(context: &RequestContext<RoleServer>) -> ClientId {
    let Some(parts) = context.extensions.get::<http::request::Parts>() else {
        return ClientId::anonymous_on("stdio");
    };
    if let Some(identity) = parts.extensions.get::<crate::identity::ClientIdentity>() {
        return ClientId::Subject(identity.0.clone());
    }
    match parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        Some(session) => ClientId::anonymous_on(format!("session:{session}")),
        None => ClientId::Anonymous(None),
    }
}
