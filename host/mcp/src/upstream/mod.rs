//! Other MCP servers' tools as gadget-host tools: `[mcp-servers.NAME]` in
//! the policy names a server (a program spoken to over stdio, or a
//! Streamable HTTP endpoint), and each of its tools becomes a [`Tool`] in
//! the one call path, so the policy's allow and deny lists, argument rules,
//! approvals, timeouts, output limiting, the audit journal and the spans
//! apply to it exactly as to a WebAssembly gadget.
//!
//! An upstream server is untrusted input like a gadget: it is started when
//! its tools are first needed (a listing, or a call of a name with its
//! prefix; a command that calls only gadgets never starts it), restarted
//! with backoff when it dies, stopped when the host exits; every answer it gives is bounded ([`MAX_TOOLS`],
//! [`MAX_RESULT_BYTES`], rmcp's line cap), a call that outlives its deadline
//! is cancelled upstream (`notifications/cancelled`), and what it asks of
//! the host is refused unless granted: sampling only within the model and
//! budget the operator gives that server (`llm`); an elicitation goes to
//! the person who answers the running call's questions (ask-human's
//! handler), and is declined when there is none.

mod connection;
mod elicitation;
mod sampling;
mod tool;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gadget_core::tool::{Tool, Tools};

pub use connection::{Upstream, end_every_server};
pub use sampling::Sampling;
pub use tool::UpstreamTool;

/// Most tools taken from one server: a hostile server's listing cannot
/// flood the prompt or the registry (the rest are dropped, with a warning).
pub const MAX_TOOLS: usize = 256;
/// Largest result taken from one call, in bytes of text: the rest is cut
/// with a note (the executor's output limit then applies as to any tool).
pub const MAX_RESULT_BYTES: usize = 1 << 20;
/// How long a server may take to start and list its tools: one that takes
/// longer is treated as failed (and retried with backoff).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long any other request to a server may wait for its answer (a
/// listing, a session's end): a server that never answers is a failure,
/// not a hang. A call's own bound is its deadline.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A call's deadline when the policy sets none.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
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

/// Bumped each time an upstream server's tools were listed again after it
/// said they changed: a front end with a session tells its client
/// (`notifications/tools/list_changed`).
pub fn changes() -> tokio::sync::watch::Receiver<u64> {
    changed_sender().subscribe()
}

fn changed_sender() -> &'static tokio::sync::watch::Sender<u64> {
    static CHANGES: std::sync::OnceLock<tokio::sync::watch::Sender<u64>> =
        std::sync::OnceLock::new();
    CHANGES.get_or_init(|| tokio::sync::watch::channel(0).0)
}

/// What an upstream tool's origin calls its server: `mcp:NAME`, where a
/// gadget's names its plugin.
pub const ORIGIN_PREFIX: &str = "mcp:";

/// How to reach one server.
#[derive(Debug, Clone)]
pub enum Transport {
    /// A program whose stdin and stdout speak MCP; it gets exactly `env`
    /// (nothing inherited) and runs in `dir`.
    Stdio {
        program: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        dir: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint, with a bearer token when the operator
    /// gave one.
    Http { url: String, bearer: Option<String> },
}

/// One `[mcp-servers.NAME]`, resolved by the front end.
#[derive(Debug, Clone)]
pub struct UpstreamSpec {
    pub name: String,
    /// Prepended to each of its tools' names (`NAME_` by default), so
    /// names never collide.
    pub prefix: String,
    pub transport: Transport,
    /// A call's deadline.
    pub timeout: Duration,
    /// Its `sampling/createMessage` requests are answered within this
    /// grant; `None`: refused (the host does not offer sampling).
    pub sampling: Option<Arc<Sampling>>,
}

impl UpstreamSpec {
    /// What the operator would recognise it by: the command or the URL.
    pub fn source(&self) -> String {
        match &self.transport {
            Transport::Stdio { program, args, .. } => {
                std::iter::once(program.display().to_string())
                    .chain(args.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

/// Every configured server's tools, as one set. Which tools are served at
/// all is the caller's filter (the policy's `[gadgets]` rules).
pub struct UpstreamTools {
    servers: Vec<Arc<Upstream>>,
    served: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl UpstreamTools {
    pub fn new(
        specs: Vec<UpstreamSpec>,
        served: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> UpstreamTools {
        UpstreamTools {
            servers: specs.into_iter().map(Upstream::new).collect(),
            served,
        }
    }

    pub fn servers(&self) -> &[Arc<Upstream>] {
        &self.servers
    }

    /// Starts the servers in `which` that were never started (all at
    /// once) and lists their tools: what a lookup needs first. It waits
    /// here, on the runtime's other threads; without a multi-threaded
    /// runtime nothing can start, and the tools are missing (a warning
    /// says so). A server that fails is a warning, and is tried again
    /// when its tools are next needed.
    fn start_unlisted(&self, which: &[&Arc<Upstream>]) {
        let unlisted: Vec<Arc<Upstream>> = which
            .iter()
            .filter(|server| !server.listed())
            .map(|server| Arc::clone(server))
            .collect();
        if unlisted.is_empty() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            tracing::warn!(
                "upstream MCP servers need a multi-threaded Tokio runtime to start; their tools are not served"
            );
            return;
        }
        let failures = tokio::task::block_in_place(|| handle.block_on(start_all(unlisted)));
        for (_, why) in failures {
            tracing::warn!("{why}");
        }
    }

    /// Stops every server (their processes end).
    pub async fn stop(&self) {
        for server in &self.servers {
            server.stop().await;
        }
    }
}

/// Starts `servers` and lists their tools, all at once: each failure as
/// (server, why).
async fn start_all(servers: Vec<Arc<Upstream>>) -> Vec<(String, String)> {
    let mut starting = tokio::task::JoinSet::new();
    for server in servers {
        starting.spawn(async move {
            let started = server.ensure_started().await;
            (server.spec().name.clone(), started)
        });
    }
    let mut failures = Vec::new();
    while let Some(joined) = starting.join_next().await {
        if let Ok((name, Err(why))) = joined {
            failures.push((name, why));
        }
    }
    failures.sort();
    failures
}

/// Servers start when their tools are first needed: a name with a
/// server's prefix starts that server only; a listing starts them all.
impl Tools for UpstreamTools {
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let lower = name.to_lowercase();
        let owners: Vec<&Arc<Upstream>> = self
            .servers
            .iter()
            .filter(|server| lower.starts_with(&server.spec().prefix.to_lowercase()))
            .collect();
        self.start_unlisted(&owners);
        owners
            .iter()
            .flat_map(|server| server.tools().iter().cloned().collect::<Vec<_>>())
            .filter(|tool| (self.served)(tool.name()))
            .find(|tool| tool.name().eq_ignore_ascii_case(name))
            .map(|tool| tool as Arc<dyn Tool>)
    }

    fn all(&self) -> Vec<Arc<dyn Tool>> {
        self.start_unlisted(&self.servers.iter().collect::<Vec<_>>());
        self.servers
            .iter()
            .flat_map(|server| server.tools().iter().cloned().collect::<Vec<_>>())
            .filter(|tool| (self.served)(tool.name()))
            .map(|tool| tool as Arc<dyn Tool>)
            .collect()
    }
}
