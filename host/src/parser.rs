//! The llmist block format, parsed as a stream.
//!
//! ```text
//! !!!GADGET_START:Name:invocation_id:dep1,dep2
//! !!!ARG:pointer/into/params
//! value
//! !!!GADGET_END
//! ```
//!
//! [`Parser::feed`] takes chunks of model output as they arrive and
//! [`Parser::finish`] ends the stream; both return [`ParseEvent`]s: text
//! between blocks and one [`GadgetCall`] per completed block. The behaviour
//! is llmist 18.4.0's, call for call (see the project's llmist reference,
//! section 1), minus its bugs: text is never emitted twice, pointer
//! segments like `__proto__` are ordinary keys, only fences that wrap the
//! whole parameter section are stripped, and the auto-id counter
//! (`gadget_N`) belongs to a [`Session`], not to the process.
//!
//! Pure: no I/O, no wasmtime, no tokio. Linear in the input for every
//! chunking: each byte is searched a bounded number of times, and the
//! buffer is compacted once per `feed`. One block's size is capped
//! ([`MAX_BLOCK_BYTES`]); past it the block becomes a call with a parse
//! error and the rest of the block is skipped. No input panics it.

use std::fmt;

use memchr::memmem::Finder;
use serde_json::{Map, Number, Value};

/// The default start, end and argument markers.
pub const DEFAULT_START: &str = "!!!GADGET_START:";
pub const DEFAULT_END: &str = "!!!GADGET_END";
pub const DEFAULT_ARG: &str = "!!!ARG:";

/// Largest header line, and largest body, of one block, in bytes. A model
/// writing a single 16 MiB tool call is broken or hostile; the cap bounds
/// the parser's memory for one block. Past it, the call carries a parse
/// error and the rest of the block is skipped, the same for every chunking
/// (only bytes certain to belong to the block are counted).
pub const MAX_BLOCK_BYTES: usize = 16 << 20;

/// Why a parser could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the {0} marker must not be empty")]
    Empty(&'static str),
    #[error("the {0} and {1} markers must differ (both are {2:?})")]
    Same(&'static str, &'static str, String),
}

/// Builds a [`Parser`] with custom markers.
#[derive(Debug, Clone)]
pub struct ParserBuilder {
    start: String,
    end: String,
    arg: String,
    max_block_bytes: usize,
}

impl Default for ParserBuilder {
    fn default() -> Self {
        ParserBuilder {
            start: DEFAULT_START.into(),
            end: DEFAULT_END.into(),
            arg: DEFAULT_ARG.into(),
            max_block_bytes: MAX_BLOCK_BYTES,
        }
    }
}

impl ParserBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn start_marker(mut self, marker: impl Into<String>) -> Self {
        self.start = marker.into();
        self
    }

    pub fn end_marker(mut self, marker: impl Into<String>) -> Self {
        self.end = marker.into();
        self
    }

    pub fn arg_marker(mut self, marker: impl Into<String>) -> Self {
        self.arg = marker.into();
        self
    }

    /// Lowers the block-size cap (tests; hosts with tight memory).
    pub fn max_block_bytes(mut self, bytes: usize) -> Self {
        self.max_block_bytes = bytes.min(MAX_BLOCK_BYTES);
        self
    }

    /// A parser for one stream; its auto ids come from `session`.
    pub fn build(&self) -> Result<Parser, ConfigError> {
        let markers = [
            ("start", &self.start),
            ("end", &self.end),
            ("arg", &self.arg),
        ];
        for (what, marker) in markers {
            if marker.is_empty() {
                return Err(ConfigError::Empty(what));
            }
        }
        for i in 0..markers.len() {
            for j in i + 1..markers.len() {
                if markers[i].1 == markers[j].1 {
                    return Err(ConfigError::Same(
                        markers[i].0,
                        markers[j].0,
                        markers[i].1.clone(),
                    ));
                }
            }
        }
        Ok(Parser {
            start: Finder::new(self.start.as_bytes()).into_owned(),
            end: Finder::new(self.end.as_bytes()).into_owned(),
            start_text: self.start.clone(),
            arg: self.arg.clone(),
            max_block_bytes: self.max_block_bytes,
            buf: String::new(),
            pos: 0,
            search_from: 0,
            state: State::Text,
            session: Session::default(),
            pending_header: None,
        })
    }
}

