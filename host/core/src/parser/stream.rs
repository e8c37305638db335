//! The streaming state machine: markers found across chunks, blocks cut
//! at their cap, text held back only while it may be the start of a marker.

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;

use memchr::memmem::Finder;

use super::body::{ArgumentSpan, PointerNode, find_short, parse_body};
use super::call::{
    ArgumentDeltaRef, CallRef, EventRef, HeaderRef, InvocationId, ParseEvent, Session,
};
use super::js::js_trim;

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

/// What parsers are configured with: the markers' searchers, checked
/// and prepared once by [`super::ParserBuilder::config`], then shared by
/// every parser of a session (each response gets a fresh [`Parser`] that
/// holds this by reference, as ripgrep's `Core { config: &Config, .. }`,
/// and so costs no marker preparation).
pub struct ParserConfig {
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
}

impl ParserConfig {
    /// Prepares these markers (start, end, argument) and options, checked
    /// by [`super::ParserBuilder::config`].
    pub(super) fn new(
        markers: [&str; 3],
        max_block_bytes: usize,
        text_deltas: bool,
        partial_arguments: bool,
    ) -> ParserConfig {
        let [start, end, arg] = markers;
        ParserConfig {
            start: Finder::new(start.as_bytes()).into_owned(),
            end: Finder::new(end.as_bytes()).into_owned(),
            arg: Finder::new(arg.as_bytes()).into_owned(),
            candidates: Candidates::new(markers),
            heads: markers.map(|m| Head::new(m.as_bytes())),
            start_text: start.to_string(),
            max_block_bytes,
            text_deltas,
            partial_arguments,
        }
    }
}

impl fmt::Debug for ParserConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParserConfig")
            .field("start", &self.start_text)
            .field("max_block_bytes", &self.max_block_bytes)
            .field("text_deltas", &self.text_deltas)
            .field("partial_arguments", &self.partial_arguments)
            .finish_non_exhaustive()
    }
}

/// An incremental block-format parser for one stream.
pub struct Parser {
    config: Arc<ParserConfig>,
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
    /// A fresh parser (a new session) with `config`, which it shares.
    pub fn with_config(config: Arc<ParserConfig>) -> Parser {
        Parser {
            config,
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
        }
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

    /// Bytes of input held, waiting for more (see [`MAX_BLOCK_BYTES`](super::MAX_BLOCK_BYTES) for the bound).
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
                let text = format!("{}{buf}", self.config.start_text);
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
                    let found = self
                        .config
                        .start
                        .find(&bytes[from..])
                        .map(|offset| from + offset);
                    // Text before here is certain: a marker, or where one may yet begin.
                    let certain = found.unwrap_or_else(|| {
                        resume_point(bytes.len(), self.config.start.needle().len(), pos)
                    });
                    if !self.config.text_deltas && certain - pos > self.config.max_block_bytes {
                        // Memory stays bounded: a segment past the cap is emitted
                        // in cap-sized pieces, cut at the same places whatever the
                        // chunking (whitespace-only pieces are dropped).
                        let mut cut = floor_char_boundary(text, pos + self.config.max_block_bytes);
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
                            pos = at + self.config.start_text.len();
                            self.search_from = pos;
                            self.text_blank_to = pos;
                            self.state = State::Header;
                        }
                        None => {
                            self.search_from = certain;
                            if self.config.text_deltas {
                                // Show all but a possible start-marker prefix.
                                let held = held_prefix(bytes, self.config.start.needle());
                                pos = self.text_until(text, pos, bytes.len() - held, false, events);
                            }
                            return pos;
                        }
                    }
                }
                State::Header => match self.header_line(text, pos, from, events) {
                    ControlFlow::Continue(next) => pos = next,
                    ControlFlow::Break(consumed) => return consumed,
                },
                State::Body | State::Skip => {
                    let body_start = if self.state == State::Body {
                        pos + self.header_len + 1
                    } else {
                        pos
                    };
                    let (body_end, resume) = match self.body_end(bytes, body_start, from) {
                        BodyEnd::Start(at) => (at, at),
                        BodyEnd::End(at) => (at, at + self.config.end.needle().len()),
                        BodyEnd::Undecided(resume) => {
                            self.search_from = resume;
                            if self.state == State::Skip {
                                // Nothing of a skipped block is kept but a possible marker prefix.
                                return resume;
                            }
                            if resume - body_start > self.config.max_block_bytes {
                                pos = self.oversized(text, pos, events);
                                continue;
                            }
                            if self.config.partial_arguments {
                                self.partials(text, pos, resume, events);
                            }
                            return pos;
                        }
                    };
                    if self.state == State::Body {
                        if body_end - body_start > self.config.max_block_bytes {
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

    /// The header state: reads the open block's header line (its newline
    /// counts only within the cap). Continues from where the body starts
    /// (or where an oversized block was skipped to); breaks with what is
    /// consumed when the line is not complete yet.
    fn header_line(
        &mut self,
        text: &str,
        pos: usize,
        from: usize,
        events: &mut dyn FnMut(EventRef<'_>),
    ) -> ControlFlow<usize, usize> {
        let bytes = text.as_bytes();
        let limit = (pos + self.config.max_block_bytes + 1).min(bytes.len());
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
                ControlFlow::Continue(pos)
            }
            None if bytes.len() - pos > self.config.max_block_bytes => {
                // No newline within the cap: the block is skipped from
                // the cap on, whatever the chunking.
                let cap = pos + self.config.max_block_bytes + 1;
                self.search_from = floor_char_boundary(text, cap).max(pos);
                ControlFlow::Continue(self.oversized(text, pos, events))
            }
            None => {
                self.search_from = bytes.len();
                ControlFlow::Break(pos)
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
        let (parameters_raw, error) = parse_body(
            body,
            &self.config.arg,
            marks,
            &mut self.spans,
            &mut self.scratch,
        );
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
        if !self.config.text_deltas {
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
            if js_trim(&text[from..to]).is_empty() && to - pos <= self.config.max_block_bytes {
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
        let marker = self.config.arg.needle().len();
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
        let [start, end, arg] = &self.config.heads;
        let (start, end, arg) = (
            MarkerTest::new(self.config.start.needle(), *start),
            MarkerTest::new(self.config.end.needle(), *end),
            MarkerTest::new(self.config.arg.needle(), *arg),
        );
        let mut at = from.max(body_start);
        loop {
            let Some(offset) = self.config.candidates.find(&bytes[at..]) else {
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
            let cut = floor_char_boundary(text, pos + 64.min(self.config.max_block_bytes));
            HeaderRef {
                name: js_trim(&text[pos..cut]),
                invocation_id: InvocationId::Written(""),
                dependencies_raw: "",
            }
        };
        self.error = Some(format!(
            "Block exceeds the {}-byte limit on one gadget call's header or body; it was not parsed",
            self.config.max_block_bytes
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
