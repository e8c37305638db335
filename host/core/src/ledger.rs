//! The per-call ledger: what a gadget reported through host imports (logs,
//! costs, progress, updates), bounded by the call's log volume limit.
//!
//! Pure data: the host imports write into it, the runtime hands it to the
//! caller with the outcome, and an optional observer sees each entry live.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::limits::{
    COST_EVENT_INTERVAL_MS, MAX_DETAILS_BYTES, MAX_HOST_WARNINGS, MAX_LOG_FIELDS_BYTES,
    MAX_LOG_MESSAGE_BYTES, MAX_UPDATE_BYTES,
};
use crate::redact::Redactor;
pub use crate::text::truncate;

/// Severity of a log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// Who wrote a log entry: the gadget, or the host about the gadget (a
/// refused cost, a dropped field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogSource {
    Gadget,
    Host,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogEntry {
    pub level: LogLevel,
    pub message: String,
    /// A JSON object; `null` when the gadget gave no fields.
    pub fields: Value,
    pub source: LogSource,
    /// Milliseconds since the call started.
    pub at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Update {
    pub partial: String,
    pub details: Option<Value>,
    pub at_ms: u64,
}

/// Numeric progress as a status line: `3/10: fetched`, `3/10`, `3`.
pub fn progress_line(done: f64, total: Option<f64>, message: Option<&str>) -> String {
    match (total, message) {
        (Some(total), Some(m)) => format!("{done}/{total}: {m}"),
        (Some(total), None) => format!("{done}/{total}"),
        (None, Some(m)) => format!("{done}: {m}"),
        (None, None) => format!("{done}"),
    }
}

/// What a call reported, as it happens, for live display.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent {
    Log(LogEntry),
    Progress(String),
    /// Progress as numbers (`report-progress`): `done` so far of `total`
    /// when known; each more than the last.
    Measured {
        done: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    Update(Update),
    Cost(f64),
    /// An event of work the call runs inside itself (a sub-agent's loop).
    Nested(Nested),
    /// The call waits for a person's approval, or was decided.
    Approval(crate::approval::ApprovalEvent),
    /// The call used a door (an HTTP request, a completion).
    Effect(crate::effect::Effect),
}

/// An event of work a call runs inside itself (a sub-agent's loop), kept
/// as its own type: this crate cannot name the types of the crates above
/// it, so a front end that knows the type reads it back with
/// [`Nested::downcast_ref`], and everyone else serialises it.
pub trait InnerEvent: std::fmt::Debug + Send + Sync + 'static {
    /// The event as its own front end writes it (`gadget agent --json`).
    fn to_json(&self) -> Value;
    fn as_any(&self) -> &dyn std::any::Any;
}

/// One inner event, shared (cloned with its call's events, never copied).
#[derive(Debug, Clone)]
pub struct Nested(Arc<dyn InnerEvent>);

impl Nested {
    pub fn new(event: impl InnerEvent) -> Nested {
        Nested(Arc::new(event))
    }

    /// The event as its own type, when it is a `T`.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }

    pub fn to_json(&self) -> Value {
        self.0.to_json()
    }
}

/// The same event, or one that reads the same.
impl PartialEq for Nested {
    fn eq(&self, other: &Nested) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.to_json() == other.to_json()
    }
}

impl Serialize for Nested {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

/// Receives a call's events as they happen (runs on the calling task: keep
/// it cheap, for example a channel send).
pub type CallObserver = Arc<dyn Fn(&CallEvent) + Send + Sync>;

#[derive(Default)]
pub struct Ledger {
    pub reported_cost: f64,
    pub logs: Vec<LogEntry>,
    pub progress: Vec<String>,
    pub updates: Vec<Update>,
    /// Entries (logs, progress, updates) dropped past the volume limit.
    pub dropped_entries: u64,
    /// Reported costs refused (not finite, negative, or a total that would
    /// not be finite); only the first is logged.
    pub refused_costs: u64,
    /// Host warnings past [`MAX_HOST_WARNINGS`], counted and not kept.
    pub suppressed_warnings: u64,
    /// Cost reported since the last live cost event, not yet told.
    cost_untold: f64,
    /// When the last live cost event went out, ms into the call.
    cost_told_at: Option<u64>,
    /// The last numeric progress accepted (each must be more).
    last_done: Option<f64>,
    host_warnings: usize,
    bytes_used: u64,
    bytes_limit: u64,
    observer: Option<CallObserver>,
    /// The plugin's secrets, replaced in everything recorded.
    redactor: Option<Arc<Redactor>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("reported_cost", &self.reported_cost)
            .field("logs", &self.logs.len())
            .field("dropped_entries", &self.dropped_entries)
            .finish()
    }
}

