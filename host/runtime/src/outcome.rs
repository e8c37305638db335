//! What a call's end means: a gadget's outcome checked against its limits,
//! or a wasmtime error classified (timeout, memory, crash) with a note
//! from the guest's stderr.

use serde_json::Value;
use wasmtime::{Store, Trap};

use gadget_core::content::{
    Content, Media, ResourceBody, ResourceContents, ResourceLink, Rich, model_text,
};
use gadget_core::ledger::{self, invalid_cost};
use gadget_core::limits::MAX_ERROR_MESSAGE_BYTES;

use crate::bindings::{GuestOutcome, wit};
use crate::{CallError, CallState, Limits, Outcome};

/// Where a call's wasmtime error came from.
pub(crate) enum Failure {
    Instantiation(wasmtime::Error),
    Trapped(wasmtime::Error),
}
pub(crate) use Failure::{Instantiation, Trapped};

/// Turns a successful outcome into the host's form, enforcing the result
/// limit (on the sum of a result's parts) and refusing bad returned costs,
/// details and structured values.
pub(crate) fn accept_outcome(
    outcome: GuestOutcome,
    gadget: &str,
    limits: &Limits,
    state: &mut CallState,
    returned_cost: &mut f64,
) -> Result<Outcome, CallError> {
    let at = state.elapsed_ms();
    let mut take = |r: wit::CallResult, state: &mut CallState| -> Result<Accepted, CallError> {
        let structured = r
            .structured
            .and_then(|text| match ledger::parse_details(&text) {
                Ok(value @ Value::Object(_)) => Some(value),
                Ok(_) => {
                    state.ledger.host_warning(
                        "dropped the structured result: it must be a JSON object".to_string(),
                        at,
                    );
                    None
                }
                Err(reason) => {
                    state
                        .ledger
                        .host_warning(format!("dropped the structured result: {reason}"), at);
                    None
                }
            });
        let mut rich = Rich {
            content: r.content.into_iter().map(content_of).collect(),
            structured,
        };
        let mut faults = Vec::new();
        for part in &mut rich.content {
            part.check_media_types(&mut faults);
        }
        for fault in faults {
            state.ledger.host_warning(fault, at);
        }
        // A plain text weighs its bytes, as it always did; parts weigh
        // their sum with each part's overhead.
        let size = match rich.content.as_slice() {
            [Content::Text { text }] if rich.structured.is_none() => text.len() as u64,
            _ => rich.size_bytes(),
        };
        if size > limits.result_bytes {
            return Err(CallError::ResultTooLarge {
                gadget: gadget.to_string(),
                size_bytes: size,
                limit_bytes: limits.result_bytes,
            });
        }
        if let Some(cost) = r.cost {
            match invalid_cost(cost) {
                None => *returned_cost = cost,
                Some(reason) => state
                    .ledger
                    .host_warning(format!("refused returned cost {cost}: {reason}"), at),
            }
        }
        let details = match r.details {
            None => None,
            Some(text) => match ledger::parse_details(&text) {
                Ok(value) => Some(value),
                Err(reason) => {
                    state
                        .ledger
                        .host_warning(format!("dropped the result's details: {reason}"), at);
                    None
                }
            },
        };
        // One text and nothing else (every 0.1.0 and 0.2.0 result) is the
        // text alone, as it always was.
        if rich.is_plain_text()
            && let Some(Content::Text { text }) = rich.content.pop()
        {
            return Ok((text, details, None));
        }
        Ok((model_text(&rich), details, Some(Box::new(rich))))
    };
    match outcome {
        GuestOutcome::Done(wit::Outcome::Result(r)) => {
            take(r, state).map(|(result, details, rich)| Outcome::Result {
                result,
                details,
                rich,
            })
        }
        GuestOutcome::Done(wit::Outcome::Finish(r)) => {
            take(r, state).map(|(result, details, rich)| Outcome::Finish {
                result,
                details,
                rich,
            })
        }
        GuestOutcome::AskHuman(question) => Ok(Outcome::AskHuman {
            question: state.ledger.bounded(question, MAX_ERROR_MESSAGE_BYTES),
        }),
    }
}

