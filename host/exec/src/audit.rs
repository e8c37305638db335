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
//! Records reach the file in batches (buffers, one per thread as far as
//! they go, handed to the journal's writer thread together when one is
//! full, when a call ends [`FLUSH_INTERVAL`] after the last hand-over,
//! when the writer has waited that long for one, and when the journal is
//! flushed or dropped); the writer orders, numbers, chains and hashes
//! them, so the calls' threads do none of it. A record is in the file
//! within about twice [`FLUSH_INTERVAL`], however idle the host is.
//! A crash can lose the last batch, never break the chain.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use gadget_core::audit::{
    GENESIS, MAX_RECORD_STRING_BYTES, MAX_RECORDS_PER_CALL, Record, RecordKind, bounded, line_hash,
    rfc3339,
};
use gadget_core::call::{CallReport, Outcome};
use gadget_core::client::ClientId;
use gadget_core::events::Failure;
use gadget_core::ledger::{CallEvent, truncate};
use gadget_core::redact::Redactor;
use gadget_core::scope::{CallRecord, Entry, EntryKind, Origin, Recorder};

mod pending;
mod writer;
pub use pending::FLUSH_INTERVAL;
use pending::Pending;
use writer::{Chain, write_batches};

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
        "audit journal {path}: another process is writing it (two writers would fork its chain); give each process its own journal file (`--audit OTHER.jsonl` for this command)"
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
///
/// A record is serialised on the thread of the call that makes it,
/// straight into that thread's shard of the pending records; the writer
/// thread orders the records, numbers, chains and hashes them (and signs
/// them, when keyed) and writes them, a batch at a time. So a call never
/// hashes, formats a line or waits on a write, calls on two cores share
/// no buffer, and the chain's state lives on one thread, unlocked.
pub struct Journal {
    path: PathBuf,
    options: JournalOptions,
    /// The session's name as a JSON string, escaped once.
    session_json: String,
    redactor: Redactor,
    /// Shared with the writer, which hands the records over itself when
    /// nothing else has for [`FLUSH_INTERVAL`].
    pending: Arc<Pending>,
    /// The first write error (later records are not attempted), shared
    /// with the writer; `failing` is read without the lock on every record.
    failed: Arc<Mutex<Option<String>>>,
    failing: Arc<AtomicBool>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// When the journal was opened, and when (ms after it) a batch was
    /// last handed to the writer: read without a lock at each call's end.
    opened: Instant,
    flushed_ms: AtomicU64,
}

/// The fields naming a record's call: `,"call":..,"gadget":..,"plugin":
/// ..,"digest":..,"client":..` (those it has), escaped once and written into each of
/// the call's records as they are: the fields' order of [`Record`].
fn naming(
    call: Option<&str>,
    gadget: Option<&str>,
    origin: Option<&Origin>,
    client: Option<&str>,
) -> Vec<u8> {
    let mut text = Vec::with_capacity(160);
    let fields = [
        ("call", call),
        ("gadget", gadget),
        ("plugin", origin.map(|o| o.plugin.as_str())),
        // A tool with no component (an MCP server's) has no digest.
        (
            "digest",
            origin.map(|o| o.digest.as_str()).filter(|d| !d.is_empty()),
        ),
        ("client", client),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            text.extend_from_slice(b",\"");
            text.extend_from_slice(name.as_bytes());
            text.extend_from_slice(b"\":");
            // Writing a `str` into a `Vec` cannot fail.
            let _ = serde_json::to_writer(&mut text, value);
        }
    }
    text
}

