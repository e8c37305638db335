//! Who is calling, as one type: an authenticated subject (an access
//! token's `sub`), or anonymous with the connection or session the
//! request came on, when there is one.
//!
//! Everything that depends on the caller takes a [`ClientId`]: the
//! operator's rules and rate limits (which count an anonymous caller as
//! [`ANONYMOUS_CLIENT`]), the journal and spans (which name a subject
//! only), and what the host keeps between requests (tasks, ask and
//! approval states), which answers only the caller that made it
//! ([`ClientId::owns`]).

use std::sync::Arc;

/// The name an anonymous caller is counted under by rate limits and
/// shown as in messages.
pub const ANONYMOUS_CLIENT: &str = "(anonymous)";

/// Who made a request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum ClientId {
    /// The subject of an access token the front end checked.
    Subject(Arc<str>),
    /// No identity. `Some`: the connection or MCP session it came on
    /// (what ties its later requests to its earlier ones); `None`: a lone
    /// request that has neither.
    Anonymous(Option<Arc<str>>),
    /// No caller at all: the local user of a command (`gadget run`,
    /// `call`, `test`), whoever runs the binary.
    #[default]
    Local,
}

impl ClientId {
    /// An authenticated caller.
    pub fn subject(subject: impl Into<Arc<str>>) -> ClientId {
        ClientId::Subject(subject.into())
    }

    /// An anonymous caller on `channel` (a connection or session id).
    pub fn anonymous_on(channel: impl Into<Arc<str>>) -> ClientId {
        ClientId::Anonymous(Some(channel.into()))
    }

    /// The authenticated subject, if any: what the journal, spans and a
    /// rule's `client` see.
    pub fn subject_name(&self) -> Option<&str> {
        match self {
            ClientId::Subject(subject) => Some(subject),
            ClientId::Anonymous(_) | ClientId::Local => None,
        }
    }

    /// The name rate limits count this caller under: its subject, or
    /// [`ANONYMOUS_CLIENT`] for everyone without one.
    pub fn rate_key(&self) -> &str {
        self.subject_name().unwrap_or(ANONYMOUS_CLIENT)
    }

    /// Whether what `owner` made may be shown to or changed by this
    /// caller. A subject owns what it made on any connection; an anonymous
    /// caller owns only what was made on its own connection or session;
    /// a lone anonymous request (no channel) owns only what other lone
    /// anonymous requests made, since nothing tells them apart.
    pub fn owns(&self, owner: &ClientId) -> bool {
        self == owner
    }

    /// The caller as one string, for a state bound to it (a signed ask
    /// state): distinct for distinct callers.
    pub fn binding(&self) -> String {
        match self {
            ClientId::Subject(subject) => format!("sub:{subject}"),
            ClientId::Anonymous(Some(channel)) => format!("anon:{channel}"),
            ClientId::Anonymous(None) => "anon".into(),
            ClientId::Local => "local".into(),
        }
    }
}

impl std::fmt::Display for ClientId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.rate_key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_owns_only_what_it_made() {
        let alice = ClientId::subject("alice");
        let bob = ClientId::subject("bob");
        let conn_a = ClientId::anonymous_on("session-a");
        let conn_b = ClientId::anonymous_on("session-b");
        assert!(alice.owns(&ClientId::subject("alice")));
        assert!(!bob.owns(&alice));
        assert!(!conn_b.owns(&conn_a));
        assert!(!conn_a.owns(&alice) && !alice.owns(&conn_a));
        assert_eq!(alice.rate_key(), "alice");
        assert_eq!(conn_a.rate_key(), ANONYMOUS_CLIENT);
        assert_ne!(alice.binding(), ClientId::anonymous_on("alice").binding());
        assert_eq!(conn_a.subject_name(), None);
    }
}
