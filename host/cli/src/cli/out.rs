//! What every command shares on its way out: the exit codes, JSON on
//! stdout, sizes for people.

use std::io::Write as _;

use anyhow::Result;
use serde::Serialize;

/// The command ran and something failed (a call, a check, a verification).
pub(super) const EXIT_FAILED: u8 = 1;
/// The command was given something it cannot use (arguments, parameters,
/// a file).
pub(super) const EXIT_BAD_INPUT: u8 = 2;

pub(super) fn print_json(value: &impl Serialize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

pub(super) fn human_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// Set when logs are JSON (`--log-format json`): then what a server says
/// to its operator is a log record too, never a plain line among them.
static JSON_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A line for the operator of a server: plain on stderr, or an INFO (an
/// ERROR when `error`) record when logs are JSON.
pub(super) fn tell_operator(message: &str, error: bool) {
    if !JSON_LOGS.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("{message}");
    } else if error {
        tracing::error!("{message}");
    } else {
        tracing::info!("{message}");
    }
}

/// Says whether logs are JSON (set once, when logging starts).
pub(super) fn set_json_logs(json: bool) {
    JSON_LOGS.store(json, std::sync::atomic::Ordering::Relaxed);
}
