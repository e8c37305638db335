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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::call::{CallError, CallReport, Example, GadgetSpec, Outcome};
use crate::limits::OwnTimeout;
use crate::params::ParamSchema;
use crate::tool::{BoxFuture, Tool, ToolCall};

/// The viewer's name, as the model writes it.
pub const VIEWER_NAME: &str = "GadgetOutputViewer";

/// The share of the context window one result may take, by default
/// (the seeds' 15%).
pub const DEFAULT_OUTPUT_LIMIT_PERCENT: u32 = 15;

/// The model's context window, in tokens, when none is given: llmist's
/// fallback for models it does not know.
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: u64 = 128_000;

/// Characters per token for sizing the limit: the seeds' rule of thumb
/// (llmist itself uses 2, which halves every limit).
pub const CHARS_PER_TOKEN: u64 = 4;

/// Characters a character-mode "next chunk" hint spans (llmist's window).
pub const CHARACTER_HINT_WINDOW: usize = 2_000;

/// A line this long (characters) in an output of at most 3 lines makes it
/// "dense": the viewer suggests character mode (llmist's threshold).
pub const DENSE_LINE_CHARS: usize = 4_000;

/// Outputs one session keeps for the viewer. The oldest goes first past
/// it, so a long session cannot grow without bound; 64 results of the
/// default 76,800-character limit and more is tens of megabytes at most.
pub const MAX_STORED_OUTPUTS: usize = 64;

/// Bytes one stored output may take; anything longer is kept up to here
/// (at a character boundary) and the message says so. Gadget results are
/// already capped by the runtime's result limit (4 MiB by default, 64 MiB
/// at most); this bounds the store whatever the runtime was told.
pub const MAX_STORED_OUTPUT_BYTES: usize = 16 << 20;

/// Bytes all of a session's stored outputs may take together: the oldest
/// go first past it, so 64 outputs of 16 MiB cannot pin a gigabyte.
pub const MAX_STORED_TOTAL_BYTES: usize = 64 << 20;

/// Backtracking steps one viewer pattern may take on one line before it
/// gives up with an error: a model's regex must not hang the host.
pub const REGEX_BACKTRACK_LIMIT: usize = 1_000_000;

/// The character limit for a context window (tokens) and a percentage:
/// `floor(window × percent / 100 × 4)`.
pub fn char_limit(context_window_tokens: u64, percent: u32) -> usize {
    (context_window_tokens * u64::from(percent) * CHARS_PER_TOKEN / 100) as usize
}

/// One stored output, with the counts the messages need.
#[derive(Debug, Clone)]
pub struct StoredOutput {
    pub id: String,
    pub gadget: String,
    pub content: String,
    pub char_count: usize,
    pub byte_size: usize,
    pub line_count: usize,
    pub max_line_chars: usize,
}

/// The oversized outputs of one session, by id.
#[derive(Debug, Default)]
pub struct OutputStore {
    outputs: HashMap<String, StoredOutput>,
    /// Ids in storing order, for the "Available IDs" list and eviction.
    order: Vec<String>,
}

impl OutputStore {
    /// Keeps `content` under `{gadget}_{8 hex digits of its SHA-256}`.
    pub fn store(&mut self, gadget: &str, mut content: String) -> &StoredOutput {
        if content.len() > MAX_STORED_OUTPUT_BYTES {
            let mut cut = MAX_STORED_OUTPUT_BYTES;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            content.truncate(cut);
        }
        let digest = Sha256::digest(content.as_bytes());
        let id = format!(
            "{gadget}_{:02x}{:02x}{:02x}{:02x}",
            digest[0], digest[1], digest[2], digest[3]
        );
        if self.outputs.contains_key(&id) {
            // The same output again (or, once in four billion, another
            // with the same prefix: the newer wins).
            self.order.retain(|other| other != &id);
            self.outputs.remove(&id);
        }
        let stored_bytes = |outputs: &HashMap<String, StoredOutput>| -> usize {
            outputs.values().map(|o| o.byte_size).sum()
        };
        while !self.order.is_empty()
            && (self.order.len() >= MAX_STORED_OUTPUTS
                || stored_bytes(&self.outputs) + content.len() > MAX_STORED_TOTAL_BYTES)
        {
            let oldest = self.order.remove(0);
            self.outputs.remove(&oldest);
        }
        let (mut line_count, mut max_line_chars) = (0, 0);
        for line in content.split('\n') {
            line_count += 1;
            max_line_chars = max_line_chars.max(line.chars().count());
        }
        let stored = StoredOutput {
            id: id.clone(),
            gadget: gadget.to_string(),
            char_count: content.chars().count(),
            byte_size: content.len(),
            line_count,
            max_line_chars,
            content,
        };
        self.order.push(id.clone());
        self.outputs.entry(id).insert_entry(stored).into_mut()
    }