impl Ledger {
    pub fn new(bytes_limit: u64, observer: Option<CallObserver>) -> Ledger {
        Ledger {
            bytes_limit,
            observer,
            ..Ledger::default()
        }
    }

    /// Replaces the plugin's secrets in everything this ledger records.
    pub fn with_redactor(mut self, redactor: Option<Arc<Redactor>>) -> Ledger {
        self.redactor = redactor.filter(|r| !r.is_empty());
        self
    }

    /// A gadget's text redacted, then cut to `max_bytes` (never the other
    /// way round: see [`Redactor::bounded`]).
    pub fn bounded(&self, text: String, max_bytes: usize) -> String {
        match &self.redactor {
            Some(redactor) => redactor.bounded(text, max_bytes),
            None => truncate(text, max_bytes),
        }
    }

    fn redact_value(&self, value: Value) -> Value {
        match &self.redactor {
            Some(redactor) => redactor.value(value),
            None => value,
        }
    }

    /// Charges `bytes` against the volume limit; false (and counted) when
    /// the entry does not fit. Host notes are always kept: they are few and
    /// bounded by the number of imports a gadget can misuse.
    fn charge(&mut self, bytes: usize, source: LogSource) -> bool {
        if source == LogSource::Host {
            return true;
        }
        let bytes = bytes as u64;
        if self.bytes_used.saturating_add(bytes) > self.bytes_limit {
            self.dropped_entries += 1;
            return false;
        }
        self.bytes_used += bytes;
        true
    }

    /// Tells the observer a door was used (nothing is kept: the journal
    /// and the live view keep what they need).
    pub fn effect(&self, effect: crate::effect::Effect) {
        self.emit(CallEvent::Effect(effect));
    }

    fn emit(&self, event: CallEvent) {
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }

    pub fn log(
        &mut self,
        level: LogLevel,
        message: String,
        fields: Value,
        source: LogSource,
        at_ms: u64,
    ) {
        let message = self.bounded(message, MAX_LOG_MESSAGE_BYTES);
        let size = message.len()
            + if fields.is_null() {
                0
            } else {
                fields.to_string().len()
            };
        if !self.charge(size, source) {
            return;
        }
        self.keep(LogEntry {
            level,
            message,
            fields,
            source,
            at_ms,
        });
    }

    /// Reports a log entry that fitted and keeps it. Its message was
    /// redacted before it was cut; its fields are redacted here.
    fn keep(&mut self, mut entry: LogEntry) {
        entry.fields = self.redact_value(entry.fields);
        self.emit(CallEvent::Log(entry.clone()));
        self.logs.push(entry);
    }

    /// A gadget's `log` import: `fields` is JSON text from the guest. The
    /// entry is charged against the volume limit by its raw size *before*
    /// anything is parsed, and fields over [`MAX_LOG_FIELDS_BYTES`] are
    /// never parsed, so a hostile gadget pays for its own flood.
    pub fn guest_log(&mut self, level: LogLevel, message: String, fields: &str, at_ms: u64) {
        let message = self.bounded(message, MAX_LOG_MESSAGE_BYTES);
        let fields = fields.trim();
        let raw_size = message.len() + fields.len().min(MAX_LOG_FIELDS_BYTES);
        if !self.charge(raw_size, LogSource::Gadget) {
            return;
        }
        let fields = if fields.is_empty() {
            Value::Null
        } else if fields.len() > MAX_LOG_FIELDS_BYTES {
            serde_json::json!({
                "fields_dropped": format!(
                    "{} bytes of fields, over the {MAX_LOG_FIELDS_BYTES}-byte limit",
                    fields.len()
                )
            })
        } else {
            match serde_json::from_str::<Value>(fields) {
                Ok(object @ Value::Object(_)) => object,
                // Keep what the gadget sent, visibly, rather than drop it.
                _ => serde_json::json!({ "fields": self.bounded(fields.to_string(), 1024) }),
            }
        };
        self.keep(LogEntry {
            level,
            message,
            fields,
            source: LogSource::Gadget,
            at_ms,
        });
    }

    /// A note from the host about the gadget's behaviour. The first
    /// [`MAX_HOST_WARNINGS`] are kept (and traced); later ones are counted.
    pub fn host_warning(&mut self, message: String, at_ms: u64) {
        if self.host_warnings >= MAX_HOST_WARNINGS {
            self.suppressed_warnings += 1;
            return;
        }
        self.host_warnings += 1;
        // The warning reaches people as the call's log entry (an event in
        // `gadget run`); tracing it at warn too would print it twice. It
        // can quote what the gadget did (a URL with a key in its query):
        // redacted before anything, the debug log included, sees it.
        let message = self.bounded(message, MAX_LOG_MESSAGE_BYTES);
        tracing::debug!("{message}");
        self.log(LogLevel::Warn, message, Value::Null, LogSource::Host, at_ms);
    }

