//! The per-call ledger: what a gadget reported through host imports (logs,
//! costs, progress, updates), bounded by the call's log volume limit.
//!
//! Pure data: the host imports write into it, the runtime hands it to the
//! caller with the outcome, and an optional observer sees each entry live.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::limits::MAX_LOG_MESSAGE_BYTES;

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

/// What a call reported, as it happens, for live display.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent {
    Log(LogEntry),
    Progress(String),
    Update(Update),
    Cost(f64),
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
    bytes_used: u64,
    bytes_limit: u64,
    observer: Option<CallObserver>,
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
        let message = truncate(message, MAX_LOG_MESSAGE_BYTES);
        let size = message.len()
            + if fields.is_null() {
                0
            } else {
                fields.to_string().len()
            };
        if !self.charge(size, source) {
            return;
        }
        let entry = LogEntry {
            level,
            message,
            fields,
            source,
            at_ms,
        };
        self.emit(CallEvent::Log(entry.clone()));
        self.logs.push(entry);
    }

    /// A note from the host about the gadget's behaviour, always kept.
    pub fn host_warning(&mut self, message: String, at_ms: u64) {
        tracing::warn!("{message}");
        self.log(LogLevel::Warn, message, Value::Null, LogSource::Host, at_ms);
    }

    pub fn progress(&mut self, message: String) {
        let message = truncate(message, MAX_LOG_MESSAGE_BYTES);
        if !self.charge(message.len(), LogSource::Gadget) {
            return;
        }
        self.emit(CallEvent::Progress(message.clone()));
        self.progress.push(message);
    }

    pub fn update(&mut self, partial: String, details: Option<Value>, at_ms: u64) {
        let size = partial.len() + details.as_ref().map_or(0, |d| d.to_string().len());
        if !self.charge(size, LogSource::Gadget) {
            return;
        }
        let update = Update {
            partial,
            details,
            at_ms,
        };
        self.emit(CallEvent::Update(update.clone()));
        self.updates.push(update);
    }

    /// Adds a reported cost; refuses (with a warning) amounts that are not
    /// finite and non-negative, so one bad report cannot poison the total.
    pub fn report_cost(&mut self, usd: f64, at_ms: u64) {
        if let Some(reason) = invalid_cost(usd) {
            self.host_warning(format!("refused reported cost {usd}: {reason}"), at_ms);
            return;
        }
        self.reported_cost += usd;
        self.emit(CallEvent::Cost(usd));
    }
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

/// Truncates at a character boundary, marking the cut.
pub fn truncate(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let dropped = text.len() - cut;
    text.truncate(cut);
    text.push_str(&format!("… [truncated {dropped} bytes]"));
    text
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
    fn bad_costs_are_refused_and_noted() {
        let mut ledger = Ledger::new(1000, None);
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            ledger.report_cost(bad, 0);
        }
        ledger.report_cost(0.5, 0);
        assert_eq!(ledger.reported_cost, 0.5);
        assert_eq!(ledger.logs.len(), 3);
        assert!(ledger.logs.iter().all(|l| l.source == LogSource::Host));
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let text = truncate("ééé".to_string(), 3);
        assert!(text.starts_with('é'), "{text}");
        assert!(text.contains("truncated 4 bytes"), "{text}");
    }
}
