//! Server-sent events into a response stream: the bytes of an HTTP body
//! are split into events by `eventsource-stream`, each provider's
//! [`Decode`] turns an event into text and usage, and the stream ends at
//! the provider's end marker. A body that stops before the response is
//! complete, or a transport error, is [`ProviderError::StreamBroken`]: a
//! half answer is never taken for a whole one.

use std::collections::VecDeque;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};

use crate::provider::{ProviderError, ResponseStream, StreamItem};

/// The most bytes one response's body may have: far more than any model
/// writes in one answer (a 100k-token answer is well under 1 MiB), so
/// only a runaway or hostile server reaches it. Past it the stream is
/// broken off, so no event, line or text grows without bound.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// What one event means.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    decode_within(provider, body, decoder, MAX_RESPONSE_BYTES)
}

/// [`decode`] with a byte limit of the caller's.
pub fn decode_within<B, E>(
    provider: &'static str,
    body: impl Stream<Item = Result<B, E>> + Send + 'static,
    decoder: impl Decode,
    limit: usize,
) -> ResponseStream
where
    B: AsRef<[u8]> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    // Counted before the event parser buffers anything.
    let mut seen = 0usize;
    let body = body.map(move |chunk| match chunk {
        Ok(bytes) => {
            seen = seen.saturating_add(bytes.as_ref().len());
            if seen > limit {
                Err(format!("the response is over {limit} bytes, the limit"))
            } else {
                Ok(bytes)
            }
        }
        Err(e) => Err(e.to_string()),
    });
    struct State<S, D> {
        events: S,
        decoder: D,
        pending: VecDeque<StreamItem>,
        ended: bool,
    }
    let state = State {
        events: Box::pin(body.eventsource()),
        decoder,
        pending: VecDeque::new(),
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
                match state.events.next().await {
                    Some(Ok(event)) => match state.decoder.event(&event.event, &event.data) {
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
                    },
                    Some(Err(error)) => {
                        state.ended = true;
                        return Some((Err(broken(error.to_string())), state));
                    }
                    None => {
                        state.ended = true;
                        if !state.decoder.complete() {
                            return Some((
                                Err(broken(
                                    "the connection closed before the response was complete".into(),
                                )),
                                state,
                            ));
                        }
                    }
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

    #[test]
    fn a_response_over_the_byte_limit_is_broken_off() {
        // One endless line: without the limit the event parser would
        // buffer it for ever.
        let chunks = (0..100).map(|_| Ok::<_, std::io::Error>(vec![b'x'; 1024]));
        let stream = decode_within(
            "test",
            futures_util::stream::iter(chunks),
            crate::openai::Decoder::default(),
            10 * 1024,
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let items: Vec<_> = runtime.block_on(stream.collect());
        assert_eq!(items.len(), 1);
        let error = items[0].as_ref().unwrap_err().to_string();
        assert!(
            error.starts_with("test: the response stream broke: ")
                && error.ends_with("the response is over 10240 bytes, the limit"),
            "{error}"
        );
    }
}
