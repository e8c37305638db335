//! Prometheus metrics of a server, in the text exposition format: calls by
//! gadget and outcome, a latency histogram, calls in flight, and requests
//! refused for overload or authentication. Counters are atomics and one
//! small map behind a mutex; rendering takes a snapshot.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Latency buckets, seconds: from a fast gadget (about a millisecond) to
/// the longest timeout an operator is likely to allow.
pub const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Default)]
pub struct Metrics {
    /// gadget → outcome → calls (looked up without allocating: this is
    /// on every call's path).
    calls: Mutex<BTreeMap<String, BTreeMap<&'static str, u64>>>,
    /// Per bucket (cumulative at render), plus sum and count.
    buckets: Vec<AtomicU64>,
    latency_sum_micros: AtomicU64,
    latency_count: AtomicU64,
    in_flight: AtomicI64,
    /// Woken when the last call in flight ends (a drain awaits it).
    idle: tokio::sync::Notify,
    refused_overload: AtomicU64,
    refused_unauthorized: AtomicU64,
    /// Whole requests refused (HTTP 429) for a per-client rate limit.
    refused_rate_limited: AtomicU64,
    /// MCP requests answered on `gadget serve`'s direct path, and by rmcp.
    requests_direct: AtomicU64,
    requests_sdk: AtomicU64,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            buckets: LATENCY_BUCKETS_SECONDS
                .iter()
                .map(|_| AtomicU64::new(0))
                .collect(),
            ..Metrics::default()
        }
    }

    pub fn started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A call that [`started`](Self::started) ended with `outcome`.
    pub fn finished(&self, gadget: &str, outcome: CallOutcome, took: Duration) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) <= 1 {
            self.idle.notify_waiters();
        }
        self.count(gadget, outcome, took);
    }

    /// Waits until no call is in flight.
    pub async fn until_idle(&self) {
        loop {
            let woken = self.idle.notified();
            if self.in_flight() <= 0 {
                return;
            }
            woken.await;
        }
    }

    /// A call refused before it started (unknown gadget, invalid arguments).
    pub fn rejected(&self, gadget: &str, took: Duration) {
        self.count(gadget, CallOutcome::Rejected, took);
    }

    /// A call that ended without running anything: the second half of an
    /// ask-human, whose result is the person's answer.
    pub fn answered(&self, gadget: &str, outcome: CallOutcome, took: Duration) {
        self.count(gadget, outcome, took);
    }

    fn count(&self, gadget: &str, outcome: CallOutcome, took: Duration) {
        {
            let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
            let per_outcome = match calls.get_mut(gadget) {
                Some(per_outcome) => per_outcome,
                None => calls.entry(gadget.to_string()).or_default(),
            };
            *per_outcome.entry(outcome.label()).or_default() += 1;
        }
        let seconds = took.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS_SECONDS.iter().position(|b| seconds <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.latency_sum_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        self.latency_count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refused_overload(&self) {
        self.refused_overload.fetch_add(1, Ordering::Relaxed);
    }

    /// An MCP request (a POST to `/mcp`), answered on the direct path
    /// (`direct`) or by rmcp.
    pub fn request(&self, direct: bool) {
        let counter = if direct {
            &self.requests_direct
        } else {
            &self.requests_sdk
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refused_rate_limited(&self) {
        self.refused_rate_limited.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refused_unauthorized(&self) {
        self.refused_unauthorized.fetch_add(1, Ordering::Relaxed);
    }

    pub fn in_flight(&self) -> i64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The text exposition format; `gadgets` is the number loaded.
    pub fn render(&self, gadgets: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP gadget_calls_total Tool calls by gadget and outcome."
        );
        let _ = writeln!(out, "# TYPE gadget_calls_total counter");
        for (gadget, per_outcome) in self.calls.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            for (outcome, n) in per_outcome {
                let _ = writeln!(
                    out,
                    "gadget_calls_total{{gadget=\"{}\",outcome=\"{}\"}} {n}",
                    escape(gadget),
                    escape(outcome)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP gadget_call_duration_seconds Tool call latency."
        );
        let _ = writeln!(out, "# TYPE gadget_call_duration_seconds histogram");
        let mut cumulative = 0;
        for (bucket, count) in LATENCY_BUCKETS_SECONDS.iter().zip(&self.buckets) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "gadget_call_duration_seconds_bucket{{le=\"{bucket}\"}} {cumulative}"
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "gadget_call_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "gadget_call_duration_seconds_sum {}",
            self.latency_sum_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "gadget_call_duration_seconds_count {count}");
        let gauges = [
            (
                "gadget_calls_in_flight",
                "Tool calls running now (each one instance).",
                self.in_flight.load(Ordering::Relaxed),
            ),
            ("gadget_gadgets_loaded", "Gadgets served.", gadgets as i64),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP gadget_requests_refused_total Requests refused, by reason."
        );
        let _ = writeln!(out, "# TYPE gadget_requests_refused_total counter");
        let _ = writeln!(
            out,
            "gadget_requests_refused_total{{reason=\"overload\"}} {}",
            self.refused_overload.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "gadget_requests_refused_total{{reason=\"unauthorized\"}} {}",
            self.refused_unauthorized.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "gadget_requests_refused_total{{reason=\"rate-limited\"}} {}",
            self.refused_rate_limited.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP gadget_mcp_requests_total MCP requests by how they were answered: direct (a stateless tools/call, answered by the host) or sdk (by the MCP SDK)."
        );
        let _ = writeln!(out, "# TYPE gadget_mcp_requests_total counter");
        for (path, counter) in [
            ("direct", &self.requests_direct),
            ("sdk", &self.requests_sdk),
        ] {
            let _ = writeln!(
                out,
                "gadget_mcp_requests_total{{path=\"{path}\"}} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        out
    }
}

/// Appends each rate limit's refused calls: `rule` is its place in the
/// policy's `[[rate-limits]]`.
pub fn render_rates(out: &mut String, rates: &gadget_core::rate::RateLimits) {
    let _ = writeln!(
        out,
        "# HELP gadget_rate_limited_total Calls refused by each of the operator's rate limits."
    );
    let _ = writeln!(out, "# TYPE gadget_rate_limited_total counter");
    for (rule, gadget, scope, refused) in rates.refusals() {
        let _ = writeln!(
            out,
            "gadget_rate_limited_total{{rule=\"{rule}\",gadget=\"{}\",scope=\"{}\"}} {refused}",
            escape(gadget),
            scope.as_str()
        );
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// How a call ended, as the `outcome` label of `gadget_calls_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallOutcome {
    /// A result (or a finishing result).
    Ok,
    /// A failure of this kind.
    Failed(gadget_core::call::FailureKind),
    /// Refused before it started.
    Rejected,
    /// A question put to the client's user, answered.
    AskHuman,
    /// A question nobody answered (declined, cancelled, no client support).
    HumanInput,
    /// A question returned to the client to ask (stateless round trip).
    InputRequired,
}

impl CallOutcome {
    pub fn label(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Failed(kind) => kind.as_str(),
            CallOutcome::Rejected => "rejected",
            CallOutcome::AskHuman => "ask-human",
            CallOutcome::HumanInput => "human-input",
            CallOutcome::InputRequired => "input-required",
        }
    }
}
