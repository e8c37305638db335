//! The operator's rate limits (`[[rate-limits]]`): at most `calls` calls
//! of the gadgets a rule names in any `per-seconds` window, counted for
//! every caller together (`scope = "gadget"`) or for each caller apart
//! (`scope = "client"`, by the caller's identity). A call over a limit is
//! refused at once, never queued, with the time after which it would be
//! admitted.
//!
//! The window is exact, not a token bucket: a rule keeps the times of the
//! last `calls` calls it admitted, and a call is admitted only when the
//! oldest of them is a whole period old. So "10 per second" never lets an
//! eleventh call through within any second, however the calls bunch.
//! Every rule that matches a call must admit it, and all are checked and
//! counted under one lock: concurrent calls cannot slip past a limit, and
//! a call one rule refuses takes no place in another's window.
//!
//! Replicas of `gadget serve` that share a store keep the windows there
//! instead ([`shared`]): the same rules and the same exact count, once for
//! all replicas.

mod replicas;
mod shared;

pub use shared::{STORE_RETRY_AFTER, SharedWindow, SharedWindows, WindowsFuture};

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::glob::glob_matches;

/// Most calls one rule may allow per window: the rule keeps one time per
/// call, so this bounds its memory (16 bytes each, per caller).
pub const MAX_RATE_CALLS: u32 = 100_000;

/// Longest window a rule may count over: a day. Longer budgets are
/// quotas, which a restart would forget.
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// Most callers one `scope = "client"` rule keeps a window for: idle
/// callers' windows are dropped first; past this many active callers, a
/// new caller is refused (each is an authenticated identity, so reaching
/// it means the identity provider mints far more than an operator plans).
pub const MAX_RATE_CLIENTS: usize = 10_000;

pub use crate::client::ANONYMOUS_CLIENT;
use crate::client::ClientId;

/// One `[[rate-limits]]` entry as the policy file writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RateLimitSpec {
    /// The gadgets it counts: a name or a glob (case-insensitive); the
    /// calls of all of them share the rule's window.
    pub gadget: String,
    /// Calls allowed in any window.
    pub calls: u32,
    /// The window, in seconds.
    pub per_seconds: u64,
    /// Whose calls share a window: everyone's (`gadget`, the default) or
    /// each caller's (`client`).
    #[serde(default)]
    pub scope: RateScope,
}

/// Whose calls a rule counts together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RateScope {
    #[default]
    Gadget,
    Client,
}

impl RateScope {
    pub fn as_str(self) -> &'static str {
        match self {
            RateScope::Gadget => "gadget",
            RateScope::Client => "client",
        }
    }
}

/// A call over a limit: which rule refused it and when a call would next
/// be admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimited {
    /// 1-based, as the operator counts `[[rate-limits]]` in the file.
    pub rule: usize,
    pub calls: u32,
    pub period: Duration,
    pub scope: RateScope,
    /// The caller counted, for a `client` rule.
    pub client: Option<String>,
    pub retry_after: Duration,
    /// Refused because the rule keeps windows for [`MAX_RATE_CLIENTS`]
    /// callers and all are in use, not for this caller's own calls.
    pub crowded: bool,
    /// Refused because the store the windows are kept in (shared by the
    /// replicas) could not be asked: why. A limited call is never let
    /// through uncounted.
    pub unavailable: Option<String>,
}

impl RateLimited {
    /// The refusal in words, naming the rule that would have to change.
    pub fn reason(&self) -> String {
        let whose = match &self.client {
            Some(client) => format!(" for client '{client}'"),
            None => String::new(),
        };
        if let Some(why) = &self.unavailable {
            return format!(
                "rate-limits[{}] cannot be counted: the shared state store cannot be reached ({why}); a limited call is refused rather than let through uncounted; retry after {:.1} s",
                self.rule,
                self.retry_after.as_secs_f64()
            );
        }
        if self.crowded {
            return format!(
                "rate-limits[{}] counts at most {MAX_RATE_CLIENTS} clients at once and all are active; retry after {:.1} s",
                self.rule,
                self.retry_after.as_secs_f64()
            );
        }
        let calls = match self.calls {
            1 => "1 call".to_string(),
            n => format!("{n} calls"),
        };
        format!(
            "rate-limits[{}] allows {calls} per {} s{whose}; retry after {:.1} s",
            self.rule,
            self.period.as_secs(),
            self.retry_after.as_secs_f64()
        )
    }