/// A result's text for the model, its details, and its parts when it has
/// more than one text.
type Accepted = (String, Option<Value>, Option<Box<Rich>>);

/// A content part of the contract as the host's.
pub(crate) fn content_of(part: wit::Content) -> Content {
    let media = |m: wit::Media| Media {
        mime_type: m.mime_type,
        data: m.data,
    };
    match part {
        wit::Content::Text(text) => Content::Text { text },
        wit::Content::Image(m) => Content::Image(media(m)),
        wit::Content::Audio(m) => Content::Audio(media(m)),
        wit::Content::Resource(r) => Content::Resource(resource_of(r)),
        wit::Content::ResourceLink(l) => Content::ResourceLink(ResourceLink {
            uri: l.uri,
            name: l.name,
            title: l.title,
            description: l.description,
            mime_type: l.mime_type,
        }),
    }
}

/// A resource's contents of the contract as the host's.
pub(crate) fn resource_of(r: wit::ResourceContents) -> ResourceContents {
    ResourceContents {
        uri: r.uri,
        mime_type: r.mime_type,
        body: match r.body {
            wit::ResourceBody::Text(text) => ResourceBody::Text(text),
            wit::ResourceBody::Blob(bytes) => ResourceBody::Blob(bytes),
        },
    }
}

/// Names the cause of a trap: the deadline, the memory limit, a stack
/// overflow, or a crash (with the panic message from stderr when there is one).
pub(crate) fn classify_trap(
    error: wasmtime::Error,
    store: &mut Store<CallState>,
    limits: &Limits,
) -> CallError {
    let state = store.data();
    let gadget = state.gadget.clone();
    let trap = error.downcast_ref::<Trap>().copied();
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return CallError::Exited {
            gadget,
            status: exit.0,
        };
    }
    if state.time.timed_out || trap == Some(Trap::Interrupt) {
        return CallError::Timeout {
            gadget,
            timeout_ms: limits.timeout.as_millis() as u64,
        };
    }
    if state.limiter.memory_refused {
        return CallError::MemoryLimit {
            gadget,
            limit_bytes: limits.memory_bytes,
        };
    }
    let mut reason = match trap {
        Some(Trap::StackOverflow) => "stack overflow (unbounded recursion?)".to_string(),
        Some(Trap::UnreachableCodeReached) => "wasm `unreachable` executed (a panic or abort in the gadget)".to_string(),
        Some(Trap::MemoryOutOfBounds) => {
            "out-of-bounds memory access (a memory bug in the gadget, or its own stack in linear memory overflowed)".to_string()
        }
        Some(trap) => trap.to_string(),
        None => format!("{error:#}"),
    };
    // A Rust panic prints its message to stderr before aborting: the most
    // useful lines there are for whoever debugs the gadget.
    let stderr = store.data().stderr.snapshot();
    if let Some(note) = crash_note(&String::from_utf8_lossy(&stderr.bytes)) {
        let note = store.data().ledger.bounded(note, 512);
        reason.push_str(&format!("; stderr: {note}"));
    }
    CallError::Crashed { gadget, reason }
}

/// The part of a crashed gadget's stderr worth quoting: a Rust panic's
/// location and message, else the last line that is not a hint.
pub(crate) fn crash_note(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(at) = lines.iter().rposition(|l| l.contains("panicked at")) {
        let message = lines.get(at + 1).filter(|l| !l.starts_with("note:"));
        return Some(match message {
            Some(message) => format!("{} {message}", lines[at]),
            None => lines[at].to_string(),
        });
    }
    lines
        .iter()
        .rev()
        .find(|l| !l.starts_with("note:"))
        .map(|l| l.to_string())
}
