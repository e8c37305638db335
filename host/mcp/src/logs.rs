//! A gadget's logs on their two ways out of a server: the operator's log
//! (stderr, target `gadget`, with the call and the gadget) and the
//! client's (MCP log messages at the level it asked for).

#![allow(deprecated, reason = "MCP logging has no replacement yet (SEP-2577)")]

use gadget_core::ledger::LogLevel;
use rmcp::model::LoggingLevel;

/// A gadget's log entry on the operator's log (target `gadget`), with
/// the call and the gadget.
pub(crate) fn operator_log(call: &str, gadget: &str, entry: &gadget_core::ledger::LogEntry) {
    let fields = if entry.fields.is_null() {
        String::new()
    } else {
        entry.fields.to_string()
    };
    let source = match entry.source {
        gadget_core::ledger::LogSource::Gadget => "gadget",
        gadget_core::ledger::LogSource::Host => "host",
    };
    macro_rules! at {
        ($level:expr) => {
            tracing::event!(target: "gadget", $level, call, gadget, source, fields = %fields, "{}", entry.message)
        };
    }
    match entry.level {
        LogLevel::Trace => at!(tracing::Level::TRACE),
        LogLevel::Debug => at!(tracing::Level::DEBUG),
        LogLevel::Info => at!(tracing::Level::INFO),
        LogLevel::Warn => at!(tracing::Level::WARN),
        LogLevel::Error => at!(tracing::Level::ERROR),
    }
}

pub(crate) fn level_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

pub(crate) fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Trace | LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Warn => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
    }
}
