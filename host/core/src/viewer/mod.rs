//! Output limiting and the built-in `GadgetOutputViewer`, as llmist does
//! them (llmist-reference §4(d)).
//!
//! A result (or error text) longer than the limit is kept in the session's
//! [`OutputStore`] and the model sees, instead,
//! `[Gadget "Big" returned too much data: 14,011 bytes, 400 lines. Use
//! GadgetOutputViewer with id "Big_38cfc341" to read it.]`. The model then
//! calls `GadgetOutputViewer` to read it back: by lines (with grep-like
//! patterns and context) or by characters, a window at a time.
//!
//! Two deliberate differences from llmist:
//! - lengths and positions count characters (Unicode scalar values) where
//!   llmist counts UTF-16 units; the two agree on every text without
//!   characters outside the Basic Multilingual Plane (emoji, some CJK), and
//!   ours never splits a character;
//! - ids are `{gadget}_{8 hex digits}` as llmist's, but the digits are the
//!   start of the output's SHA-256 instead of random: a run can be
//!   replayed, a transcript can name the id, and storing the same output
//!   twice keeps one copy.
//!
//! Pure: no I/O, no wasmtime, no tokio.
//!
//! `limits` (names and limits), `store` (the outputs kept), `view`
//! (reading one back); the tool itself is here.

mod limits;
mod store;
#[cfg(test)]
mod tests;
mod view;

pub use limits::*;
pub use store::{OutputStore, StoredOutput, char_limit};
pub use view::grouped;
use view::{ViewParams, character_mode_suggestion, suggests_character_mode};

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use crate::call::{CallError, CallReport, Example, GadgetSpec, Outcome};
use crate::limits::OwnTimeout;
use crate::params::ParamSchema;
use crate::tool::{BoxFuture, Tool, ToolCall, ToolCard};

/// Names of the host's own tools. No plugin may serve a gadget under one
/// of them (compared case-insensitively, as every gadget name is): a
/// plugin cannot stand in for the output viewer.
pub const RESERVED_NAMES: &[&str] = &[VIEWER_NAME];

/// Whether `name` is one of the host's own tools' names.
pub fn is_reserved(name: &str) -> bool {
    RESERVED_NAMES.iter().any(|r| r.eq_ignore_ascii_case(name))
}

/// Output limiting for one session: the limit, the store, the viewer.
#[derive(Debug)]
pub struct OutputLimiter {
    /// Characters a result may have before it is stored instead.
    pub char_limit: usize,
    pub store: OutputStore,
}

impl OutputLimiter {
    pub fn new(char_limit: usize) -> OutputLimiter {
        OutputLimiter {
            char_limit,
            store: OutputStore::default(),
        }
    }

    /// The text the model sees for `text`, a result or error of `gadget`:
    /// the text itself, or (over the limit) the "returned too much data"
    /// message after storing it, with the id it was stored under. The
    /// viewer's own output is never limited.
    pub fn limit(&mut self, gadget: &str, text: String) -> (String, Option<String>) {
        if gadget.eq_ignore_ascii_case(VIEWER_NAME) || !exceeds_chars(&text, self.char_limit) {
            return (text, None);
        }
        let char_limit = self.char_limit;
        let stored = self.store.store(gadget, text);
        let dense = if suggests_character_mode(stored, char_limit) {
            format!(" {}", character_mode_suggestion(stored, 1, false))
        } else {
            String::new()
        };
        let message = format!(
            "[Gadget \"{gadget}\" returned too much data: {} bytes, {} lines. Use {VIEWER_NAME} with id \"{}\" to read it.]{dense}",
            grouped(stored.byte_size),
            grouped(stored.line_count),
            stored.id
        );
        (message, Some(stored.id.clone()))
    }

    /// Runs the viewer on validated parameters; `Err` is an error result.
    pub fn view(&self, params: &Value) -> Result<String, String> {
        let params: ViewParams = serde_json::from_value(params.clone())
            .map_err(|e| format!("Invalid parameters for '{VIEWER_NAME}': {e}"))?;
        view::view(&self.store, &params, self.char_limit)
    }
}

/// The built-in `GadgetOutputViewer`, a [`Tool`] like any gadget: it
/// reads the outputs its session's [`OutputLimiter`] stored.
pub struct OutputViewer {
    limiter: Arc<Mutex<OutputLimiter>>,
    card: ToolCard,
}

