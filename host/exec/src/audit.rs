//! The audit journal's writer: the one call path records each call that
//! reaches a tool (its start with the parameters' shape, its end with the
//! outcome, duration and cost) and what the call reports on the way (cost
//! reports, approvals, and each door it uses), appended to a file as the
//! hash-chained lines of [`gadget_core::audit`]. It is the file-backed
//! [`Recorder`] of a call's scope, so a call carries it to the tools that
//! run calls of their own (a sub-agent's calls are journaled like any
//! other); the pure crate opens no file.
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
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use sha2::{Digest as _, Sha256};

use gadget_core::audit::{
    GENESIS, MAX_RECORD_STRING_BYTES, MAX_RECORDS_PER_CALL, Record, RecordKind, bounded, hex,
    line_hash, rfc3339,
};
use gadget_core::call::{CallReport, Outcome};
use gadget_core::events::Failure;
use gadget_core::ledger::{CallEvent, truncate};
use gadget_core::redact::Redactor;
use gadget_core::scope::{CallRecord, Origin, Recorder};

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
    /// The operator's secret for a keyed journal (`[audit] key-env`): each
    /// line then carries its HMAC (`gadget_core::audit::line_mac`).
    pub key: Option<JournalKey>,
}

/// A keyed journal's secret; never shown.
#[derive(Clone, Default)]
pub struct JournalKey(pub Vec<u8>);

impl std::fmt::Debug for JournalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JournalKey([redacted])")
    }
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
    #[error(
        "audit journal {path}: another process is writing it (two writers would fork its chain); give each process its own journal file"
    )]
    Busy { path: PathBuf },
    #[error(
        "audit journal {path}: its records are {found}, and this run would write them {wanted}; one file holds one kind of chain: start a new file (or set [audit] key-env as it was)"
    )]
    ChainKind {
        path: PathBuf,
        found: &'static str,
        wanted: &'static str,
    },
}

/// An append-only, hash-chained journal file.
pub struct Journal {
    path: PathBuf,
    options: JournalOptions,
    redactor: Redactor,
    state: Mutex<State>,
    /// The file. Its lock is taken before the state's is let go, so
    /// batches reach it in order, while the next records are already
    /// being added to a new buffer (no call waits on a write).
    out: Mutex<Box<dyn Write + Send>>,
    /// When the journal was opened, and when (ms after it) the buffer was
    /// last written out: read without a lock at each call's end.
    opened: Instant,
    flushed_ms: AtomicU64,
}

/// Bytes of records gathered before they are written out.
const BATCH_BYTES: usize = 64 << 10;

struct State {
    /// Records not yet written out.
    batch: Vec<u8>,
    seq: u64,
    prev: String,
    /// The first write error (later records are not attempted).
    failed: Option<String>,
}

