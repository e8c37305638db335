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
use std::ops::Range;

use memchr::memmem::Finder;
use serde_json::{Map, Number, Value};

/// The default start, end and argument markers.
pub const DEFAULT_START: &str = "!!!GADGET_START:";
pub const DEFAULT_END: &str = "!!!GADGET_END";
pub const DEFAULT_ARG: &str = "!!!ARG:";

/// Largest header line, and largest body, of one block, and largest text
/// segment held before it is emitted, in bytes. A model writing a single
/// 16 MiB tool call is broken or hostile; the cap bounds the parser's
/// memory (at most two caps, the longest marker and the current chunk are
/// buffered). Past it, the call carries a parse error and the rest of the
/// block is skipped; a longer text segment comes as several `Text`
/// events. Both happen at the same places for every chunking (only bytes
/// certain to belong to the block or the text are counted).
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
    text_deltas: bool,
    partial_arguments: bool,
}

impl Default for ParserBuilder {
    fn default() -> Self {
        ParserBuilder {
            start: DEFAULT_START.into(),
            end: DEFAULT_END.into(),
            arg: DEFAULT_ARG.into(),
            max_block_bytes: MAX_BLOCK_BYTES,
            text_deltas: false,
            partial_arguments: false,
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

    /// Text as it arrives, for live display: each feed emits the text it
    /// can (holding back only a possible start-marker prefix, and leading
    /// whitespace until the segment shows something else), so a segment
    /// comes as several `Text` events whose concatenation is the segment
    /// the default mode would emit whole. Whitespace-only segments are
    /// still dropped, unless longer than the block cap (memory stays
    /// bounded, so such a run is shown rather than held).
    pub fn text_deltas(mut self, on: bool) -> Self {
        self.text_deltas = on;
        self
    }

    /// Argument values of a block still being written, for live display:
    /// at the end of each feed that leaves a block open, an
    /// `ArgumentDelta` for each argument that grew (the first, possibly
    /// empty, announces it). A value's deltas concatenate to the start of
    /// its raw value (held back: one `\n` that may precede the next
    /// marker, and any possible marker prefix); the last value may show
    /// trailing whitespace the finished call trims. The `Call` event stays
    /// the authority; a block completed within one feed has no deltas.
    pub fn partial_arguments(mut self, on: bool) -> Self {
        self.partial_arguments = on;
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
            arg: Finder::new(self.arg.as_bytes()).into_owned(),
            candidates: Candidates::new([&self.start, &self.end, &self.arg]),
            heads: [&self.start, &self.end, &self.arg].map(|m| Head::new(m.as_bytes())),
            start_text: self.start.clone(),
            max_block_bytes: self.max_block_bytes,
            text_deltas: self.text_deltas,
            partial_arguments: self.partial_arguments,
            buf: String::new(),
            search_from: 0,
            state: State::Text,
            session: Session::default(),
            header_len: 0,
            auto_id: 0,
            arg_marks: Vec::new(),
            arg_next: 0,
            partial: PartialProgress::default(),
            text_has_content: false,
            text_blank_to: 0,
            spans: Vec::new(),
            error: None,
            scratch: Vec::new(),
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
    fn next_auto_id(&mut self) -> u64 {
        self.auto_ids += 1;
        self.auto_ids
    }
}

/// One completed block, owned. See [`CallRef`] for the borrowed form the
/// parser produces first.
///
/// The body is kept once, as [`GadgetCall::parameters_raw`]; the arguments
/// are spans into it, and the parameters are built on demand
/// ([`GadgetCall::parameters`], or [`GadgetCall::parameters_with_schema`]
/// for the executor).
#[derive(Debug, Clone, PartialEq)]
pub struct GadgetCall {
    /// As written (not trimmed per part, as llmist).
    pub name: String,
    pub invocation_id: String,
    pub dependencies: Vec<String>,
    /// The block body, trimmed.
    pub parameters_raw: String,
    /// Why the parameters could not be built, if they could not.
    pub parse_error: Option<String>,
    /// Each argument's pointer and raw value, as byte ranges of `parameters_raw`, in order.
    spans: Vec<ArgumentSpan>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ArgumentSpan {
    pointer: Range<usize>,
    value: Range<usize>,
}

/// The (pointer, raw value) pairs of a parameter section.
fn arguments_of<'a>(
    raw: &'a str,
    spans: &'a [ArgumentSpan],
) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'a {
    spans
        .iter()
        .map(move |span| (&raw[span.pointer.clone()], &raw[span.value.clone()]))
}

impl GadgetCall {
    /// Drops the call's body (its raw parameters and their spans), keeping
    /// its name, id and dependencies: what a long session needs to keep
    /// of a call that has ended.
    pub fn forget_body(&mut self) {
        self.parameters_raw = String::new();
        self.spans = Vec::new();
        self.parse_error = None;
    }

    /// A call assembled by hand (tests, synthetic calls): the body is
    /// parsed with the default argument marker, as a block would be.
    pub fn new(
        name: impl Into<String>,
        invocation_id: impl Into<String>,
        dependencies: Vec<String>,
        body: &str,
    ) -> GadgetCall {
        let arg = Finder::new(DEFAULT_ARG.as_bytes());
        let mut spans = Vec::new();
        let (parameters_raw, parse_error) =
            parse_body(body, &arg, None, &mut spans, &mut Vec::new());
        GadgetCall {
            name: name.into(),
            invocation_id: invocation_id.into(),
            dependencies,
            parameters_raw: parameters_raw.to_string(),
            parse_error,
            spans,
        }
    }

    /// Each argument's pointer and raw (uncoerced) value, in block order.
    pub fn arguments(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        arguments_of(&self.parameters_raw, &self.spans)
    }

    /// The parameters with llmist's schema-less coercion (what its
    /// `gadget_call` event carries); `None` when there is a parse error.
    pub fn parameters(&self) -> Option<Map<String, Value>> {
        if self.parse_error.is_some() {
            return None;
        }
        build_parameters(self.arguments(), coerce).ok()
    }

    /// The parameters coerced by the gadget's JSON Schema, as llmist's
    /// executor re-parses them; see [`coerce_with_schema`].
    pub fn parameters_with_schema(&self, schema: &Value) -> Result<Map<String, Value>, String> {
        if let Some(error) = &self.parse_error {
            return Err(error.clone());
        }
        coerce_with_schema(self.arguments(), schema)
    }

    /// [`parameters_with_schema`](Self::parameters_with_schema) with what
    /// `schema` expects of its top-level properties already worked out
    /// (`coercions` must be made of `schema`: [`ParamSchema::parameters_of`](crate::params::ParamSchema::parameters_of)
    /// keeps the two together).
    pub(crate) fn parameters_with_coercions(
        &self,
        schema: &Value,
        coercions: &Coercions,
    ) -> Result<Map<String, Value>, String> {
        if let Some(error) = &self.parse_error {
            return Err(error.clone());
        }
        coerce_by(self.arguments(), |pointer| {
            coercions.expected(schema, pointer)
        })
    }
}

/// An invocation id as written, or one the session assigned (`gadget_N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvocationId<'a> {
    Written(&'a str),
    Auto(u64),
}

impl fmt::Display for InvocationId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvocationId::Written(id) => f.write_str(id),
            InvocationId::Auto(n) => write!(f, "gadget_{n}"),
        }
    }
}

