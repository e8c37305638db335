//! The audit journal's format: one JSON object per line, each carrying the
//! SHA-256 of the line before it, so a changed, removed or reordered line
//! breaks the chain at a place [`verify`] names.
//!
//! A record says what happened (`event`), to which call of which gadget of
//! which plugin (with its component's digest), when and in which session;
//! `detail` holds the event's own fields. Parameters are recorded by their
//! shape ([`shape`]: keys, types, sizes) unless the operator asks for
//! values, and secret values never reach a record (the writer redacts).
//!
//! What the plain chain proves: that no line was changed, removed or
//! reordered by someone who did not then rehash every later line. Anyone
//! who can write the file can do that (or forge a journal whole), so a
//! journal may be keyed (`[audit] key-env`): each line then carries `mac`,
//! an HMAC-SHA256 with the operator's secret over the line without it
//! ([`line_mac`]), and only a holder of the key can write a line that
//! verifies. What no chain can show: a journal cut after its last line.
//! Ship the journal off the machine (or anchor its last hash elsewhere)
//! when that matters.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The `prev` of a journal's first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Records one call may add to the journal besides its start and end:
/// far more than an honest call's requests, file operations and costs;
/// past it, one `records_dropped` record at the call's end counts the rest,
/// so a hostile gadget cannot grow the journal without bound.
pub const MAX_RECORDS_PER_CALL: u64 = 1000;

/// Longest string value kept in a record's detail, in bytes (parameter
/// values when the policy asks for them, reasons, URLs).
pub const MAX_RECORD_STRING_BYTES: usize = 4096;

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// 1 for the first line of a journal, then one more per line.
    pub seq: u64,
    /// UTC, RFC 3339 with milliseconds.
    pub time: String,
    /// The session (one `gadget run`, `agent`, `call` or server process).
    pub session: String,
    /// What happened: `call_started`, `call_finished`, `http`, `llm`,
    /// `cost`, `approval`, `records_dropped`, ...
    pub event: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub call: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gadget: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub plugin: Option<String>,
    /// SHA-256 of the plugin's component.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub digest: Option<String>,
    /// Who called, as the server authenticated them (an access token's
    /// subject); absent for an anonymous caller.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client: Option<String>,
    #[serde(skip_serializing_if = "Value::is_null", default)]
    pub detail: Value,
    /// SHA-256 (hex) of the previous line's bytes, [`GENESIS`] for the first.
    pub prev: String,
    /// In a keyed journal: HMAC-SHA256 (hex) with the operator's key of
    /// this line without its `mac` (always the last field).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mac: Option<String>,
}

/// What a record is, by its `event`: the name the writer puts on each
/// line, so no writer spells one by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    CallStarted,
    /// A catalog request's start (`resources/read`), in place of
    /// `call_started`; its end is a `call_finished`.
    ResourceRead,
    /// `prompts/get`'s start.
    Prompt,
    /// `completion/complete`'s start.
    Completion,
    CallFinished,
    CallRefused,
    Cost,
    Approval,
    Http,
    File,
    Config,
    Llm,
    Omitted,
    RecordsDropped,
}

impl RecordKind {
    /// The `event` of its records.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::CallStarted => "call_started",
            RecordKind::ResourceRead => "resource_read",
            RecordKind::Prompt => "prompt",
            RecordKind::Completion => "completion",
            RecordKind::CallFinished => "call_finished",
            RecordKind::CallRefused => "call_refused",
            RecordKind::Cost => "cost",
            RecordKind::Approval => "approval",
            RecordKind::Http => "http",
            RecordKind::File => "file",
            RecordKind::Config => "config",
            RecordKind::Llm => "llm",
            RecordKind::Omitted => "omitted",
            RecordKind::RecordsDropped => "records_dropped",
        }
    }

    /// The records of a door's effects.
    pub fn of_door(door: crate::effect::Door) -> RecordKind {
        use crate::effect::Door;
        match door {
            Door::Http => RecordKind::Http,
            Door::File => RecordKind::File,
            Door::Config => RecordKind::Config,
            Door::Llm => RecordKind::Llm,
            Door::Omitted => RecordKind::Omitted,
            Door::Call => RecordKind::CallRefused,
            Door::Approval => RecordKind::Approval,
        }
    }
}

