//! One upstream server's connection: started on first need, its tools
//! listed (and listed again when it says they changed), restarted with
//! backoff after it fails or dies, stopped on request. Its notifications
//! reach the host here: progress goes to the call it belongs to, logs to
//! the host's log, a changed tool list marks the tools stale.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
};
#[allow(deprecated, reason = "servers still send sampling/createMessage")]
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult};
use rmcp::model::{ElicitRequestParams, ElicitResult};
#[allow(deprecated, reason = "servers still send notifications/message")]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};

use super::elicitation::Asker;
use crate::processes::{ProcessGroup, SERVER_MARK_VAR, server_mark};
use gadget_core::ask::MAX_QUESTIONS_PER_ASK;
use rmcp::model::ProtocolVersion;
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};

use gadget_core::ledger::{CallEvent, CallObserver, LogEntry, LogLevel, LogSource, truncate};
use gadget_core::tool::Tool;

use super::oauth::{Authorizer, MAX_AUTHORIZATIONS};
use super::sampling::Sampling;
use super::spec::{Transport, UpstreamSpec, changed_sender};

/// Most tools taken from one server: a hostile server's listing cannot
/// flood the prompt or the registry (the rest are dropped, with a warning).
pub const MAX_TOOLS: usize = 256;
/// How long a server may take to start and list its tools: one that takes
/// longer is treated as failed (and retried with backoff).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long any other request to a server may wait for its answer (a
/// listing, a session's end): a server that never answers is a failure,
/// not a hang. A call's own bound is its deadline.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The first wait before a failed or dead server is started again; it
/// doubles with each failure in a row, up to [`MAX_RESTART_BACKOFF`].
pub const MIN_RESTART_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(30);
/// Progress notifications forwarded for one call: a flood past this is
/// dropped (the call goes on).
pub const MAX_PROGRESS_PER_CALL: u32 = 1000;
/// Log lines kept from one server per [`LOG_WINDOW`]: a flood past this is
/// counted, not written (one line says how many were dropped).
pub const MAX_LOGS_PER_WINDOW: u32 = 100;
pub const LOG_WINDOW: Duration = Duration::from_secs(10);
/// Log lines one call keeps in its report (those of its server while it
/// ran, past the window's cap).
pub const MAX_LOGS_PER_CALL: usize = 200;
/// Longest upstream log message kept, in bytes.
pub const MAX_LOG_BYTES: usize = 4 << 10;

/// Makes the served tool of one listed tool of a server (or says why it
/// is not served): the tool module's, handed in so that a connection
/// needs no knowledge of how its tools run.
pub type ToolMaker = fn(&Arc<Upstream>, rmcp::model::Tool) -> Result<Arc<dyn Tool>, String>;

/// What the connection's handler shares with the calls.
struct Shared {
    name: String,
    /// The running calls' observers, by the progress token of their request.
    progress: Mutex<HashMap<ProgressToken, ProgressSink>>,
    /// The server said its tools changed: list them again before the next use.
    tools_changed: AtomicBool,
    /// The server's log lines in the current window, for the flood cap.
    logs: Mutex<LogWindow>,
    /// Its sampling grant, if any.
    sampling: Option<Arc<Sampling>>,
    /// Who answers for each running call (its progress token, its id and
    /// name, the person): an elicitation goes to the newest.
    asking: Mutex<Vec<(ProgressToken, Asker)>>,
    /// The server itself, to list its tools again when they change.
    upstream: std::sync::OnceLock<std::sync::Weak<Upstream>>,
}

/// How many log lines a server sent in the current [`LOG_WINDOW`], and
/// how many were dropped.
struct LogWindow {
    started: Instant,
    kept: u32,
    dropped: u64,
}

