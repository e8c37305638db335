//! Server-sent events into a response stream: the bytes of an HTTP body
//! are split into events by [`EventParser`] (one pass, bounded), each provider's
//! [`Decode`] turns an event into text and usage, and the stream ends at
//! the provider's end marker. A body that stops before the response is
//! complete, or a transport error, is [`ProviderError::StreamBroken`]: a
//! half answer is never taken for a whole one.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{Stream, StreamExt};

use crate::provider::{ProviderError, ResponseStream, StreamItem};

/// The most bytes one response's body may have: far more than any model
/// writes in one answer (a 100k-token answer is well under 1 MiB), so
/// only a runaway or hostile server reaches it. Past it the stream is
/// broken off.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// The most bytes one event may hold (its lines together): the largest
/// real event is one delta of a few KiB. A line that never ends is broken
/// off here, not at the whole-response limit after seconds of scanning.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// How long a streaming response may send nothing at all: providers send
/// tokens or keep-alive comments every few seconds while a model thinks.
/// A server that goes silent is broken off instead of hanging the agent.
pub const READ_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// What one event means.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Stream(StreamItem),
    /// The provider's end marker: nothing after it is read.
    End,
}

/// A provider's reading of its events.
pub trait Decode: Send + 'static {
    /// The items of one event (`event` is its type, empty when it has
    /// none).
    fn event(&mut self, event: &str, data: &str) -> Result<Vec<Item>, ProviderError>;

    /// Whether the body may end here without the end marker.
    fn complete(&self) -> bool;
}

/// The bounds a body is read within.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub response_bytes: usize,
    pub event_bytes: usize,
    pub idle: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            response_bytes: MAX_RESPONSE_BYTES,
            event_bytes: MAX_EVENT_BYTES,
            idle: READ_IDLE_TIMEOUT,
        }
    }
}

/// The response stream of an event-stream body.
pub fn decode<B, E>(
    provider: &'static str,
    body: impl Stream<Item = Result<B, E>> + Send + 'static,
    decoder: impl Decode,
) -> ResponseStream
where
    B: AsRef<[u8]> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    decode_within(provider, body, decoder, Bounds::default())
}

/// One event: its type and its data lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: String,
    pub data: String,
}

/// The event-stream format (WHATWG's `text/event-stream`), read in one pass:
/// each byte is looked at once, whatever the chunking; lines end at LF, CR
/// or CRLF; a line or an event over its limit, or text that is not UTF-8,
/// is an error (never a character held back for ever).
#[derive(Debug)]
pub struct EventParser {
    line: Vec<u8>,
    /// The last byte seen was a CR (an LF right after it ends nothing).
    after_cr: bool,
    started: bool,
    event: String,
    data: String,
    has_data: bool,
    limit: usize,
}

impl EventParser {
    pub fn new(event_limit: usize) -> EventParser {
        EventParser {
            line: Vec::new(),
            after_cr: false,
            started: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            limit: event_limit,
        }
    }