impl OutputViewer {
    /// The viewer over `limiter`'s store.
    pub fn new(limiter: Arc<Mutex<OutputLimiter>>) -> OutputViewer {
        let spec = GadgetSpec {
            name: VIEWER_NAME.into(),
            label: None,
            description: VIEWER_DESCRIPTION.into(),
            parameters_schema: viewer_schema().to_string(),
            examples: viewer_examples()
                .into_iter()
                .map(|(comment, params)| Example {
                    params: params.to_string(),
                    output: None,
                    comment: Some(comment),
                })
                .collect(),
            timeout_ms: None,
            exclusive: false,
            max_concurrent: None,
        };
        let schema =
            ParamSchema::compile(&spec.parameters_schema).expect("the viewer's schema is valid");
        OutputViewer {
            limiter,
            card: ToolCard::new(spec, schema, OwnTimeout::None),
        }
    }
}

impl Tool for OutputViewer {
    fn card(&self) -> &ToolCard {
        &self.card
    }

    fn is_instant(&self) -> bool {
        true
    }

    fn run(&self, call: ToolCall) -> BoxFuture<'_, CallReport> {
        let started = Instant::now();
        let outcome = self
            .limiter
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .view(&call.params)
            .map(Outcome::text)
            .map_err(|message| CallError::Failed { message });
        Box::pin(std::future::ready(CallReport::of(
            outcome,
            started.elapsed(),
        )))
    }
}

/// Whether `text` has more than `limit` characters, without counting all
/// of a long text.
fn exceeds_chars(text: &str, limit: usize) -> bool {
    text.len() > limit && text.chars().nth(limit).is_some()
}

/// The viewer's parameters schema (draft 2020-12), as llmist declares it.
pub fn viewer_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "id": {
                "type": "string",
                "description": "ID of the stored output (from the truncation message)"
            },
            "mode": {
                "type": "string",
                "enum": ["line", "character"],
                "default": "line",
                "description": "Browse by \"line\" (supports patterns) or by \"character\" (raw windows for dense output)."
            },
            "patterns": {
                "type": "array",
                "description": "Line-mode filter patterns applied in order (like piping through grep). Not supported in mode \"character\".",
                "items": {
                    "type": "object",
                    "properties": {
                        "regex": {"type": "string", "description": "Regular expression to match"},
                        "include": {"type": "boolean", "default": true, "description": "true = keep matching lines, false = exclude matching lines"},
                        "before": {"type": "integer", "minimum": 0, "default": 0, "description": "Context lines before each match (like grep -B)"},
                        "after": {"type": "integer", "minimum": 0, "default": 0, "description": "Context lines after each match (like grep -A)"}
                    },
                    "required": ["regex"]
                }
            },
            "limit": {
                "type": "string",
                "description": "Pagination window. In mode \"line\" it is a line range; in mode \"character\" it is a character range. Formats: \"100-\" (first 100), \"-25\" (last 25), \"50-100\" (inclusive range)."
            }
        },
        "required": ["id"]
    })
}

/// The viewer's description, as llmist's.
pub const VIEWER_DESCRIPTION: &str = "View stored output from gadgets that returned too much data. Use mode \"line\" for grep-like filtering and mode \"character\" for raw chunked browsing when the output is dense or effectively single-line. Patterns work only in line mode.";

/// The viewer's examples (comment, parameters), as llmist's.
pub fn viewer_examples() -> Vec<(String, Value)> {
    use serde_json::json;
    vec![
        (
            "View first 50 lines of stored output".into(),
            json!({"id": "Search_abc12345", "mode": "line", "limit": "50-"}),
        ),
        (
            "Filter for error lines with context".into(),
            json!({"id": "Search_abc12345", "mode": "line",
                   "patterns": [{"regex": "error|Error|ERROR", "include": true, "before": 2, "after": 5}]}),
        ),
        (
            "Exclude blank lines, then show first 100 lines".into(),
            json!({"id": "Search_abc12345", "mode": "line",
                   "patterns": [{"regex": "^\\s*$", "include": false, "before": 0, "after": 0}],
                   "limit": "100-"}),
        ),
        (
            "Browse the raw output by character window when line mode is too dense".into(),
            json!({"id": "Search_abc12345", "mode": "character", "limit": "1-2000"}),
        ),
    ]
}