struct ProgressSink {
    observer: Option<CallObserver>,
    /// What the call's report lists (the first [`MAX_PROGRESS_PER_CALL`]).
    seen: Vec<String>,
    /// The server's log lines while the call ran (the first
    /// [`MAX_LOGS_PER_CALL`]).
    logs: Vec<LogEntry>,
    /// When the call was sent: a log line goes to the newest call.
    started: Instant,
}

/// The host's side of the session: it takes notifications and answers
/// nothing it was not asked to (no sampling, no elicitation, no roots:
/// the capabilities it sends are empty).
#[derive(Clone)]
struct Handler {
    shared: Arc<Shared>,
}

// Logging and sampling are deprecated by SEP-2577; servers still use both.
#[allow(
    deprecated,
    reason = "servers still send notifications/message and sampling"
)]
impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        // Forms go to the person who answers the running call (declined
        // when no one does); URLs are not offered.
        capabilities.elicitation =
            Some(rmcp::model::ElicitationCapability::new().with_form(Default::default()));
        // Offered only to a server the operator granted a model.
        if self.shared.sampling.is_some() {
            capabilities.sampling = Some(Default::default());
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("gadget-host", env!("CARGO_PKG_VERSION")),
        )
    }

    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, rmcp::ErrorData>> + Send + '_ {
        let asker = self
            .shared
            .asking
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .map(|(_, asker)| asker.clone());
        let server = self.shared.name.clone();
        async move { Ok(super::elicitation::ask(&server, asker, request).await) }
    }

    fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<CreateMessageResult, rmcp::ErrorData>> + Send + '_ {
        let shared = self.shared.clone();
        async move {
            match &shared.sampling {
                Some(sampling) => sampling.answer(&shared.name, params).await,
                None => Err(rmcp::ErrorData::invalid_request(
                    format!(
                        "sampling is not granted to MCP server '{}' (the operator grants a model with [mcp-servers.{}] llm)",
                        shared.name, shared.name
                    ),
                    None,
                )),
            }
        }
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let mut sinks = self
            .shared
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(sink) = sinks.get_mut(&params.progress_token)
            && sink.seen.len() < MAX_PROGRESS_PER_CALL as usize
        {
            let mut text = match params.total {
                Some(total) => format!("{}/{}", params.progress, total),
                None => format!("{}", params.progress),
            };
            if let Some(message) = &params.message {
                text.push(' ');
                text.push_str(&truncate(message.clone(), MAX_LOG_BYTES));
            }
            if let Some(observer) = &sink.observer {
                observer(&CallEvent::Progress(text.clone()));
            }
            sink.seen.push(text);
        }
        std::future::ready(())
    }

    // What the server logs is the host's log of it.
    fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // A flood of logs costs the host one counter per line past the cap.
        {
            let mut window = self.shared.logs.lock().unwrap_or_else(|p| p.into_inner());
            if window.started.elapsed() >= LOG_WINDOW {
                if window.dropped > 0 {
                    tracing::warn!(
                        mcp_server = %self.shared.name,
                        "dropped {} log lines past {MAX_LOGS_PER_WINDOW} in {} s",
                        window.dropped,
                        LOG_WINDOW.as_secs()
                    );
                }
                *window = LogWindow {
                    started: Instant::now(),
                    kept: 0,
                    dropped: 0,
                };
            }
            if window.kept >= MAX_LOGS_PER_WINDOW {
                window.dropped += 1;
                return std::future::ready(());
            }
            window.kept += 1;
        }
        let data = match &params.data {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let message = truncate(data, MAX_LOG_BYTES);
        tracing::info!(
            mcp_server = %self.shared.name,
            level = ?params.level,
            logger = params.logger.as_deref().unwrap_or(""),
            "{message}"
        );
        // The server's session has no call to tie a line to: it goes to the
        // call sent last, as that call's log (shown live, kept in its report).
        let mut sinks = self
            .shared
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(sink) = sinks.values_mut().max_by_key(|sink| sink.started)
            && sink.logs.len() < MAX_LOGS_PER_CALL
        {
            let entry = LogEntry {
                level: match params.level {
                    LoggingLevel::Debug => LogLevel::Debug,
                    LoggingLevel::Info | LoggingLevel::Notice => LogLevel::Info,
                    LoggingLevel::Warning => LogLevel::Warn,
                    _ => LogLevel::Error,
                },
                message,
                fields: params.logger.as_ref().map_or(
                    serde_json::Value::Null,
                    |l| serde_json::json!({"logger": l}),
                ),
                source: LogSource::Gadget,
                at_ms: sink.started.elapsed().as_millis() as u64,
            };
            if let Some(observer) = &sink.observer {
                observer(&CallEvent::Log(entry.clone()));
            }
            sink.logs.push(entry);
        }
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // Listed again now (under the connection's lock, so a call waits
        // for the new list rather than racing it).
        self.shared.tools_changed.store(true, Ordering::Relaxed);
        if let Some(upstream) = self.shared.upstream.get().and_then(|u| u.upgrade()) {
            tokio::spawn(async move {
                let _ = upstream.peer().await;
            });
        }
        std::future::ready(())
    }
}