thread_local! {
    /// The last record time this thread wrote, and its text: records of
    /// the same millisecond share it.
    static RECORD_TIME: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
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
        let chain = Chain::new(seq, &prev).ok_or_else(|| JournalError::NotAJournal {
            path: path.to_path_buf(),
        })?;
        Journal::start(path, Box::new(file), options, chain).map_err(io)
    }

    /// A journal written to `out` (a pipe, a socket, a log shipper),
    /// starting a new chain; `name` stands for it in messages.
    pub fn to_writer(
        name: &str,
        out: Box<dyn Write + Send>,
        options: JournalOptions,
    ) -> Result<Journal, JournalError> {
        let path = PathBuf::from(name);
        let Some(chain) = Chain::new(0, GENESIS) else {
            return Err(JournalError::NotAJournal { path });
        };
        Journal::start(&path, out, options, chain)
            .map_err(|source| JournalError::Io { path, source })
    }

    /// The journal, its writer thread started.
    fn start(
        path: &Path,
        out: Box<dyn Write + Send>,
        options: JournalOptions,
        mut chain: Chain,
    ) -> std::io::Result<Journal> {
        chain.key = options.key.as_ref().map(|key| key.0.clone());
        let failed = Arc::new(Mutex::new(None));
        let failing = Arc::new(AtomicBool::new(false));
        let (to_writer, inbox) = std::sync::mpsc::channel();
        let pending = Arc::new(Pending::new(to_writer));
        let writer = std::thread::Builder::new()
            .name("gadget-journal".into())
            .spawn({
                let (failed, failing, pending) = (failed.clone(), failing.clone(), pending.clone());
                move || write_batches(inbox, chain, out, failed, failing, pending)
            })?;
        Ok(Journal {
            path: path.to_path_buf(),
            session_json: serde_json::to_string(&options.session).unwrap_or_default(),
            redactor: Redactor::new(options.secrets.clone()),
            options,
            pending,
            failed,
            failing,
            writer: Mutex::new(Some(writer)),
            opened: Instant::now(),
            flushed_ms: AtomicU64::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first write error, if writing failed (asked before every call:
    /// no lock unless it did).
    pub fn failure(&self) -> Option<String> {
        if !self.failing.load(Ordering::Relaxed) {
            return None;
        }
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn fail(&self, why: String) {
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
        self.failing.store(true, Ordering::Relaxed);
    }

    /// Appends one record of the call `naming` names (redacted, strings
    /// bounded).
    fn record(&self, event: RecordKind, naming: &[u8], detail: Value) {
        let detail = (!detail.is_null()).then(|| bounded(self.redactor.value(detail)));
        self.append(event, naming, Detail(detail));
    }

    /// Appends one record whose detail is already redacted and bounded,
    /// its call named by `naming`: written into this thread's shard of
    /// the pending records (the fields of [`Record`] in their order, but
    /// its place in the chain).
    fn append<D: serde::Serialize>(&self, event: RecordKind, naming: &[u8], detail: D) {
        if self.failing.load(Ordering::Relaxed) {
            return;
        }
        let now = now_ms();
        let pushed = self.pending.push(|text| {
            text.extend_from_slice(b"\"time\":\"");
            RECORD_TIME.with_borrow_mut(|(at, time)| {
                if *at != now {
                    *time = rfc3339(now);
                    *at = now;
                }
                text.extend_from_slice(time.as_bytes());
            });
            text.extend_from_slice(b"\",\"session\":");
            text.extend_from_slice(self.session_json.as_bytes());
            text.extend_from_slice(b",\"event\":\"");
            text.extend_from_slice(event.as_str().as_bytes());
            text.push(b'"');
            text.extend_from_slice(naming);
            text.extend_from_slice(b",\"detail\":");
            // The writer puts the number before and the chain after.
            serde_json::to_writer(&mut *text, &detail)
        });
        match pushed {
            Ok(true) => self.hand_over(),
            Ok(false) => {}
            Err(e) => self.fail(e.to_string()),
        }
    }

    /// Sends the pending records to the writer.
    fn hand_over(&self) {
        self.flushed_ms
            .store(self.opened.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.pending.hand_over();
    }

    /// Writes what is buffered, and returns once it is written.
    pub fn flush(&self) {
        self.flushed_ms
            .store(self.opened.elapsed().as_millis() as u64, Ordering::Relaxed);
        if let Some(written) = self.pending.flush() {
            let _ = written.recv();
        }
    }

    /// Hands what is buffered to the writer if it has waited
    /// [`FLUSH_INTERVAL`].
    fn flush_due(&self) {
        let now = self.opened.elapsed().as_millis() as u64;
        if now.saturating_sub(self.flushed_ms.load(Ordering::Relaxed))
            < FLUSH_INTERVAL.as_millis() as u64
        {
            return;
        }
        self.hand_over();
    }

    /// A call refused before it reached a tool (no such gadget, a gadget
    /// the operator denies, parameters that do not fit), asked for by
    /// `client`: `name` as the caller wrote it, never its parameters.
    pub fn refused(&self, call: &str, name: &str, failure: &Failure, client: &ClientId) {
        // The name is the caller's: a model or a client may write anything.
        let name = truncate(name.to_string(), MAX_REFUSED_NAME_BYTES);
        let call = truncate(call.to_string(), MAX_REFUSED_NAME_BYTES);
        self.record(
            RecordKind::CallRefused,
            &naming(Some(&call), Some(&name), None, client.subject_name()),
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

    fn refused(&self, call: &str, name: &str, failure: &Failure, client: &ClientId) {
        self.0.refused(call, name, failure, client);
    }

    fn call(
        &self,
        entry: Entry<'_>,
        origin: Option<Arc<Origin>>,
        client: &ClientId,
    ) -> Arc<dyn CallRecord> {
        // A catalog request names what it asked for; the caller wrote it,
        // so it is bounded like a refused call's name.
        let name = match entry.kind {
            EntryKind::Call => std::borrow::Cow::Borrowed(entry.name),
            _ => std::borrow::Cow::Owned(truncate(entry.name.to_string(), MAX_REFUSED_NAME_BYTES)),
        };
        let fields = naming(
            Some(entry.id),
            Some(&name),
            origin.as_deref(),
            client.subject_name(),
        );
        Arc::new(CallRecorder {
            journal: self.0.clone(),
            naming: fields,
            origin,
            kind: entry.kind,
            records: AtomicU64::new(0),
        })
    }
}

/// Records one call: its start, what it reports (capped), its end.
struct CallRecorder {
    journal: Arc<Journal>,
    /// The call's naming fields, as every record of it writes them.
    naming: Vec<u8>,
    origin: Option<std::sync::Arc<Origin>>,
    /// Which way into plugin code: the kind of its first record.
    kind: EntryKind,
    /// Records of this call besides its start and end.
    records: AtomicU64,
}

impl CallRecorder {
    fn append<D: serde::Serialize>(&self, event: RecordKind, detail: D) {
        self.journal.append(event, &self.naming, detail);
    }

    fn record(&self, event: RecordKind, detail: Value) {
        self.journal.record(event, &self.naming, detail);
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
        let started = match self.kind {
            EntryKind::Call => RecordKind::CallStarted,
            EntryKind::ResourceRead => RecordKind::ResourceRead,
            EntryKind::Prompt => RecordKind::Prompt,
            EntryKind::Completion => RecordKind::Completion,
        };
        self.append(started, detail);
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
    /// Everything buffered is written, then the writer ends.
    fn drop(&mut self) {
        self.flush();
        self.pending.close();
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
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

    /// No other call comes, the journal stays open: its writer takes the
    /// record itself within about two flush intervals.
    #[test]
    fn an_idle_journals_last_record_reaches_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let journal = Journal::open(&path, JournalOptions::default()).unwrap();
        let failure = Failure::new(
            gadget_core::call::FailureKind::UnknownGadget,
            "no such gadget",
        );
        journal.refused("c1", "Nope", &failure, &ClientId::Local);
        let started = Instant::now();
        // Generous: a loaded machine may run the writer late.
        while std::fs::read_to_string(&path).unwrap().lines().count() < 1 {
            assert!(started.elapsed() < Duration::from_secs(10), "never written");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(journal);
    }

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
