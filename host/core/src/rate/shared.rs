//! Rate-limit windows kept in a store every replica shares (gadget-mcp's
//! `state`, on Redis): the same rules, one exact count for all replicas.
//! This file is what such a store is; [`super::replicas`] says which
//! windows a call meets and what each is called in the store, and turns the
//! store's answer into an admission or a refusal. The store checks and
//! counts every window in one atomic step, as the in-memory windows are
//! checked under one lock. A store that cannot be
//! asked refuses the call (fail closed): a limit that cannot be counted is
//! never let through silently. Calls no rule counts never reach the store.
//!
//! A window's name holds no caller's name: a `client` rule's window is
//! named by a digest of the caller's identity.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use sha2::{Digest, Sha256};

/// How long a call refused because the store could not be asked is told to
/// wait: the store's own request bound is shorter, and a second is what a
/// reconnect takes.
pub const STORE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The store's answer: `None` when the call was admitted (and counted, if
/// asked), else the index of the window that waits longest and its wait;
/// `Err` with why the store could not answer.
pub type WindowsFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<(usize, Duration)>, String>> + Send + 'a>>;

/// One window a call meets in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedWindow {
    /// The window's name: the rule (its number and a digest of what it
    /// says, so replicas with another policy never share its count) and,
    /// for a `client` rule, a digest of the caller.
    pub key: String,
    pub calls: u32,
    pub period: Duration,
}

/// A store of windows the replicas share.
pub trait SharedWindows: Send + Sync {
    /// In one atomic step: when every window has room, counts the call in
    /// each (if `count`) and admits it; else counts it nowhere and names
    /// the window that waits longest.
    fn admit<'a>(&'a self, windows: &'a [SharedWindow], count: bool) -> WindowsFuture<'a>;
}

/// SHA-256 of `text`, hex.
pub(super) fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
