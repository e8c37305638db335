//! The operator's rate limits against windows the replicas share
//! ([`super::shared`]): which windows a call meets, each named without the
//! caller's name, and the store's answer as an admission or a refusal.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::shared::{STORE_RETRY_AFTER, SharedWindow, SharedWindows, digest};
use super::{RateLimited, RateLimits, RateRule, RateScope};
use crate::client::ClientId;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::RateLimitSpec;
    use crate::rate::WindowsFuture;
    use std::future::Future;
    use std::sync::Mutex;
    use std::time::Duration;

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