/// What a session shares across the responses of one conversation: the
/// auto-id counter, so `gadget_N` ids never repeat within it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    auto_ids: u64,
}

impl Session {
    fn next_auto_id(&mut self) -> String {
        self.auto_ids += 1;
        format!("gadget_{}", self.auto_ids)
    }
}

/// One completed block.
#[derive(Debug, Clone, PartialEq)]
pub struct GadgetCall {
    /// As written (not trimmed per part, as llmist).
    pub name: String,
    pub invocation_id: String,
    pub dependencies: Vec<String>,
    /// The block body, trimmed.
    pub parameters_raw: String,
    /// The parameters with llmist's schema-less coercion; `None` on a parse error.
    pub parameters: Option<Map<String, Value>>,
    /// Each argument's raw value, by pointer, in order (for schema-aware coercion).
    pub arguments: Vec<(String, String)>,
    pub parse_error: Option<String>,
}

/// What the parser saw.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseEvent {
    /// Text outside blocks: a whole segment, never whitespace only.
    Text(String),
    /// A completed block.
    Call(GadgetCall),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Outside blocks, looking for a start marker.
    Text,
    /// After a start marker, looking for the header's `\n`.
    Header,
    /// In a block body, looking for the end marker or the next start.
    Body,
    /// Discarding the rest of an oversized block.
    Skip,
}

/// An incremental block-format parser for one stream.
pub struct Parser {
    start: Finder<'static>,
    end: Finder<'static>,
    start_text: String,
    arg: String,
    max_block_bytes: usize,
    /// Unconsumed input starts at `pos`; compacted once per `feed`.
    buf: String,
    pos: usize,
    /// Where the current search resumes (absolute in `buf`).
    search_from: usize,
    state: State,
    session: Session,
    /// Name, id and dependencies of the block being read.
    pending_header: Option<Header>,
}

type Header = (String, String, Vec<String>);

impl fmt::Debug for Parser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parser")
            .field("state", &self.state)
            .field("buffered", &(self.buf.len() - self.pos))
            .finish_non_exhaustive()
    }
}

impl Parser {
    /// A parser with the default markers and a fresh session.
    pub fn new() -> Parser {
        ParserBuilder::new()
            .build()
            .expect("default markers are valid")
    }

    /// Continues `session`'s auto-id numbering (the next response of a conversation).
    pub fn with_session(mut self, session: Session) -> Parser {
        self.session = session;
        self
    }

    /// The session, to hand to the parser of the next response.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Parses the next chunk.
    pub fn feed(&mut self, chunk: &str) -> Vec<ParseEvent> {
        let mut events = Vec::new();
        self.buf.push_str(chunk);
        self.scan(&mut events);
        self.compact();
        events
    }

    /// Ends the stream: what is still open completes as it stands.
    pub fn finish(&mut self) -> Vec<ParseEvent> {
        let mut events = Vec::new();
        let rest = &self.buf[self.pos..];
        match self.state {
            State::Text => push_text(&mut events, rest),
            // A start marker whose header never ended is text [016].
            State::Header => push_text(&mut events, &format!("{}{rest}", self.start_text)),
            State::Body => {
                let (name, id, deps) = self.pending_header.take().unwrap_or_default();
                events.push(ParseEvent::Call(build_call(
                    name, id, deps, rest, &self.arg,
                )));
            }
            State::Skip => {}
        }
        self.buf.clear();
        self.pos = 0;
        self.search_from = 0;
        self.state = State::Text;
        self.pending_header = None;
        events
    }