/// A block's header line, borrowed: `Name`, `Name:id` or `Name:id:dep,dep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRef<'a> {
    /// As written (the line is trimmed as a whole, not per part, as llmist).
    pub name: &'a str,
    pub invocation_id: InvocationId<'a>,
    /// Everything after the id's colon: dependencies separated by `,` or `:`.
    dependencies_raw: &'a str,
}

impl<'a> HeaderRef<'a> {
    /// Parses a header line; `auto` is the id the session gave it if it has none.
    fn parse(line: &'a str, auto: u64) -> HeaderRef<'a> {
        let line = js_trim(line);
        let (name, rest) = match find_short(b':', line.as_bytes()) {
            Some(colon) => (&line[..colon], Some(&line[colon + 1..])),
            None => (line, None),
        };
        let (invocation_id, dependencies_raw) = match rest {
            None => (InvocationId::Auto(auto), ""),
            Some(rest) => match find_short(b':', rest.as_bytes()) {
                Some(colon) => (
                    InvocationId::Written(js_trim(&rest[..colon])),
                    &rest[colon + 1..],
                ),
                None => (InvocationId::Written(js_trim(rest)), ""),
            },
        };
        HeaderRef {
            name,
            invocation_id,
            dependencies_raw,
        }
    }

    /// The dependencies: trimmed, empties dropped, duplicates dropped
    /// (first occurrence order).
    pub fn dependencies(&self) -> Vec<&'a str> {
        let mut deps: Vec<&str> = Vec::new();
        for dep in self.dependencies_raw.split([':', ',']) {
            let dep = js_trim(dep);
            if !dep.is_empty() && !deps.contains(&dep) {
                deps.push(dep);
            }
        }
        deps
    }
}

/// One completed block, borrowed from the parser's input: what
/// [`Parser::feed_events`] hands out without allocating (the owned
/// [`GadgetCall`] is one [`CallRef::to_owned`] away).
#[derive(Debug, Clone, Copy)]
pub struct CallRef<'a> {
    pub header: HeaderRef<'a>,
    /// The block body, trimmed.
    pub parameters_raw: &'a str,
    pub parse_error: Option<&'a str>,
    spans: &'a [ArgumentSpan],
}

impl<'a> CallRef<'a> {
    /// Each argument's pointer and raw (uncoerced) value, in block order.
    pub fn arguments(&self) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'a {
        arguments_of(self.parameters_raw, self.spans)
    }

    /// The owned call.
    pub fn to_owned(&self) -> GadgetCall {
        GadgetCall {
            name: self.header.name.to_string(),
            invocation_id: self.header.invocation_id.to_string(),
            dependencies: self
                .header
                .dependencies()
                .into_iter()
                .map(str::to_string)
                .collect(),
            parameters_raw: self.parameters_raw.to_string(),
            parse_error: self.parse_error.map(str::to_string),
            spans: self.spans.to_vec(),
        }
    }
}

/// More of one argument's raw value of a block still being written, for
/// live display (see [`ParserBuilder::partial_arguments`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgumentDeltaRef<'a> {
    pub header: HeaderRef<'a>,
    pub pointer: &'a str,
    /// The next piece of the value; empty when the argument is first seen.
    pub delta: &'a str,
}

/// What the parser saw, borrowed from its input.
#[derive(Debug, Clone, Copy)]
pub enum EventRef<'a> {
    /// Text outside blocks (a whole segment, or with
    /// [`ParserBuilder::text_deltas`] the next piece of one).
    Text(&'a str),
    /// A completed block.
    Call(CallRef<'a>),
    /// More of an argument of the block still open.
    ArgumentDelta(ArgumentDeltaRef<'a>),
}

/// What the parser saw, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseEvent {
    /// Text outside blocks: a whole segment, never whitespace only (with
    /// [`ParserBuilder::text_deltas`], the next piece of such a segment).
    Text(String),
    /// A completed block.
    Call(GadgetCall),
    /// More of an argument of the block still open (with
    /// [`ParserBuilder::partial_arguments`]).
    ArgumentDelta {
        gadget_name: String,
        invocation_id: String,
        pointer: String,
        delta: String,
    },
}

impl From<EventRef<'_>> for ParseEvent {
    fn from(event: EventRef<'_>) -> ParseEvent {
        match event {
            EventRef::Text(text) => ParseEvent::Text(text.to_string()),
            EventRef::Call(call) => ParseEvent::Call(call.to_owned()),
            EventRef::ArgumentDelta(delta) => ParseEvent::ArgumentDelta {
                gadget_name: delta.header.name.to_string(),
                invocation_id: delta.header.invocation_id.to_string(),
                pointer: delta.pointer.to_string(),
                delta: delta.delta.to_string(),
            },
        }
    }
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
    arg: Finder<'static>,
    /// Finds the places where any of the three markers may begin.
    candidates: Candidates,
    /// Heads of the start, end and argument markers.
    heads: [Head; 3],
    start_text: String,
    max_block_bytes: usize,
    text_deltas: bool,
    partial_arguments: bool,
    /// Input not consumed yet. A feed scans the chunk in place when
    /// nothing is buffered, and keeps only the unconsumed tail. While a
    /// block is open, its header line stays in the input, so events can
    /// borrow it.
    buf: String,
    /// Where the current search resumes, relative to the unconsumed input.
    search_from: usize,
    state: State,
    session: Session,
    /// The open block: its header line's length (the body starts one byte
    /// later), and the auto id the session gave it (0 if it has an id).
    header_len: usize,
    auto_id: u64,
    /// Argument markers of the open block, relative to its body.
    arg_marks: Vec<usize>,
    /// Where the next argument marker may begin (markers do not overlap,
    /// as `str::split`), relative to the body.
    arg_next: usize,
    /// Partial-argument progress of the open block.
    partial: PartialProgress,
    /// Text-delta mode: whether the current text segment has shown
    /// anything but whitespace, and how far it is known to be whitespace.
    text_has_content: bool,
    text_blank_to: usize,
    /// Reused per block: argument spans, the parse error, and the pointer check's arena.
    spans: Vec<ArgumentSpan>,
    error: Option<String>,
    scratch: Vec<PointerNode>,
}

