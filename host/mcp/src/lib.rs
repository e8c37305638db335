//! gadget-mcp: the Model Context Protocol front end of gadget-host. Every
//! loaded, granted, allowed gadget is an MCP tool ([`server`]), served over
//! stdio (`gadget mcp`) or Streamable HTTP (`gadget serve`, [`http`]) with
//! the official Rust SDK, rmcp. The HTTP server is stateless between calls,
//! so an operator runs as many replicas as the load needs; it has health
//! and readiness endpoints, Prometheus [`metrics`], a cap on concurrent
//! calls, bearer-token authentication and graceful shutdown. Replicas
//! share their tasks and rate limits through a store ([`state`]).

pub mod approval;
mod ask;
mod auth;
mod call;
mod caller;
mod catalog;
mod content;
mod direct;
pub mod http;
pub mod identity;
mod inputs;
mod logs;
pub mod metrics;
mod peek;
mod replay;
pub mod server;
pub mod state;
pub mod stdio;
mod task_call;
pub(crate) mod tasks;
mod trace;
/// The host as an MCP client of other servers, its own crate.
pub use gadget_upstream as upstream;

pub use server::GadgetServer;

use std::sync::Arc;

/// Loads the plugins again (on SIGHUP): the tools to serve now, or `None`
/// when the reload failed (the old ones stay; the caller has said why).
/// The CLI hands it in, so this crate knows no runtime.
pub type Reload = Arc<
    dyn Fn() -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Option<Arc<dyn gadget_core::tool::Tools>>> + Send>,
        > + Send
        + Sync,
>;

/// The SIGHUPs sent to this process from the moment it is made: taken
/// before the tools are served, so that one sent the moment they are (an
/// operator's reload right after start) is neither lost nor, before any
/// handler, the default action that ends the process.
pub struct Hangups(#[cfg(unix)] Option<tokio::signal::unix::Signal>);

impl Hangups {
    /// Starts listening (within a tokio runtime).
    pub fn listen() -> Hangups {
        #[cfg(unix)]
        {
            Hangups(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok())
        }
        #[cfg(not(unix))]
        Hangups()
    }
}

/// Reloads on every SIGHUP, serves the new tools, and tells `changed`
/// (a client to notify). Runs until the process ends.
pub fn reload_on_sighup(
    server: GadgetServer,
    reload: Reload,
    changed: impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
    + Send
    + 'static,
    hangups: Hangups,
) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let Some(mut hangups) = hangups.0 else {
            return;
        };
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: loading the plugins again");
            match reload().await {
                Some(tools) => {
                    let count = tools.all().len();
                    if count == 0 {
                        tracing::warn!("reloaded: no tools to serve (clients see an empty list)");
                    } else {
                        tracing::info!("reloaded: {count} tools");
                    }
                    server.replace_tools(tools);
                    changed().await;
                }
                None => tracing::warn!(
                    "reload failed (see above): still serving the tools loaded before"
                ),
            }
        }
    });
    #[cfg(not(unix))]
    let _ = (server, reload, changed, hangups);
}
