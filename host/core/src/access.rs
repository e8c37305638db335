//! What a tool may touch and what it says of itself, the same for every
//! kind of tool, so the front ends read one place: `describe`, and the
//! annotations MCP clients are shown.
//!
//! [`Access`] is a tool's *effective* access (for a WebAssembly gadget:
//! what its manifest asks for AND what the operator grants; for a
//! sub-agent: the model it completes with). [`Declared`] is what the tool's
//! author says of its effects. [`Access::effects`] combines them, the
//! access having the last word: a tool that may write a directory or reach
//! the network is neither read-only nor closed-world, whatever it says.

use serde::Serialize;

/// What a tool may touch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Access {
    /// Directories, at the paths the tool opens them by.
    pub files: Vec<FileAccess>,
    /// HTTP origins it may reach.
    pub http: Vec<String>,
    /// Configuration keys it may read (never their values).
    pub config: Vec<String>,
    /// Models it may complete with, `provider:model`.
    pub llm: Vec<String>,
    /// It runs outside the sandbox, bounded by no grant (another MCP
    /// server's tool): what it is, for a person deciding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside: Option<String>,
}

/// One directory a tool may open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileAccess {
    /// The path the tool opens it by.
    pub path: String,
    pub writable: bool,
}

/// What a tool's author declares about its effects (MCP's tool
/// annotations); unset means "not said".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Declared {
    /// It changes nothing outside itself.
    pub read_only: Option<bool>,
    /// It may destroy or overwrite something.
    pub destructive: Option<bool>,
    /// Calling twice with the same arguments does no more than once.
    pub idempotent: Option<bool>,
    /// It reaches things outside the host.
    pub open_world: Option<bool>,
    /// Whether a call may run as a task (MCP's Tasks extension).
    pub tasks: TaskSupport,
}

/// Whether a tool's calls may run as tasks: started, answered with a
/// handle at once, and polled (MCP's Tasks extension). The author says
/// which of its tools are long enough to be worth it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// Calls always run to their result within the request.
    #[default]
    Forbidden,
    /// A call runs as a task when the client supports tasks, else within
    /// the request.
    Optional,
    /// Calls run only as tasks: a client without tasks is refused.
    Required,
}

/// The effects a client is told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Effects {
    pub read_only: bool,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: bool,
}

impl Access {
    /// It may write a directory.
    pub fn writes(&self) -> bool {
        self.files.iter().any(|f| f.writable)
    }

    /// It may reach the network (HTTP, or a model).
    pub fn reaches_out(&self) -> bool {
        !self.http.is_empty() || !self.llm.is_empty()
    }

    /// What `declared` says, corrected by what the tool may really do:
    /// read-only only if it says so and can neither write nor reach out;
    /// destructive if it may write; open-world if it may reach out.
    pub fn effects(&self, declared: &Declared) -> Effects {
        let writes = self.writes();
        let network = self.reaches_out();
        Effects {
            read_only: declared.read_only.unwrap_or(false) && !writes && !network,
            destructive: match declared.destructive {
                Some(destructive) => Some(destructive || writes),
                None => writes.then_some(true),
            },
            idempotent: declared.idempotent,
            open_world: declared.open_world.unwrap_or(false) || network,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_access_has_the_last_word_over_what_a_tool_declares() {
        let says_harmless = Declared {
            read_only: Some(true),
            destructive: Some(false),
            idempotent: Some(true),
            open_world: Some(false),
            tasks: TaskSupport::Forbidden,
        };
        let none = Access::default();
        assert_eq!(
            none.effects(&says_harmless),
            Effects {
                read_only: true,
                destructive: Some(false),
                idempotent: Some(true),
                open_world: false
            }
        );
        let writes = Access {
            files: vec![FileAccess {
                path: "/data".into(),
                writable: true,
            }],
            ..Access::default()
        };
        let effects = writes.effects(&says_harmless);
        assert!(!effects.read_only && effects.destructive == Some(true) && !effects.open_world);
        let asks_a_model = Access {
            llm: vec!["openai:gpt-4o-mini".into()],
            ..Access::default()
        };
        let effects = asks_a_model.effects(&Declared::default());
        assert!(!effects.read_only && effects.open_world && effects.destructive.is_none());
    }
}