    /// Feeds bytes; complete events go to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut VecDeque<Event>) -> Result<(), String> {
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.after_cr && rest[0] == b'\n' {
                rest = &rest[1..];
                self.after_cr = false;
                continue;
            }
            self.after_cr = false;
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(at) => {
                    self.take(&rest[..at])?;
                    self.after_cr = rest[at] == b'\r';
                    rest = &rest[at + 1..];
                    self.line_ended(out)?;
                }
                None => {
                    self.take(rest)?;
                    rest = &[];
                }
            }
        }
        Ok(())
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), String> {
        // The line being read and the event's data so far: comments and
        // other fields between events do not add up.
        let held = self.line.len() + self.data.len();
        if held.saturating_add(bytes.len()) > self.limit {
            return Err(format!(
                "an event is over {} bytes, the limit (a line that never ends?)",
                self.limit
            ));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_ended(&mut self, out: &mut VecDeque<Event>) -> Result<(), String> {
        let mut line = std::mem::take(&mut self.line);
        if !self.started {
            self.started = true;
            if line.starts_with("\u{feff}".as_bytes()) {
                line.drain(..3);
            }
        }
        let line = String::from_utf8(line).map_err(|e| {
            format!(
                "the stream is not UTF-8 (at byte {} of a line)",
                e.utf8_error().valid_up_to()
            )
        })?;
        if line.is_empty() {
            if self.has_data {
                out.push_back(Event {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields: nothing a response needs
        }
        Ok(())
    }

    /// The body ended: an event not closed by a blank line is dropped, as
    /// the format says (a half-sent event is not an event).
    pub fn finish(&mut self, _out: &mut VecDeque<Event>) -> Result<(), String> {
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        Ok(())
    }
}

/// [`decode`] within bounds of the caller's.
pub fn decode_within<B, E>(
    provider: &'static str,
    body: impl Stream<Item = Result<B, E>> + Send + 'static,
    decoder: impl Decode,
    bounds: Bounds,
) -> ResponseStream
where
    B: AsRef<[u8]> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    struct State<S, D> {
        body: S,
        parser: EventParser,
        events: VecDeque<Event>,
        decoder: D,
        pending: VecDeque<StreamItem>,
        seen: usize,
        body_ended: bool,
        ended: bool,
    }
    let state = State {
        body: Box::pin(body),
        parser: EventParser::new(bounds.event_bytes),
        events: VecDeque::new(),
        decoder,
        pending: VecDeque::new(),
        seen: 0,
        body_ended: false,
        ended: false,
    };
    let broken = move |cause: String| ProviderError::StreamBroken {
        provider: provider.to_string(),
        cause,
    };
    Box::pin(futures_util::stream::unfold(
        state,
        move |mut state| async move {
            loop {
                if let Some(item) = state.pending.pop_front() {
                    return Some((Ok(item), state));
                }
                if state.ended {
                    return None;
                }
                if let Some(event) = state.events.pop_front() {
                    match state.decoder.event(&event.event, &event.data) {
                        Ok(items) => {
                            for item in items {
                                match item {
                                    Item::Stream(item) => state.pending.push_back(item),
                                    Item::End => state.ended = true,
                                }
                            }
                        }
                        Err(error) => {
                            state.ended = true;
                            state.pending.clear();
                            return Some((Err(error), state));
                        }
                    }
                    continue;
                }
                if state.body_ended {
                    state.ended = true;
                    if !state.decoder.complete() {
                        return Some((
                            Err(broken(
                                "the connection closed before the response was complete".into(),
                            )),
                            state,
                        ));
                    }
                    continue;
                }
                let fed = match tokio::time::timeout(bounds.idle, state.body.next()).await {
                    Err(_) => Err(format!(
                        "the server sent nothing for {} s",
                        bounds.idle.as_secs_f64()
                    )),
                    Ok(Some(Ok(bytes))) => {
                        let bytes = bytes.as_ref();
                        state.seen = state.seen.saturating_add(bytes.len());
                        if state.seen > bounds.response_bytes {
                            Err(format!(
                                "the response is over {} bytes, the limit",
                                bounds.response_bytes
                            ))
                        } else {
                            state.parser.feed(bytes, &mut state.events)
                        }
                    }
                    Ok(Some(Err(error))) => Err(error.to_string()),
                    Ok(None) => {
                        state.body_ended = true;
                        state.parser.finish(&mut state.events)
                    }
                };
                if let Err(cause) = fed {
                    state.ended = true;
                    return Some((Err(broken(cause)), state));
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    //! Recorded streams in the shapes the providers document, fed through
    //! the real event parser in awkward pieces.
    use super::*;

    /// Everything a parser makes of `input` fed in the given pieces: the
    /// events, and whether it ended in an error.
    fn parse_in_pieces(input: &[u8], cuts: &[usize], limit: usize) -> (Vec<Event>, bool) {
        let mut parser = EventParser::new(limit);
        let mut out = VecDeque::new();
        let mut from = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            let cut = cut.clamp(from, input.len());
            if parser.feed(&input[from..cut], &mut out).is_err() {
                return (out.into_iter().collect(), true);
            }
            from = cut;
        }
        let failed = parser.finish(&mut out).is_err();
        (out.into_iter().collect(), failed)
    }

    /// Fuzz target: any bytes, in any pieces, give the same events (or the
    /// same error) as the whole stream at once, and no event is over the
    /// limit.
    #[test]
    fn fuzz_event_streams() {
        let seeds: &[&[u8]] = &[
            b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
            b"\xef\xbb\xbfevent: message_start\r\ndata: {\"type\":\"message_start\"}\r\n\r\n: keep-alive\r\n\r\n",
            b"event: content_block_delta\ndata: a\ndata: b\rdata: c\r\n\nid: 1\nretry: 5\n\n",
            b"data:no-space\n\ndata\n\n:comment\n",
        ];
        let runs = gadget_core::fuzz::run("sse", seeds, |input| {
            let limit = 16 + input.first().map_or(0, |&b| usize::from(b));
            let whole = parse_in_pieces(input, &[], limit);
            for event in &whole.0 {
                assert!(event.data.len() <= limit, "an event over the limit");
            }
            let n = input.len().max(1);
            let seed = input.iter().fold(7usize, |h, &b| {
                h.wrapping_mul(31).wrapping_add(usize::from(b))
            });
            let cuts = [seed % n, (seed / 7) % n, (seed / 13) % n];
            let mut sorted = cuts;
            sorted.sort_unstable();
            assert_eq!(
                whole,
                parse_in_pieces(input, &sorted, limit),
                "pieces {sorted:?}"
            );
            let bytes: Vec<usize> = (1..input.len()).collect();
            assert_eq!(whole, parse_in_pieces(input, &bytes, limit), "byte by byte");
        });
        assert!(runs > 0);
    }
    use crate::provider::Usage;

    /// Everything a stream yields, with `body` cut into `piece`-byte chunks.
    fn collect(body: &str, piece: usize, decoder: impl Decode) -> Vec<Result<StreamItem, String>> {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body
            .as_bytes()
            .chunks(piece)
            .map(|c| Ok(c.to_vec()))
            .collect();
        let stream = decode("test", futures_util::stream::iter(chunks), decoder);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(stream.map(|r| r.map_err(|e| e.to_string())).collect())
    }

    fn text(items: &[Result<StreamItem, String>]) -> String {
        items
            .iter()
            .filter_map(|i| match i {
                Ok(StreamItem::Text(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn last_usage(items: &[Result<StreamItem, String>]) -> Option<Usage> {
        items.iter().rev().find_map(|i| match i {
            Ok(StreamItem::Usage(u)) => Some(*u),
            _ => None,
        })
    }

    const OPENAI: &str = concat!(
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        ": a comment line, which servers send to keep the connection open\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo ✓\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,\"total_tokens\":21}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn an_openai_stream_gives_its_text_and_usage_however_it_is_cut() {
        for piece in [1, 3, 7, 64, OPENAI.len()] {
            let items = collect(OPENAI, piece, crate::openai::Decoder::default());
            assert_eq!(text(&items), "Hello ✓", "piece {piece}");
            assert_eq!(
                last_usage(&items),
                Some(Usage {
                    input_tokens: 9,
                    output_tokens: 12
                })
            );
            assert!(items.iter().all(Result::is_ok), "{items:?}");
        }
    }

    #[test]
    fn an_openai_stream_without_done_is_whole_only_after_a_finish_reason() {
        let no_done = OPENAI.replace("data: [DONE]\n\n", "");
        let items = collect(&no_done, 16, crate::openai::Decoder::default());
        assert!(items.iter().all(Result::is_ok), "{items:?}");
        let cut_short = &OPENAI[..OPENAI.find("\"lo ✓\"").unwrap()];
        let items = collect(cut_short, 16, crate::openai::Decoder::default());
        assert_eq!(text(&items), "Hel");
        assert_eq!(
            items.last().unwrap().as_ref().unwrap_err(),
            "test: the response stream broke: the connection closed before the response was complete"
        );
    }

    #[test]
    fn an_openai_error_event_and_a_non_json_event_end_the_stream_with_their_cause() {
        let error = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"never\"}}]}\n\n";
        let items = collect(error, 10, crate::openai::Decoder::default());
        assert_eq!(text(&items), "a");
        assert_eq!(
            items.last().unwrap().as_ref().unwrap_err(),
            "openai: the API reported an error mid-response: The server had an error while processing your request."
        );
        let items = collect("data: {not json\n\n", 10, crate::openai::Decoder::default());
        assert!(
            items[0]
                .as_ref()
                .unwrap_err()
                .contains("an event is not JSON"),
            "{items:?}"
        );
    }

    const ANTHROPIC: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-20250514\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" world\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    #[test]
    fn an_anthropic_stream_gives_its_text_and_cumulative_usage_however_it_is_cut() {
        for piece in [1, 5, 33, ANTHROPIC.len()] {
            let items = collect(ANTHROPIC, piece, crate::anthropic::Decoder::default());
            assert_eq!(text(&items), "Hello world", "piece {piece}");
            assert_eq!(
                last_usage(&items),
                Some(Usage {
                    input_tokens: 25,
                    output_tokens: 15
                })
            );
            assert!(items.iter().all(Result::is_ok), "{items:?}");
        }
    }

    #[test]
    fn an_anthropic_error_event_or_a_missing_stop_is_an_error() {
        let overloaded = format!(
            "{}event: error\ndata: {{\"type\": \"error\", \"error\": {{\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}}}\n\n",
            &ANTHROPIC[..ANTHROPIC.find("event: content_block_stop").unwrap()]
        );
        let items = collect(&overloaded, 9, crate::anthropic::Decoder::default());
        assert_eq!(text(&items), "Hello world");
        assert_eq!(
            items.last().unwrap().as_ref().unwrap_err(),
            "anthropic: the API reported an error mid-response: Overloaded"
        );
        let no_stop = ANTHROPIC.replace(
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            "",
        );
        let items = collect(&no_stop, 64, crate::anthropic::Decoder::default());
        assert!(items.last().unwrap().is_err(), "{items:?}");
    }

    /// What a body of these chunks gives within `bounds`; `then_hang`:
    /// after them the body sends nothing and never ends.
    fn within(
        chunks: Vec<Vec<u8>>,
        bounds: Bounds,
        then_hang: bool,
    ) -> Vec<Result<StreamItem, String>> {
        let body = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
        let body: std::pin::Pin<Box<dyn Stream<Item = Result<Vec<u8>, std::io::Error>> + Send>> =
            if then_hang {
                Box::pin(body.chain(futures_util::stream::pending()))
            } else {
                Box::pin(body)
            };
        let stream = decode_within("test", body, crate::openai::Decoder::default(), bounds);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(stream.map(|r| r.map_err(|e| e.to_string())).collect())
    }

    fn broken_with(items: &[Result<StreamItem, String>], cause: &str) {
        let error = items.last().unwrap().as_ref().unwrap_err();
        assert!(
            error.starts_with("test: the response stream broke: ") && error.contains(cause),
            "{error}"
        );
    }

    #[test]
    fn a_response_over_the_byte_limit_is_broken_off() {
        let chunks = (0..100).map(|_| b": keep-alive\n".repeat(100)).collect();
        let bounds = Bounds {
            response_bytes: 10 * 1024,
            ..Bounds::default()
        };
        let items = within(chunks, bounds, false);
        broken_with(&items, "the response is over 10240 bytes, the limit");
    }

    #[test]
    fn an_endless_line_is_broken_off_at_the_event_limit_in_linear_time() {
        // 16 MiB of one line in 1-byte to 64 KiB pieces: each byte is
        // looked at once, so this takes milliseconds, not seconds.
        for piece in [1usize, 4096, 65536] {
            let total = if piece == 1 { 2 << 20 } else { 16 << 20 };
            let chunks = (0..total / piece).map(|_| vec![b'x'; piece]).collect();
            let started = std::time::Instant::now();
            let items = within(chunks, Bounds::default(), false);
            broken_with(&items, &format!("an event is over {MAX_EVENT_BYTES} bytes"));
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "{piece}: {:?}",
                started.elapsed()
            );
        }
    }

    #[test]
    fn invalid_utf8_is_a_stream_error_not_a_hang() {
        let mut bad = b"data: {\"choices\":[{\"delta\":{\"content\":\"a".to_vec();
        bad.push(0xff);
        bad.extend_from_slice(b"\"}}]}\n\ndata: [DONE]\n\n");
        for hang in [false, true] {
            let items = within(vec![bad.clone()], Bounds::default(), hang);
            broken_with(&items, "not UTF-8");
        }
        // A character split across chunks is fine.
        let text = "data: {\"choices\":[{\"delta\":{\"content\":\"✓\"}}]}\n\ndata: [DONE]\n\n";
        let bytes = text.as_bytes();
        let cut = text.find('✓').unwrap() + 1;
        let items = within(
            vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()],
            Bounds::default(),
            false,
        );
        assert_eq!(super::tests::text(&items), "✓", "{items:?}");
    }

    #[test]
    fn a_silent_server_is_broken_off_after_the_idle_timeout() {
        let bounds = Bounds {
            idle: std::time::Duration::from_millis(100),
            ..Bounds::default()
        };
        let first = b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n".to_vec();
        let items = within(vec![first], bounds, true);
        assert_eq!(super::tests::text(&items), "Hi");
        broken_with(&items, "the server sent nothing for 0.1 s");
    }

    #[test]
    fn lines_end_at_lf_cr_or_crlf_and_events_need_a_blank_line() {
        let mut parser = EventParser::new(1024);
        let mut out = VecDeque::new();
        for piece in [
            "\u{feff}event: a\r",
            "\ndata: 1\r\ndata:2\r\r",
            ": c\n",
            "data: x\n",
            "\n",
            "data: tail",
        ] {
            parser.feed(piece.as_bytes(), &mut out).unwrap();
        }
        parser.finish(&mut out).unwrap();
        let events: Vec<(String, String)> = out.into_iter().map(|e| (e.event, e.data)).collect();
        assert_eq!(
            events,
            [
                ("a".to_string(), "1\n2".to_string()),
                (String::new(), "x".to_string()),
            ]
        );
    }
}
