//! `gadget parse`: block-format text from stdin through the parser, the
//! events out as JSON lines in the conformance kit's format.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use serde_json::json;

use gadget_core::parser::{self, EventRef, ParserBuilder};

/// Options of `gadget parse`.
#[derive(Debug, clap::Args)]
pub struct ParseOptions {
    /// Feed the input N bytes at a time (moved to the next character boundary), as a stream would arrive.
    #[arg(long, value_name = "N")]
    chunk: Option<usize>,
    /// The start marker.
    #[arg(long, value_name = "MARKER", allow_hyphen_values = true, default_value = parser::DEFAULT_START)]
    start: String,
    /// The end marker.
    #[arg(long, value_name = "MARKER", allow_hyphen_values = true, default_value = parser::DEFAULT_END)]
    end: String,
    /// The argument marker.
    #[arg(long, value_name = "MARKER", allow_hyphen_values = true, default_value = parser::DEFAULT_ARG)]
    arg: String,
    /// Print only counts (text events, calls, parse errors), for timing.
    #[arg(long)]
    count: bool,
    /// Emit text as it arrives (pieces of segments) instead of whole segments.
    #[arg(long)]
    text_deltas: bool,
    /// Emit `gadget_args_partial` events for argument values of blocks still open at the end of a chunk.
    #[arg(long)]
    partials: bool,
}

/// `gadget parse`: stdin through the block-format parser, events out as
/// JSON lines in the conformance kit's format.
pub fn parse(options: &ParseOptions) -> Result<ExitCode> {
    let mut parser = ParserBuilder::new()
        .start_marker(&options.start)
        .end_marker(&options.end)
        .arg_marker(&options.arg)
        .text_deltas(options.text_deltas)
        .partial_arguments(options.partials)
        .build()
        .context("invalid markers")?;
    let mut bytes = Vec::new();
    super::run::reading_from_a_terminal("a response to parse");
    std::io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .context("reading stdin")?;
    let input = match std::str::from_utf8(&bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(&bytes),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let (mut texts, mut calls, mut errors, mut partials) = (0usize, 0usize, 0usize, 0usize);
    let mut failure: Option<std::io::Error> = None;
    let count = options.count;
    let mut emit = |event: EventRef<'_>| {
        let line = match event {
            EventRef::Text(content) => {
                texts += 1;
                if count {
                    return;
                }
                json!({ "type": "text", "content": content })
            }
            EventRef::Call(call) => {
                calls += 1;
                errors += usize::from(call.parse_error.is_some());
                if count {
                    return;
                }
                let call = call.to_owned();
                json!({ "type": "gadget_call", "call": {
                    "gadgetName": call.name,
                    "invocationId": call.invocation_id,
                    "dependencies": call.dependencies,
                    "parametersRaw": call.parameters_raw,
                    "parameters": call.parameters(),
                    "parseError": call.parse_error,
                }})
            }
            EventRef::ArgumentDelta(delta) => {
                partials += 1;
                json!({
                    "type": "gadget_args_partial",
                    "gadgetName": delta.header.name,
                    "invocationId": delta.header.invocation_id.to_string(),
                    "fieldPath": delta.pointer,
                    "delta": delta.delta,
                })
            }
        };
        if !count
            && failure.is_none()
            && let Err(error) = writeln!(out, "{line}")
        {
            failure = Some(error);
        }
    };
    match options.chunk {
        None | Some(0) => parser.feed_events(&input, &mut emit),
        Some(size) => {
            let mut rest: &str = &input;
            while !rest.is_empty() {
                let mut cut = size.min(rest.len());
                while !rest.is_char_boundary(cut) {
                    cut += 1;
                }
                parser.feed_events(&rest[..cut], &mut emit);
                rest = &rest[cut..];
            }
        }
    }
    parser.finish_events(&mut emit);
    if let Some(error) = failure {
        return Err(error).context("writing stdout");
    }
    if count {
        write!(
            out,
            "text events: {texts}, calls: {calls}, parse errors: {errors}"
        )?;
        if options.partials {
            write!(out, ", argument deltas: {partials}")?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