/// A record's `event` and `detail` as one type (ripgrep's tagged JSON
/// lines): readers match on it, and the compiler finds every kind. The
/// JSON on disk is the record's own (`"event": ..., "detail": ...`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "detail", rename_all = "snake_case")]
pub enum RecordBody {
    /// The parameters' shape (or values, when the policy asks), the
    /// deadline, the provenance.
    CallStarted(Value),
    /// A catalog request's start: what a call's start says, its
    /// parameters being what the request asked for.
    ResourceRead(Value),
    Prompt(Value),
    Completion(Value),
    CallFinished(CallFinished),
    CallRefused(CallRefused),
    Cost {
        usd: f64,
    },
    Approval(Value),
    Http(crate::effect::Effect),
    File(crate::effect::Effect),
    Config(crate::effect::Effect),
    Llm(crate::effect::Effect),
    Omitted(crate::effect::Effect),
    RecordsDropped {
        count: u64,
        cap: u64,
    },
}

/// How a call ended, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallFinished {
    /// `result`, `finish`, `ask-human` or `error`.
    pub outcome: String,
    #[serde(default)]
    pub error: Option<RecordedError>,
    pub duration_ms: f64,
    pub cost: f64,
}

/// A failure, as recorded: its kind and (redacted, bounded) message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedError {
    pub kind: String,
    pub message: String,
}

/// A call refused before it reached a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRefused {
    pub kind: String,
    pub message: String,
}

impl Record {
    /// The record's event and detail as a type; `None` for an event this
    /// version does not know, or a detail that does not fit it (shown as
    /// written).
    pub fn body(&self) -> Option<RecordBody> {
        let mut tagged = Map::with_capacity(2);
        tagged.insert("event".into(), Value::String(self.event.clone()));
        tagged.insert("detail".into(), self.detail.clone());
        serde_json::from_value(Value::Object(tagged)).ok()
    }
}

/// How a keyed line ends: `","mac":"` 64 hex digits `"}`.
const MAC_SUFFIX_BYTES: usize = r#"","mac":""#.len() + 64 + r#""}"#.len();

/// The HMAC-SHA256 (hex) with `key` of a line's bytes without its `mac`
/// (`{"seq":..,"prev":".."}`); `None` only if HMAC refused the key (it
/// takes any size), and then no line is written or verified with it.
pub fn line_mac(key: &[u8], unsigned: &[&[u8]]) -> Option<String> {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<Sha256>::new_from_slice(key).ok()?;
    for piece in unsigned {
        mac.update(piece);
    }
    Some(hex(&mac.finalize().into_bytes()))
}

/// A keyed line's MAC and the bytes it covers (the line without it).
fn split_mac(line: &str) -> Option<(&str, &str)> {
    let cut = line.len().checked_sub(MAC_SUFFIX_BYTES)?;
    let suffix = line.get(cut..)?;
    let mac = suffix.strip_prefix(r#"","mac":""#)?.strip_suffix(r#""}"#)?;
    Some((&line[..cut], mac))
}

/// SHA-256 of one line (without its newline), hex: the next line's `prev`.
pub fn line_hash(line: &str) -> String {
    hex(&Sha256::digest(line.as_bytes()))
}

/// Lower-case hex, without a formatter per byte (this is on every
/// record's path).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// Where the chain first breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct Broken {
    /// 1-based line number in the file.
    pub line: usize,
    pub why: String,
}

