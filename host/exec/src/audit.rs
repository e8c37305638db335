//! The audit journal's writer: the one call path records each call that
//! reaches a tool (its start with the parameters' shape, its end with the
//! outcome, duration and cost) and what the call reports on the way (cost
//! reports, approvals, and each door it uses), appended to a file as the
//! hash-chained lines of [`gadget_core::audit`].
//!
//! Bounded: past [`MAX_RECORDS_PER_CALL`] records of one call, the rest
//! are counted into one `records_dropped` record at its end. Secret values
//! never reach the file: every record passes through the redactor of the
//! host's granted secrets, and parameter values are recorded only when the
//! operator asks (`record-params`), redacted too.
//!
//! Records reach the file in batches (a buffer, flushed when full, at the
//! end of each call that was not instant, and when the journal is
//! dropped); a crash can lose the last batch, never break the chain.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use gadget_core::audit::{
    GENESIS, MAX_RECORDS_PER_CALL, Record, bounded, line_hash, rfc3339, shape,
};
use gadget_core::call::{CallReport, Outcome};
use gadget_core::ledger::CallEvent;
use gadget_core::redact::Redactor;
use gadget_core::tool::{Origin, Tool};

/// How much of an existing journal's end is read to continue its chain:
/// far more than one record ever takes.
const TAIL_BYTES: u64 = 1 << 20;

/// What the operator chose for the journal.
#[derive(Debug, Clone, Default)]
pub struct JournalOptions {
    /// Names this run in every record.
    pub session: String,
    /// Record parameter values (redacted), not only their shape.
    pub record_params: bool,
    /// The granted secret values, never written.
    pub secrets: Vec<String>,
}

/// Why a journal cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("audit journal {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "audit journal {path}: its last line is not a journal record, so the chain cannot go on (verify it with `gadget audit verify`, then start a new file)"
    )]
    NotAJournal { path: PathBuf },
}

/// An append-only, hash-chained journal file.
pub struct Journal {
    path: PathBuf,
    options: JournalOptions,
    redactor: Redactor,
    state: Mutex<State>,
}

struct State {
    out: BufWriter<File>,
    seq: u64,
    prev: String,
    /// Records of each running call, for the per-call cap.
    per_call: HashMap<String, u64>,
    /// The first write error (later records are not attempted).
    failed: Option<String>,
}

impl Journal {
    /// Opens `path` for appending (created if missing), going on from the
    /// chain already in it.
    pub fn open(path: &Path, options: JournalOptions) -> Result<Journal, JournalError> {
        let io = |source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        let (seq, prev) = match last_line(&mut file).map_err(io)? {
            None => (0, GENESIS.to_string()),
            Some(line) => {
                let record: Record =
                    serde_json::from_str(&line).map_err(|_| JournalError::NotAJournal {
                        path: path.to_path_buf(),
                    })?;
                (record.seq, line_hash(&line))
            }
        };
        Ok(Journal {
            path: path.to_path_buf(),
            redactor: Redactor::new(options.secrets.clone()),
            options,
            state: Mutex::new(State {
                out: BufWriter::with_capacity(64 << 10, file),
                seq,
                prev,
                per_call: HashMap::new(),
                failed: None,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first write error, if writing failed.
    pub fn failure(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one record (redacted, strings bounded).
    pub fn record(&self, event: &str, call: Option<&str>, tool: Option<&dyn Tool>, detail: Value) {
        let origin: Option<Origin> = tool.and_then(|t| t.origin());
        let detail = bounded(self.redactor.value(detail));
        let mut state = self.lock();
        if state.failed.is_some() {
            return;
        }
        let record = Record {
            seq: state.seq + 1,
            time: rfc3339(now_ms()),
            session: self.options.session.clone(),
            event: event.to_string(),
            call: call.map(str::to_string),
            gadget: tool.map(|t| t.name().to_string()),
            plugin: origin.as_ref().map(|o| o.plugin.clone()),
            digest: origin.map(|o| o.digest),
            detail,
            prev: state.prev.clone(),
        };
        let line = match serde_json::to_string(&record) {
            Ok(line) => line,
            Err(e) => {
                state.failed = Some(e.to_string());
                return;
            }
        };
        if let Err(e) = writeln!(state.out, "{line}") {
            state.failed = Some(e.to_string());
            return;
        }
        state.seq += 1;
        state.prev = line_hash(&line);
    }

    /// Writes what is buffered.
    pub fn flush(&self) {
        let mut state = self.lock();
        if let Err(e) = state.out.flush()
            && state.failed.is_none()
        {
            state.failed = Some(e.to_string());
        }
    }

    /// A call is about to run `tool` with `params`.
    pub fn call_started(
        &self,
        call: &str,
        tool: &dyn Tool,
        params: &Value,
        timeout: Option<Duration>,
    ) {
        self.lock().per_call.insert(call.to_string(), 0);
        let params = if self.options.record_params {
            params.clone()
        } else {
            shape(params)
        };
        let key = if self.options.record_params {
            "params"
        } else {
            "params_shape"
        };
        self.record(
            "call_started",
            Some(call),
            Some(tool),
            json!({ key: params, "timeout_ms": timeout.map(|t| t.as_millis() as u64) }),
        );
    }

    /// What a running call reported that the journal keeps: costs,
    /// approvals, and the doors it used (counted against the cap).
    pub fn call_event(&self, call: &str, tool: &dyn Tool, event: &CallEvent) {
        let (name, detail) = match event {
            CallEvent::Cost(usd) => ("cost", json!({ "usd": usd })),
            CallEvent::Approval(approval) => ("approval", json!(approval)),
            CallEvent::Effect(effect) => (effect.door(), json!(effect)),
            _ => return,
        };
        {
            let mut state = self.lock();
            let count = state.per_call.entry(call.to_string()).or_insert(0);
            *count += 1;
            if *count > MAX_RECORDS_PER_CALL {
                return;
            }
        }
        self.record(name, Some(call), Some(tool), detail);
    }

    /// A call ended (ran, or was refused before it ran).
    pub fn call_finished(&self, call: &str, tool: &dyn Tool, report: &CallReport) {
        let records = self.lock().per_call.remove(call).unwrap_or(0);
        if records > MAX_RECORDS_PER_CALL {
            self.record(
                "records_dropped",
                Some(call),
                Some(tool),
                json!({ "count": records - MAX_RECORDS_PER_CALL, "cap": MAX_RECORDS_PER_CALL }),
            );
        }
        let (outcome, error) = match &report.outcome {
            Ok(Outcome::Result { .. }) => ("result", None),
            Ok(Outcome::Finish { .. }) => ("finish", None),
            Ok(Outcome::AskHuman { .. }) => ("ask-human", None),
            Err(error) => (
                "error",
                Some(json!({"kind": error.kind(), "message": error.to_string()})),
            ),
        };
        self.record(
            "call_finished",
            Some(call),
            Some(tool),
            json!({
                "outcome": outcome,
                "error": error,
                "duration_ms": report.duration.as_secs_f64() * 1e3,
                "cost": report.cost,
            }),
        );
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("path", &self.path).finish()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = self.lock().out.flush();
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The file's last non-empty line, read from its end.
fn last_line(file: &mut File) -> std::io::Result<Option<String>> {
    let len = file.seek(SeekFrom::End(0))?;
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut tail)?;
    let text = String::from_utf8_lossy(&tail);
    Ok(text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string))
}

/// A shared journal, as call options carry it.
pub type SharedJournal = Arc<Journal>;
