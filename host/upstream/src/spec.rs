//! What the operator configured for one upstream MCP server, and the
//! names and signals every part of the upstream module shares.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::oauth::OAuthSpec;
use super::sampling::Sampling;

/// A call's deadline when the policy sets none.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// What an upstream tool's origin calls its server: `mcp:NAME`, where a
/// gadget's names its plugin.
pub const ORIGIN_PREFIX: &str = "mcp:";

/// Bumped each time an upstream server's tools were listed again after it
/// said they changed: a front end with a session tells its client
/// (`notifications/tools/list_changed`).
pub fn changes() -> tokio::sync::watch::Receiver<u64> {
    changed_sender().subscribe()
}

pub(super) fn changed_sender() -> &'static tokio::sync::watch::Sender<u64> {
    static CHANGES: std::sync::OnceLock<tokio::sync::watch::Sender<u64>> =
        std::sync::OnceLock::new();
    CHANGES.get_or_init(|| tokio::sync::watch::channel(0).0)
}

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
    /// gave one; else authorized with OAuth when the server asks for it.
    Http {
        url: String,
        bearer: Option<String>,
        oauth: OAuthSpec,
    },
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