/// Checks a whole journal: every line a record, numbered one after
/// another, each carrying the hash of the line before. `Ok` is the number
/// of records. A keyed journal needs its key: without one it is refused
/// (its lines are not checked for what only the key can show); with one,
/// every line must carry a MAC the key verifies.
pub fn verify(text: &str, key: Option<&[u8]>) -> Result<usize, Broken> {
    let mut previous: Option<(String, u64)> = None;
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let broken = |why: String| Broken { line: number, why };
        let record: Record = serde_json::from_str(line)
            .map_err(|e| broken(format!("not a journal record ({e})")))?;
        match (key, &record.mac) {
            (None, Some(_)) => {
                return Err(broken(
                    "the journal is keyed: verify it with its key (--key-env VAR, or the policy's [audit] key-env)".into(),
                ));
            }
            (Some(_), None) => {
                return Err(broken(format!(
                    "record {} carries no MAC: it was not written with the key (a keyed journal has one on every line)",
                    record.seq
                )));
            }
            (Some(key), Some(_)) => {
                let (unsigned, mac) = split_mac(line)
                    .ok_or_else(|| broken("its MAC is not the line's last field".into()))?;
                if line_mac(key, &[unsigned.as_bytes(), b"\"}"]).as_deref() != Some(mac) {
                    return Err(broken(format!(
                        "record {} was not written with this key (changed, forged, or another key)",
                        record.seq
                    )));
                }
            }
            (None, None) => {}
        }
        match &previous {
            None => {
                if record.seq != 1 {
                    return Err(broken(format!(
                        "the journal starts at record {}: the {} record(s) before it were removed",
                        record.seq,
                        record.seq.saturating_sub(1)
                    )));
                }
                if record.prev != GENESIS {
                    return Err(broken("the first record does not start the chain".into()));
                }
            }
            Some((hash, seq)) => {
                if record.seq <= *seq {
                    return Err(broken(format!(
                        "record {} comes after record {seq}: lines were reordered or repeated",
                        record.seq
                    )));
                }
                if record.seq > seq + 1 {
                    return Err(broken(format!(
                        "record {} follows record {seq}: {} record(s) were removed before this line",
                        record.seq,
                        record.seq - seq - 1
                    )));
                }
                if &record.prev != hash {
                    return Err(Broken {
                        line: number - 1,
                        why: format!(
                            "record {seq} was changed (line {number} carries a different hash of it)"
                        ),
                    });
                }
            }
        }
        previous = Some((line_hash(line), record.seq));
        count += 1;
    }
    Ok(count)
}

/// The shape of parameters: for each key, its type and size (characters
/// of a string, items of an array, keys of an object), nested; never a
/// value.
pub fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut shaped = Map::new();
            for (key, value) in map {
                shaped.insert(key.clone(), shape(value));
            }
            Value::Object(shaped)
        }
        Value::Array(items) => serde_json::json!({"type": "array", "items": items.len()}),
        Value::String(text) => serde_json::json!({"type": "string", "chars": text.chars().count()}),
        Value::Number(_) => serde_json::json!({"type": "number"}),
        Value::Bool(_) => serde_json::json!({"type": "boolean"}),
        Value::Null => serde_json::json!({"type": "null"}),
    }
}

/// `value` with every string cut to [`MAX_RECORD_STRING_BYTES`], in place
/// (nothing is rebuilt when nothing is long).
pub fn bounded(mut value: Value) -> Value {
    fn cut(value: &mut Value) {
        match value {
            Value::String(text) if text.len() > MAX_RECORD_STRING_BYTES => {
                *text = crate::text::truncate(std::mem::take(text), MAX_RECORD_STRING_BYTES);
            }
            Value::Array(items) => items.iter_mut().for_each(cut),
            Value::Object(map) => map.values_mut().for_each(cut),
            _ => {}
        }
    }
    cut(&mut value);
    value
}

