//! What a call did through a door the host keeps: each HTTP request it
//! made (or was refused), each file operation in a granted directory, the
//! config keys it read, each completion it asked for. The runtime tells
//! them as they happen ([`crate::ledger::CallEvent::Effect`]); the audit
//! journal records them and `--json` shows them live.

use serde::{Deserialize, Serialize};

/// A door a call goes through that the host keeps, and counts refusals
/// at: the call itself, its HTTP requests, its file operations, its
/// config, its completions, and its approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Door {
    Call,
    Http,
    File,
    Config,
    Llm,
    Approval,
    /// The count of uses of a door past its per-call cap.
    Omitted,
}

impl Door {
    /// The name in records, metrics and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Door::Call => "call",
            Door::Http => "http",
            Door::File => "file",
            Door::Config => "config",
            Door::Llm => "llm",
            Door::Approval => "approval",
            Door::Omitted => "omitted",
        }
    }
}

impl std::fmt::Display for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A file operation in a granted directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileOp {
    Open,
    Create,
    Read,
    Write,
    Mkdir,
    Remove,
    Rename,
    Symlink,
    Link,
}

impl FileOp {
    /// The name in records and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            FileOp::Open => "open",
            FileOp::Create => "create",
            FileOp::Read => "read",
            FileOp::Write => "write",
            FileOp::Mkdir => "mkdir",
            FileOp::Remove => "remove",
            FileOp::Rename => "rename",
            FileOp::Symlink => "symlink",
            FileOp::Link => "link",
        }
    }
}

impl std::fmt::Display for FileOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One use of a door by a running call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        op: FileOp,
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
    Omitted { of: Door, count: u64 },
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
    /// The door it went through: the journal's event name.
    pub fn door(&self) -> Door {
        match self {
            Effect::Http { .. } => Door::Http,
            Effect::File { .. } => Door::File,
            Effect::Config { .. } => Door::Config,
            Effect::Omitted { .. } => Door::Omitted,
            Effect::Llm { .. } => Door::Llm,
        }
    }
}
