//! `gadget serve`: MCP over Streamable HTTP at `/mcp`, stateless between
//! calls (rmcp's stateless mode: no session lives in a replica, so any
//! replica answers any request; tasks and rate-limit windows go to the
//! store replicas share, with `--state`, [`crate::state`]), with what an
//! operator needs around it:
//!
//! - `/healthz` (the process answers) and `/readyz` (it takes calls; 503
//!   while draining, or while the shared store cannot be reached),
//!   `/metrics` in Prometheus' text format;
//! - a cap on concurrent tool calls: one more is refused at once with 503
//!   and `Retry-After`, never queued without bound;
//! - authentication ([`crate::auth`]): a shared bearer token, or JWT
//!   access tokens whose subject names the caller, and a refusal to listen
//!   beyond loopback without either; the `Host` header is checked against
//!   the allowed hosts (DNS rebinding);
//! - the operator's per-client rate limits: a `tools/call` over one is
//!   refused whole with 429 and `Retry-After` before it is read further;
//! - graceful shutdown: readiness fails and new calls are refused, calls in
//!   flight finish within the drain timeout (then their abort signal goes
//!   up), then the server stops;
//! - the direct path ([`crate::direct`]): the common stateless
//!   `tools/call` answered by the host once the guard has read it, every
//!   other request left to rmcp.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use gadget_core::tool::Tools;

use crate::direct::{AllowedHosts, DirectCall};
use crate::metrics::Metrics;
use crate::peek::{is_tool_call, over_client_limit};
use crate::server::GadgetServer;

use crate::direct::MCP_PATH;

/// Tool calls one replica runs at once unless told otherwise: each is an
/// instance with up to its memory limit, so this bounds a replica's memory
/// as much as its CPU.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 64;

/// How long a shutdown waits for calls in flight before cancelling them.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest request body read, bytes (rmcp's own cap too).
pub const MAX_REQUEST_BODY_BYTES: usize = 4 << 20;

/// What an overloaded replica tells a client to wait, seconds.
pub const OVERLOAD_RETRY_AFTER_SECONDS: u64 = 1;

/// How long a drained server, its last call answered, keeps answering
/// before the connections close: the last responses leave, and a client's
/// follow-up to its answer is still served (the official Python SDK lists
/// the tools right after a call's result, to check it against the output
/// schema; at 20 ms it met a closed port whenever it took longer).
const LAST_RESPONSES_WAIT: Duration = Duration::from_millis(250);

/// How long a client has to send a request's headers once it starts one
/// (and, on a kept-alive connection, once the previous response is sent).
/// Real clients send them in one packet; a client trickling bytes to hold
/// connections open is cut off here.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections open at once. Each costs a descriptor and a task; beyond
/// this a new connection is closed at once (a load balancer retries it
/// elsewhere), so a flood cannot exhaust the process's descriptors.
pub const MAX_OPEN_CONNECTIONS: usize = 1024;

/// What one connection may hold.
#[derive(Debug, Clone, Copy)]
struct ConnectionLimits {
    header_read_timeout: Duration,
    max_open: usize,
}

impl ConnectionLimits {
    const DEFAULT: ConnectionLimits = ConnectionLimits {
        header_read_timeout: HEADER_READ_TIMEOUT,
        max_open: MAX_OPEN_CONNECTIONS,
    };
}

/// How long the last connections get to finish their responses once the
/// drain is over.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The pause after a failed accept (usually: out of descriptors), so the
/// loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How long cancelled calls get to end after the drain timeout: the
/// gadgets' grace period is shorter.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// How a server is run.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Every request must carry `Authorization: Bearer TOKEN`.
    pub auth_token: Option<BearerToken>,
    /// Every request must carry a JWT access token these keys verify; its
    /// subject is the caller's identity.
    pub jwt: Option<Arc<crate::identity::JwtAuth>>,
    pub max_concurrent_calls: usize,
    pub drain_timeout: Duration,
    /// `Host` values accepted besides loopback ones (public names).
    pub allowed_hosts: Vec<String>,
    /// A second address serving `/metrics` (and `/healthz`) without the
    /// token, for a scraper inside the cluster that has none; the MCP port
    /// keeps its own, authenticated, `/metrics`.
    pub metrics_listen: Option<SocketAddr>,
    /// The operator's approval rules, and the key approval states are
    /// signed with (the same on every replica).
    pub rules: Arc<gadget_core::approval::Rules>,
    pub approval_key: crate::approval::ApprovalKey,
    /// The operator's rate limits: a call over one is refused as
    /// `rate-limited`; a request over a per-client one, with HTTP 429.
    pub rates: Option<Arc<gadget_core::rate::RateLimits>>,
    /// The audit journal every call is recorded in, if any.
    pub journal: Option<Arc<gadget_exec::audit::Journal>>,
    /// Keep a session per client of protocol 2025-11-25 and older, so the
    /// server can ask it mid-call (elicitation, sampling, roots). A
    /// session lives in one replica; clients of 2026-07-28 are served
    /// statelessly either way.
    pub sessions: bool,
    /// The store replicas share tasks and rate-limit windows in
    /// (`--state`); `None`: this replica's memory.
    pub state: Option<Arc<crate::state::StateStore>>,
}