    /// Runs the state machine over the unconsumed input.
    fn scan(&mut self, events: &mut Vec<ParseEvent>) {
        loop {
            let bytes = self.buf.as_bytes();
            let from = self.search_from.max(self.pos);
            match self.state {
                State::Text => match self.start.find(&bytes[from..]) {
                    Some(offset) => {
                        let at = from + offset;
                        push_text(events, &self.buf[self.pos..at]);
                        self.pos = at + self.start_text.len();
                        self.search_from = self.pos;
                        self.state = State::Header;
                    }
                    None => {
                        self.search_from =
                            resume_point(bytes.len(), self.start.needle().len(), self.pos);
                        return;
                    }
                },
                State::Header => match memchr::memchr(b'\n', &bytes[from..]) {
                    Some(offset) => {
                        let at = from + offset;
                        if at - self.pos > self.max_block_bytes {
                            self.search_from = at + 1;
                            self.oversized(events);
                            continue;
                        }
                        let header = parse_header(&self.buf[self.pos..at], &mut self.session);
                        self.pending_header = Some(header);
                        self.pos = at + 1;
                        self.search_from = self.pos;
                        self.state = State::Body;
                    }
                    None => {
                        self.search_from = bytes.len();
                        if bytes.len() - self.pos > self.max_block_bytes {
                            self.oversized(events);
                        } else {
                            return;
                        }
                    }
                },
                State::Body | State::Skip => {
                    let end = self.end.find(&bytes[from..]).map(|o| from + o);
                    let limit = end.unwrap_or(bytes.len());
                    let start = self.start.find(&bytes[from..limit]).map(|o| from + o);
                    let (body_end, resume) = match (start, end) {
                        // Implicit termination: the next block starts here; its marker stays.
                        (Some(s), _) => (s, s),
                        (None, Some(e)) => (e, e + self.end.needle().len()),
                        (None, None) => {
                            let longest = self.start.needle().len().max(self.end.needle().len());
                            self.search_from = resume_point(bytes.len(), longest, self.pos);
                            if self.state == State::Body
                                && self.search_from - self.pos > self.max_block_bytes
                            {
                                self.oversized(events);
                                continue;
                            }
                            if self.state == State::Skip {
                                // Nothing of a skipped block is kept but a possible marker prefix.
                                self.pos = self.search_from;
                            }
                            return;
                        }
                    };
                    if self.state == State::Body {
                        let (name, id, deps) = self.pending_header.take().unwrap_or_default();
                        let call = if body_end - self.pos > self.max_block_bytes {
                            oversized_call((name, id, deps), self.max_block_bytes)
                        } else {
                            build_call(name, id, deps, &self.buf[self.pos..body_end], &self.arg)
                        };
                        events.push(ParseEvent::Call(call));
                    }
                    self.pos = resume;
                    self.search_from = resume;
                    self.state = State::Text;
                }
            }
        }
    }

    /// The block being read passed the size cap: report it as a call with
    /// a parse error, and skip the rest of it.
    fn oversized(&mut self, events: &mut Vec<ParseEvent>) {
        let header = match self.pending_header.take() {
            Some(header) => header,
            // Still in the header: name the call after its first bytes.
            None => {
                let cut = floor_char_boundary(&self.buf, (self.pos + 64).min(self.buf.len()));
                (
                    js_trim(&self.buf[self.pos..cut]).to_string(),
                    String::new(),
                    Vec::new(),
                )
            }
        };
        events.push(ParseEvent::Call(oversized_call(
            header,
            self.max_block_bytes,
        )));
        self.state = State::Skip;
        self.pos = self.search_from.min(self.buf.len());
    }

    /// Drops consumed input, once per `feed` (never per event, which
    /// would make many small blocks in one chunk quadratic).
    fn compact(&mut self) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.search_from = self.search_from.saturating_sub(self.pos);
            self.pos = 0;
        }
    }
}