/// Milliseconds since the Unix epoch as RFC 3339 UTC
/// (`2026-11-25T23:10:00.123Z`).
pub fn rfc3339(unix_ms: u64) -> String {
    let (days, ms_of_day) = (unix_ms / 86_400_000, unix_ms % 86_400_000);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, ms) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_as_its_typed_body_and_an_unknown_one_as_none() {
        let line = |event: &str, detail: Value| Record {
            seq: 1,
            time: rfc3339(0),
            session: "s".into(),
            event: event.into(),
            call: None,
            gadget: None,
            plugin: None,
            digest: None,
            client: None,
            detail,
            prev: GENESIS.into(),
            mac: None,
        };
        let http = serde_json::json!({"door": "http", "method": "GET", "origin": "http://a:1",
            "path": "/", "status": 200, "bytes_out": 0, "bytes_in": 3, "duration_ms": 1.0});
        assert!(matches!(
            line("http", http).body(),
            Some(RecordBody::Http(crate::effect::Effect::Http {
                status: Some(200),
                ..
            }))
        ));
        let file = serde_json::json!({"door": "file", "op": "write", "path": "/d/x", "host": "/h/x", "bytes": 3});
        assert!(matches!(
            line("file", file).body(),
            Some(RecordBody::File(crate::effect::Effect::File {
                op: crate::effect::FileOp::Write,
                ..
            }))
        ));
        let finished = serde_json::json!({"outcome": "error", "error": {"kind": "timeout", "message": "m"},
            "duration_ms": 2.0, "cost": 0.0});
        let Some(RecordBody::CallFinished(finished)) = line("call_finished", finished).body()
        else {
            panic!("not read as call_finished");
        };
        assert_eq!(finished.error.unwrap().kind, "timeout");
        assert_eq!(line("something_new", Value::Null).body(), None);
        for kind in [
            RecordKind::CallStarted,
            RecordKind::ResourceRead,
            RecordKind::Prompt,
            RecordKind::Completion,
            RecordKind::RecordsDropped,
            RecordKind::Omitted,
        ] {
            let named = serde_json::to_value(kind).unwrap();
            assert_eq!(
                named,
                kind.as_str(),
                "the written name is the serialised one"
            );
        }
    }
    use serde_json::json;

    fn journal(n: u64) -> Vec<String> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let record = Record {
                    seq,
                    time: rfc3339(seq),
                    session: "s".into(),
                    event: "cost".into(),
                    call: Some(format!("c{seq}")),
                    gadget: None,
                    plugin: None,
                    digest: None,
                    client: None,
                    detail: json!({"usd": seq}),
                    prev: prev.clone(),
                    mac: None,
                };
                let line = serde_json::to_string(&record).unwrap();
                prev = line_hash(&line);
                line
            })
            .collect()
    }

    fn verify_plain(text: &str) -> Result<usize, Broken> {
        verify(text, None)
    }

    #[test]
    fn the_chain_names_the_first_changed_removed_or_reordered_line() {
        let lines = journal(5);
        assert_eq!(verify_plain(&lines.join("\n")), Ok(5));
        let mut changed = lines.clone();
        changed[2] = changed[2].replace("\"usd\":3", "\"usd\":0");
        let err = verify_plain(&changed.join("\n")).unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        assert!(err.why.contains("record 3 was changed"), "{err}");
        let mut removed = lines.clone();
        removed.remove(1);
        let err = verify_plain(&removed.join("\n")).unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(err.why.contains("1 record(s) were removed"), "{err}");
        let mut reordered = lines.clone();
        reordered.swap(3, 4);
        let err = verify_plain(&reordered.join("\n")).unwrap_err();
        assert_eq!(err.line, 4, "{err}");
        let mut garbage = lines;
        garbage[1] = "{}".into();
        assert_eq!(verify_plain(&garbage.join("\n")).unwrap_err().line, 2);
    }

    #[test]
    fn a_shape_has_no_values() {
        let params =
            json!({"path": "/out/secret", "n": 3, "tags": ["a", "b"], "deep": {"on": true}});
        let shaped = shape(&params).to_string();
        assert!(
            !shaped.contains("secret") && !shaped.contains("/out"),
            "{shaped}"
        );
        assert_eq!(
            shape(&params)["path"],
            json!({"type": "string", "chars": 11})
        );
        assert_eq!(shape(&params)["tags"], json!({"type": "array", "items": 2}));
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_645_955_740), "2026-11-25T22:32:35.740Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