/// How far partial-argument events of the open block have got (positions
/// relative to its body).
#[derive(Debug, Clone, Default)]
struct PartialProgress {
    /// The argument being shown (an index into the block's markers).
    field: usize,
    /// Its pointer line's end, once found, and how far it was searched.
    pointer_end: Option<usize>,
    searched_to: usize,
    /// How much of its value has been shown.
    shown_to: usize,
}

/// Where a block body ends, as far as the input read so far tells.
enum BodyEnd {
    /// At the next block's start marker, which stays in the input.
    Start(usize),
    /// At the end marker, which is consumed.
    End(usize),
    /// Not yet known; the search resumes here when more input comes.
    Undecided(usize),
}

/// The first (up to) 8 bytes of a marker as a little-endian word and the
/// mask of the bytes that count: most candidates are told apart by one
/// word comparison instead of a `memcmp` call.
#[derive(Debug, Clone, Copy)]
struct Head {
    word: u64,
    mask: u64,
}

impl Head {
    fn new(marker: &[u8]) -> Head {
        let n = marker.len().min(8);
        let mut word = [0u8; 8];
        word[..n].copy_from_slice(&marker[..n]);
        Head {
            word: u64::from_le_bytes(word),
            mask: if n == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * n)) - 1
            },
        }
    }
}

/// What a candidate position holds of one marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// The whole marker.
    Whole,
    /// The input ends inside what may be the marker: undecided.
    Prefix,
    No,
}

struct MarkerTest<'m> {
    marker: &'m [u8],
    head: Head,
}

impl<'m> MarkerTest<'m> {
    fn new(marker: &'m [u8], head: Head) -> Self {
        MarkerTest { marker, head }
    }

    fn at(&self, rest: &[u8]) -> Seen {
        if let Some(first) = rest.first_chunk::<8>() {
            if u64::from_le_bytes(*first) & self.head.mask != self.head.word {
                return Seen::No;
            }
            if self.marker.len() <= 8 {
                return Seen::Whole;
            }
        }
        if rest.len() >= self.marker.len() {
            if rest.starts_with(self.marker) {
                Seen::Whole
            } else {
                Seen::No
            }
        } else if self.marker.starts_with(rest) {
            Seen::Prefix
        } else {
            Seen::No
        }
    }
}

/// Candidate positions for a marker: any of the markers' first bytes. A
/// byte search has no set-up cost, which matters for small chunks, and
/// every candidate is checked against each marker (a bounded comparison,
/// so even input made of nothing but first bytes stays linear).
struct Candidates([u8; 3]);

impl Candidates {
    fn new(markers: [&str; 3]) -> Candidates {
        Candidates(markers.map(|marker| marker.as_bytes()[0]))
    }

    fn find(&self, haystack: &[u8]) -> Option<usize> {
        let [a, b, c] = self.0;
        if a == b && b == c {
            memchr::memchr(a, haystack)
        } else {
            memchr::memchr3(a, b, c, haystack)
        }
    }
}

