//! `gadget serve`'s direct path: the request a served replica gets most,
//! a stateless `tools/call` of protocol 2026-07-28, answered without
//! rmcp's per-request machinery (a service, a transport, its channels and
//! tasks built and torn down for every request, and the body decoded into
//! a JSON tree, re-encoded and decoded again for the header checks).
//!
//! The request is decoded once, into rmcp's own types, and the call runs
//! through the same steps as every other (`GadgetServer::call`: the tool
//! and its validated arguments, approvals, the journal, the trace, the
//! deadline and the call cap), so nothing a call is held to differs.
//! What is answered here is only what the checks below prove rmcp would
//! answer the same way; anything else (another method, an older protocol,
//! a header that does not agree with the body, the Tasks extension, a
//! session, a batch) goes to rmcp as before, which answers it or refuses
//! it in its own words. The checks are rmcp's, made on the same inputs:
//! the `Host` header (DNS rebinding), the media types, the protocol
//! version in the header and in `_meta`, the required `_meta` fields, and
//! the `Mcp-Method` / `Mcp-Name` headers (SEP-2243).
//!
//! The response is rmcp's too: the call's result as one JSON body, or,
//! when the call sent a notification (progress, a log) before it, an SSE
//! stream of every message with the result last. A client that goes away
//! raises the call's abort signal, and the call still ends (and is
//! journaled) as any other.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use rmcp::model::{
    CallToolRequestParams, ErrorCode, ProtocolVersion, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use serde::Deserialize;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::caller::{Caller, Outbound};

/// Where `gadget serve` answers MCP.
pub(crate) const MCP_PATH: &str = "/mcp";
use crate::server::GadgetServer;

/// How long an SSE response may stay silent before a keep-alive comment
/// (rmcp's own interval, so proxies see the same stream either way).
pub const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A `tools/call` the direct path answers: its id, its parameters, and
/// the client behind it as the call will see it.
pub(crate) struct DirectCall {
    id: RequestId,
    params: CallToolRequestParams,
    caller: Caller,
    /// Where the call's result goes, after its notifications.
    reply: UnboundedSender<ServerJsonRpcMessage>,
    /// Raised when the response is dropped before the call is over (the
    /// client went away): the call's abort signal.
    gone: CancellationToken,
    messages: UnboundedReceiver<ServerJsonRpcMessage>,
}

/// The JSON-RPC envelope of one request; anything else in it, or any other
/// shape (a batch, a notification, a response), is rmcp's to answer.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: std::borrow::Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    params: CallToolRequestParams,
}

/// The hosts a request may name (`Host`), as rmcp's check reads them.
#[derive(Clone)]
pub(crate) struct AllowedHosts(Vec<(String, Option<u16>)>);

impl AllowedHosts {
    pub(crate) fn new(hosts: &[String]) -> AllowedHosts {
        AllowedHosts(hosts.iter().filter_map(|h| authority(h.trim())).collect())
    }

    fn allow(&self, headers: &HeaderMap) -> bool {
        let Some((host, port)) = one(headers, header::HOST).and_then(authority) else {
            return false;
        };
        self.0.iter().any(|(allowed, allowed_port)| {
            *allowed == host && allowed_port.is_none_or(|p| Some(p) == port)
        })
    }
}

/// `host[:port]` as rmcp normalises it: lower case, no brackets.
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let parsed = http::uri::Authority::try_from(text).ok()?;
    let host = parsed.host().trim_matches(['[', ']']).to_ascii_lowercase();
    Some((host, parsed.port_u16()))
}

/// The one value of header `name`, if it has exactly one and it is text.
fn one(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    values
        .next()
        .is_none()
        .then(|| value.to_str().ok())
        .flatten()
}

/// Whether `Accept` plainly names both JSON and SSE (no weights to weigh:
/// a header that has any is rmcp's to read).
fn accepts_both(headers: &HeaderMap) -> bool {
    let Some(accept) = one(headers, header::ACCEPT) else {
        return false;
    };
    let (mut json, mut sse) = (false, false);
    for entry in accept.split(',') {
        let entry = entry.trim();
        if entry.contains(';') || entry.contains('"') {
            return false;
        }
        json |= entry.eq_ignore_ascii_case("application/json");
        sse |= entry.eq_ignore_ascii_case("text/event-stream");
    }
    json && sse
}

fn is_json(headers: &HeaderMap) -> bool {
    one(headers, header::CONTENT_TYPE).is_some_and(|value| {
        let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
        essence.trim().eq_ignore_ascii_case("application/json")
    })
}

impl DirectCall {
    /// The tool the call names, as the client wrote it.
    pub(crate) fn tool_name(&self) -> &str {
        &self.params.name
    }