/// How long records may wait in the buffer once a call has ended: a
/// person reading the journal sees a call within this long, and a busy
/// host writes in batches rather than once per call.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// A record's fields besides its place in the chain, borrowed; `detail`
/// typed for the records every call makes (no JSON tree built for them).
#[derive(serde::Serialize)]
struct Body<'a, D> {
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
    detail: D,
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
        // One writer at a time: a second process appending would fork the
        // chain. The lock lasts as long as the file is open.
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(JournalError::Busy {
                    path: path.to_path_buf(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        let kind = |keyed: bool| if keyed { "keyed (HMAC)" } else { "not keyed" };
        let (seq, prev) = match last_line(&mut file).map_err(io)? {
            None => (0, GENESIS.to_string()),
            Some(line) => {
                let record: Record =
                    serde_json::from_str(&line).map_err(|_| JournalError::NotAJournal {
                        path: path.to_path_buf(),
                    })?;
                if record.mac.is_some() != options.key.is_some() {
                    return Err(JournalError::ChainKind {
                        path: path.to_path_buf(),
                        found: kind(record.mac.is_some()),
                        wanted: kind(options.key.is_some()),
                    });
                }
                (record.seq, line_hash(&line))
            }
        };
        Ok(Journal {
            path: path.to_path_buf(),
            redactor: Redactor::new(options.secrets.clone()),
            options,
            out: Mutex::new(Box::new(file)),
            opened: Instant::now(),
            flushed_ms: AtomicU64::new(0),
            state: Mutex::new(State {
                batch: Vec::with_capacity(BATCH_BYTES),
                seq,
                prev,
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
            out: Mutex::new(out),
            opened: Instant::now(),
            flushed_ms: AtomicU64::new(0),
            state: Mutex::new(State {
                batch: Vec::with_capacity(BATCH_BYTES),
                seq: 0,
                prev: GENESIS.to_string(),
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
    fn record(
        &self,
        event: RecordKind,
        call: Option<&str>,
        gadget: Option<&str>,
        origin: Option<&Origin>,
        detail: Value,
    ) {
        let detail = (!detail.is_null()).then(|| bounded(self.redactor.value(detail)));
        self.append(event, call, gadget, origin, Detail(detail));
    }

    /// Appends one record whose detail is already redacted and bounded.
    fn append<D: serde::Serialize>(
        &self,
        event: RecordKind,
        call: Option<&str>,
        gadget: Option<&str>,
        origin: Option<&Origin>,
        detail: D,
    ) {
        let body = Body {
            time: rfc3339(now_ms()),
            session: &self.options.session,
            event: event.as_str(),
            call,
            gadget,
            plugin: origin.map(|o| o.plugin.as_str()),
            // A tool with no component (an MCP server's) has no digest.
            digest: origin.map(|o| o.digest.as_str()).filter(|d| !d.is_empty()),
            detail,
        };
        let mut text = Vec::with_capacity(512);
        if let Err(e) = serde_json::to_writer(&mut text, &body) {
            self.lock().failed.get_or_insert(e.to_string());
            return;
        }
        // `{...}` without its braces, between the number and `prev`: the
        // field order of [`Record`].
        let inner = &text[1..text.len() - 1];
        let mut guard = self.lock();
        if guard.failed.is_some() {
            return;
        }
        let state = &mut *guard;
        let seq = state.seq + 1;
        let head = format!("{{\"seq\":{seq},");
        // The line is written and hashed in pieces, never assembled.
        let mut pieces: [&[u8]; 5] = [
            head.as_bytes(),
            inner,
            b",\"prev\":\"",
            state.prev.as_bytes(),
            b"\"}",
        ];
        // A keyed line: its MAC over the line without it, as the last field.
        let mac = match &self.options.key {
            None => None,
            Some(key) => match gadget_core::audit::line_mac(&key.0, &pieces) {
                Some(mac) => Some(format!("\",\"mac\":\"{mac}\"}}")),
                None => {
                    state
                        .failed
                        .get_or_insert("the journal's key cannot sign a line".into());
                    return;
                }
            },
        };
        if let Some(mac) = &mac {
            pieces[4] = mac.as_bytes();
        }
        let mut hasher = Sha256::new();
        for piece in pieces {
            hasher.update(piece);
            state.batch.extend_from_slice(piece);
        }
        state.batch.push(b'\n');
        state.seq = seq;
        state.prev = hex(&hasher.finalize());
        if state.batch.len() >= BATCH_BYTES {
            self.write_out(guard);
        }
    }

    /// Takes the batch and writes it, the state's lock let go first.
    fn write_out(&self, mut state: std::sync::MutexGuard<'_, State>) {
        let batch = std::mem::replace(&mut state.batch, Vec::with_capacity(BATCH_BYTES));
        self.flushed_ms
            .store(self.opened.elapsed().as_millis() as u64, Ordering::Relaxed);
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        drop(state);
        let written = out.write_all(&batch).and_then(|()| out.flush());
        drop(out);
        if let Err(e) = written {
            self.lock().failed.get_or_insert(e.to_string());
        }
    }

    /// Writes what is buffered.
    pub fn flush(&self) {
        self.write_out(self.lock());
    }

    /// Writes what is buffered if it has waited [`FLUSH_INTERVAL`].
    fn flush_due(&self) {
        let now = self.opened.elapsed().as_millis() as u64;
        if now.saturating_sub(self.flushed_ms.load(Ordering::Relaxed))
            < FLUSH_INTERVAL.as_millis() as u64
        {
            return;
        }
        self.write_out(self.lock());
    }

    /// A call refused before it reached a tool (no such gadget, a gadget
    /// the operator denies, parameters that do not fit): `name` as the
    /// caller wrote it, never its parameters.
    pub fn refused(&self, call: &str, name: &str, failure: &Failure) {
        // The name is the caller's: a model or a client may write anything.
        let name = truncate(name.to_string(), MAX_REFUSED_NAME_BYTES);
        let call = truncate(call.to_string(), MAX_REFUSED_NAME_BYTES);
        self.record(
            RecordKind::CallRefused,
            Some(&call),
            Some(&name),
            None,
            json!({ "kind": failure.kind, "message": failure.message }),
        );
    }

    /// This journal as the recorder of a call scope.
    pub fn recorder(self: &Arc<Self>) -> Arc<dyn Recorder> {
        Arc::new(JournalRecorder(self.clone()))
    }
}

/// A journal as a [`Recorder`]: every call it records keeps it open.
struct JournalRecorder(Arc<Journal>);

impl Recorder for JournalRecorder {
    fn failure(&self) -> Option<String> {
        let why = self.0.failure()?;
        Some(format!(
            "the audit journal {} cannot be written ({why}), and no call runs unrecorded",
            self.0.path().display()
        ))
    }

    fn refused(&self, call: &str, name: &str, failure: &Failure) {
        self.0.refused(call, name, failure);
    }

    fn call(&self, call: &str, gadget: &str, origin: Option<Arc<Origin>>) -> Arc<dyn CallRecord> {
        Arc::new(CallRecorder {
            journal: self.0.clone(),
            call: call.to_string(),
            gadget: gadget.to_string(),
            origin,
            records: AtomicU64::new(0),
        })
    }
}

/// Records one call: its start, what it reports (capped), its end.
struct CallRecorder {
    journal: Arc<Journal>,
    call: String,
    gadget: String,
    origin: Option<std::sync::Arc<Origin>>,
    /// Records of this call besides its start and end.
    records: AtomicU64,
}

impl CallRecorder {
    fn append<D: serde::Serialize>(&self, event: RecordKind, detail: D) {
        self.journal.append(
            event,
            Some(&self.call),
            Some(&self.gadget),
            self.origin.as_deref(),
            detail,
        );
    }

    fn record(&self, event: RecordKind, detail: Value) {
        self.journal.record(
            event,
            Some(&self.call),
            Some(&self.gadget),
            self.origin.as_deref(),
            detail,
        );
    }
}

impl CallRecord for CallRecorder {
    /// The call is about to run with `params`.
    fn started(&self, params: &Value, timeout: Option<Duration>) {
        let journal = &self.journal;
        let detail = if journal.options.record_params {
            Started {
                params_shape: None,
                params: Some(bounded(journal.redactor.value(params.clone()))),
                timeout_ms: timeout.map(|t| t.as_millis() as u64),
                source: self.origin.as_ref().map(|o| o.source.as_str()),
                signature: self.origin.as_ref().map(|o| o.signature.as_str()),
            }
        } else {
            Started {
                params_shape: Some(ShapeOf {
                    value: params,
                    redactor: &journal.redactor,
                }),
                params: None,
                timeout_ms: timeout.map(|t| t.as_millis() as u64),
                source: self.origin.as_ref().map(|o| o.source.as_str()),
                signature: self.origin.as_ref().map(|o| o.signature.as_str()),
            }
        };
        self.append(RecordKind::CallStarted, detail);
    }

    /// What a running call reported that the journal keeps: costs,
    /// approvals, and the doors it used (counted against the cap).
    fn event(&self, event: &CallEvent) {
        let (name, detail) = match event {
            CallEvent::Cost(usd) => (RecordKind::Cost, json!({ "usd": usd })),
            CallEvent::Approval(approval) => (RecordKind::Approval, json!(approval)),
            // A count of what the runtime left out is itself the summary
            // (one per door per call): never dropped.
            CallEvent::Effect(effect @ gadget_core::effect::Effect::Omitted { .. }) => {
                return self.record(RecordKind::of_door(effect.door()), json!(effect));
            }
            CallEvent::Effect(effect) => (RecordKind::of_door(effect.door()), json!(effect)),
            _ => return,
        };
        if self.records.fetch_add(1, Ordering::Relaxed) >= MAX_RECORDS_PER_CALL {
            return;
        }
        self.record(name, detail);
    }

    /// The call ended (ran, or was refused before it ran); `instant`:
    /// it answered in the host at once (no flush for it).
    fn finished(&self, report: &CallReport, instant: bool) {
        let records = self.records.load(Ordering::Relaxed);
        if records > MAX_RECORDS_PER_CALL {
            self.record(
                RecordKind::RecordsDropped,
                json!({ "count": records - MAX_RECORDS_PER_CALL, "cap": MAX_RECORDS_PER_CALL }),
            );
        }
        let (outcome, error) = match &report.outcome {
            Ok(Outcome::Result { .. }) => ("result", None),
            Ok(Outcome::Finish { .. }) => ("finish", None),
            Ok(Outcome::AskHuman { .. }) => ("ask-human", None),
            Err(error) => {
                let message = self.journal.redactor.string(error.to_string());
                let message = truncate(message, MAX_RECORD_STRING_BYTES);
                let kind = error.kind();
                ("error", Some(ErrorDetail { kind, message }))
            }
        };
        let detail = FinishedDetail {
            outcome,
            error,
            duration_ms: report.duration.as_secs_f64() * 1e3,
            cost: report.cost,
        };
        self.append(RecordKind::CallFinished, detail);
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
        self.flush();
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

/// A detail given as JSON: `null` is left out of the record.
struct Detail(Option<Value>);

impl serde::Serialize for Detail {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// `call_started`'s detail.
#[derive(serde::Serialize)]
struct Started<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    params_shape: Option<ShapeOf<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<Value>,
    timeout_ms: Option<u64>,
    /// The tool's provenance (a plugin's: where from, whose signature);
    /// the record's `plugin` and `digest` say which component it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<&'a str>,
}

/// `call_finished`'s detail.
#[derive(serde::Serialize)]
struct FinishedDetail {
    outcome: &'static str,
    error: Option<ErrorDetail>,
    duration_ms: f64,
    cost: f64,
}

#[derive(serde::Serialize)]
struct ErrorDetail {
    kind: gadget_core::call::FailureKind,
    message: String,
}

/// [`gadget_core::audit::shape`] written as it is serialised (no tree built):
/// each key's type and size, keys redacted and bounded.
struct ShapeOf<'a> {
    value: &'a Value,
    redactor: &'a Redactor,
}

impl serde::Serialize for ShapeOf<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let kind = |serializer: S, kind: &str, size: Option<(&str, usize)>| {
            let mut map = serializer.serialize_map(Some(1 + usize::from(size.is_some())))?;
            map.serialize_entry("type", kind)?;
            if let Some((key, size)) = size {
                map.serialize_entry(key, &size)?;
            }
            map.end()
        };
        match self.value {
            Value::Object(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields {
                    let shaped = ShapeOf {
                        value,
                        redactor: self.redactor,
                    };
                    if self.redactor.is_empty() && key.len() <= MAX_RECORD_STRING_BYTES {
                        map.serialize_entry(key, &shaped)?;
                    } else {
                        let key = self.redactor.string(key.clone());
                        let key = truncate(key, MAX_RECORD_STRING_BYTES);
                        map.serialize_entry(&key, &shaped)?;
                    }
                }
                map.end()
            }
            Value::Array(items) => kind(serializer, "array", Some(("items", items.len()))),
            Value::String(text) => {
                kind(serializer, "string", Some(("chars", text.chars().count())))
            }
            Value::Number(_) => kind(serializer, "number", None),
            Value::Bool(_) => kind(serializer, "boolean", None),
            Value::Null => kind(serializer, "null", None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_written_as_it_goes_is_the_shape_built() {
        let value = json!({"a": "héllo", "b": [1, 2], "c": {"d": null, "e": true}, "f": 1.5});
        let none = Redactor::new(Vec::new());
        let written = serde_json::to_value(ShapeOf {
            value: &value,
            redactor: &none,
        })
        .unwrap();
        assert_eq!(written, gadget_core::audit::shape(&value));
        // A secret in a key is redacted like anywhere else.
        let secret = Redactor::new(vec!["hunter2-key".into()]);
        let keyed = json!({"hunter2-key": 1});
        let text = serde_json::to_string(&ShapeOf {
            value: &keyed,
            redactor: &secret,
        })
        .unwrap();
        assert!(!text.contains("hunter2-key"), "{text}");
    }
}
