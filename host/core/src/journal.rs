//! The audit journal's writer: the one call path records each call that
//! reaches a tool (its start with the parameters' shape, its end with the
//! outcome, duration and cost) and what the call reports on the way (cost
//! reports, approvals, and each door it uses), appended to a file as the
//! hash-chained lines of [`crate::audit`]. It is here, beside the
//! records, so that a call carries it to the tools that run calls of their
//! own (a sub-agent's calls are journaled like any other).
//!
//! Bounded: past [`MAX_RECORDS_PER_CALL`] records of one call, the rest
//! are counted into one `records_dropped` record at its end. Secret values
//! never reach the file: every record passes through the redactor of the
//! host's granted secrets, and parameter values are recorded only when the
//! operator asks (`record-params`), redacted too.
//!
//! Records reach the file in batches (a buffer, written out when full,
//! when a call ends [`FLUSH_INTERVAL`] after the last write, and when the
//! journal is dropped); a crash can lose the last batch, never break the
//! chain.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::audit::{GENESIS, MAX_RECORDS_PER_CALL, Record, bounded, line_hash, rfc3339, shape};
use crate::call::{CallReport, Outcome};
use crate::ledger::CallEvent;
use crate::redact::Redactor;
use crate::tool::{Origin, Tool};

/// Longest name or id of a refused call kept in its record, in bytes:
/// whoever wrote it may have written anything.
const MAX_REFUSED_NAME_BYTES: usize = 256;

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
    out: BufWriter<Box<dyn Write + Send>>,
    seq: u64,
    prev: String,
    /// When the buffer was last written out.
    flushed: Instant,
    /// The first write error (later records are not attempted).
    failed: Option<String>,
}

/// How long records may wait in the buffer once a call has ended: a
/// person reading the journal sees a call within this long, and a busy
/// host writes in batches rather than once per call.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// A record's fields besides its place in the chain, borrowed.
#[derive(serde::Serialize)]
struct Body<'a> {
    time: String,
    session: &'a str,
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    call: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gadget: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<&'a str>,
    #[serde(skip_serializing_if = "Value::is_null")]
    detail: Value,
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
                out: BufWriter::with_capacity(64 << 10, Box::new(file)),
                seq,
                prev,
                flushed: Instant::now(),
                failed: None,
            }),
        })
    }

    /// A journal written to `out` (a pipe, a socket, a log shipper),
    /// starting a new chain; `name` stands for it in messages.
    pub fn to_writer(name: &str, out: Box<dyn Write + Send>, options: JournalOptions) -> Journal {
        Journal {
            path: PathBuf::from(name),
            redactor: Redactor::new(options.secrets.clone()),
            options,
            state: Mutex::new(State {
                out: BufWriter::with_capacity(64 << 10, out),
                seq: 0,
                prev: GENESIS.to_string(),
                flushed: Instant::now(),
                failed: None,
            }),
        }
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

    /// Appends one record (redacted, strings bounded). The record is
    /// serialised before the lock is taken; only its place in the chain
    /// (number, previous hash, its own hash) is settled under it.
    pub fn record(
        &self,
        event: &str,
        call: Option<&str>,
        gadget: Option<&str>,
        origin: Option<&Origin>,
        detail: Value,
    ) {
        let body = Body {
            time: rfc3339(now_ms()),
            session: &self.options.session,
            event,
            call,
            gadget,
            plugin: origin.map(|o| o.plugin.as_str()),
            digest: origin.map(|o| o.digest.as_str()),
            detail: bounded(self.redactor.value(detail)),
        };
        let body = match serde_json::to_string(&body) {
            Ok(body) => body,
            Err(e) => {
                self.lock().failed.get_or_insert(e.to_string());
                return;
            }
        };
        // `{...}` without its braces, between the number and `prev`: the
        // field order of [`Record`].
        let inner = &body[1..body.len() - 1];
        let mut state = self.lock();
        if state.failed.is_some() {
            return;
        }
        let seq = state.seq + 1;
        let line = format!("{{\"seq\":{seq},{inner},\"prev\":\"{}\"}}", state.prev);
        if let Err(e) = writeln!(state.out, "{line}") {
            state.failed = Some(e.to_string());
            return;
        }
        state.seq = seq;
        state.prev = line_hash(&line);
    }

    /// Writes what is buffered.
    pub fn flush(&self) {
        let mut state = self.lock();
        state.flushed = Instant::now();
        if let Err(e) = state.out.flush()
            && state.failed.is_none()
        {
            state.failed = Some(e.to_string());
        }
    }

    /// Writes what is buffered if it has waited [`FLUSH_INTERVAL`].
    fn flush_due(&self) {
        let mut state = self.lock();
        if state.flushed.elapsed() < FLUSH_INTERVAL {
            return;
        }
        state.flushed = Instant::now();
        if let Err(e) = state.out.flush()
            && state.failed.is_none()
        {
            state.failed = Some(e.to_string());
        }
    }

    /// A call refused before it reached a tool (no such gadget, a gadget
    /// the operator denies, parameters that do not fit): `name` as the
    /// caller wrote it, never its parameters.
    pub fn refused(&self, call: &str, name: &str, failure: &crate::events::Failure) {
        // The name is the caller's: a model or a client may write anything.
        let name = crate::ledger::truncate(name.to_string(), MAX_REFUSED_NAME_BYTES);
        let call = crate::ledger::truncate(call.to_string(), MAX_REFUSED_NAME_BYTES);
        self.record(
            "call_refused",
            Some(&call),
            Some(&name),
            None,
            json!({ "kind": failure.kind, "message": failure.message }),
        );
    }

    /// What records one call of `tool`.
    pub fn call(self: &Arc<Self>, call: &str, tool: &dyn Tool) -> CallRecorder {
        CallRecorder {
            journal: self.clone(),
            call: call.to_string(),
            gadget: tool.name().to_string(),
            origin: tool.origin(),
            records: AtomicU64::new(0),
        }
    }
}