impl fmt::Debug for Parser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parser")
            .field("state", &self.state)
            .field("buffered", &self.buf.len())
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

    /// Bytes of input held, waiting for more (see [`MAX_BLOCK_BYTES`] for the bound).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Parses the next chunk.
    pub fn feed(&mut self, chunk: &str) -> Vec<ParseEvent> {
        let mut events = Vec::new();
        self.feed_events(chunk, |event| events.push(event.into()));
        events
    }

    /// Parses the next chunk, handing each owned event to `sink` as soon
    /// as it is complete.
    pub fn feed_with(&mut self, chunk: &str, mut sink: impl FnMut(ParseEvent)) {
        self.feed_events(chunk, |event| sink(event.into()));
    }

    /// Parses the next chunk, lending each event to `sink` as soon as it
    /// is complete: events borrow the input, so a block costs no
    /// allocation unless the sink keeps something.
    pub fn feed_events(&mut self, chunk: &str, mut sink: impl FnMut(EventRef<'_>)) {
        let sink: &mut dyn FnMut(EventRef<'_>) = &mut sink;
        if self.buf.is_empty() {
            // Nothing buffered: scan the chunk where it is, keep the tail.
            let consumed = self.scan(chunk, sink);
            self.buf.push_str(&chunk[consumed..]);
            self.rebase(consumed);
        } else {
            let mut buf = std::mem::take(&mut self.buf);
            buf.push_str(chunk);
            let consumed = self.scan(&buf, sink);
            // Once per feed, never per event (many blocks in one chunk stay linear).
            if consumed > 0 {
                buf.drain(..consumed);
            }
            self.buf = buf;
            self.rebase(consumed);
        }
    }

    /// Ends the stream: what is still open completes as it stands.
    pub fn finish(&mut self) -> Vec<ParseEvent> {
        let mut events = Vec::new();
        self.finish_events(|event| events.push(event.into()));
        events
    }

    /// [`Parser::finish`], handing each owned event to `sink`.
    pub fn finish_with(&mut self, mut sink: impl FnMut(ParseEvent)) {
        self.finish_events(|event| sink(event.into()));
    }

    /// [`Parser::finish`], lending each event to `sink`.
    pub fn finish_events(&mut self, mut sink: impl FnMut(EventRef<'_>)) {
        let sink: &mut dyn FnMut(EventRef<'_>) = &mut sink;
        let buf = std::mem::take(&mut self.buf);
        match self.state {
            State::Text => {
                self.text_until(&buf, 0, buf.len(), true, sink);
            }
            // A start marker whose header never ended is text [016].
            State::Header => {
                let text = format!("{}{buf}", self.start_text);
                self.text_has_content = false;
                self.text_blank_to = 0;
                self.text_until(&text, 0, text.len(), true, sink);
            }
            State::Body => {
                // The marks of a tail still undecided are not known: split afresh.
                let call = self.call(&buf, 0, buf.len(), false);
                sink(EventRef::Call(call));
            }
            State::Skip => {}
        }
        self.buf = buf;
        self.buf.clear();
        self.search_from = 0;
        self.state = State::Text;
        self.text_has_content = false;
        self.text_blank_to = 0;
    }

    /// Positions relative to the unconsumed input move with it.
    fn rebase(&mut self, consumed: usize) {
        self.search_from = self.search_from.saturating_sub(consumed);
        self.text_blank_to = self.text_blank_to.saturating_sub(consumed);
    }

    /// Runs the state machine over `text` (the unconsumed input); returns
    /// how many of its bytes are consumed.
    fn scan(&mut self, text: &str, events: &mut dyn FnMut(EventRef<'_>)) -> usize {
        let bytes = text.as_bytes();
        let mut pos = 0;
        loop {
            let from = self.search_from.max(pos);
            match self.state {
                State::Text => {
                    let found = self.start.find(&bytes[from..]).map(|offset| from + offset);
                    // Text before here is certain: a marker, or where one may yet begin.
                    let certain = found.unwrap_or_else(|| {
                        resume_point(bytes.len(), self.start.needle().len(), pos)
                    });
                    if !self.text_deltas && certain - pos > self.max_block_bytes {
                        // Memory stays bounded: a segment past the cap is emitted
                        // in cap-sized pieces, cut at the same places whatever the
                        // chunking (whitespace-only pieces are dropped).
                        let mut cut = floor_char_boundary(text, pos + self.max_block_bytes);
                        if cut == pos {
                            // A cap smaller than one character: take the character.
                            cut += text[pos..].chars().next().map_or(1, char::len_utf8);
                        }
                        self.text_until(text, pos, cut, true, events);
                        pos = cut;
                        self.search_from = certain;
                        continue;
                    }
                    match found {
                        Some(at) => {
                            self.text_until(text, pos, at, true, events);
                            self.text_has_content = false;
                            pos = at + self.start_text.len();
                            self.search_from = pos;
                            self.text_blank_to = pos;
                            self.state = State::Header;
                        }
                        None => {
                            self.search_from = certain;
                            if self.text_deltas {
                                // Show all but a possible start-marker prefix.
                                let held = held_prefix(bytes, self.start.needle());
                                pos = self.text_until(text, pos, bytes.len() - held, false, events);
                            }
                            return pos;
                        }
                    }
                }
                State::Header => {
                    // The header's newline counts only within the cap.
                    let limit = (pos + self.max_block_bytes + 1).min(bytes.len());
                    match memchr::memchr(b'\n', &bytes[from.min(limit)..limit]) {
                        Some(offset) => {
                            let at = from.min(limit) + offset;
                            // The auto id is taken when the header is read, as llmist does.
                            let has_id = find_short(b':', &bytes[pos..at]).is_some();
                            self.auto_id = if has_id {
                                0
                            } else {
                                self.session.next_auto_id()
                            };
                            self.header_len = at - pos;
                            self.search_from = at + 1;
                            self.arg_marks.clear();
                            self.arg_next = 0;
                            self.partial = PartialProgress::default();
                            self.state = State::Body;
                        }
                        None if bytes.len() - pos > self.max_block_bytes => {
                            // No newline within the cap: the block is skipped from
                            // the cap on, whatever the chunking.
                            let cap = pos + self.max_block_bytes + 1;
                            self.search_from = floor_char_boundary(text, cap).max(pos);
                            pos = self.oversized(text, pos, events);
                        }
                        None => {
                            self.search_from = bytes.len();
                            return pos;
                        }
                    }
                }
                State::Body | State::Skip => {
                    let body_start = if self.state == State::Body {
                        pos + self.header_len + 1
                    } else {
                        pos
                    };
                    let (body_end, resume) = match self.body_end(bytes, body_start, from) {
                        BodyEnd::Start(at) => (at, at),
                        BodyEnd::End(at) => (at, at + self.end.needle().len()),
                        BodyEnd::Undecided(resume) => {
                            self.search_from = resume;
                            if self.state == State::Skip {
                                // Nothing of a skipped block is kept but a possible marker prefix.
                                return resume;
                            }
                            if resume - body_start > self.max_block_bytes {
                                pos = self.oversized(text, pos, events);
                                continue;
                            }
                            if self.partial_arguments {
                                self.partials(text, pos, resume, events);
                            }
                            return pos;
                        }
                    };
                    if self.state == State::Body {
                        if body_end - body_start > self.max_block_bytes {
                            self.oversized(text, pos, events);
                        } else {
                            let call = self.call(text, pos, body_end, true);
                            events(EventRef::Call(call));
                        }
                    }
                    pos = resume;
                    self.search_from = resume;
                    self.text_blank_to = resume;
                    self.state = State::Text;
                }
            }
        }
    }

    /// The open block's header, its line starting at `pos` in `text`.
    fn header<'a>(&self, text: &'a str, pos: usize) -> HeaderRef<'a> {
        HeaderRef::parse(&text[pos..pos + self.header_len], self.auto_id)
    }

    /// The open block, complete: header at `pos`, body up to `body_end`.
    /// `use_marks`: the argument markers the scan recorded cover the body.
    fn call<'a>(
        &'a mut self,
        text: &'a str,
        pos: usize,
        body_end: usize,
        use_marks: bool,
    ) -> CallRef<'a> {
        let header = self.header(text, pos);
        let body = &text[(pos + self.header_len + 1).min(body_end)..body_end];
        let marks = use_marks.then_some(self.arg_marks.as_slice());
        let (parameters_raw, error) =
            parse_body(body, &self.arg, marks, &mut self.spans, &mut self.scratch);
        // The error lives in the parser until the next block.
        self.error = error;
        CallRef {
            header,
            parameters_raw,
            parse_error: self.error.as_deref(),
            spans: &self.spans,
        }
    }

    /// Emits text `text[pos..to]` (whole segments, or pieces in text-delta
    /// mode) unless it is whitespace only; returns the new position.
    /// `segment_ends`: a start marker or the end of input follows.
    fn text_until(
        &mut self,
        text: &str,
        pos: usize,
        to: usize,
        segment_ends: bool,
        events: &mut dyn FnMut(EventRef<'_>),
    ) -> usize {
        let to = to.max(pos);
        if !self.text_deltas {
            if segment_ends && !js_trim(&text[pos..to]).is_empty() {
                events(EventRef::Text(&text[pos..to]));
            }
            return if segment_ends { to } else { pos };
        }
        if !self.text_has_content {
            // Hold leading whitespace until the segment shows content, so
            // that a whitespace-only segment is dropped as in whole mode.
            let from = self.text_blank_to.clamp(pos, to);
            // Past the cap, whitespace is shown too: memory stays bounded.
            if js_trim(&text[from..to]).is_empty() && to - pos <= self.max_block_bytes {
                self.text_blank_to = to;
                return if segment_ends { to } else { pos };
            }
            self.text_has_content = true;
        }
        if to > pos {
            events(EventRef::Text(&text[pos..to]));
        }
        to
    }

    /// Partial-argument events for the open block (header at `pos`),
    /// whose body is certain up to `decided` (exclusive).
    fn partials(
        &mut self,
        text: &str,
        pos: usize,
        decided: usize,
        events: &mut dyn FnMut(EventRef<'_>),
    ) {
        let header = self.header(text, pos);
        let body_start = pos + self.header_len + 1;
        let body = &text[body_start..decided];
        let marker = self.arg.needle().len();
        let progress = &mut self.partial;
        while let Some(&mark) = self.arg_marks.get(progress.field) {
            let next_mark = self.arg_marks.get(progress.field + 1).copied();
            let field_end = next_mark.unwrap_or(body.len());
            let line_start = mark + marker;
            if progress.pointer_end.is_none() {
                let from = progress.searched_to.max(line_start);
                match memchr::memchr(b'\n', &body.as_bytes()[from..field_end]) {
                    Some(offset) => progress.pointer_end = Some(from + offset),
                    None if next_mark.is_some() => progress.pointer_end = Some(field_end),
                    None => {
                        progress.searched_to = field_end;
                        return;
                    }
                }
            }
            let pointer_end = progress.pointer_end.unwrap_or(field_end);
            let pointer = js_trim(&body[line_start..pointer_end]);
            let value_start = (pointer_end + 1).min(field_end);
            // One `\n` before the next marker (or maybe before one still to come) is not value.
            let value_end = if body[value_start..field_end].ends_with('\n') {
                field_end - 1
            } else {
                field_end
            };
            let first = progress.shown_to == 0;
            let shown = progress.shown_to.max(value_start);
            if !pointer.is_empty() && (first || value_end > shown) {
                events(EventRef::ArgumentDelta(ArgumentDeltaRef {
                    header,
                    pointer,
                    delta: &body[shown..value_end.max(shown)],
                }));
            }
            progress.shown_to = value_end.max(shown);
            if next_mark.is_none() {
                return;
            }
            *progress = PartialProgress {
                field: progress.field + 1,
                ..PartialProgress::default()
            };
        }
    }

    /// One pass over a block body from `from` (the body starts at
    /// `body_start`): finds where it ends (the first end or start marker;
    /// at the same place the end marker wins, as in llmist) and, on the
    /// way, records the argument markers. A candidate that the input ends
    /// inside of a marker leaves the end undecided.
    fn body_end(&mut self, bytes: &[u8], body_start: usize, from: usize) -> BodyEnd {
        let record = self.state == State::Body;
        let [start, end, arg] = &self.heads;
        let (start, end, arg) = (
            MarkerTest::new(self.start.needle(), *start),
            MarkerTest::new(self.end.needle(), *end),
            MarkerTest::new(self.arg.needle(), *arg),
        );
        let mut at = from.max(body_start);
        loop {
            let Some(offset) = self.candidates.find(&bytes[at..]) else {
                return BodyEnd::Undecided(bytes.len());
            };
            let candidate = at + offset;
            let rest = &bytes[candidate..];
            match end.at(rest) {
                Seen::Whole => return BodyEnd::End(candidate),
                Seen::Prefix => return BodyEnd::Undecided(candidate),
                Seen::No => {}
            }
            match start.at(rest) {
                Seen::Whole => return BodyEnd::Start(candidate),
                Seen::Prefix => return BodyEnd::Undecided(candidate),
                Seen::No => {}
            }
            let relative = candidate - body_start;
            if record && relative >= self.arg_next {
                match arg.at(rest) {
                    Seen::Whole => {
                        self.arg_marks.push(relative);
                        self.arg_next = relative + arg.marker.len();
                    }
                    Seen::Prefix => return BodyEnd::Undecided(candidate),
                    Seen::No => {}
                }
            }
            at = candidate + 1;
        }
    }

    /// The block being read (its header line starts at `pos`) passed the
    /// size cap: report it as a call with a parse error, and skip the rest
    /// of it. Returns the new position.
    fn oversized(&mut self, text: &str, pos: usize, events: &mut dyn FnMut(EventRef<'_>)) -> usize {
        let header = if self.state == State::Body {
            self.header(text, pos)
        } else {
            // Still in the header: name the call after its first bytes
            // (never more than the cap, so the name is the same for every chunking).
            let cut = floor_char_boundary(text, pos + 64.min(self.max_block_bytes));
            HeaderRef {
                name: js_trim(&text[pos..cut]),
                invocation_id: InvocationId::Written(""),
                dependencies_raw: "",
            }
        };
        self.error = Some(format!(
            "Block exceeds the {}-byte limit on one gadget call's header or body; it was not parsed",
            self.max_block_bytes
        ));
        events(EventRef::Call(CallRef {
            header,
            parameters_raw: "",
            parse_error: self.error.as_deref(),
            spans: &[],
        }));
        self.state = State::Skip;
        self.search_from.min(text.len())
    }
}

/// Where a search resumes after finding nothing: far enough back that a
/// marker split across chunks is still found, never before `floor`.
fn resume_point(len: usize, needle: usize, floor: usize) -> usize {
    len.saturating_sub(needle.saturating_sub(1)).max(floor)
}

/// The length of the longest end of `bytes` that is a proper prefix of `marker`.
fn held_prefix(bytes: &[u8], marker: &[u8]) -> usize {
    (1..marker.len().min(bytes.len() + 1))
        .rev()
        .find(|&n| bytes.ends_with(&marker[..n]))
        .unwrap_or(0)
}

fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Trims a block body and splits its parameter section into `spans`
/// (relative to the trimmed body); returns the trimmed body and the parse
/// error, if any. `marks` are the argument markers the scan found in the
/// body, if it recorded them; otherwise (and when trimming or fence
/// stripping cut through one) the parameter section is searched again.
fn parse_body<'a>(
    body: &'a str,
    arg: &Finder,
    marks: Option<&[usize]>,
    spans: &mut Vec<ArgumentSpan>,
    scratch: &mut Vec<PointerNode>,
) -> (&'a str, Option<String>) {
    let parameters_raw = js_trim(body);
    let content = strip_fences(parameters_raw);
    // `content` is a slice of `parameters_raw`: spans are offsets into it.
    let base = content.as_ptr() as usize - parameters_raw.as_ptr() as usize;
    // Where `content` starts and ends in `body`.
    let in_body = parameters_raw.as_ptr() as usize - body.as_ptr() as usize + base;
    let (lo, hi) = (in_body, in_body + content.len());
    let marker = arg.needle().len();
    let marks = marks.filter(|marks| {
        // A mark cut by the section's edges would change how `split` pairs the rest.
        !marks
            .iter()
            .any(|&m| (m < lo && m + marker > lo) || (m < hi && m + marker > hi))
    });
    spans.clear();
    match marks {
        Some(marks) => {
            let inside = marks
                .iter()
                .filter(|&&m| m >= lo && m + marker <= hi)
                .map(|&m| m - lo);
            split_arguments(content, inside, marker, base, spans);
        }
        None => {
            let bytes = content.as_bytes();
            let mut next = 0;
            let found = std::iter::from_fn(|| {
                let at = next + arg.find(&bytes[next..])?;
                next = at + marker;
                Some(at)
            });
            split_arguments(content, found, marker, base, spans);
        }
    }
    let error = first_parse_error(parameters_raw, spans, scratch);
    (parameters_raw, error)
}

/// Splits the parameter section on the argument marker, as llmist's
/// `content.split(argPrefix)`: text before the first marker is ignored; per
/// part, the pointer is the trimmed first line (an empty one skips the
/// part) and the value is the rest minus exactly one trailing `\n`.
fn split_arguments(
    content: &str,
    mut marks: impl Iterator<Item = usize>,
    marker: usize,
    base: usize,
    spans: &mut Vec<ArgumentSpan>,
) {
    let bytes = content.as_bytes();
    let Some(first) = marks.next() else {
        return;
    };
    let mut part_start = first + marker;
    loop {
        let next = marks.next();
        let part_end = next.unwrap_or(bytes.len());
        let part = &content[part_start..part_end];
        let (pointer, value) = match memchr::memchr(b'\n', part.as_bytes()) {
            Some(nl) => {
                let value_start = part_start + nl + 1;
                let value_end = if part.ends_with('\n') && part_end > value_start {
                    part_end - 1
                } else {
                    part_end
                };
                (
                    trim_range(content, part_start, part_start + nl),
                    value_start..value_end,
                )
            }
            None => (
                trim_range(content, part_start, part_end),
                part_end..part_end,
            ),
        };
        if !pointer.is_empty() {
            spans.push(ArgumentSpan {
                pointer: pointer.start + base..pointer.end + base,
                value: value.start + base..value.end + base,
            });
        }
        match next {
            Some(at) => part_start = at + marker,
            None => return,
        }
    }
}

/// A byte in a slice that is usually short (a header, a pointer): a plain
/// loop, without the set-up a vectorised search pays on every call.
fn find_short(byte: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == byte)
}

/// The byte range of `text[start..end]` after a JavaScript trim.
fn trim_range(text: &str, start: usize, end: usize) -> std::ops::Range<usize> {
    let slice = &text[start..end];
    let trimmed = js_trim(slice);
    let offset = trimmed.as_ptr() as usize - slice.as_ptr() as usize;
    start + offset..start + offset + trimmed.len()
}

/// Past this many arguments the pointer check builds the parameters
/// instead: its node lookup is linear, so quadratic in the argument count.
const POINTER_CHECK_MAX_ARGUMENTS: usize = 64;

/// The error building the parameters would hit, found without building
/// them: only the shape (containers, scalar types, array lengths) decides
/// whether `set_by_pointer` fails, so a small tree of segments in a reused
/// arena stands in for the JSON value. The unit tests compare the two.
fn first_parse_error(
    raw: &str,
    spans: &[ArgumentSpan],
    nodes: &mut Vec<PointerNode>,
) -> Option<String> {
    let arguments = || arguments_of(raw, spans);
    if spans.len() > POINTER_CHECK_MAX_ARGUMENTS {
        return build_parameters(arguments(), coerce).err();
    }
    let nested = arguments().any(|(pointer, _)| pointer.as_bytes().contains(&b'/'));
    nodes.clear();
    nodes.push(PointerNode::root());
    let mut hashes = [0u64; POINTER_CHECK_MAX_ARGUMENTS];
    for (i, (pointer, _)) in arguments().enumerate() {
        hashes[i] = key_hash(pointer.as_bytes());
        let duplicate = (0..i).any(|j| {
            hashes[j] == hashes[i]
                && arguments()
                    .nth(j)
                    .is_some_and(|(earlier, _)| earlier == pointer)
        });
        if duplicate {
            return Some(format!("Duplicate pointer: {pointer}"));
        }
        // Without a `/` anywhere, every pointer is a key of the root
        // object, and only a duplicate can fail.
        if nested && let Err(error) = check_pointer(nodes, raw, spans, pointer, i) {
            return Some(error);
        }
    }
    None
}

/// One place in the parameters' shape: a child of `parent` (as it was in
/// generation `parent_generation`: a container replaced by a scalar orphans
/// its children) under `key`.
#[derive(Debug, Clone)]
struct PointerNode {
    parent: usize,
    parent_generation: u32,
    key: NodeKey,
    kind: NodeKind,
    generation: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum NodeKey {
    /// An object key: its hash and its byte range in the call's
    /// `parameters_raw` (every pointer is a slice of it), so the check
    /// allocates nothing.
    Name(u64, Range<usize>),
    Index(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeKind {
    Object,
    Array(usize),
    /// Written by the argument with this index.
    Scalar(usize),
}

impl PointerNode {
    fn root() -> PointerNode {
        PointerNode {
            parent: usize::MAX,
            parent_generation: 0,
            key: NodeKey::Index(0),
            kind: NodeKind::Object,
            generation: 0,
        }
    }
}

/// The JSON type `coerce` gives a raw value (only for an error message).
fn coerced_type(raw: &str) -> &'static str {
    json_type(&coerce(raw))
}

/// `set_by_pointer` on the shape tree: the same walk, the same errors.
fn check_pointer(
    nodes: &mut Vec<PointerNode>,
    text: &str,
    spans: &[ArgumentSpan],
    pointer: &str,
    argument: usize,
) -> Result<(), String> {
    let offset = |part: &str| part.as_ptr() as usize - text.as_ptr() as usize;
    let same_key = |a: &NodeKey, b: &NodeKey| match (a, b) {
        (NodeKey::Name(ha, a), NodeKey::Name(hb, b)) => {
            ha == hb && text[a.clone()] == text[b.clone()]
        }
        (NodeKey::Index(a), NodeKey::Index(b)) => a == b,
        _ => false,
    };
    // Splits at `/` (a byte search: pointers are short, and a char pattern costs more).
    fn split(rest: &str) -> (&str, Option<&str>) {
        match find_short(b'/', rest.as_bytes()) {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        }
    }
    let mut current = 0;
    let mut rest = Some(pointer);
    while let Some(remaining) = rest {
        let (segment, after) = split(remaining);
        let next = after.map(|after| split(after).0);
        let fresh = if next.is_some_and(is_ascii_index) {
            NodeKind::Array(0)
        } else {
            NodeKind::Object
        };
        let key = match nodes[current].kind {
            NodeKind::Object => NodeKey::Name(
                key_hash(segment.as_bytes()),
                offset(segment)..offset(segment) + segment.len(),
            ),
            NodeKind::Array(len) => {
                let index = parse_index(segment)
                    .ok_or_else(|| format!("Invalid array index: {segment}"))?;
                if index > len {
                    return Err(format!("Array index gap: expected {len}, got {index}"));
                }
                if index == len {
                    nodes[current].kind = NodeKind::Array(len + 1);
                }
                NodeKey::Index(index)
            }
            NodeKind::Scalar(writer) => {
                let raw = arguments_of(text, spans)
                    .nth(writer)
                    .map_or("", |(_, raw)| raw);
                let kind = coerced_type(raw);
                // The root is an object, so a scalar is never the first segment.
                let walked = segment.as_ptr() as usize - pointer.as_ptr() as usize;
                return Err(format!(
                    "Cannot write '{segment}' below the {kind} value at '{}' (pointer '{pointer}')",
                    &pointer[..walked.saturating_sub(1)]
                ));
            }
        };
        let generation = nodes[current].generation;
        let existing = nodes.iter().position(|node| {
            node.parent == current
                && node.parent_generation == generation
                && same_key(&node.key, &key)
        });
        let child = match existing {
            Some(child) => child,
            None => {
                nodes.push(PointerNode {
                    parent: current,
                    parent_generation: generation,
                    key,
                    kind: fresh,
                    generation: 0,
                });
                nodes.len() - 1
            }
        };
        if after.is_none() {
            // The leaf is written: whatever was here is replaced.
            let node = &mut nodes[child];
            node.kind = NodeKind::Scalar(argument);
            node.generation += 1;
            return Ok(());
        }
        current = child;
        rest = after;
    }
    Ok(())
}

/// A fast, non-cryptographic hash of a short key (compared before the
/// bytes, so most mismatches cost one integer comparison).
fn key_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(bytes.len() as u64, |hash, &byte| {
        (hash.rotate_left(5) ^ u64::from(byte)).wrapping_mul(0x517c_c1b7_2722_0a95)
    })
}

/// Builds the parameters from (pointer, raw value) pairs with `coerce_value`.
fn build_parameters<'a>(
    arguments: impl Iterator<Item = (&'a str, &'a str)>,
    coerce_value: impl Fn(&str) -> Value,
) -> Result<Map<String, Value>, String> {
    let mut root = Value::Object(Map::new());
    let mut seen: Vec<&str> = Vec::new();
    for (pointer, raw) in arguments {
        if seen.contains(&pointer) {
            return Err(format!("Duplicate pointer: {pointer}"));
        }
        seen.push(pointer);
        set_by_pointer(&mut root, pointer, coerce_value(raw))?;
    }
    match root {
        Value::Object(map) => Ok(map),
        _ => Err("parameters are not an object".into()),
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
        // Compared as bytes: the text after the ticks may be any UTF-8.
        let head = rest.as_bytes().get(..lang.len());
        if head.is_some_and(|head| head.eq_ignore_ascii_case(lang.as_bytes())) {
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

/// Writes `value` at a `/`-separated pointer (no `~0`/`~1` unescaping, as
/// llmist). Containers are created on the way: an array when the next
/// segment is all ASCII digits, else an object.
fn set_by_pointer(root: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    // Most arguments are top-level names: one insert, no segment list.
    if !pointer.contains('/')
        && let Value::Object(map) = root
    {
        map.insert(pointer.to_string(), value);
        return Ok(());
    }
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
    if memchr::memchr(b'\n', value.as_bytes()).is_some() {
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
pub fn coerce_with_schema<'a>(
    arguments: impl IntoIterator<Item = (&'a str, &'a str)>,
    schema: &Value,
) -> Result<Map<String, Value>, String> {
    coerce_by(arguments, |pointer| expected_at(schema, pointer))
}

/// Most properties a schema's [`Coercions`] list: looking one up is a scan
/// of this many names at most, faster than hashing for the few parameters
/// a gadget has; a larger schema is walked per argument instead.
const MAX_LISTED_COERCIONS: usize = 16;

/// What a schema expects of each of its top-level properties, worked out
/// once instead of walking the schema (a handful of map lookups through
/// optional wrappers) for every argument of every call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Coercions {
    top_level: Vec<(String, Expected)>,
}

impl Coercions {
    pub(crate) fn of(schema: &Value) -> Coercions {
        let properties = crate::schema::unwrap_optional(schema)
            .get("properties")
            .and_then(Value::as_object);
        let top_level = match properties {
            Some(properties) if properties.len() <= MAX_LISTED_COERCIONS => properties
                .keys()
                .map(|name| (name.clone(), expected_at(schema, name)))
                .collect(),
            _ => Vec::new(),
        };
        Coercions { top_level }
    }

    /// What `schema` (the one these were made of) expects at `pointer`.
    fn expected(&self, schema: &Value, pointer: &str) -> Expected {
        match self.top_level.iter().find(|(name, _)| name == pointer) {
            Some((_, expected)) => *expected,
            None => expected_at(schema, pointer),
        }
    }
}

fn coerce_by<'a>(
    arguments: impl IntoIterator<Item = (&'a str, &'a str)>,
    expected: impl Fn(&str) -> Expected,
) -> Result<Map<String, Value>, String> {
    let mut root = Value::Object(Map::new());
    for (pointer, raw) in arguments {
        let value = match expected(pointer) {
            Expected::String => Value::String(raw.to_string()),
            _ if memchr::memchr(b'\n', raw.as_bytes()).is_some() => Value::String(raw.to_string()),
            Expected::Number => match js_number(js_trim(raw)) {
                Some(number) => json_number(number),
                None => Value::String(raw.to_string()),
            },
            Expected::Boolean => match js_trim(raw) {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(raw.to_string()),
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
    let Some(at) = crate::schema::at(schema, pointer) else {
        return Expected::Unknown;
    };
    // `schema::types` without its list (this runs for every argument of
    // every call): one declared type, `null` aside, or an enum of strings.
    let mut declared = None;
    match at.get("type") {
        Some(Value::String(t)) => declared = Some(t.as_str()),
        Some(Value::Array(types)) => {
            for t in types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
            {
                if declared.replace(t).is_some() {
                    return Expected::Unknown;
                }
            }
        }
        _ => {
            if at
                .get("enum")
                .and_then(Value::as_array)
                .is_some_and(|e| e.iter().all(Value::is_string))
            {
                declared = Some("string");
            }
        }
    }
    match declared {
        Some("string") => Expected::String,
        Some("number" | "integer") => Expected::Number,
        Some("boolean") => Expected::Boolean,
        _ => Expected::Unknown,
    }
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
    // ASCII first: whitespace around model output is almost always ASCII,
    // and a byte test is much cheaper than decoding characters.
    let is_ascii_space = |b: &u8| matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ');
    let bytes = s.as_bytes();
    let start = bytes
        .iter()
        .position(|b| !is_ascii_space(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ascii_space(b))
        .map_or(start, |i| i + 1);
    let rest = &s[start..end.max(start)];
    // Only a non-ASCII byte at either edge can be more JavaScript whitespace.
    if rest.as_bytes().first().is_some_and(|b| !b.is_ascii())
        || rest.as_bytes().last().is_some_and(|b| !b.is_ascii())
    {
        rest.trim_matches(is_js_space)
    } else {
        rest
    }
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
                _ => None,
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
    fn past_the_pointer_check_limit_the_parameters_are_built_to_find_errors() {
        // More arguments than the shape check takes: the same errors, found the slow way.
        let many = POINTER_CHECK_MAX_ARGUMENTS + 6;
        let mut body: String = (0..many).map(|i| format!("!!!ARG:k{i}/v\n{i}\n")).collect();
        let call = GadgetCall::new("G", "g", Vec::new(), &body);
        assert_eq!(call.parse_error, None);
        assert_eq!(call.parameters().unwrap().len(), many);
        body.push_str("!!!ARG:k3/v/deeper\nx\n");
        let call = GadgetCall::new("G", "g", Vec::new(), &body);
        assert!(
            call.parse_error
                .as_deref()
                .unwrap()
                .contains("below the number value at 'k3/v'"),
            "{:?}",
            call.parse_error
        );
    }

    #[test]
    fn a_fence_followed_by_multibyte_text_is_no_language_tag() {
        // Found by the fuzzer: `to` then a 2-byte character must not be cut at byte 4.
        assert_eq!(
            strip_fences("```to\u{5c0}ml\nx\n```"),
            "```to\u{5c0}ml\nx\n```"
        );
        assert_eq!(strip_fences("```TOML\n!!!ARG:x\n1\n```"), "!!!ARG:x\n1");
    }

    #[test]
    fn a_text_segment_past_the_cap_comes_in_pieces_at_the_same_places_for_every_chunking() {
        let input = format!("{}é{}", "a".repeat(150), "b".repeat(120));
        let mut expected = None;
        for chunk in [0usize, 1, 7, 64] {
            let mut parser = ParserBuilder::new().max_block_bytes(100).build().unwrap();
            let mut events = Vec::new();
            let mut rest = input.as_str();
            while !rest.is_empty() {
                let mut cut = if chunk == 0 {
                    rest.len()
                } else {
                    chunk.min(rest.len())
                };
                while !rest.is_char_boundary(cut) {
                    cut += 1;
                }
                events.extend(parser.feed(&rest[..cut]));
                assert!(parser.buffered() <= 100 + DEFAULT_START.len() + chunk.max(input.len()));
                rest = &rest[cut..];
            }
            events.extend(parser.finish());
            let texts: Vec<String> = events
                .into_iter()
                .map(|e| match e {
                    ParseEvent::Text(t) => t,
                    other => panic!("{other:?}"),
                })
                .collect();
            assert!(texts.len() >= 3, "{texts:?}");
            assert!(texts.iter().all(|t| t.len() <= 100));
            assert_eq!(texts.concat(), input);
            match &expected {
                None => expected = Some(texts),
                Some(first) => assert_eq!(first, &texts, "chunk {chunk}"),
            }
        }
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
                calls[1].parameters(),
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
        let args = [
            ("n", "1e3"),
            ("s", "42"),
            ("b", "true"),
            ("opt", " 0x10 "),
            ("either", "7"),
            ("mode", "1"),
            ("items/0/qty", ".5"),
            ("unknown", "12"),
        ];
        let params = Value::Object(coerce_with_schema(args, &schema).unwrap());
        assert_eq!(
            params,
            json!({ "n": 1000, "s": "42", "b": true, "opt": 16, "either": 7, "mode": "1", "items": [{ "qty": 0.5 }], "unknown": 12 })
        );
        // Worked out once per schema, the same result.
        let coercions = Coercions::of(&schema);
        let by_coercions = coerce_by(args, |p| coercions.expected(&schema, p)).unwrap();
        assert_eq!(Value::Object(by_coercions), params);
        for (name, _) in args.iter().filter(|(p, _)| !p.contains('/')) {
            assert_eq!(
                coercions.expected(&schema, name),
                expected_at(&schema, name),
                "{name}"
            );
        }
        // A string field keeps its raw text, untrimmed; multi-line never becomes a number.
        let args = [("s", "  x \n"), ("n", "4\n2")];
        let params = coerce_with_schema(args, &schema).unwrap();
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
        assert!(call.parameters().is_none());
        assert!(
            call.parse_error
                .as_deref()
                .unwrap()
                .contains("below the string value"),
            "{call:?}"
        );
        assert_eq!(call.arguments().len(), 2, "raw arguments are kept");
    }

    proptest::proptest! {
        /// The shape check finds exactly the error building the parameters
        /// finds (or none), for pointers full of arrays, gaps, bad indices,
        /// scalars written over and below.
        #[test]
        fn pointer_check_agrees_with_building(
            arguments in proptest::collection::vec(
                (
                    proptest::collection::vec(
                        proptest::sample::select(vec!["a", "b", "0", "1", "2", "00", "-1", "x", ""]),
                        1..4,
                    ),
                    proptest::sample::select(vec!["s", "1", "true", "a\nb", " 2 "]),
                ),
                0..8,
            )
        ) {
            let body: String = arguments
                .iter()
                .map(|(segments, value)| format!("!!!ARG:{}\n{value}\n", segments.join("/")))
                .collect();
            let call = GadgetCall::new("G", "g", Vec::new(), &body);
            let built = build_parameters(call.arguments(), coerce).err();
            proptest::prop_assert_eq!(&call.parse_error, &built, "{}", body);
        }
    }
}
