//! # gadget-upstream
//!
//! The host as an MCP client: other MCP servers' tools as gadget-host
//! tools (re-exported by gadget-mcp as `gadget_mcp::upstream`). Its own
//! crate: a client of other servers, with OAuth, shares nothing with the
//! server the host is, but the HTTP client its requests go out with.
//!
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
//! handler), and is declined when there is none. A server reached over
//! HTTP that asks for OAuth is authorized ([`oauth`](self::Authorizer)):
//! at once when its authorization server grants without a person, else by
//! a person at a terminal (`gadget login NAME`), the tokens kept.

mod client;
mod connection;
mod elicitation;
mod oauth;
mod processes;
mod sampling;
mod spec;
mod tool;

use std::sync::Arc;

use gadget_core::tool::{Tool, Tools};

pub use client::http_client_builder;
pub use connection::{
    LOG_WINDOW, MAX_LOG_BYTES, MAX_LOGS_PER_CALL, MAX_LOGS_PER_WINDOW, MAX_PROGRESS_PER_CALL,
    MAX_RESTART_BACKOFF, MAX_TOOLS, MIN_RESTART_BACKOFF, REQUEST_TIMEOUT, START_TIMEOUT, Upstream,
};
pub use oauth::{
    AUTHORIZATION_PROBE_TIMEOUT, AUTHORIZATION_WAIT, Authorizer, CLIENT_NAME, MAX_AUTHORIZATIONS,
    MAX_CALLBACK_REQUEST_BYTES, OAuthSpec, ShowAuthorization, ShowFn,
};
pub use processes::{SERVER_MARK_VAR, end_every_server};
pub use sampling::Sampling;
pub use spec::{DEFAULT_CALL_TIMEOUT, ORIGIN_PREFIX, Transport, UpstreamSpec, changes};
pub use tool::{MAX_INPUT_ROUNDS, MAX_RESULT_BYTES, UpstreamTool};

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
            servers: specs
                .into_iter()
                .map(|spec| Upstream::new(spec, UpstreamTool::served))
                .collect(),
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

impl UpstreamTools {
    /// Whether a gadget pattern of the operator's (`*` and `?` globs)
    /// could name a tool of one of these servers, told from their
    /// prefixes alone: nothing is started to list the tools. Errs on the
    /// side of yes (`git*` may name `github_create_issue`).
    pub fn may_serve(&self, pattern: &str) -> bool {
        let pattern = pattern.to_lowercase();
        let literal = pattern
            .split(['*', '?'])
            .next()
            .unwrap_or_default()
            .to_string();
        let wild = literal.len() < pattern.len();
        self.servers.iter().any(|server| {
            let prefix = server.spec().prefix.to_lowercase();
            literal.starts_with(&prefix) || (wild && prefix.starts_with(&literal))
        })
    }
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