    /// The call `body` asks for, when the direct path answers it exactly as
    /// rmcp would; `None` leaves the request to rmcp.
    pub(crate) fn of(
        headers: &HeaderMap,
        body: &[u8],
        hosts: &AllowedHosts,
        client: gadget_core::client::ClientId,
    ) -> Option<DirectCall> {
        let v2026 = ProtocolVersion::V_2026_07_28.as_str();
        if !hosts.allow(headers)
            || !accepts_both(headers)
            || !is_json(headers)
            || one(headers, "mcp-protocol-version") != Some(v2026)
            || one(headers, "mcp-method") != Some("tools/call")
            || headers.contains_key("mcp-session-id")
        {
            return None;
        }
        let envelope: Envelope = serde_json::from_slice(body).ok()?;
        if envelope.jsonrpc != "2.0" || envelope.method != "tools/call" {
            return None;
        }
        let params = envelope.params;
        // An encoded name (`=?base64?...?=`) is rmcp's to decode.
        if one(headers, "mcp-name") != Some(&*params.name) || params.name.starts_with("=?") {
            return None;
        }
        // The fields 2026-07-28 requires (rmcp's `missing_required_keys`),
        // each read once.
        let meta = params.meta.as_ref()?;
        if meta.protocol_version().as_ref().map(|v| v.as_str()) != Some(v2026) {
            return None;
        }
        let capabilities = meta.client_capabilities()?;
        // Tasks outlive their request: rmcp's path keeps them.
        if capabilities.supports_tasks() {
            return None;
        }
        let (sender, messages) = tokio::sync::mpsc::unbounded_channel();
        let gone = CancellationToken::new();
        let caller = Caller {
            capabilities: Some(capabilities),
            modern: true,
            progress_token: meta.get_progress_token(),
            trace: crate::trace::parent_from(meta, headers),
            gone: gone.clone(),
            out: Outbound::Direct(sender.clone()),
            client,
            started: std::time::Instant::now(),
        };
        Some(DirectCall {
            id: envelope.id,
            params,
            caller,
            reply: sender,
            gone,
            messages,
        })
    }

    /// Runs the call and answers: its result as JSON, or an SSE stream
    /// when a notification comes first.
    pub(crate) async fn answer(self, server: &GadgetServer) -> Response {
        let DirectCall {
            id,
            params,
            caller,
            reply,
            gone,
            mut messages,
        } = self;
        let server = server.clone();
        // On a task of its own, so that a client going away raises the
        // abort signal and the call still ends as calls end (journaled,
        // counted), as it does under rmcp.
        // Boxed: the call's future is large, and a task moves its future
        // by value a few times on the way into its cell.
        tokio::spawn(Box::pin(async move {
            let message = match server.call(params, &caller).await {
                Ok(response) => ServerJsonRpcMessage::response(ServerResult::from(response), id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            };
            // The response is gone when the receiver is: nothing to tell.
            let _ = reply.send(message);
        }));
        let cancel_on_drop = gone.drop_guard();
        let Some(first) = messages.recv().await else {
            return internal_error();
        };
        if is_terminal(&first) {
            cancel_on_drop.disarm();
            let status = status_of(&first);
            return json_response(&first, status);
        }
        sse_response(first, messages, cancel_on_drop)
    }
}

fn is_terminal(message: &ServerJsonRpcMessage) -> bool {
    matches!(
        message,
        ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)
    )
}

