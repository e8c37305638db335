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
//!
//! The files, each using only those before it: `markers` (the defaults and
//! the cap), `js` (JavaScript's spaces and trimming, JSON type names),
//! `pointer` (setting a value at a JSON pointer), `coerce` (argument text
//! to JSON, by the schema when there is one), `body` (a block's body split
//! into arguments, checked and built), `call` (the calls and events the
//! parser yields), `stream` (the state machine over chunks) and `builder`.

mod body;
mod builder;
mod call;
mod coerce;
mod js;
mod markers;
mod pointer;
mod stream;
#[cfg(test)]
mod tests;

pub use body::strip_fences;
pub use builder::{ConfigError, ParserBuilder};
pub use call::{
    ArgumentDeltaRef, CallRef, EventRef, GadgetCall, HeaderRef, InvocationId, ParseEvent, Session,
};
pub(crate) use coerce::Coercions;
pub use coerce::{coerce, coerce_with_schema, json_number};
pub use js::{is_js_space, js_trim, json_type};
pub use markers::{DEFAULT_ARG, DEFAULT_END, DEFAULT_START, MAX_BLOCK_BYTES};
pub use stream::{Parser, ParserConfig};