    pub fn get(&self, id: &str) -> Option<&StoredOutput> {
        self.outputs.get(id)
    }

    /// Ids in storing order.
    pub fn ids(&self) -> &[String] {
        &self.order
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
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
        view(&self.store, &params, self.char_limit)
    }
}

/// The built-in `GadgetOutputViewer`, a [`Tool`] like any gadget: it
/// reads the outputs its session's [`OutputLimiter`] stored.
pub struct OutputViewer {
    limiter: Arc<Mutex<OutputLimiter>>,
    spec: GadgetSpec,
    schema: ParamSchema,
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
            spec,
            schema,
        }
    }
}

impl Tool for OutputViewer {
    fn spec(&self) -> &GadgetSpec {
        &self.spec
    }

    fn schema(&self) -> &ParamSchema {
        &self.schema
    }

    fn own_timeout(&self) -> OwnTimeout {
        OwnTimeout::None
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
            .map(|result| Outcome::Result {
                result,
                details: None,
            })
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

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Line,
    Character,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize)]
struct Pattern {
    regex: String,
    #[serde(default = "default_true")]
    include: bool,
    #[serde(default)]
    before: usize,
    #[serde(default)]
    after: usize,
}

#[derive(Debug, Deserialize)]
struct ViewParams {
    id: String,
    #[serde(default = "line_mode")]
    mode: Mode,
    #[serde(default)]
    patterns: Option<Vec<Pattern>>,
    #[serde(default)]
    limit: Option<String>,
}

fn line_mode() -> Mode {
    Mode::Line
}

/// A window of the limit grammar: `N-` first N, `-N` last N, `A-B` the
/// 1-based inclusive range. Anything else is no window at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    First(usize),
    Last(usize),
    Range(usize, usize),
}

/// llmist's `parseLimitWindow`, including `parseInt`'s leniency: `"5x-"`
/// reads as the first 5, `"-3abc"` as the last 3.
fn parse_window(limit: &str) -> Option<Window> {
    let trimmed = crate::parser::js_trim(limit);
    if let Some(head) = trimmed.strip_suffix('-')
        && !trimmed.starts_with('-')
        && let Some(n) = parse_int_prefix(head)
        && n > 0
    {
        return Some(Window::First(n as usize));
    }
    if let Some(tail) = trimmed.strip_prefix('-')
        && !tail.contains('-')
        && let Some(n) = parse_int_prefix(tail)
        && n > 0
    {
        return Some(Window::Last(n as usize));
    }
    let (a, b) = trimmed.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if digits(a) && digits(b) {
        let (start, end) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
        if start > 0 && end >= start {
            return Some(Window::Range(start, end));
        }
    }
    None
}