/// A configured bearer token, checked when it is made: trimmed (a token
/// read from a file or a Kubernetes secret often ends in a newline), never
/// empty, and only characters a header can carry. Once one exists, the
/// guard's expected header value is built from it without a fallible step,
/// so a configured token can never turn into "no authentication".
#[derive(Clone)]
pub struct BearerToken {
    header: HeaderValue,
}

/// Why a configured token cannot be used: a start-up error, never a
/// silent "no authentication".
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the token is empty (after trimming whitespace)")]
    Empty,
    #[error(
        "the token holds a character a bearer token cannot carry (at byte {0}: spaces, control characters and non-ASCII are refused)"
    )]
    InvalidCharacter(usize),
}

impl BearerToken {
    pub fn new(raw: &str) -> Result<BearerToken, TokenError> {
        let token = raw.trim();
        if token.is_empty() {
            return Err(TokenError::Empty);
        }
        // RFC 6750's b64token is narrower; any visible ASCII is accepted so
        // that operators' existing tokens work, nothing else.
        if let Some(at) = token.bytes().position(|b| !b.is_ascii_graphic()) {
            return Err(TokenError::InvalidCharacter(at));
        }
        let header = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| TokenError::InvalidCharacter(0))?;
        Ok(BearerToken { header })
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error(
        "refusing to listen on {0} without authentication: set a token with --auth-token-env VAR, or check access tokens with --auth-jwks (or listen on 127.0.0.1)"
    )]
    Unauthenticated(SocketAddr),
    #[error(
        "a shared token and access tokens were both configured: choose one (--auth-token-env or --auth-jwks)"
    )]
    TwoAuthentications,
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the server stopped: {0}")]
    Serve(#[source] std::io::Error),
}

struct Shared {
    metrics: Arc<Metrics>,
    server: GadgetServer,
    calls: Arc<Semaphore>,
    auth: Arc<crate::auth::Auth>,
    draining: AtomicBool,
    /// The `Host` values the direct path accepts (rmcp's list).
    hosts: AllowedHosts,
    /// The shared store, which must answer for the replica to be ready.
    state: Option<Arc<crate::state::StateStore>>,
}