    /// A fact from the host about the call (a completion it made for the
    /// gadget, say), at info level; bounded like the gadget's own logs.
    pub fn host_info(&mut self, message: String, fields: Value, at_ms: u64) {
        self.log(LogLevel::Info, message, fields, LogSource::Host, at_ms);
    }

    /// Closes the ledger at the end of a call: one line sums up what was
    /// refused or suppressed, instead of one line per offence.
    pub fn close(&mut self, at_ms: u64) {
        self.tell_cost(at_ms);
        let summaries = [
            (self.refused_costs > 1).then(|| {
                format!(
                    "refused {} reported costs in all (only the first is shown)",
                    self.refused_costs
                )
            }),
            (self.suppressed_warnings > 0).then(|| {
                format!(
                    "{} more host warnings about this call were not kept",
                    self.suppressed_warnings
                )
            }),
        ];
        for message in summaries.into_iter().flatten() {
            // Summary lines are kept even past the cap: they are the point.
            self.host_warnings = self.host_warnings.min(MAX_HOST_WARNINGS - 1);
            self.host_warning(message, at_ms);
        }
    }

    pub fn progress(&mut self, message: String) {
        let message = self.bounded(message, MAX_LOG_MESSAGE_BYTES);
        if !self.charge(message.len(), LogSource::Gadget) {
            return;
        }
        self.emit(CallEvent::Progress(message.clone()));
        self.progress.push(message);
    }

    /// A gadget's `report-progress` import: numbers that must be finite
    /// and grow (MCP requires it of progress notifications), else dropped
    /// with a warning; kept in the report as a status line.
    pub fn measured(&mut self, done: f64, total: Option<f64>, message: Option<String>, at_ms: u64) {
        let finite = done.is_finite() && total.is_none_or(f64::is_finite);
        if !finite || self.last_done.is_some_and(|last| done <= last) {
            self.host_warning(
                format!(
                    "dropped a progress report of {done}: progress must be finite and more than the last ({})",
                    self.last_done.map_or("none".to_string(), |l| l.to_string())
                ),
                at_ms,
            );
            return;
        }
        let message = message.map(|m| self.bounded(m, MAX_LOG_MESSAGE_BYTES));
        let line = progress_line(done, total, message.as_deref());
        if !self.charge(line.len(), LogSource::Gadget) {
            return;
        }
        self.last_done = Some(done);
        self.emit(CallEvent::Measured {
            done,
            total,
            message,
        });
        self.progress.push(line);
    }

    /// A gadget's `update` import. The partial text is cut at
    /// [`MAX_UPDATE_BYTES`]; details are charged by their raw size and parsed
    /// only when within [`MAX_DETAILS_BYTES`].
    pub fn update(&mut self, partial: String, details: Option<&str>, at_ms: u64) {
        let partial = self.bounded(partial, MAX_UPDATE_BYTES);
        let raw_size = partial.len() + details.map_or(0, |d| d.len().min(MAX_DETAILS_BYTES));
        if !self.charge(raw_size, LogSource::Gadget) {
            return;
        }
        let details = details.and_then(|text| match parse_details(text) {
            Ok(value) => Some(value),
            Err(reason) => {
                self.host_warning(format!("dropped the details of an update: {reason}"), at_ms);
                None
            }
        });
        let update = Update {
            partial,
            details: details.map(|d| self.redact_value(d)),
            at_ms,
        };
        self.emit(CallEvent::Update(update.clone()));
        self.updates.push(update);
    }

    /// Adds a reported cost. Amounts that are not finite and non-negative,
    /// or that would make the total not finite, are refused: counted, the
    /// first one noted, so a flood of bad reports costs the host nothing.
    pub fn report_cost(&mut self, usd: f64, at_ms: u64) {
        let total = self.reported_cost + usd;
        let reason = invalid_cost(usd).or(if total.is_finite() {
            None
        } else {
            Some("the call's total cost would not be a finite number")
        });
        if let Some(reason) = reason {
            self.refused_costs += 1;
            if self.refused_costs == 1 {
                self.host_warning(format!("refused reported cost {usd}: {reason}"), at_ms);
            }
            return;
        }
        self.reported_cost = total;
        // Live cost events are for a display: at most one per
        // COST_EVENT_INTERVAL_MS, carrying what was reported since the
        // last (a loop of tiny or zero reports once made 129 MB of
        // events). The call's total is exact in its report either way.
        self.cost_untold += usd;
        let due = self
            .cost_told_at
            .is_none_or(|told| at_ms.saturating_sub(told) >= COST_EVENT_INTERVAL_MS);
        if due {
            self.tell_cost(at_ms);
        }
    }