/// One attempt at a session with an HTTP server; a failure says whether
/// the server asked for authorization (its challenge).
async fn connect(
    handler: Handler,
    url: &str,
    bearer: Option<&str>,
    authorizer: &Authorizer,
) -> Result<RunningService<RoleClient, Handler>, (String, Option<String>)> {
    let transport = || {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url)
            .control_request_timeout(START_TIMEOUT);
        if let Some(token) = bearer {
            config = config.auth_header(token.to_string());
        }
        StreamableHttpClientTransport::with_client(authorizer.http(), config)
    };
    // Protocol 2026-07-28 first (`server/discover`, stateless requests), so
    // a server that dropped the handshake is reachable; a server that
    // answers it as an unknown method gets the 2025-11-25 handshake.
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let discover = match handler
        .clone()
        .serve_with_lifecycle(transport(), lifecycle)
        .await
    {
        Ok(running) => return Ok(running),
        Err(e) => e,
    };
    if let Some(challenge) = discover.auth_challenge() {
        return Err((discover.to_string(), Some(challenge.to_string())));
    }
    // A server that answers `server/discover` with something else than a
    // discovery or an error (some answer any method with an empty result)
    // is asked the old way, on a new connection.
    handler.serve(transport()).await.map_err(|e| {
        (
            format!(
                "{url} did not complete the MCP handshake: {e} (and server/discover: {discover})"
            ),
            e.auth_challenge().map(str::to_string),
        )
    })
}

pub(crate) use super::client::http_client;

/// Whether the server runs, and if not, when it may be tried again.
#[derive(Default)]
struct State {
    running: Option<RunningService<RoleClient, Handler>>,
    /// A stdio server's process group: ended whole with the session.
    group: Option<ProcessGroup>,
    /// Failures in a row (reset by a successful start).
    failures: u32,
    retry_at: Option<Instant>,
    last_error: Option<String>,
}

/// One upstream server.
pub struct Upstream {
    spec: UpstreamSpec,
    shared: Arc<Shared>,
    state: tokio::sync::Mutex<State>,
    tools: RwLock<Arc<Vec<Arc<dyn Tool>>>>,
    make_tool: ToolMaker,
    /// Set once the first listing was attempted: the tools are known (or
    /// the failure is).
    listed: AtomicBool,
    /// An HTTP server's OAuth side (made on first start).
    authorizer: tokio::sync::OnceCell<Arc<Authorizer>>,
}

