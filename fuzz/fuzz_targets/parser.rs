//! Arbitrary bytes, fed as arbitrary chunkings, with arbitrary options.
//!
//! The first bytes choose the block cap, the options and the chunk sizes;
//! the rest (lossily UTF-8) is the model output. Checks, beyond "no panic":
//! - memory stays bounded: the parser never holds more than two caps, the
//!   longest marker and the current chunk;
//! - every chunking gives the same calls and the same concatenated text as
//!   feeding the whole input (with text deltas and partial arguments on or off);
//! - every call's parameters can be built, or it carries a parse error.
//!
//! Run: `cargo +nightly fuzz run parser` (see fuzz/README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

use gadget_core::parser::{ParseEvent, Parser, ParserBuilder};

fn build(cap: usize, custom: bool, deltas: bool, partials: bool) -> Parser {
    let builder = if custom {
        ParserBuilder::new()
            .start_marker("<T")
            .end_marker("<E")
            .arg_marker("@@")
    } else {
        ParserBuilder::new()
    };
    builder
        .max_block_bytes(cap)
        .text_deltas(deltas)
        .partial_arguments(partials)
        .build()
        .expect("valid markers")
}

/// Calls (as debug text) and the concatenated text.
fn summarize(events: Vec<ParseEvent>) -> (Vec<String>, String) {
    let (mut calls, mut text) = (Vec::new(), String::new());
    for event in events {
        match event {
            ParseEvent::Text(t) => text.push_str(&t),
            ParseEvent::Call(call) => {
                assert!(call.parse_error.is_some() || call.parameters().is_some());
                calls.push(format!("{call:?}"));
            }
            ParseEvent::ArgumentDelta { .. } => {}
        }
    }
    (calls, text)
}

fuzz_target!(|data: &[u8]| {
    let [cap, flags, rest @ ..] = data else {
        return;
    };
    let cap = 16 + usize::from(*cap) * 4;
    let (custom, deltas, partials) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
    let input = String::from_utf8_lossy(rest);
    let first_step = usize::from(flags >> 3) + 1;

    // Calls never depend on the live-display options; text deltas change
    // only how text is cut, so compare against the whole input fed once
    // with the same options.
    let feed_whole = |deltas, partials| {
        let mut parser = build(cap, custom, deltas, partials);
        let mut events = parser.feed(&input);
        events.extend(parser.finish());
        summarize(events)
    };
    let plain = feed_whole(false, false);
    let expected = feed_whole(deltas, partials);
    assert_eq!(plain.0, expected.0);

    let mut parser = build(cap, custom, deltas, partials);
    let mut events = Vec::new();
    let mut at = 0;
    let mut step = first_step;
    while at < input.len() {
        let mut end = (at + step).min(input.len());
        while !input.is_char_boundary(end) {
            end += 1;
        }
        events.extend(parser.feed(&input[at..end]));
        let bound = 2 * cap + 16 + (end - at);
        assert!(
            parser.buffered() <= bound,
            "holding {} bytes, bound {bound}",
            parser.buffered()
        );
        at = end;
        // Vary the chunk sizes: 1..=32 bytes, from the seed.
        step = (step * 7 + 3) % 32 + 1;
    }
    events.extend(parser.finish());
    assert_eq!(summarize(events), expected);
});