/// JavaScript's `parseInt(s, 10)` for non-negative results: leading
/// whitespace and `+`, then as many digits as there are.
fn parse_int_prefix(text: &str) -> Option<u64> {
    let text = crate::parser::js_trim(text);
    let text = text.strip_prefix('+').unwrap_or(text);
    let digits: &str = &text[..text.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    Some(digits.parse::<u64>().unwrap_or(u64::MAX))
}

/// `1234567` → `1,234,567` (JavaScript's `toLocaleString()` in en-US).
pub fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn plural(count: usize, singular: &str) -> String {
    if count == 1 {
        singular.to_string()
    } else {
        format!("{singular}s")
    }
}

fn suggests_character_mode(stored: &StoredOutput, max_output_chars: usize) -> bool {
    stored.line_count <= 3
        && (stored.max_line_chars > max_output_chars || stored.max_line_chars >= DENSE_LINE_CHARS)
}

fn character_range_hint(start: usize, total: usize) -> Option<String> {
    if total == 0 || start > total {
        return None;
    }
    let end = total.min(start + CHARACTER_HINT_WINDOW - 1);
    Some(format!("{start}-{end}"))
}

fn character_mode_suggestion(stored: &StoredOutput, start: usize, remove_patterns: bool) -> String {
    let hint = character_range_hint(start, stored.char_count)
        .map(|h| format!(", limit: \"{h}\""))
        .unwrap_or_default();
    format!(
        "This output is dense ({} {}; longest line {} chars). {} mode: \"character\"{hint}.",
        grouped(stored.line_count),
        plural(stored.line_count, "line"),
        grouped(stored.max_line_chars),
        if remove_patterns {
            "Remove patterns and then try"
        } else {
            "Try"
        },
    )
}

/// Byte offset of the `n`th character of `text` (its length past the end).
fn char_offset(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

fn view(store: &OutputStore, params: &ViewParams, max_chars: usize) -> Result<String, String> {
    let Some(stored) = store.get(&params.id) else {
        let ids = if store.is_empty() {
            "(none)".to_string()
        } else {
            store.ids().join(", ")
        };
        return Ok(format!(
            "Error: No stored output with id \"{}\". Available IDs: {ids}",
            params.id
        ));
    };
    let patterns = params.patterns.as_deref().unwrap_or(&[]);
    match params.mode {
        Mode::Character if !patterns.is_empty() => Ok(
            "Error: patterns are only supported in mode \"line\". Remove patterns or switch back to mode: \"line\"."
                .into(),
        ),
        Mode::Character => Ok(view_characters(stored, params.limit.as_deref(), max_chars)),
        Mode::Line => view_lines(stored, patterns, params.limit.as_deref(), max_chars),
    }
}

fn view_characters(stored: &StoredOutput, limit: Option<&str>, max_chars: usize) -> String {
    let total = stored.char_count;
    if total == 0 {
        return "[Mode: character | Output is empty]".into();
    }
    let window = limit.and_then(parse_window);
    let (mut start, end) = match window {
        Some(Window::First(n)) => (0, n.min(total)),
        Some(Window::Last(n)) => (total.saturating_sub(n), total),
        Some(Window::Range(a, b)) => ((a - 1).min(total), b.min(total)),
        None => (0, total),
    };
    let mut len = end.saturating_sub(start);
    let truncated = len > max_chars;
    if truncated {
        if matches!(window, Some(Window::Last(_))) {
            start = end - max_chars;
        }
        len = max_chars;
    }
    let from = char_offset(&stored.content, start);
    let text = &stored.content[from..from + char_offset(&stored.content[from..], len)];
    let (shown_start, shown_end) = if len == 0 {
        (0, 0)
    } else {
        (start + 1, start + len)
    };
    let mut header = format!(
        "[Mode: character | Showing chars {}-{} of {}{}]",
        grouped(shown_start),
        grouped(shown_end),
        grouped(total),
        if truncated {
            " (truncated due to viewer size limit)"
        } else {
            ""
        }
    );
    if start + len < total
        && let Some(next) = character_range_hint(shown_end + 1, total)
    {
        header.push_str(&format!(
            "\n[Next chunk: mode: \"character\", limit: \"{next}\"]"
        ));
    }
    format!("{header}\n{text}")
}

fn compile(pattern: &str) -> Result<fancy_regex::Regex, String> {
    fancy_regex::RegexBuilder::new(pattern)
        .backtrack_limit(REGEX_BACKTRACK_LIMIT)
        .build()
        .map_err(|e| format!("Invalid regular expression: /{pattern}/: {e}"))
}

fn matches(regex: &fancy_regex::Regex, line: &str) -> Result<bool, String> {
    regex
        .is_match(line)
        .map_err(|e| format!("Regular expression /{}/ gave up: {e}", regex.as_str()))
}

fn apply_pattern<'a>(lines: Vec<&'a str>, pattern: &Pattern) -> Result<Vec<&'a str>, String> {
    let regex = compile(&pattern.regex)?;
    if !pattern.include {
        let mut kept = Vec::with_capacity(lines.len());
        for line in lines {
            if !matches(&regex, line)? {
                kept.push(line);
            }
        }
        return Ok(kept);
    }
    let mut keep = vec![false; lines.len()];
    for (i, line) in lines.iter().enumerate() {
        if matches(&regex, line)? {
            let from = i.saturating_sub(pattern.before);
            let to = (i.saturating_add(pattern.after)).min(lines.len() - 1);
            keep[from..=to].iter_mut().for_each(|k| *k = true);
        }
    }
    Ok(lines
        .into_iter()
        .zip(keep)
        .filter_map(|(line, k)| k.then_some(line))
        .collect())
}

