//! What a call did through a door the host keeps: each HTTP request it
//! made (or was refused), each file operation in a granted directory, the
//! config keys it read, each completion it asked for. The runtime tells
//! them as they happen ([`crate::ledger::CallEvent::Effect`]); the audit
//! journal records them and `--json` shows them live.

use serde::Serialize;

/// One use of a door by a running call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "door", rename_all = "snake_case")]
pub enum Effect {
    /// An outgoing HTTP request (`wasi:http`).
    Http {
        method: String,
        /// `scheme://host:port`.
        origin: String,
        /// The path, without the query (which may carry secrets).
        path: String,
        /// The response's status, when one came.
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// Request body bytes sent.
        bytes_out: u64,
        /// Response body bytes the gadget read.
        bytes_in: u64,
        /// From the request to the end of the response body (or of the
        /// gadget's reading).
        duration_ms: f64,
        /// Why the host refused it (the grant that would allow it).
        #[serde(skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
        /// Why it failed after it was allowed (connection, deadline, ...).
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A file operation in a granted directory (`wasi:filesystem`).
    File {
        /// `open`, `create`, `read`, `write`, `mkdir`, `remove`, `rename`,
        /// `symlink` or `link`.
        op: &'static str,
        /// The path as the gadget sees it (under its grant's guest path).
        path: String,
        /// The same path on the host.
        host: String,
        /// Bytes read or written, for `read` and `write`.
        #[serde(skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
        /// The new path, for `rename` and `link`.
        #[serde(skip_serializing_if = "Option::is_none")]
        to: Option<String>,
        /// Why the host refused it (a read-only grant, a quota, a link
        /// that would leave the grant).
        #[serde(skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
        /// Why it failed otherwise (no such file, ...).
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The gadget read its configuration (`wasi:cli/environment`, which
    /// hands over every granted key at once): the keys, never the values.
    Config { keys: Vec<String> },
    /// More uses of a door than one call tells (its per-call cap): which
    /// door, and how many were not told.
    Omitted { of: &'static str, count: u64 },
    /// A completion through the `llm` import.
    Llm {
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        /// USD charged to the call.
        cost: f64,
        /// Why the host refused it (not granted, over budget).
        #[serde(skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
        /// Why it failed after it was allowed (the provider, the deadline).
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl Effect {
    /// The door's name (`http`, `file`, `config`, `llm`): the journal's
    /// event name.
    pub fn door(&self) -> &'static str {
        match self {
            Effect::Http { .. } => "http",
            Effect::File { .. } => "file",
            Effect::Config { .. } => "config",
            Effect::Omitted { .. } => "omitted",
            Effect::Llm { .. } => "llm",
        }
    }
}