    /// Whole seconds to wait, as HTTP's `Retry-After` says it (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        secs.max(1)
    }
}

/// One rule, compiled, with the windows it keeps.
#[derive(Debug)]
struct RateRule {
    spec: RateLimitSpec,
    period: Duration,
    /// 1-based.
    number: usize,
    /// Calls this rule refused, for the metrics.
    refused: AtomicU64,
}

/// The calls a rule admitted in its last window, per caller (one entry,
/// under "", for a `gadget` rule).
#[derive(Debug, Default)]
struct Windows(HashMap<String, VecDeque<Instant>>);

/// The operator's rate limits and their state, shared by every call of
/// the host.
#[derive(Debug)]
pub struct RateLimits {
    rules: Vec<RateRule>,
    windows: Mutex<Vec<Windows>>,
    /// Where the windows are kept when replicas share them: set once, at
    /// start-up, before the first call.
    shared: OnceLock<Arc<dyn SharedWindows>>,
}

impl std::fmt::Debug for dyn SharedWindows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedWindows")
    }
}

impl RateLimits {
    /// Compiles `[[rate-limits]]`; `Err` names the entry (`rate-limits[N]`)
    /// and what is wrong with it.
    pub fn new(specs: Vec<RateLimitSpec>) -> Result<RateLimits, String> {
        let mut rules = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let at = format!("rate-limits[{}]", i + 1);
            if spec.gadget.trim().is_empty() {
                return Err(format!("{at}.gadget: name a gadget (or a glob)"));
            }
            if spec.calls == 0 || spec.calls > MAX_RATE_CALLS {
                return Err(format!(
                    "{at}.calls: {} is not between 1 and {MAX_RATE_CALLS}",
                    spec.calls
                ));
            }
            let period = Duration::from_secs(spec.per_seconds);
            if period.is_zero() || period > MAX_RATE_PERIOD {
                return Err(format!(
                    "{at}.per-seconds: {} is not between 1 and {}",
                    spec.per_seconds,
                    MAX_RATE_PERIOD.as_secs()
                ));
            }
            rules.push(RateRule {
                spec,
                period,
                number: i + 1,
                refused: AtomicU64::new(0),
            });
        }
        let windows = Mutex::new(rules.iter().map(|_| Windows::default()).collect());
        Ok(RateLimits {
            rules,
            windows,
            shared: OnceLock::new(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether any rule counts calls of `gadget`.
    pub fn applies_to(&self, gadget: &str) -> bool {
        self.rules.iter().any(|rule| rule.matches(gadget))
    }

    /// Whether any rule counts a request known by any of `names` (a
    /// catalog request: its own `resource:`/`prompt:` name and the names
    /// of its plugin's gadgets).
    pub fn applies_to_any(&self, names: &[&str]) -> bool {
        names.iter().any(|name| self.applies_to(name))
    }

    /// Admits one call of `gadget` by `client` at `now`, counting it in every rule that matches; or
    /// refuses it, counting it nowhere, with the rule that refused and
    /// the longest wait any matching rule asks.
    pub fn admit(&self, gadget: &str, client: &ClientId, now: Instant) -> Result<(), RateLimited> {
        self.check(&[gadget], client, now, true, |_| true)
    }

    /// [`RateLimits::admit`] for a request known by several `names`:
    /// every rule that matches any of them counts it once.
    pub fn admit_any(
        &self,
        names: &[&str],
        client: &ClientId,
        now: Instant,
    ) -> Result<(), RateLimited> {
        self.check(names, client, now, true, |_| true)
    }

    /// Whether a call of `gadget` by `client` would be over a `client`
    /// rule now, taking no place in a window (a refusal is counted in the
    /// rule's refusals): how a server refuses a whole request (HTTP 429)
    /// before it reads the call.
    pub fn over_client_limit(
        &self,
        gadget: &str,
        client: &ClientId,
        now: Instant,
    ) -> Result<(), RateLimited> {
        self.check(&[gadget], client, now, false, |rule| {
            rule.spec.scope == RateScope::Client
        })
    }

    fn check(
        &self,
        names: &[&str],
        client: &ClientId,
        now: Instant,
        count: bool,
        which: impl Fn(&RateRule) -> bool,
    ) -> Result<(), RateLimited> {
        let matching = self.matching(names, which);
        if matching.is_empty() {
            return Ok(());
        }
        let client = client.rate_key();
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let mut refusal: Option<RateLimited> = None;
        for &i in &matching {
            let rule = &self.rules[i];
            let key = rule.key(client);
            let windows = &mut windows[i];
            let (wait, crowded) = if let Some(window) = windows.0.get_mut(key) {
                (rule.wait(window, now), false)
            } else if windows.0.len() >= MAX_RATE_CLIENTS {
                windows.prune(rule.period, now);
                let crowded = windows.0.len() >= MAX_RATE_CLIENTS;
                (
                    crowded.then(|| windows.soonest_free(rule.period, now)),
                    crowded,
                )
            } else {
                (None, false)
            };
            if let Some(wait) = wait
                && refusal.as_ref().is_none_or(|r| r.retry_after < wait)
            {
                let mut refused = rule.refusal(client, wait);
                refused.crowded = crowded;
                refusal = Some(refused);
            }
        }
        if let Some(refusal) = refusal {
            self.rules[refusal.rule - 1]
                .refused
                .fetch_add(1, Ordering::Relaxed);
            return Err(refusal);
        }
        if count {
            for &i in &matching {
                let rule = &self.rules[i];
                let window = windows[i]
                    .0
                    .entry(rule.key(client).to_string())
                    .or_default();
                if window.len() >= rule.spec.calls as usize {
                    window.pop_front();
                }
                window.push_back(now);
            }
        }
        Ok(())
    }

    /// The rules that count calls of `gadget`, in the operator's words
    /// (what `gadget describe` shows).
    pub fn rules_for(&self, gadget: &str) -> Vec<String> {
        self.rules
            .iter()
            .filter(|rule| rule.matches(gadget))
            .map(|rule| {
                let calls = match rule.spec.calls {
                    1 => "1 call".to_string(),
                    n => format!("{n} calls"),
                };
                let whose = match rule.spec.scope {
                    RateScope::Gadget => "for every caller together",
                    RateScope::Client => "for each caller apart",
                };
                format!(
                    "at most {calls} per {} s {whose} (rate-limits[{}], gadget = \"{}\")",
                    rule.spec.per_seconds, rule.number, rule.spec.gadget
                )
            })
            .collect()
    }

    /// The rules (by index) that count a request known by `names`, of
    /// those `which` picks.
    fn matching(&self, names: &[&str], which: impl Fn(&RateRule) -> bool) -> Vec<usize> {
        (0..self.rules.len())
            .filter(|&i| {
                which(&self.rules[i]) && names.iter().any(|name| self.rules[i].matches(name))
            })
            .collect()
    }

    /// Per rule, as the metrics show it: its number, its gadget pattern,
    /// its scope, and the calls it refused.
    pub fn refusals(&self) -> Vec<(usize, &str, RateScope, u64)> {
        self.rules
            .iter()
            .map(|rule| {
                let refused = rule.refused.load(Ordering::Relaxed);
                (
                    rule.number,
                    rule.spec.gadget.as_str(),
                    rule.spec.scope,
                    refused,
                )
            })
            .collect()
    }
}

impl RateRule {
    fn matches(&self, gadget: &str) -> bool {
        glob_matches(&self.spec.gadget, gadget)
    }

    /// The window a caller's calls go to.
    fn key<'a>(&self, client: &'a str) -> &'a str {
        match self.spec.scope {
            RateScope::Gadget => "",
            RateScope::Client => client,
        }
    }

    /// How long until this window admits a call at `now` (`None`: now).
    fn wait(&self, window: &mut VecDeque<Instant>, now: Instant) -> Option<Duration> {
        while window
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= self.period)
        {
            window.pop_front();
        }
        if window.len() < self.spec.calls as usize {
            return None;
        }
        let oldest = *window.front()?;
        Some(self.period - now.saturating_duration_since(oldest))
    }