impl Upstream {
    pub fn new(spec: UpstreamSpec, make_tool: ToolMaker) -> Arc<Upstream> {
        Arc::new_cyclic(|me| Upstream {
            shared: Arc::new(Shared {
                name: spec.name.clone(),
                progress: Mutex::new(HashMap::new()),
                tools_changed: AtomicBool::new(false),
                logs: Mutex::new(LogWindow {
                    started: Instant::now(),
                    kept: 0,
                    dropped: 0,
                }),
                sampling: spec.sampling.clone(),
                asking: Mutex::new(Vec::new()),
                upstream: std::sync::OnceLock::from(me.clone()),
            }),
            spec,
            state: tokio::sync::Mutex::new(State::default()),
            tools: RwLock::new(Arc::new(Vec::new())),
            make_tool,
            listed: AtomicBool::new(false),
            authorizer: tokio::sync::OnceCell::new(),
        })
    }

    pub fn spec(&self) -> &UpstreamSpec {
        &self.spec
    }

    /// Whether it was ever started (its tools, or its failure, are known).
    pub fn listed(&self) -> bool {
        self.listed.load(Ordering::Relaxed)
    }

    /// Its tools as last listed.
    pub fn tools(&self) -> Arc<Vec<Arc<dyn Tool>>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Starts the server if it is not running (and may be tried), and
    /// lists its tools if they are not known or changed.
    pub async fn ensure_started(self: &Arc<Self>) -> Result<(), String> {
        self.peer().await.map(|_| ())
    }

    /// A live session with the server, started (or restarted) if needed.
    pub(super) async fn peer(self: &Arc<Self>) -> Result<Peer<RoleClient>, String> {
        let mut state = self.state.lock().await;
        if let Some(running) = &state.running
            && !running.is_closed()
        {
            let peer = running.peer().clone();
            if self.shared.tools_changed.swap(false, Ordering::Relaxed) {
                // Relisted under the lock: calls wait for the new tools.
                match self.list_tools(&peer).await {
                    Ok(()) => {
                        changed_sender().send_modify(|n| *n = n.wrapping_add(1));
                    }
                    Err(why) => {
                        tracing::warn!(mcp_server = %self.spec.name, "listing its tools again: {why}");
                    }
                }
            }
            return Ok(peer);
        }
        if state.running.take().is_some() {
            tracing::warn!(mcp_server = %self.spec.name, "the server's session ended; starting it again");
        }
        if let Some(retry_at) = state.retry_at
            && Instant::now() < retry_at
        {
            return Err(format!(
                "MCP server '{}' is not running ({}); it is tried again in {} ms",
                self.spec.name,
                state.last_error.as_deref().unwrap_or("it failed"),
                retry_at
                    .saturating_duration_since(Instant::now())
                    .as_millis()
            ));
        }
        state.group = None;
        match tokio::time::timeout(START_TIMEOUT, self.start()).await {
            Ok(Ok((running, group))) => {
                let peer = running.peer().clone();
                state.running = Some(running);
                state.group = group;
                state.failures = 0;
                state.retry_at = None;
                state.last_error = None;
                self.shared.tools_changed.store(false, Ordering::Relaxed);
                let listed = self.list_tools(&peer).await;
                self.listed.store(true, Ordering::Relaxed);
                listed.map(|()| peer)
            }
            Ok(Err(why)) => Err(self.failed(&mut state, why)),
            Err(_) => Err(self.failed(
                &mut state,
                format!(
                    "it did not start and list its tools within {} s",
                    START_TIMEOUT.as_secs()
                ),
            )),
        }
    }

    /// Notes a failure to start; when to try again.
    fn failed(&self, state: &mut State, why: String) -> String {
        state.failures = state.failures.saturating_add(1);
        let backoff = MIN_RESTART_BACKOFF
            .saturating_mul(1 << state.failures.saturating_sub(1).min(16))
            .min(MAX_RESTART_BACKOFF);
        state.retry_at = Some(Instant::now() + backoff);
        state.last_error = Some(why.clone());
        self.listed.store(true, Ordering::Relaxed);
        format!("MCP server '{}' did not start: {why}", self.spec.name)
    }