/// Serves until `stop` is cancelled (or SIGTERM / Ctrl-C), then drains.
/// `ready` is told the bound address once the server accepts requests.
pub async fn serve(
    tools: Arc<dyn Tools>,
    options: ServeOptions,
    stop: CancellationToken,
    reload: Option<crate::Reload>,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let auth = Arc::new(match (&options.auth_token, &options.jwt) {
        (Some(_), Some(_)) => return Err(ServeError::TwoAuthentications),
        (None, Some(jwt)) => crate::auth::Auth::Jwt(jwt.clone()),
        (Some(token), None) => crate::auth::Auth::Token(token.header.clone()),
        (None, None) => crate::auth::Auth::Open,
    });
    if !options.listen.ip().is_loopback() && auth.is_open() {
        return Err(ServeError::Unauthenticated(options.listen));
    }
    // Before the address is bound (and told): a SIGHUP from then on reloads.
    let hangups = crate::Hangups::listen();
    let metrics = Arc::new(Metrics::new());
    let calls_cancelled = CancellationToken::new();
    let server = GadgetServer::new(tools, metrics.clone())
        .with_shutdown(calls_cancelled.clone())
        .with_approvals(options.rules.clone(), options.approval_key.clone())
        .with_rates(options.rates.clone())
        .with_journal(options.journal.clone())
        .with_server_requests(options.sessions);
    let server = match &options.state {
        Some(store) => server.with_state(store.clone()),
        None => server,
    };
    // The lease and the tasks' channel, until the calls have drained.
    let state_stop = CancellationToken::new();
    let keeping = server
        .tasks
        .shared()
        .map(|tasks| tokio::spawn(tasks.clone().keep(state_stop.clone())));
    // Stateless clients list the tools again when they want them: a reload
    // needs no notification here.
    if let Some(reload) = reload {
        crate::reload_on_sighup(server.clone(), reload, || Box::pin(async {}), hangups);
    }
    let shared_server = server.clone();
    let mut allowed_hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "[::1]".to_string(),
    ];
    allowed_hosts.extend(options.allowed_hosts.iter().cloned());
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = options.sessions;
    config.json_response = true;
    let hosts = AllowedHosts::new(&allowed_hosts);
    config.allowed_hosts = allowed_hosts;
    config.max_request_body_bytes = MAX_REQUEST_BODY_BYTES;
    // rmcp's own token ends its sessions: only once the drain is over, so
    // a cancelled call's answer still reaches its client.
    let sessions_end = CancellationToken::new();
    config.cancellation_token = sessions_end.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(server.for_session()),
        LocalSessionManager::default().into(),
        config,
    );
    let shared = Arc::new(Shared {
        metrics,
        server: shared_server,
        calls: Arc::new(Semaphore::new(options.max_concurrent_calls.max(1))),
        auth: auth.clone(),
        draining: AtomicBool::new(false),
        hosts,
        state: options.state.clone(),
    });
    let guarded = axum::Router::new()
        .nest_service(MCP_PATH, mcp)
        .route("/metrics", axum::routing::get(metrics_page))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard));
    let metadata = axum::Router::new()
        .route(
            crate::auth::RESOURCE_METADATA_PATH,
            axum::routing::get(crate::auth::resource_metadata),
        )
        .route(
            &format!("{}{MCP_PATH}", crate::auth::RESOURCE_METADATA_PATH),
            axum::routing::get(crate::auth::resource_metadata),
        )
        .with_state(auth);
    let router = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .route("/readyz", axum::routing::get(readyz))
        .merge(guarded)
        .with_state(shared.clone())
        .merge(metadata);
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: options.listen,
            source,
        })?;
    let bound = listener.local_addr().map_err(ServeError::Serve)?;
    if let Some(addr) = options.metrics_listen {
        serve_metrics(addr, shared.clone()).await?;
    }
    ready(bound);

    let drained = drain(
        shared.clone(),
        stop,
        options.drain_timeout,
        calls_cancelled.clone(),
    );
    accept_until(listener, router, ConnectionLimits::DEFAULT, drained).await;
    calls_cancelled.cancel();
    sessions_end.cancel();
    state_stop.cancel();
    if let Some(keeping) = keeping {
        let _ = keeping.await;
    }
    Ok(())
}

/// Serves `/metrics` (no token) and `/healthz` on `addr` too: read-only
/// figures, ended with the process.
async fn serve_metrics(addr: SocketAddr, shared: Arc<Shared>) -> Result<(), ServeError> {
    let metrics_listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let metrics_router = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics_page))
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .with_state(shared);
    if let Ok(at) = metrics_listener.local_addr() {
        tracing::info!("metrics at http://{at}/metrics (no token)");
    }
    tokio::spawn(accept_until(
        metrics_listener,
        metrics_router,
        ConnectionLimits::DEFAULT,
        std::future::pending(),
    ));
    Ok(())
}

/// Waits for `stop` (or SIGTERM / Ctrl-C), then drains: readiness fails
/// (the load balancer stops sending), new calls are refused with 503
/// (clients retry elsewhere), the listener stays open for the calls in
/// flight and their sessions; when they are done, or at the drain timeout
/// (then their abort signal goes up and they get a moment to end), the
/// server stops.
async fn drain(
    shared: Arc<Shared>,
    stop: CancellationToken,
    drain_timeout: Duration,
    cancel_calls: CancellationToken,
) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = terminate() => {}
    }
    shared.draining.store(true, Ordering::SeqCst);
    tracing::info!("draining: calls in flight get {drain_timeout:?}");
    let idle = shared.metrics.until_idle();
    if tokio::time::timeout(drain_timeout, idle).await.is_err() {
        cancel_calls.cancel();
        let _ = tokio::time::timeout(CANCEL_GRACE, shared.metrics.until_idle()).await;
    }
    // Let the last responses leave before the connections close.
    tokio::time::sleep(LAST_RESPONSES_WAIT).await;
}