    fn refusal(&self, client: &str, retry_after: Duration) -> RateLimited {
        RateLimited {
            rule: self.number,
            calls: self.spec.calls,
            period: self.period,
            scope: self.spec.scope,
            client: (self.spec.scope == RateScope::Client).then(|| client.to_string()),
            retry_after,
            crowded: false,
            unavailable: None,
        }
    }
}

impl Windows {
    /// Drops the windows whose every call is a whole period old.
    fn prune(&mut self, period: Duration, now: Instant) {
        self.0.retain(|_, window| {
            window
                .back()
                .is_some_and(|at| now.saturating_duration_since(*at) < period)
        });
    }

    /// How long until the first window expires (all are live).
    fn soonest_free(&self, period: Duration, now: Instant) -> Duration {
        self.0
            .values()
            .filter_map(|window| window.back())
            .map(|at| period.saturating_sub(now.saturating_duration_since(*at)))
            .min()
            .unwrap_or(period)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rules: &[(&str, u32, u64, RateScope)]) -> RateLimits {
        RateLimits::new(
            rules
                .iter()
                .map(|&(gadget, calls, per_seconds, scope)| RateLimitSpec {
                    gadget: gadget.into(),
                    calls,
                    per_seconds,
                    scope,
                })
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn the_eleventh_call_of_ten_per_second_is_refused_until_the_first_is_a_second_old() {
        let limits = limits(&[("Calc*", 10, 1, RateScope::Gadget)]);
        let start = Instant::now();
        for i in 0..10 {
            let at = start + Duration::from_millis(50 * i);
            assert_eq!(
                limits.admit("Calculator", &ClientId::Local, at),
                Ok(()),
                "call {i}"
            );
        }
        let at = start + Duration::from_millis(700);
        let refused = limits
            .admit("calculator", &ClientId::Local, at)
            .unwrap_err();
        assert_eq!(refused.rule, 1);
        assert_eq!(refused.retry_after, Duration::from_millis(300));
        assert_eq!(refused.retry_after_secs(), 1);
        assert_eq!(
            refused.reason(),
            "rate-limits[1] allows 10 calls per 1 s; retry after 0.3 s"
        );
        // Refused calls take no place: at 1 s the first is a second old.
        assert_eq!(
            limits.admit(
                "Calculator",
                &ClientId::Local,
                start + Duration::from_secs(1)
            ),
            Ok(())
        );
        assert!(
            limits
                .admit(
                    "Calculator",
                    &ClientId::Local,
                    start + Duration::from_millis(1010)
                )
                .is_err()
        );
        assert_eq!(
            limits.admit(
                "Calculator",
                &ClientId::Local,
                start + Duration::from_millis(1050)
            ),
            Ok(())
        );
        // Other gadgets are not counted.
        assert_eq!(limits.admit("Echo", &ClientId::Local, at), Ok(()));
        assert_eq!(limits.refusals(), [(1, "Calc*", RateScope::Gadget, 2)]);
    }

    #[test]
    fn a_client_rule_counts_each_caller_apart_and_a_gadget_rule_everyone() {
        let limits = limits(&[
            ("Fetch", 2, 60, RateScope::Client),
            ("Fetch", 3, 60, RateScope::Gadget),
        ]);
        let now = Instant::now();
        assert_eq!(
            limits.admit("Fetch", &ClientId::subject("alice"), now),
            Ok(())
        );
        assert_eq!(
            limits.admit("Fetch", &ClientId::subject("alice"), now),
            Ok(())
        );
        let alice = limits
            .admit("Fetch", &ClientId::subject("alice"), now)
            .unwrap_err();
        assert_eq!((alice.rule, alice.client.as_deref()), (1, Some("alice")));
        assert!(
            alice.reason().contains("for client 'alice'"),
            "{}",
            alice.reason()
        );
        // Bob has his own window, but all share the gadget's three.
        assert_eq!(
            limits.admit("Fetch", &ClientId::subject("bob"), now),
            Ok(())
        );
        let bob = limits
            .admit("Fetch", &ClientId::subject("bob"), now)
            .unwrap_err();
        assert_eq!((bob.rule, bob.client), (2, None));
        // Peeking takes no place in a window; its refusals are counted.
        assert!(
            limits
                .over_client_limit("Fetch", &ClientId::subject("alice"), now)
                .is_err()
        );
        assert_eq!(
            limits.over_client_limit("Fetch", &ClientId::subject("carol"), now),
            Ok(())
        );
        assert_eq!(
            limits.over_client_limit("Fetch", &ClientId::subject("carol"), now),
            Ok(())
        );
        assert_eq!(
            limits
                .admit("Fetch", &ClientId::subject("carol"), now)
                .unwrap_err()
                .rule,
            2
        );
        assert_eq!(limits.refusals()[0].3, 2);
    }

    #[test]
    fn concurrent_calls_cannot_slip_past_a_limit() {
        let limits = std::sync::Arc::new(limits(&[("*", 10, 3600, RateScope::Gadget)]));
        let now = Instant::now();
        let admitted: usize = std::thread::scope(|s| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let limits = limits.clone();
                    s.spawn(move || {
                        (0..50)
                            .filter(|_| limits.admit("Any", &ClientId::Local, now).is_ok())
                            .count()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).sum()
        });
        assert_eq!(admitted, 10);
    }

    #[test]
    fn past_the_callers_a_rule_keeps_a_new_one_is_refused_until_windows_expire() {
        let limits = limits(&[("*", 1, 10, RateScope::Client)]);
        let now = Instant::now();
        for i in 0..MAX_RATE_CLIENTS {
            assert_eq!(
                limits.admit("Any", &ClientId::subject(format!("c{i}")), now),
                Ok(())
            );
        }
        let refused = limits
            .admit("Any", &ClientId::subject("one-more"), now)
            .unwrap_err();
        assert!(refused.crowded);
        assert_eq!(refused.retry_after, Duration::from_secs(10));
        assert!(refused.reason().contains("counts at most 10000 clients"));
        let later = now + Duration::from_secs(10);
        assert_eq!(
            limits.admit("Any", &ClientId::subject("one-more"), later),
            Ok(())
        );
    }

    #[test]
    fn a_rule_outside_its_bounds_is_refused_naming_it() {
        let spec = |calls, per_seconds| RateLimitSpec {
            gadget: "X".into(),
            calls,
            per_seconds,
            scope: RateScope::Gadget,
        };
        let err = |spec| RateLimits::new(vec![spec]).unwrap_err();
        assert!(err(spec(0, 1)).starts_with("rate-limits[1].calls"));
        assert!(err(spec(MAX_RATE_CALLS + 1, 1)).starts_with("rate-limits[1].calls"));
        assert!(err(spec(1, 0)).starts_with("rate-limits[1].per-seconds"));
        assert!(err(spec(1, 86_401)).starts_with("rate-limits[1].per-seconds"));
        let mut blank = spec(1, 1);
        blank.gadget = " ".into();
        assert!(err(blank).starts_with("rate-limits[1].gadget"));
    }
}