    async fn start(
        &self,
    ) -> Result<(RunningService<RoleClient, Handler>, Option<ProcessGroup>), String> {
        let handler = Handler {
            shared: self.shared.clone(),
        };
        match &self.spec.transport {
            Transport::Stdio {
                program,
                args,
                env,
                dir,
            } => {
                let mut command = tokio::process::Command::new(program);
                // Killed with the session (and the host): never left behind.
                command
                    .args(args)
                    .env_clear()
                    .envs(env.iter().cloned())
                    .kill_on_drop(true);
                // In a process group of its own, so that what it starts
                // (npx starts node) is ended with it, not left behind; and
                // marked, so that what leaves the group (a new session, a
                // daemon) is found by its inherited environment and ended
                // too.
                #[cfg(unix)]
                command.process_group(0);
                let mark = server_mark();
                command.env(SERVER_MARK_VAR, &mark);
                if let Some(dir) = dir {
                    command.current_dir(dir);
                }
                // Its stderr is its own log, not the host's output.
                let (transport, _stderr) = rmcp::transport::TokioChildProcess::builder(command)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
                let group = transport.id().map(|pid| ProcessGroup::new(pid, mark));
                let running = handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("it did not complete the MCP handshake: {e}"))?;
                Ok((running, group))
            }
            Transport::Http { url, bearer, oauth } => {
                let authorizer = self
                    .authorizer
                    .get_or_try_init(|| async {
                        Authorizer::new(&self.spec.name, url, oauth.clone(), http_client()?)
                            .await
                            .map(Arc::new)
                    })
                    .await?;
                let mut authorizations = 0;
                loop {
                    let seen = authorizer.generation();
                    match connect(handler.clone(), url, bearer.as_deref(), authorizer).await {
                        Ok(running) => return Ok((running, None)),
                        Err((_, Some(challenge)))
                            if bearer.is_none() && authorizations < MAX_AUTHORIZATIONS =>
                        {
                            authorizations += 1;
                            authorizer
                                .authorize(&challenge, seen)
                                .await
                                .map_err(|e| format!("{url} asks for OAuth authorization; {e}"))?;
                        }
                        Err((why, _)) => return Err(why),
                    }
                }
            }
        }
    }

    /// For a request that met `challenge` (401 or 403) after being sent
    /// with authorization `seen`: authorizes, if this server is authorized
    /// with OAuth (not a fixed bearer token).
    pub(super) async fn authorize(&self, challenge: &str, seen: u64) -> Result<(), String> {
        match (&self.spec.transport, self.authorizer.get()) {
            (Transport::Http { bearer: None, .. }, Some(authorizer)) => {
                authorizer.authorize(challenge, seen).await
            }
            _ => Err("it is not authorized with OAuth (a bearer token is configured)".into()),
        }
    }

    /// Which authorization requests are sent with now (see
    /// [`Upstream::authorize`]).
    pub(super) fn authorization(&self) -> u64 {
        self.authorizer.get().map_or(0, |a| a.generation())
    }

    async fn list_tools(self: &Arc<Self>, peer: &Peer<RoleClient>) -> Result<(), String> {
        // Bounded like every request to it: a server that never answers
        // its listing must not hang `gadget list` (or anything else).
        let bound = self.spec.timeout.min(REQUEST_TIMEOUT);
        let mut authorizations = 0;
        let listed = loop {
            let seen = self.authorization();
            match tokio::time::timeout(bound, peer.list_all_tools()).await {
                Ok(Ok(listed)) => break listed,
                Ok(Err(e)) => match e.auth_challenge() {
                    Some(challenge) if authorizations < MAX_AUTHORIZATIONS => {
                        authorizations += 1;
                        self.authorize(challenge, seen)
                            .await
                            .map_err(|why| format!("tools/list failed: {e}; {why}"))?;
                    }
                    _ => return Err(format!("tools/list failed: {e}")),
                },
                Err(_) => {
                    return Err(format!(
                        "tools/list got no answer within {} ms",
                        bound.as_millis()
                    ));
                }
            }
        };
        let total = listed.len();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for tool in listed.into_iter().take(MAX_TOOLS) {
            match (self.make_tool)(self, tool) {
                Ok(tool)
                    if tools
                        .iter()
                        .any(|t| t.spec().name.eq_ignore_ascii_case(&tool.spec().name)) =>
                {
                    tracing::warn!(
                        mcp_server = %self.spec.name,
                        "tool '{}' is not served: another of its tools is served under that name",
                        tool.spec().name
                    );
                }
                Ok(tool) => tools.push(tool),
                Err(why) => tracing::warn!(mcp_server = %self.spec.name, "{why}"),
            }
        }
        if total > MAX_TOOLS {
            tracing::warn!(
                mcp_server = %self.spec.name,
                "the server lists {total} tools; only the first {MAX_TOOLS} are served"
            );
        }
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(tools);
        Ok(())
    }

    /// Keeps the progress of the request with `token` (and forwards it to
    /// `observer`) until [`Upstream::unwatch`].
    pub(super) fn watch(&self, token: ProgressToken, observer: Option<CallObserver>) {
        self.shared
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                token,
                ProgressSink {
                    observer,
                    seen: Vec::new(),
                    logs: Vec::new(),
                    started: Instant::now(),
                },
            );
    }

    /// `asker` answers the questions the server asks while the request
    /// with `token` runs.
    pub(super) fn asks(&self, token: ProgressToken, asker: Asker) {
        self.shared
            .asking
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((token, asker));
    }

    /// The answers to what a server asked in an `input_required` result
    /// (protocol 2026-07-28), by key: its elicitations go to `asker` (the
    /// call's person), its sampling to the server's grant, roots are none
    /// (the host names no roots). A question that cannot be answered is
    /// left out, so the server asks again or fails the call; so are those
    /// past the first [`MAX_QUESTIONS_PER_ASK`] of one round, which a person
    /// would otherwise be asked without end.
    pub(super) async fn answer_inputs(
        &self,
        asker: Option<Asker>,
        requests: rmcp::model::InputRequests,
    ) -> rmcp::model::InputResponses {
        use rmcp::model::InputRequest;
        let mut responses = rmcp::model::InputResponses::new();
        for (key, request) in requests.into_iter().take(MAX_QUESTIONS_PER_ASK) {
            let answer = match request {
                InputRequest::Elicitation(request) => {
                    let result =
                        super::elicitation::ask(&self.shared.name, asker.clone(), request.params)
                            .await;
                    serde_json::to_value(result).ok()
                }
                InputRequest::CreateMessage(request) => match &self.shared.sampling {
                    Some(sampling) => sampling
                        .answer(&self.shared.name, request.params)
                        .await
                        .ok()
                        .and_then(|r| serde_json::to_value(r).ok()),
                    None => None,
                },
                InputRequest::ListRoots(_) => Some(serde_json::json!({ "roots": [] })),
                _ => None,
            };
            if let Some(answer) = answer {
                responses.insert(key, answer);
            }
        }
        responses
    }

    /// The progress and the log lines the request got (and it asks no
    /// more).
    pub(super) fn unwatch(&self, token: &ProgressToken) -> (Vec<String>, Vec<LogEntry>) {
        self.shared
            .asking
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(asking, _)| asking != token);
        self.shared
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(token)
            .map(|sink| (sink.seen, sink.logs))
            .unwrap_or_default()
    }

    /// The session is known to be broken (a call saw its transport end):
    /// the next use starts the server again.
    pub(super) async fn broken(&self) {
        self.stop().await;
    }

    /// Ends the session (a stdio server's process group is ended with it).
    pub async fn stop(&self) {
        let mut state = self.state.lock().await;
        if let Some(running) = state.running.take() {
            // Bounded: a session that does not close is dropped anyway.
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, running.cancel()).await;
        }
        state.group = None;
    }
}
