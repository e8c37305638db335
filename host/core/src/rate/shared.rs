//! Rate-limit windows kept in a store every replica shares (gadget-mcp's
//! `state`, on Redis): the same rules, one exact count for all replicas.
//!
//! This side says which windows a call meets and what each is called in
//! the store, and turns the store's answer into an admission or a refusal;
//! the store checks and counts every window in one atomic step, as the
//! in-memory windows are checked under one lock. A store that cannot be
//! asked refuses the call (fail closed): a limit that cannot be counted is
//! never let through silently. Calls no rule counts never reach the store.
//!
//! A window's name holds no caller's name: a `client` rule's window is
//! named by a digest of the caller's identity.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{RateLimited, RateLimits, RateRule, RateScope};
use crate::client::ClientId;

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

impl RateLimits {
    /// Keeps the windows in `store` from now on (once, at start-up);
    /// false if they already were.
    pub fn share(&self, store: Arc<dyn SharedWindows>) -> bool {
        self.shared.set(store).is_ok()
    }

    /// The store the windows are kept in, if replicas share them.
    pub fn shared(&self) -> Option<&Arc<dyn SharedWindows>> {
        self.shared.get()
    }

    /// [`RateLimits::admit_any`], or for `client_rules_only`
    /// [`RateLimits::over_client_limit`] (then counted nowhere), against
    /// the windows in `store`.
    pub async fn admit_shared(
        &self,
        store: &dyn SharedWindows,
        names: &[&str],
        client: &ClientId,
        client_rules_only: bool,
    ) -> Result<(), RateLimited> {
        let matching = self.matching(names, |rule| {
            !client_rules_only || rule.spec.scope == RateScope::Client
        });
        if matching.is_empty() {
            return Ok(());
        }
        let client = client.rate_key();
        let caller = digest(client);
        let windows: Vec<SharedWindow> = matching
            .iter()
            .map(|&i| self.rules[i].shared_window(&caller))
            .collect();
        let (rule, refusal) = match store.admit(&windows, !client_rules_only).await {
            Ok(None) => return Ok(()),
            Ok(Some((index, wait))) => {
                let rule = &self.rules[matching[index.min(matching.len() - 1)]];
                (rule, rule.refusal(client, wait))
            }
            Err(why) => {
                let rule = &self.rules[matching[0]];
                let mut refusal = rule.refusal(client, STORE_RETRY_AFTER);
                refusal.unavailable = Some(why);
                (rule, refusal)
            }
        };
        rule.refused.fetch_add(1, Ordering::Relaxed);
        Err(refusal)
    }
}

impl RateRule {
    fn shared_window(&self, caller: &str) -> SharedWindow {
        let whose = match self.spec.scope {
            RateScope::Gadget => "all",
            RateScope::Client => caller,
        };
        let rule = digest(&format!(
            "{}\0{}\0{}\0{}",
            self.spec.gadget,
            self.spec.calls,
            self.spec.per_seconds,
            self.spec.scope.as_str()
        ));
        SharedWindow {
            key: format!("rate:{}:{}:{whose}", self.number, &rule[..16]),
            calls: self.spec.calls,
            period: self.period,
        }
    }
}

/// SHA-256 of `text`, hex.
fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::RateLimitSpec;
    use std::sync::Mutex;

    /// A store that answers what it is told to and keeps what it was asked.
    struct Scripted {
        answer: Result<Option<(usize, Duration)>, String>,
        asked: Mutex<Vec<(Vec<SharedWindow>, bool)>>,
    }

    impl SharedWindows for Scripted {
        fn admit<'a>(&'a self, windows: &'a [SharedWindow], count: bool) -> WindowsFuture<'a> {
            self.asked.lock().unwrap().push((windows.to_vec(), count));
            Box::pin(std::future::ready(self.answer.clone()))
        }
    }

    fn limits() -> RateLimits {
        RateLimits::new(vec![
            RateLimitSpec {
                gadget: "Fetch".into(),
                calls: 2,
                per_seconds: 60,
                scope: RateScope::Client,
            },
            RateLimitSpec {
                gadget: "*".into(),
                calls: 5,
                per_seconds: 1,
                scope: RateScope::Gadget,
            },
        ])
        .unwrap()
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        // The scripted store answers at once: one poll is enough.
        let mut future = std::pin::pin!(future);
        let waker = std::task::Waker::noop();
        match future
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
        {
            std::task::Poll::Ready(output) => output,
            std::task::Poll::Pending => panic!("the scripted store answers at once"),
        }
    }

    #[test]
    fn a_call_meets_every_matching_window_named_without_the_callers_name() {
        let store = Scripted {
            answer: Ok(None),
            asked: Mutex::default(),
        };
        let limits = limits();
        let alice = ClientId::subject("alice@example.com");
        block_on(limits.admit_shared(&store, &["Fetch"], &alice, false)).unwrap();
        block_on(limits.admit_shared(&store, &["Fetch"], &alice, true)).unwrap();
        let asked = store.asked.lock().unwrap();
        let (windows, count) = &asked[0];
        assert!(count);
        assert_eq!(windows.len(), 2);
        assert!(windows[0].key.starts_with("rate:1:"), "{}", windows[0].key);
        assert!(!windows[0].key.contains("alice"), "{}", windows[0].key);
        assert!(windows[1].key.ends_with(":all"), "{}", windows[1].key);
        assert_eq!(
            (windows[0].calls, windows[0].period),
            (2, Duration::from_secs(60))
        );
        // Peeking asks only the client rules and counts nothing.
        let (peeked, count) = &asked[1];
        assert!(!count);
        assert_eq!(peeked.len(), 1);
        assert_eq!(peeked[0], windows[0]);
    }

    #[test]
    fn the_stores_refusal_names_its_rule_and_an_unreachable_store_refuses() {
        let limits = limits();
        let bob = ClientId::subject("bob");
        let refusing = Scripted {
            answer: Ok(Some((1, Duration::from_millis(400)))),
            asked: Mutex::default(),
        };
        let refused =
            block_on(limits.admit_shared(&refusing, &["Fetch"], &bob, false)).unwrap_err();
        assert_eq!((refused.rule, refused.retry_after.as_millis()), (2, 400));
        let down = Scripted {
            answer: Err("connection refused".into()),
            asked: Mutex::default(),
        };
        let refused = block_on(limits.admit_shared(&down, &["Echo"], &bob, false)).unwrap_err();
        assert_eq!(refused.rule, 2);
        let reason = refused.reason();
        assert!(
            reason.contains("shared state store cannot be reached (connection refused)"),
            "{reason}"
        );
        assert!(
            reason.contains("refused rather than let through"),
            "{reason}"
        );
        assert_eq!(limits.refusals()[1].3, 2);
        // A request no rule counts never asks the store.
        block_on(limits.admit_shared(&down, &["Echo"], &bob, true)).unwrap();
        assert!(down.asked.lock().unwrap().len() == 1);
    }
}