fn view_lines(
    stored: &StoredOutput,
    patterns: &[Pattern],
    limit: Option<&str>,
    max_chars: usize,
) -> Result<String, String> {
    let mut lines: Vec<&str> = stored.content.split('\n').collect();
    for pattern in patterns {
        lines = apply_pattern(lines, pattern)?;
    }
    if let Some(window) = limit.and_then(parse_window) {
        lines = match window {
            Window::First(n) => lines[..n.min(lines.len())].to_vec(),
            Window::Last(n) => lines[lines.len().saturating_sub(n)..].to_vec(),
            Window::Range(a, b) => {
                let from = (a - 1).min(lines.len());
                lines[from..b.min(lines.len())].to_vec()
            }
        };
    }
    let total = stored.line_count;
    let total_label = plural(total, "line");
    let dense = suggests_character_mode(stored, max_chars);
    let remove_patterns = !patterns.is_empty();
    let returned = lines.len();
    if returned == 0 {
        let base = format!(
            "No lines matched the filters. Original output had {} lines.",
            grouped(total)
        );
        return Ok(if dense {
            format!(
                "{base} {}",
                character_mode_suggestion(stored, 1, remove_patterns)
            )
        } else {
            base
        });
    }
    // Sizes in characters: joined length is the lines plus the newlines.
    let joined_chars: usize = lines.iter().map(|l| l.chars().count()).sum::<usize>() + returned - 1;
    let mut included = returned;
    let mut clipped_first = false;
    let output = if joined_chars > max_chars {
        let mut out = String::new();
        let mut out_chars = 0;
        included = 0;
        for line in &lines {
            let addition = line.chars().count() + usize::from(included > 0);
            if out_chars + addition > max_chars {
                break;
            }
            if included > 0 {
                out.push('\n');
            }
            out.push_str(line);
            out_chars += addition;
            included += 1;
        }
        if included == 0 {
            clipped_first = true;
            included = 1;
            out = lines[0][..char_offset(lines[0], max_chars)].to_string();
        }
        out
    } else {
        lines.join("\n")
    };
    let header = if clipped_first {
        format!(
            "[Mode: line | Showing 1 partial line of {} {total_label} (the selected line exceeds the viewer size limit)]\n",
            grouped(total)
        )
    } else if joined_chars > max_chars {
        let remaining = returned - included;
        format!(
            "[Mode: line | Showing {} of {} {total_label} (truncated due to size limit)]\n[... {} more {}. Use limit parameter to paginate, e.g., limit: \"{}-{}\"]\n",
            grouped(included),
            grouped(total),
            grouped(remaining),
            plural(remaining, "line"),
            included + 1,
            included + 200
        )
    } else if returned < total {
        format!(
            "[Mode: line | Showing {} of {} {total_label}]\n",
            grouped(returned),
            grouped(total)
        )
    } else {
        format!(
            "[Mode: line | Showing all {} {total_label}]\n",
            grouped(total)
        )
    };
    let footer = if dense || clipped_first {
        format!(
            "\n[Tip: {}]",
            character_mode_suggestion(stored, 1, remove_patterns)
        )
    } else {
        String::new()
    };
    Ok(format!("{header}{output}{footer}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limiter_with(content: &str, limit: usize) -> (OutputLimiter, String) {
        let mut limiter = OutputLimiter::new(limit);
        let (message, id) = limiter.limit("Big", content.to_string());
        let id = id.unwrap();
        (limiter, format!("{message}\u{0}{id}"))
    }

    fn numbered(n: usize) -> String {
        (1..=n)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn short_results_pass_and_long_ones_are_stored_with_llmists_message() {
        let mut limiter = OutputLimiter::new(100);
        assert_eq!(
            limiter.limit("Big", "x".repeat(100)),
            ("x".repeat(100), None)
        );
        let text = numbered(400);
        let (message, stored) = limiter.limit("Big", text.clone());
        let id = &limiter.store.ids()[0];
        assert_eq!(stored.as_ref(), Some(id));
        assert!(id.starts_with("Big_") && id.len() == 12, "{id}");
        assert!(id[4..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            message,
            format!(
                "[Gadget \"Big\" returned too much data: {} bytes, 400 lines. Use GadgetOutputViewer with id \"{id}\" to read it.]",
                grouped(text.len())
            )
        );
        // The viewer's own output is never limited.
        assert_eq!(limiter.limit(VIEWER_NAME, text.clone()), (text, None));
    }

    #[test]
    fn dense_output_gets_the_character_mode_hint() {
        let (_, both) = limiter_with(&"y".repeat(5_000), 1_000);
        let (message, _) = both.split_once('\u{0}').unwrap();
        assert!(
            message.ends_with(" This output is dense (1 line; longest line 5,000 chars). Try mode: \"character\", limit: \"1-2000\"."),
            "{message}"
        );
    }

    #[test]
    fn the_limit_counts_characters_not_bytes() {
        let mut limiter = OutputLimiter::new(10);
        assert_eq!(limiter.limit("G", "é".repeat(10)).0, "é".repeat(10));
        assert!(
            limiter
                .limit("G", "é".repeat(11))
                .0
                .starts_with("[Gadget \"G\"")
        );
    }

    #[test]
    fn limit_grammar_matches_llmist() {
        assert_eq!(parse_window("50-"), Some(Window::First(50)));
        assert_eq!(parse_window(" -25 "), Some(Window::Last(25)));
        assert_eq!(parse_window("10-20"), Some(Window::Range(10, 20)));
        assert_eq!(parse_window("5x-"), Some(Window::First(5)));
        assert_eq!(parse_window("0-"), None);
        assert_eq!(parse_window("20-10"), None);
        assert_eq!(parse_window("0-3"), None);
        assert_eq!(parse_window("-0"), None);
        assert_eq!(parse_window("abc"), None);
        assert_eq!(parse_window("1-2-3"), None);
    }

    #[test]
    fn grouping_is_en_us() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(14_011), "14,011");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    fn view_of(limiter: &OutputLimiter, params: Value) -> String {
        limiter.view(&params).unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn line_mode_headers() {
        let (limiter, both) = limiter_with(&numbered(400), 100);
        let id = both.split_once('\u{0}').unwrap().1;
        assert_eq!(
            view_of(&limiter, json!({"id": id, "limit": "5-"})),
            "[Mode: line | Showing 5 of 400 lines]\nline 1\nline 2\nline 3\nline 4\nline 5"
        );
        assert_eq!(
            view_of(&limiter, json!({"id": id, "limit": "-2"})),
            "[Mode: line | Showing 2 of 400 lines]\nline 399\nline 400"
        );
        assert_eq!(
            view_of(&limiter, json!({"id": id, "limit": "10-11"})),
            "[Mode: line | Showing 2 of 400 lines]\nline 10\nline 11"
        );
        // Over the size limit: whole lines, and a hint to paginate.
        let all = view_of(&limiter, json!({"id": id}));
        assert!(
            all.starts_with("[Mode: line | Showing 13 of 400 lines (truncated due to size limit)]\n[... 387 more lines. Use limit parameter to paginate, e.g., limit: \"14-213\"]\nline 1\n"),
            "{all}"
        );
        assert_eq!(
            view_of(
                &limiter,
                json!({"id": id, "patterns": [{"regex": "^nope$"}]})
            ),
            "No lines matched the filters. Original output had 400 lines."
        );
    }

    #[test]
    fn patterns_filter_in_order_with_context() {
        let (limiter, both) = limiter_with(&numbered(30), 10);
        let id = both.split_once('\u{0}').unwrap().1;
        let limiter = OutputLimiter {
            char_limit: 10_000,
            ..limiter
        };
        let out = view_of(
            &limiter,
            json!({"id": id, "patterns": [
                {"regex": "^line (5|20)$", "before": 1, "after": 2},
                {"regex": "21", "include": false}
            ]}),
        );
        assert_eq!(
            out,
            "[Mode: line | Showing 7 of 30 lines]\nline 4\nline 5\nline 6\nline 7\nline 19\nline 20\nline 22",
            "context lines merge; the second pattern drops line 21"
        );
    }

    #[test]
    fn character_mode_windows_and_next_chunk_hint() {
        let content: String = "abcdefghij".repeat(500); // 5,000 chars, one line
        let (limiter, both) = limiter_with(&content, 3_000);
        let id = both.split_once('\u{0}').unwrap().1;
        assert_eq!(
            view_of(
                &limiter,
                json!({"id": id, "mode": "character", "limit": "1-50"})
            ),
            format!(
                "[Mode: character | Showing chars 1-50 of 5,000]\n[Next chunk: mode: \"character\", limit: \"51-2050\"]\n{}",
                &content[..50]
            )
        );
        assert_eq!(
            view_of(
                &limiter,
                json!({"id": id, "mode": "character", "limit": "-5"})
            ),
            "[Mode: character | Showing chars 4,996-5,000 of 5,000]\nfghij"
        );
        let all = view_of(&limiter, json!({"id": id, "mode": "character"}));
        assert!(
            all.starts_with("[Mode: character | Showing chars 1-3,000 of 5,000 (truncated due to viewer size limit)]\n[Next chunk: mode: \"character\", limit: \"3001-5000\"]\n"),
            "{all}"
        );
        assert_eq!(
            view_of(
                &limiter,
                json!({"id": id, "mode": "character", "patterns": [{"regex": "a"}]})
            ),
            "Error: patterns are only supported in mode \"line\". Remove patterns or switch back to mode: \"line\"."
        );
        // A dense output in line mode: one partial line and the tip.
        let line = view_of(&limiter, json!({"id": id}));
        assert!(line.starts_with("[Mode: line | Showing 1 partial line of 1 line (the selected line exceeds the viewer size limit)]\n"), "{line}");
        assert!(line.ends_with("\n[Tip: This output is dense (1 line; longest line 5,000 chars). Try mode: \"character\", limit: \"1-2000\".]"), "{line}");
    }

    #[test]
    fn unknown_ids_list_the_stored_ones() {
        let (limiter, both) = limiter_with(&numbered(50), 10);
        let id = both.split_once('\u{0}').unwrap().1;
        assert_eq!(
            view_of(&limiter, json!({"id": "nope_123"})),
            format!("Error: No stored output with id \"nope_123\". Available IDs: {id}")
        );
        let empty = OutputLimiter::new(10);
        assert_eq!(
            view_of(&empty, json!({"id": "x"})),
            "Error: No stored output with id \"x\". Available IDs: (none)"
        );
    }

    #[test]
    fn bad_and_runaway_regexes_are_errors_not_hangs() {
        let (limiter, both) = limiter_with(&format!("{}!", "a".repeat(40)), 10);
        let id = both.split_once('\u{0}').unwrap().1;
        let bad = view_of(&limiter, json!({"id": id, "patterns": [{"regex": "("}]}));
        assert!(
            bad.starts_with("ERR Invalid regular expression: /(/"),
            "{bad}"
        );
        // Catastrophic backtracking (a backreference forces the
        // backtracking engine) hits the limit and says so.
        let runaway = view_of(
            &limiter,
            json!({"id": id, "patterns": [{"regex": "^(a|a)+\\1$"}]}),
        );
        assert!(runaway.starts_with("ERR Regular expression"), "{runaway}");
    }

    #[test]
    fn ids_are_content_addressed() {
        let mut store = OutputStore::default();
        let a = store.store("G", "same".into()).id.clone();
        let b = store.store("G", "same".into()).id.clone();
        let c = store.store("G", "other".into()).id.clone();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // sha256("same") starts 0967115f.
        assert_eq!(a, "G_0967115f");
        assert_eq!(store.ids(), [a, c]);
    }

    #[test]
    fn a_stored_output_is_capped_at_a_character_boundary() {
        let mut store = OutputStore::default();
        // One byte short of the cap, then a two-byte character across it.
        let content = format!("{}é tail", "x".repeat(MAX_STORED_OUTPUT_BYTES - 1));
        let stored = store.store("G", content);
        assert_eq!(stored.byte_size, MAX_STORED_OUTPUT_BYTES - 1);
        assert!(stored.content.bytes().all(|b| b == b'x'));
    }

    #[test]
    fn the_store_is_bounded() {
        let mut store = OutputStore::default();
        for i in 0..MAX_STORED_OUTPUTS + 5 {
            store.store("G", format!("output {i}"));
        }
        assert_eq!(store.len(), MAX_STORED_OUTPUTS);
        assert_eq!(
            store.get(&store.ids()[0]).unwrap().content,
            "output 5",
            "the oldest went first"
        );
    }

    #[test]
    fn the_store_is_bounded_in_bytes_too() {
        let mut store = OutputStore::default();
        let big = MAX_STORED_OUTPUT_BYTES;
        for i in 0..6 {
            store.store("G", format!("{i}{}", "x".repeat(big - 1)));
        }
        let total: usize = store
            .ids()
            .iter()
            .map(|id| store.get(id).unwrap().byte_size)
            .sum();
        assert!(total <= MAX_STORED_TOTAL_BYTES, "{total}");
        assert_eq!(store.len(), MAX_STORED_TOTAL_BYTES / big);
        assert!(store.get(&store.ids()[0]).unwrap().content.starts_with('2'));
    }
}
