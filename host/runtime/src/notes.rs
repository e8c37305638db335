//! What the host's doors refused, or saw fail, during one call.
//!
//! Every note goes to the call's log when the call ends. A refusal also
//! reaches the model: when the call fails, its error ends with the first
//! refusal's reason, since the model reads neither the log nor the policy
//! and could not otherwise tell "use GET" from "this origin is closed". The
//! operator's part of a refusal (the TOML that would allow it) stays in the
//! log: the model cannot change the policy.

use std::sync::{Arc, Mutex};

use gadget_core::text::truncate;

/// Most bytes of one refusal's reason added to a failed call's error: a
/// URL the gadget wrote can be long, and the reason is there to be read.
pub const MAX_REFUSAL_TOLD_BYTES: usize = 1024;

/// One note: the line for the call's log, and for a refusal, the reason
/// the model is told.
#[derive(Debug)]
pub(crate) struct Note {
    pub(crate) log: String,
    pub(crate) refusal: Option<String>,
}

/// The call's notes, shared by its doors (file streams and HTTP bodies
/// outlive any one host call).
#[derive(Debug, Clone, Default)]
pub(crate) struct Notes(Arc<Mutex<Vec<Note>>>);

impl Note {
    /// A failure or a remark, for the log only.
    pub(crate) fn plain(log: String) -> Note {
        Note { log, refusal: None }
    }

    /// A refusal: `reason` is said in the log (after `what`) and, without
    /// the operator's hint, to the model if the call fails.
    pub(crate) fn refusal(what: &str, reason: &str) -> Note {
        Note {
            log: format!("{what}{reason}"),
            refusal: Some(without_operator_hint(reason).to_string()),
        }
    }
}

impl Notes {
    /// A refusal (see [`Note::refusal`]).
    pub(crate) fn refused(&self, what: &str, reason: &str) {
        self.push(Note::refusal(what, reason));
    }

    pub(crate) fn push(&self, note: Note) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(note);
    }

    /// Everything noted so far, in order.
    pub(crate) fn take(&self) -> Vec<Note> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A refusal's reason without its last parenthesis when that tells the
/// operator how to allow it ("grant it with …", "raise it with …").
fn without_operator_hint(reason: &str) -> &str {
    for hint in [" (grant it with ", " (raise it with "] {
        if let Some(at) = reason.rfind(hint)
            && reason.ends_with(')')
        {
            return &reason[..at];
        }
    }
    reason
}

/// A failed call's message with what the host refused during the call,
/// so the model can correct the request (or stop trying).
pub(crate) fn with_refusals(message: String, notes: &[Note]) -> String {
    let mut refusals = notes.iter().filter_map(|n| n.refusal.as_deref());
    let Some(first) = refusals.next() else {
        return message;
    };
    let first = truncate(first.to_string(), MAX_REFUSAL_TOLD_BYTES);
    let more = match refusals.count() {
        0 => String::new(),
        n => format!(" (and {n} more refusal(s), in the call's log)"),
    };
    format!("{message} [the host refused: {first}{more}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_told_the_reason_and_not_the_operators_hint() {
        let notes = Notes::default();
        notes.push(Note::plain(
            "HTTP http://a/: connection refused".to_string(),
        ));
        notes.refused(
            "refused an HTTP request: ",
            "p: POST https://api.example/v1/x is outside its grant https://api.example (GET; /v1/*) (grant it with [plugins.p] http = [{ origin = \"https://api.example\", methods = [\"POST\"], paths = [\"/v1/x\"] }])",
        );
        notes.refused(
            "",
            "files /data: the call's write quota of 10 bytes is spent: further writes fail (raise it with write-quota-mib on the grant)",
        );
        let taken = notes.take();
        assert_eq!(taken.len(), 3);
        assert!(taken[1].log.starts_with("refused an HTTP request: p: POST"));
        assert!(taken[1].log.contains("grant it with"));
        let told = with_refusals("request failed".to_string(), &taken);
        assert_eq!(
            told,
            "request failed [the host refused: p: POST https://api.example/v1/x is outside its grant https://api.example (GET; /v1/*) (and 1 more refusal(s), in the call's log)]"
        );
        assert!(notes.take().is_empty());
        assert_eq!(with_refusals("plain".to_string(), &[]), "plain");
    }

    #[test]
    fn a_long_reason_is_bounded() {
        let notes = Notes::default();
        notes.refused(
            "",
            &format!("p: GET https://x/{} is not granted", "a".repeat(5000)),
        );
        let told = with_refusals("failed".to_string(), &notes.take());
        assert!(told.len() < MAX_REFUSAL_TOLD_BYTES + 100, "{}", told.len());
        assert!(told.contains("[truncated"));
    }
}