fn oversized_call((name, invocation_id, dependencies): Header, limit: usize) -> GadgetCall {
    GadgetCall {
        name,
        invocation_id,
        dependencies,
        parameters_raw: String::new(),
        parameters: None,
        arguments: Vec::new(),
        parse_error: Some(format!(
            "Block exceeds the {limit}-byte limit on one gadget call's header or body; it was not parsed"
        )),
    }
}

/// Where a search resumes after finding nothing: far enough back that a
/// marker split across chunks is still found, never before `floor`.
fn resume_point(len: usize, needle: usize, floor: usize) -> usize {
    len.saturating_sub(needle.saturating_sub(1)).max(floor)
}

fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn push_text(events: &mut Vec<ParseEvent>, text: &str) {
    if !js_trim(text).is_empty() {
        events.push(ParseEvent::Text(text.to_string()));
    }
}

/// The header line: `Name`, `Name:id` or `Name:id:dep,dep` (extra colons
/// separate dependencies too). The line is trimmed as a whole, not per part.
fn parse_header(line: &str, session: &mut Session) -> Header {
    let line = js_trim(line);
    let parts: Vec<&str> = line.split(':').collect();
    let name = parts[0].to_string();
    let id = match parts.get(1) {
        Some(id) => js_trim(id).to_string(),
        None => session.next_auto_id(),
    };
    let mut deps: Vec<String> = Vec::new();
    if parts.len() > 2 {
        for dep in parts[2..].iter().flat_map(|p| p.split(',')) {
            let dep = js_trim(dep);
            if !dep.is_empty() && !deps.iter().any(|d| d == dep) {
                deps.push(dep.to_string());
            }
        }
    }
    (name, id, deps)
}

fn build_call(
    name: String,
    invocation_id: String,
    dependencies: Vec<String>,
    body: &str,
    arg: &str,
) -> GadgetCall {
    let parameters_raw = js_trim(body).to_string();
    let (parameters, arguments, parse_error) =
        match parse_block_params(strip_fences(&parameters_raw), arg) {
            Ok((parameters, arguments)) => (Some(parameters), arguments, None),
            Err((arguments, error)) => (None, arguments, Some(error)),
        };
    GadgetCall {
        name,
        invocation_id,
        dependencies,
        parameters_raw,
        parameters,
        arguments,
        parse_error,
    }
}

/// Removes a markdown fence that wraps the whole parameter section
/// (```` ``` ````, ```` ```toml ````, ```` ```yaml ````, ```` ```json ````). Unlike
/// llmist, a closing fence is removed only with an opening one, so a last
/// value that itself ends with a fence keeps it.
pub fn strip_fences(raw: &str) -> &str {
    let content = js_trim(raw);
    let Some(after_ticks) = content.strip_prefix("```") else {
        return content;
    };
    let mut rest = after_ticks;
    for lang in ["toml", "yaml", "json"] {
        if rest.len() >= lang.len() && rest[..lang.len()].eq_ignore_ascii_case(lang) {
            rest = &rest[lang.len()..];
            break;
        }
    }
    // `\s*\n`: spaces (which include newlines) then the newline that ends the fence line.
    let spaces = rest.len() - rest.trim_start_matches(is_js_space).len();
    let Some(newline) = rest[..spaces].rfind('\n') else {
        return content;
    };
    let inner = &rest[newline + 1..];
    let trimmed_end = inner.trim_end_matches(is_js_space);
    let Some(before) = trimmed_end.strip_suffix("```") else {
        return content;
    };
    js_trim(before.strip_suffix('\n').unwrap_or(before))
}

type Arguments = Vec<(String, String)>;