/// Records one call: its start, what it reports (capped), its end.
pub struct CallRecorder {
    journal: Arc<Journal>,
    call: String,
    gadget: String,
    origin: Option<Origin>,
    /// Records of this call besides its start and end.
    records: AtomicU64,
}

impl CallRecorder {
    fn record(&self, event: &str, detail: Value) {
        self.journal.record(
            event,
            Some(&self.call),
            Some(&self.gadget),
            self.origin.as_ref(),
            detail,
        );
    }

    /// The call is about to run with `params`.
    pub fn started(&self, params: &Value, timeout: Option<Duration>) {
        let record_params = self.journal.options.record_params;
        let (key, params) = if record_params {
            ("params", params.clone())
        } else {
            ("params_shape", shape(params))
        };
        self.record(
            "call_started",
            json!({ key: params, "timeout_ms": timeout.map(|t| t.as_millis() as u64) }),
        );
    }

    /// What a running call reported that the journal keeps: costs,
    /// approvals, and the doors it used (counted against the cap).
    pub fn event(&self, event: &CallEvent) {
        let (name, detail) = match event {
            CallEvent::Cost(usd) => ("cost", json!({ "usd": usd })),
            CallEvent::Approval(approval) => ("approval", json!(approval)),
            // A count of what the runtime left out is itself the summary
            // (one per door per call): never dropped.
            CallEvent::Effect(effect @ crate::effect::Effect::Omitted { .. }) => {
                return self.record(effect.door(), json!(effect));
            }
            CallEvent::Effect(effect) => (effect.door(), json!(effect)),
            _ => return,
        };
        if self.records.fetch_add(1, Ordering::Relaxed) >= MAX_RECORDS_PER_CALL {
            return;
        }
        self.record(name, detail);
    }

    /// The call ended (ran, or was refused before it ran); `instant`:
    /// it answered in the host at once (no flush for it).
    pub fn finished(&self, report: &CallReport, instant: bool) {
        let records = self.records.load(Ordering::Relaxed);
        if records > MAX_RECORDS_PER_CALL {
            self.record(
                "records_dropped",
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
            json!({
                "outcome": outcome,
                "error": error,
                "duration_ms": report.duration.as_secs_f64() * 1e3,
                "cost": report.cost,
            }),
        );
        if !instant {
            self.journal.flush_due();
        }
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
