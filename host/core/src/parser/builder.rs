//! Building a [`Parser`]: markers, the block cap and the live-display
//! options, checked once.

use std::sync::Arc;

use super::markers::{DEFAULT_ARG, DEFAULT_END, DEFAULT_START, MAX_BLOCK_BYTES};
use super::stream::{Parser, ParserConfig};

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

    /// A parser for one stream, with a fresh session.
    pub fn build(&self) -> Result<Parser, ConfigError> {
        Ok(Parser::with_config(self.config()?))
    }

    /// The checked, prepared configuration, for parsers to share (see
    /// [`Parser::with_config`]).
    pub fn config(&self) -> Result<Arc<ParserConfig>, ConfigError> {
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
        Ok(Arc::new(ParserConfig::new(
            [&self.start, &self.end, &self.arg].map(String::as_str),
            self.max_block_bytes,
            self.text_deltas,
            self.partial_arguments,
        )))
    }
}

impl Parser {
    /// A parser with the default markers and a fresh session.
    pub fn new() -> Parser {
        ParserBuilder::new()
            .build()
            .expect("default markers are valid")
    }
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}