/// Splits the body on the argument marker and builds the parameters.
fn parse_block_params(
    content: &str,
    arg: &str,
) -> Result<(Map<String, Value>, Arguments), (Arguments, String)> {
    let mut root = Value::Object(Map::new());
    let mut arguments: Arguments = Vec::new();
    let mut error = None;
    // Text before the first marker is ignored, as llmist does.
    for part in content.split(arg).skip(1) {
        let (pointer, value) = match part.find('\n') {
            Some(nl) => {
                let value = &part[nl + 1..];
                (
                    js_trim(&part[..nl]),
                    value.strip_suffix('\n').unwrap_or(value),
                )
            }
            None => (js_trim(part), ""),
        };
        if pointer.is_empty() {
            continue;
        }
        if error.is_none() {
            if arguments.iter().any(|(p, _)| p == pointer) {
                error = Some(format!("Duplicate pointer: {pointer}"));
            } else if let Err(e) = set_by_pointer(&mut root, pointer, coerce(value)) {
                error = Some(e);
            }
        }
        arguments.push((pointer.to_string(), value.to_string()));
    }
    match (error, root) {
        (Some(e), _) => Err((arguments, e)),
        (None, Value::Object(map)) => Ok((map, arguments)),
        (None, _) => Err((arguments, "parameters are not an object".into())),
    }
}

/// Writes `value` at a `/`-separated pointer (no `~0`/`~1` unescaping, as
/// llmist). Containers are created on the way: an array when the next
/// segment is all ASCII digits, else an object.
fn set_by_pointer(root: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    let segments: Vec<&str> = pointer.split('/').collect();
    let mut current = root;
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let fresh = || {
            if segments.get(i + 1).is_some_and(|next| is_ascii_index(next)) {
                Value::Array(Vec::new())
            } else {
                Value::Object(Map::new())
            }
        };
        current = match current {
            Value::Object(map) => {
                if last {
                    map.insert(segment.to_string(), value);
                    return Ok(());
                }
                map.entry(segment.to_string()).or_insert_with(fresh)
            }
            Value::Array(items) => {
                let index = parse_index(segment)
                    .ok_or_else(|| format!("Invalid array index: {segment}"))?;
                if index > items.len() {
                    return Err(format!(
                        "Array index gap: expected {}, got {index}",
                        items.len()
                    ));
                }
                if last {
                    if index == items.len() {
                        items.push(value);
                    } else {
                        items[index] = value;
                    }
                    return Ok(());
                }
                if index == items.len() {
                    items.push(fresh());
                }
                &mut items[index]
            }
            scalar => {
                return Err(format!(
                    "Cannot write '{segment}' below the {} value at '{}' (pointer '{pointer}')",
                    json_type(scalar),
                    segments[..i].join("/")
                ));
            }
        };
    }
    Ok(())
}

fn is_ascii_index(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit())
}

/// JavaScript's `parseInt(segment, 10)` for array indices: leading
/// whitespace, then digits (a sign makes it negative, so invalid).
fn parse_index(segment: &str) -> Option<usize> {
    let digits: &str = segment.trim_start_matches(is_js_space);
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    digits[..end].parse().ok().or(Some(usize::MAX))
}