/// The HTTP status of a terminal message, as rmcp maps it on the
/// per-request path.
fn status_of(message: &ServerJsonRpcMessage) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else {
        return StatusCode::OK;
    };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn json_response(message: &ServerJsonRpcMessage, status: StatusCode) -> Response {
    let Ok(body) = serde_json::to_vec(message) else {
        return internal_error();
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn internal_error() -> Response {
    let mut response = Response::new(Body::from("the call ended without a response\n"));
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// One SSE event carrying `message`.
fn event(message: &ServerJsonRpcMessage) -> Bytes {
    let data = serde_json::to_string(message).unwrap_or_default();
    Bytes::from(format!("data: {data}\n\n"))
}

/// `first`, then every message until the terminal one, as SSE; a comment
/// every [`SSE_KEEP_ALIVE`] of silence. Dropping the body (the client went
/// away) before the end raises the call's abort signal.
fn sse_response(
    first: ServerJsonRpcMessage,
    messages: UnboundedReceiver<ServerJsonRpcMessage>,
    cancel_on_drop: DropGuard,
) -> Response {
    struct Stream {
        messages: UnboundedReceiver<ServerJsonRpcMessage>,
        cancel_on_drop: Option<DropGuard>,
    }
    let first = futures::stream::once(std::future::ready(Ok::<_, Infallible>(event(&first))));
    let state = Stream {
        messages,
        cancel_on_drop: Some(cancel_on_drop),
    };
    let rest = futures::stream::unfold(state, |mut state| async move {
        state.cancel_on_drop.as_ref()?;
        let bytes = match tokio::time::timeout(SSE_KEEP_ALIVE, state.messages.recv()).await {
            Err(_) => Bytes::from_static(b":\n\n"),
            Ok(None) => return None,
            Ok(Some(message)) => {
                if is_terminal(&message)
                    && let Some(guard) = state.cancel_on_drop.take()
                {
                    guard.disarm();
                }
                event(&message)
            }
        };
        Some((Ok::<_, Infallible>(bytes), state))
    });
    use futures::StreamExt as _;
    let mut response = Response::new(Body::from_stream(first.chain(rest)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use gadget_core::client::ClientId;

    const CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

    fn headers(changes: &[(&'static str, Option<&'static str>)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "127.0.0.1:8080"),
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "Echo"),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        for (name, value) in changes {
            match value {
                Some(value) => headers.insert(*name, HeaderValue::from_static(value)),
                None => headers.remove(*name),
            };
        }
        headers
    }

    fn hosts() -> AllowedHosts {
        AllowedHosts::new(&["localhost".into(), "127.0.0.1".into(), "[::1]".into()])
    }

    #[tokio::test]
    async fn the_plain_stateless_call_is_taken() {
        let call = DirectCall::of(
            &headers(&[]),
            CALL.as_bytes(),
            &hosts(),
            ClientId::Anonymous(None),
        )
        .expect("taken");
        assert_eq!(call.id, RequestId::Number(3));
        assert_eq!(call.params.name, "Echo");
        assert!(call.caller.modern && call.caller.progress_token.is_none());
        for host in ["localhost", "LOCALHOST:1", "[::1]:9"] {
            let taken = DirectCall::of(
                &headers(&[("host", Some(host))]),
                CALL.as_bytes(),
                &hosts(),
                ClientId::Anonymous(None),
            );
            assert!(taken.is_some(), "{host}");
        }
    }

    #[tokio::test]
    async fn anything_the_sdk_would_read_otherwise_is_left_to_it() {
        let refused_headers: &[&[(&'static str, Option<&'static str>)]] = &[
            &[("host", Some("evil.example"))],
            &[("host", None)],
            &[("accept", Some("application/json"))],
            &[("accept", Some("application/json;q=0, text/event-stream"))],
            &[("content-type", Some("text/plain"))],
            &[("mcp-protocol-version", Some("2025-11-25"))],
            &[("mcp-protocol-version", None)],
            &[("mcp-method", Some("tools/list"))],
            &[("mcp-name", Some("Other"))],
            &[("mcp-name", None)],
            &[("mcp-session-id", Some("abc"))],
        ];
        for changes in refused_headers {
            let taken = DirectCall::of(
                &headers(changes),
                CALL.as_bytes(),
                &hosts(),
                ClientId::Anonymous(None),
            );
            assert!(taken.is_none(), "{changes:?}");
        }
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        for body in [
            // A batch, a notification, another method, another version.
            format!("[{CALL}]"),
            CALL.replace(r#""id":3,"#, ""),
            CALL.replace(r#""id":3"#, r#""id":null"#),
            CALL.replace(r#""jsonrpc":"2.0""#, r#""jsonrpc":"1.0""#),
            CALL.replace(r#""id":3,"#, r#""id":3,"extra":1,"#),
            CALL.replace(meta, r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#),
            CALL.replace(meta, r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}"#),
            CALL.replace(&format!(",{meta}"), ""),
            // The Tasks extension: tasks outlive the request.
            CALL.replace(
                r#""io.modelcontextprotocol/clientCapabilities":{}"#,
                r#""io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#,
            ),
            "not json".to_string(),
        ] {
            assert_ne!(body, CALL);
            let taken = DirectCall::of(&headers(&[]), body.as_bytes(), &hosts(), ClientId::Anonymous(None));
            assert!(taken.is_none(), "{body}");
        }
    }

    #[test]
    fn errors_keep_the_sdks_statuses() {
        let error = |code| {
            ServerJsonRpcMessage::error(
                rmcp::ErrorData::new(code, "x", None),
                Some(RequestId::Number(1)),
            )
        };
        assert_eq!(
            status_of(&error(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY)),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_of(&error(ErrorCode::METHOD_NOT_FOUND)),
            StatusCode::NOT_FOUND
        );
        assert_eq!(status_of(&error(ErrorCode::INVALID_PARAMS)), StatusCode::OK);
    }
}