    /// Sends the cost not yet told as one live event (none for nothing).
    fn tell_cost(&mut self, at_ms: u64) {
        if self.cost_untold > 0.0 {
            let usd = std::mem::take(&mut self.cost_untold);
            self.cost_told_at = Some(at_ms);
            self.emit(CallEvent::Cost(usd));
        }
    }
}

/// Parses a gadget's `details` JSON text, refusing it unparsed when it is
/// over [`MAX_DETAILS_BYTES`].
pub fn parse_details(text: &str) -> Result<Value, String> {
    if text.len() > MAX_DETAILS_BYTES {
        return Err(format!(
            "{} bytes, over the {MAX_DETAILS_BYTES}-byte limit on details",
            text.len()
        ));
    }
    serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
}

/// Adds two cost totals (each finite and non-negative), saturating at the
/// largest finite amount: a session total is always a number.
pub fn add_costs(a: f64, b: f64) -> f64 {
    let sum = a + b;
    if sum.is_finite() { sum } else { f64::MAX }
}

/// Why a cost amount is refused, if it is.
pub fn invalid_cost(usd: f64) -> Option<&'static str> {
    if !usd.is_finite() {
        Some("costs must be finite")
    } else if usd < 0.0 {
        Some("costs must not be negative")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_limit_drops_and_counts() {
        let mut ledger = Ledger::new(10, None);
        ledger.log(
            LogLevel::Info,
            "12345".into(),
            Value::Null,
            LogSource::Gadget,
            0,
        );
        ledger.log(
            LogLevel::Info,
            "123456".into(),
            Value::Null,
            LogSource::Gadget,
            0,
        );
        ledger.progress("12345".into());
        assert_eq!(ledger.logs.len(), 1);
        assert_eq!(ledger.progress.len(), 1);
        assert_eq!(ledger.dropped_entries, 1);
    }

    #[test]
    fn one_long_message_is_truncated_to_the_per_message_limit() {
        let mut ledger = Ledger::new(u64::MAX, None);
        ledger.log(
            LogLevel::Info,
            "x".repeat(MAX_LOG_MESSAGE_BYTES + 100),
            Value::Null,
            LogSource::Gadget,
            0,
        );
        ledger.progress("y".repeat(MAX_LOG_MESSAGE_BYTES * 2));
        assert!(
            ledger.logs[0]
                .message
                .starts_with(&"x".repeat(MAX_LOG_MESSAGE_BYTES))
        );
        assert!(ledger.logs[0].message.ends_with("[truncated 100 bytes]"));
        assert!(ledger.progress[0].len() < MAX_LOG_MESSAGE_BYTES + 64);
    }

    #[test]
    fn bad_costs_are_refused_counted_and_noted_once() {
        let mut ledger = Ledger::new(1000, None);
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            ledger.report_cost(bad, 0);
        }
        ledger.report_cost(0.5, 0);
        assert_eq!(ledger.reported_cost, 0.5);
        assert_eq!(ledger.refused_costs, 3);
        assert_eq!(ledger.logs.len(), 1);
        assert!(ledger.logs[0].message.contains("costs must be finite"));
        ledger.close(0);
        assert_eq!(ledger.logs.len(), 2);
        assert!(ledger.logs[1].message.contains("refused 3 reported costs"));
        assert!(ledger.logs.iter().all(|l| l.source == LogSource::Host));
    }

    #[test]
    fn a_cost_flood_stays_small_and_the_total_finite() {
        let mut ledger = Ledger::new(1000, None);
        for _ in 0..1_000_000 {
            ledger.report_cost(f64::NAN, 0);
        }
        ledger.report_cost(f64::MAX, 0);
        ledger.report_cost(f64::MAX, 0);
        assert_eq!(ledger.reported_cost, f64::MAX);
        assert_eq!(ledger.refused_costs, 1_000_001);
        ledger.close(0);
        assert_eq!(ledger.logs.len(), 2, "{:?}", ledger.logs);
        assert!(ledger.reported_cost.is_finite());
        assert_eq!(add_costs(f64::MAX, f64::MAX), f64::MAX);
    }

    #[test]
    fn live_cost_events_are_coalesced_and_none_is_lost() {
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = events.clone();
        let observer: CallObserver = Arc::new(move |event: &CallEvent| {
            if let CallEvent::Cost(usd) = event {
                seen.lock().unwrap().push(*usd);
            }
        });
        let mut ledger = Ledger::new(1000, Some(observer));
        // A million reports, zero and tiny, within 250 ms of the call.
        for i in 0..1_000_000u64 {
            let usd = if i % 2 == 0 { 0.0 } else { 1e-9 };
            ledger.report_cost(usd, i / 4_000);
        }
        ledger.close(250);
        let events = events.lock().unwrap();
        assert!(events.len() <= 4, "{} events", events.len());
        let told: f64 = events.iter().sum();
        assert!((told - ledger.reported_cost).abs() < 1e-12);
        assert!((ledger.reported_cost - 500_000.0 * 1e-9).abs() < 1e-9);
        // Only zero reports: no event at all.
        let mut quiet = Ledger::new(1000, None);
        quiet.report_cost(0.0, 0);
        assert_eq!(quiet.cost_untold, 0.0);
    }

    #[test]
    fn host_warnings_past_the_cap_are_counted() {
        let mut ledger = Ledger::new(1000, None);
        for i in 0..100 {
            ledger.host_warning(format!("warning {i}"), 0);
        }
        assert_eq!(ledger.logs.len(), MAX_HOST_WARNINGS);
        assert_eq!(ledger.suppressed_warnings, 100 - MAX_HOST_WARNINGS as u64);
        ledger.close(0);
        // The summary line is the one kept past the cap.
        assert_eq!(ledger.logs.len(), MAX_HOST_WARNINGS + 1);
        assert!(
            ledger
                .logs
                .last()
                .unwrap()
                .message
                .contains("84 more host warnings")
        );
    }

    #[test]
    fn oversized_fields_and_details_are_not_parsed() {
        let mut ledger = Ledger::new(u64::MAX, None);
        // Not valid JSON, so parsing it would keep it as a string field:
        // the note proves it was never parsed.
        let huge = "[".repeat(MAX_LOG_FIELDS_BYTES + 1);
        ledger.guest_log(LogLevel::Info, "m".into(), &huge, 0);
        let note = ledger.logs[0].fields["fields_dropped"].as_str().unwrap();
        assert!(note.contains("over the 16384-byte limit"), "{note}");
        ledger.guest_log(LogLevel::Info, "m".into(), r#"{"k":1}"#, 0);
        assert_eq!(ledger.logs[1].fields["k"], 1);
        ledger.guest_log(LogLevel::Info, "m".into(), "not json", 0);
        assert_eq!(ledger.logs[2].fields["fields"], "not json");

        let details = format!("[{}0]", "0,".repeat(MAX_DETAILS_BYTES));
        ledger.update("p".repeat(MAX_UPDATE_BYTES * 2), Some(&details), 0);
        assert_eq!(ledger.updates[0].details, None);
        assert!(ledger.updates[0].partial.len() < MAX_UPDATE_BYTES + 64);
        assert!(
            ledger.logs[3]
                .message
                .contains("over the 65536-byte limit on details")
        );
    }

    #[test]
    fn a_flood_of_logs_is_charged_by_raw_size_before_parsing() {
        let mut ledger = Ledger::new(100, None);
        let fields = format!("{{\"k\":\"{}\"}}", "v".repeat(200));
        ledger.guest_log(LogLevel::Info, "m".into(), &fields, 0);
        assert!(ledger.logs.is_empty());
        assert_eq!(ledger.dropped_entries, 1);
    }

    #[test]
    fn secrets_are_redacted_from_every_entry_host_notes_included() {
        let redactor = Arc::new(crate::redact::Redactor::new(vec!["k-123".into()]));
        let mut ledger = Ledger::new(1 << 20, None).with_redactor(Some(redactor));
        ledger.guest_log(LogLevel::Info, "key k-123".into(), r#"{"k": "k-123"}"#, 0);
        ledger.host_warning("HTTP https://api.example.com/?key=k-123: refused".into(), 0);
        ledger.progress("at k-123".into());
        ledger.update("u k-123".into(), Some(r#"{"v": "k-123"}"#), 0);
        let all = format!(
            "{:?} {:?} {:?}",
            ledger.logs, ledger.progress, ledger.updates
        );
        assert!(!all.contains("k-123"), "{all}");
        assert_eq!(
            ledger.logs[1].message,
            "HTTP https://api.example.com/?key=[redacted]: refused"
        );
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let text = truncate("ééé".to_string(), 3);
        assert!(text.starts_with('é'), "{text}");
        assert!(text.contains("truncated 4 bytes"), "{text}");
    }
}