/// Accepts connections until `shutdown` completes, then lets each finish
/// the request it is serving (idle ones close at once), for at most
/// `CLOSE_GRACE`.
///
/// Not `axum::serve`: it sets no timer, so a client that trickles header
/// bytes (or opens a connection and says nothing) holds a connection and a
/// task forever. Here each connection has `header_read_timeout` to send a
/// request's headers, and at most `max_open` are open at once.
async fn accept_until(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let ConnectionLimits {
        header_read_timeout,
        max_open,
    } = limits;
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;

    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let open = Arc::new(Semaphore::new(max_open));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut at_cap = false;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors or a connection reset before it
                    // was accepted: neither ends the server.
                    tracing::warn!("accepting a connection failed: {err}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(slot) = open.clone().try_acquire_owned() else {
            // Once per stretch at the cap, not once per connection: a flood
            // must not become a flood of log lines.
            if !at_cap {
                at_cap = true;
                tracing::warn!(
                    "refusing connections (the first from {peer}): {max_open} are open (MAX_OPEN_CONNECTIONS)"
                );
            }
            continue;
        };
        at_cap = false;
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!("connection from {peer} ended: {err}");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(CLOSE_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {CLOSE_GRACE:?}: closing them");
    }
}

/// SIGTERM (what orchestrators send) or Ctrl-C.
async fn terminate() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    if shared.draining.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    // A replica that cannot reach the shared store cannot answer for a
    // task or count a limited call: take it out of rotation meanwhile.
    if let Some(store) = &shared.state
        && let Err(e) = store.ping().await
    {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {e}\n")).into_response();
    }
    "ready\n".into_response()
}

async fn metrics_page(State(shared): State<Arc<Shared>>) -> Response {
    let mut page = shared.metrics.render(shared.server.served().all().len());
    if let Some(rates) = &shared.server.rates {
        crate::metrics::render_rates(&mut page, rates);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], page).into_response()
}

/// Authentication, then the call cap: a `tools/call` takes a permit for as
/// long as its response is being sent, or is refused with 503.
async fn guard(State(shared): State<Arc<Shared>>, mut request: Request, next: Next) -> Response {
    let identity = match shared.auth.check(request.headers()).await {
        Ok(identity) => identity,
        Err(refused) => {
            shared.metrics.refused_unauthorized();
            return refused;
        }
    };
    // A stateless request (the direct path takes none with a session)
    // is anonymous on nothing, unless authenticated.
    let client = match &identity {
        Some(identity) => gadget_core::client::ClientId::Subject(identity.0.clone()),
        None => gadget_core::client::ClientId::Anonymous(None),
    };
    if let Some(identity) = identity {
        // rmcp hands the request's parts to the call: the identity rides
        // along.
        request.extensions_mut().insert(identity);
    }
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_REQUEST_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is too large\n",
            )
                .into_response();
        }
    };
    // The common stateless call, answered here; anything else is rmcp's.
    let direct = (parts.uri.path() == MCP_PATH)
        .then(|| DirectCall::of(&parts.headers, &bytes, &shared.hosts, client.clone()))
        .flatten();
    if parts.uri.path() == MCP_PATH {
        shared.metrics.request(direct.is_some());
    }
    let is_call = direct.is_some() || is_tool_call(&bytes);
    if !is_call {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    }
    if let Some(limited) = over_client_limit(&shared.server, direct.as_ref(), &bytes, &client).await
    {
        shared.metrics.refused_rate_limited();
        // A store that could not be asked is this side's fault, not the
        // caller's rate: 503, so a balancer may try another replica.
        let status = match limited.unavailable {
            Some(_) => StatusCode::SERVICE_UNAVAILABLE,
            None => StatusCode::TOO_MANY_REQUESTS,
        };
        return (
            status,
            [(header::RETRY_AFTER, limited.retry_after_secs().to_string())],
            format!("rate-limited: {}\n", limited.reason()),
        )
            .into_response();
    }
    if shared.draining.load(Ordering::SeqCst) {
        shared.metrics.refused_overload();
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                header::RETRY_AFTER,
                OVERLOAD_RETRY_AFTER_SECONDS.to_string(),
            )],
            "draining: this replica is shutting down; retry on another\n",
        )
            .into_response();
    }
    let Ok(permit) = shared.calls.clone().try_acquire_owned() else {
        shared.metrics.refused_overload();
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                header::RETRY_AFTER,
                OVERLOAD_RETRY_AFTER_SECONDS.to_string(),
            )],
            "overloaded: every call slot is taken; retry shortly (or on another replica)\n",
        )
            .into_response();
    };
    let response = match direct {
        Some(call) => call.answer(&shared.server).await,
        None => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    };
    response.map(|body| {
        Body::new(PermitBody {
            body,
            _permit: permit,
        })
    })
}

/// A response body that holds a call slot until it has been sent.
struct PermitBody {
    body: Body,
    _permit: OwnedSemaphorePermit,
}

impl http_body::Body for PermitBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;