/// The JSON type of a value, as a word ("string", "array", ...).
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// llmist's schema-less coercion: multi-line values stay strings; `true` /
/// `false` are booleans; `-?digits(.digits)?` is a number when finite;
/// anything else is the original, untrimmed text.
pub fn coerce(value: &str) -> Value {
    if value.contains('\n') {
        return Value::String(value.to_string());
    }
    let t = js_trim(value);
    match t {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if is_plain_decimal(t)
        && let Ok(number) = t.parse::<f64>()
        && number.is_finite()
    {
        return json_number(number);
    }
    Value::String(value.to_string())
}

/// `^-?\d+(\.\d+)?$` with ASCII digits, as JavaScript's `\d`.
fn is_plain_decimal(t: &str) -> bool {
    let t = t.strip_prefix('-').unwrap_or(t);
    let (int, frac) = match t.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (t, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(int) && frac.is_none_or(digits)
}

/// A JSON number as JavaScript would print it: integers without a
/// fraction (and `-0` as `0`), others as doubles.
pub fn json_number(number: f64) -> Value {
    if number.fract() == 0.0 && number.abs() < 9_007_199_254_740_992.0 {
        Value::Number(Number::from(number as i64))
    } else {
        Number::from_f64(number).map_or(Value::Null, Value::Number)
    }
}

/// The type a schema expects at one place, for schema-aware coercion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    String,
    Number,
    Boolean,
    /// Unions, unknown paths, anything else: the schema-less rules.
    Unknown,
}

/// Rebuilds a call's parameters from its raw argument values, coerced by
/// the gadget's schema as llmist's executor does: a string field keeps the
/// raw text untrimmed (`"42"` stays `"42"`); a number field takes
/// JavaScript's `Number(trimmed)` when finite (`1e3`, `0x10`, `+5`, `.5`);
/// a boolean field takes exactly `true` / `false`; unions and unknown paths
/// fall back to the schema-less rules; multi-line values are never coerced
/// to numbers or booleans.
pub fn coerce_with_schema(
    arguments: &[(String, String)],
    schema: &Value,
) -> Result<Map<String, Value>, String> {
    let mut root = Value::Object(Map::new());
    for (pointer, raw) in arguments {
        let value = match expected_at(schema, pointer) {
            Expected::String => Value::String(raw.clone()),
            _ if raw.contains('\n') => Value::String(raw.clone()),
            Expected::Number => match js_number(js_trim(raw)) {
                Some(number) => json_number(number),
                None => Value::String(raw.clone()),
            },
            Expected::Boolean => match js_trim(raw) {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(raw.clone()),
            },
            Expected::Unknown => coerce(raw),
        };
        set_by_pointer(&mut root, pointer, value)?;
    }
    match root {
        Value::Object(map) => Ok(map),
        _ => Err("parameters are not an object".into()),
    }
}

/// What the schema expects at a `/`-separated pointer.
fn expected_at(schema: &Value, pointer: &str) -> Expected {
    let mut current = unwrap_optional(schema);
    for segment in pointer.split('/') {
        let next = current
            .get("properties")
            .and_then(|p| p.get(segment))
            .or_else(|| current.get("items").filter(|_| is_ascii_index(segment)));
        match next {
            Some(next) => current = unwrap_optional(next),
            None => return Expected::Unknown,
        }
    }
    let types: Vec<&str> = match current.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ if current
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().all(Value::is_string)) =>
        {
            vec!["string"]
        }
        _ => Vec::new(),
    };
    match types.as_slice() {
        ["string"] => Expected::String,
        ["number"] | ["integer"] => Expected::Number,
        ["boolean"] => Expected::Boolean,
        _ => Expected::Unknown,
    }
}

/// `anyOf` / `oneOf` of one schema and `null` (an optional field, as
/// schemars writes `Option<T>`) is that schema.
fn unwrap_optional(schema: &Value) -> &Value {
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let non_null: Vec<&Value> = options
                .iter()
                .filter(|o| o.get("type") != Some(&Value::from("null")))
                .collect();
            if let [only] = non_null.as_slice() {
                return only;
            }
        }
    }
    schema
}

/// JavaScript's `Number(text)` for already-trimmed, non-empty text, when
/// finite: decimal with optional sign, fraction and exponent, or `0x`,
/// `0o`, `0b` integers.
fn js_number(text: &str) -> Option<f64> {
    if text.is_empty() {
        return None;
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = text.strip_prefix(prefix) {
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            // Digit by digit, as doubles, so long literals round like JS (every
            // digit was checked above, so `to_digit` cannot fail here).
            let value = digits.chars().fold(0f64, |acc, c| {
                acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
            });
            return value.is_finite().then_some(value);
        }
    }
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    if !mantissa_ok || !exponent_ok {
        return None;
    }
    text.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// JavaScript's `String.prototype.trim` whitespace: it includes U+FEFF and
/// excludes U+0085, unlike Rust's `char::is_whitespace`.
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// JavaScript's `trim()`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_all(parser: &mut Parser, input: &str) -> Vec<ParseEvent> {
        let mut events = parser.feed(input);
        events.extend(parser.finish());
        events
    }

    fn calls(events: &[ParseEvent]) -> Vec<&GadgetCall> {
        events
            .iter()
            .filter_map(|e| match e {
                ParseEvent::Call(c) => Some(c),
                ParseEvent::Text(_) => None,
            })
            .collect()
    }

    #[test]
    fn markers_are_validated() {
        assert_eq!(
            ParserBuilder::new().start_marker("").build().unwrap_err(),
            ConfigError::Empty("start")
        );
        assert!(matches!(
            ParserBuilder::new()
                .end_marker("!!!ARG:")
                .build()
                .unwrap_err(),
            ConfigError::Same("end", "arg", _)
        ));
    }

    #[test]
    fn auto_ids_continue_across_responses_of_a_session() {
        let mut first = Parser::new();
        let events = parse_all(
            &mut first,
            "!!!GADGET_START:A\n!!!GADGET_END\n!!!GADGET_START:B:b1\n!!!GADGET_END",
        );
        assert_eq!(calls(&events)[0].invocation_id, "gadget_1");
        let mut second = Parser::new().with_session(first.session().clone());
        let events = parse_all(&mut second, "!!!GADGET_START:C\n!!!GADGET_END");
        assert_eq!(calls(&events)[0].invocation_id, "gadget_2");
        // A new session starts again at 1.
        let events = parse_all(&mut Parser::new(), "!!!GADGET_START:C\n!!!GADGET_END");
        assert_eq!(calls(&events)[0].invocation_id, "gadget_1");
    }

    #[test]
    fn an_oversized_block_is_an_error_and_the_next_block_still_parses() {
        let big = "x".repeat(1000);
        let input = format!(
            "before\n!!!GADGET_START:Big:b1\n!!!ARG:v\n{big}\n!!!GADGET_END\nmid\n!!!GADGET_START:Small:s1\n!!!ARG:v\n1\n!!!GADGET_END"
        );
        for chunk in [0usize, 1, 7, 64] {
            let mut parser = ParserBuilder::new().max_block_bytes(100).build().unwrap();
            let mut events = Vec::new();
            if chunk == 0 {
                events.extend(parser.feed(&input));
            } else {
                for piece in input.as_bytes().chunks(chunk) {
                    events.extend(parser.feed(std::str::from_utf8(piece).unwrap()));
                }
            }
            events.extend(parser.finish());
            let calls = calls(&events);
            assert_eq!(calls.len(), 2, "chunk {chunk}: {events:?}");
            assert_eq!(calls[0].invocation_id, "b1");
            assert!(
                calls[0]
                    .parse_error
                    .as_deref()
                    .unwrap()
                    .contains("100-byte limit")
            );
            assert_eq!(
                calls[1].parameters,
                Some(json!({ "v": 1 }).as_object().unwrap().clone())
            );
            let text: String = events
                .iter()
                .filter_map(|e| {
                    if let ParseEvent::Text(t) = e {
                        Some(t.as_str())
                    } else {
                        None
                    }
                })
                .collect();
            assert_eq!(text, "before\n\nmid\n", "chunk {chunk}");
        }
    }

    #[test]
    fn coercion_follows_llmist() {
        for (input, expected) in [
            ("42", json!(42)),
            (" 42 ", json!(42)),
            ("007", json!(7)),
            ("-0", json!(0)),
            ("1.0", json!(1)),
            ("1.5", json!(1.5)),
            ("true", json!(true)),
            ("false", json!(false)),
            ("True", json!("True")),
            ("1e3", json!("1e3")),
            ("0x10", json!("0x10")),
            ("+5", json!("+5")),
            (".5", json!(".5")),
            ("5.", json!("5.")),
            ("NaN", json!("NaN")),
            ("   ", json!("   ")),
            ("null", json!("null")),
            ("42\n", json!("42\n")),
            ("١٢", json!("١٢")),
        ] {
            assert_eq!(coerce(input), expected, "{input:?}");
        }
        assert_eq!(
            coerce(&"9".repeat(401)),
            json!("9".repeat(401)),
            "Infinity stays a string"
        );
    }

    #[test]
    fn schema_aware_coercion_follows_llmists_executor() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": { "type": "number" },
                "s": { "type": "string" },
                "b": { "type": "boolean" },
                "opt": { "anyOf": [{ "type": "integer" }, { "type": "null" }] },
                "either": { "type": ["number", "string"] },
                "mode": { "enum": ["a", "b"] },
                "items": { "type": "array", "items": { "type": "object", "properties": { "qty": { "type": "number" } } } }
            }
        });
        let args: Vec<(String, String)> = [
            ("n", "1e3"),
            ("s", "42"),
            ("b", "true"),
            ("opt", " 0x10 "),
            ("either", "7"),
            ("mode", "1"),
            ("items/0/qty", ".5"),
            ("unknown", "12"),
        ]
        .iter()
        .map(|(p, v)| (p.to_string(), v.to_string()))
        .collect();
        let params = Value::Object(coerce_with_schema(&args, &schema).unwrap());
        assert_eq!(
            params,
            json!({ "n": 1000, "s": "42", "b": true, "opt": 16, "either": 7, "mode": "1", "items": [{ "qty": 0.5 }], "unknown": 12 })
        );
        // A string field keeps its raw text, untrimmed; multi-line never becomes a number.
        let args = vec![
            ("s".to_string(), "  x \n".to_string()),
            ("n".to_string(), "4\n2".to_string()),
        ];
        let params = coerce_with_schema(&args, &schema).unwrap();
        assert_eq!(params["s"], json!("  x \n"));
        assert_eq!(params["n"], json!("4\n2"));
    }

    #[test]
    fn js_number_accepts_what_javascript_accepts() {
        for (text, expected) in [
            ("1e3", Some(1000.0)),
            ("+5", Some(5.0)),
            (".5", Some(0.5)),
            ("5.", Some(5.0)),
            ("0x10", Some(16.0)),
            ("0b101", Some(5.0)),
            ("-2.5e-1", Some(-0.25)),
        ] {
            assert_eq!(js_number(text), expected, "{text}");
        }
        for text in [
            "", "inf", "Infinity", "NaN", "1_000", "1,5", "e5", ".", "0x", "-0x10", "1e", "١",
        ] {
            assert_eq!(js_number(text), None, "{text}");
        }
    }

    #[test]
    fn js_trim_differs_from_rust_trim_where_javascript_does() {
        assert_eq!(js_trim("\u{FEFF} a \u{A0}"), "a");
        assert_eq!(js_trim("\u{85}a"), "\u{85}a");
    }

    #[test]
    fn fences_are_stripped_only_when_they_wrap_everything() {
        assert_eq!(strip_fences("```toml\n!!!ARG:a\n1\n```"), "!!!ARG:a\n1");
        assert_eq!(
            strip_fences("!!!ARG:a\n```\ncode\n```"),
            "!!!ARG:a\n```\ncode\n```"
        );
    }

    #[test]
    fn writing_below_a_scalar_is_a_parse_error_not_a_panic() {
        let events = parse_all(
            &mut Parser::new(),
            "!!!GADGET_START:A\n!!!ARG:a\nx\n!!!ARG:a/b\ny\n!!!GADGET_END",
        );
        let call = calls(&events)[0];
        assert!(call.parameters.is_none());
        assert!(
            call.parse_error
                .as_deref()
                .unwrap()
                .contains("below the string value"),
            "{call:?}"
        );
        assert_eq!(call.arguments.len(), 2, "raw arguments are kept");
    }
}
