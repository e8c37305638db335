//! What the parser produces: calls (owned and borrowed), their ids and
//! headers, and the events of a stream.

use std::fmt;

use memchr::memmem::Finder;
use serde_json::{Map, Value};

use super::body::{ArgumentSpan, arguments_of, build_parameters, find_short, parse_body};
use super::coerce::{Coercions, coerce, coerce_by, coerce_with_schema};
use super::js::js_trim;
use super::markers::DEFAULT_ARG;

/// What a session shares across the responses of one conversation: the
/// auto-id counter, so `gadget_N` ids never repeat within it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    auto_ids: u64,
}

impl Session {
    pub(super) fn next_auto_id(&mut self) -> u64 {
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
    /// Parameters given as JSON (a provider's native tool call), used as
    /// they are instead of being built from a block's arguments;
    /// `parameters_raw` is then their JSON text.
    native: Option<Map<String, Value>>,
}

impl GadgetCall {
    /// Drops the call's body (its raw parameters and their spans), keeping
    /// its name, id and dependencies: what a long session needs to keep
    /// of a call that has ended.
    pub fn forget_body(&mut self) {
        self.parameters_raw = String::new();
        self.spans = Vec::new();
        self.parse_error = None;
        self.native = None;
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
            native: None,
        }
    }

    /// A provider's native tool call: its parameters are JSON already
    /// (no block to parse, no coercion; the schema still validates them).
    pub fn native(
        name: impl Into<String>,
        invocation_id: impl Into<String>,
        parameters: Map<String, Value>,
    ) -> GadgetCall {
        GadgetCall {
            name: name.into(),
            invocation_id: invocation_id.into(),
            dependencies: Vec::new(),
            parameters_raw: Value::Object(parameters.clone()).to_string(),
            parse_error: None,
            spans: Vec::new(),
            native: Some(parameters),
        }
    }

    /// Whether it came as a native tool call.
    pub fn is_native(&self) -> bool {
        self.native.is_some()
    }

    /// Each argument's pointer and raw (uncoerced) value, in block order.
    pub fn arguments(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        arguments_of(&self.parameters_raw, &self.spans)
    }

    /// The parameters with llmist's schema-less coercion (what its
    /// `gadget_call` event carries); `None` when there is a parse error.
    pub fn parameters(&self) -> Option<Map<String, Value>> {
        if let Some(native) = &self.native {
            return Some(native.clone());
        }
        if self.parse_error.is_some() {
            return None;
        }
        build_parameters(self.arguments(), coerce).ok()
    }

    /// The parameters coerced by the gadget's JSON Schema, as llmist's
    /// executor re-parses them; see [`coerce_with_schema`].
    pub fn parameters_with_schema(&self, schema: &Value) -> Result<Map<String, Value>, String> {
        if let Some(native) = &self.native {
            return Ok(native.clone());
        }
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
        if let Some(native) = &self.native {
            return Ok(native.clone());
        }
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
    pub(super) dependencies_raw: &'a str,
}

impl<'a> HeaderRef<'a> {
    /// Parses a header line; `auto` is the id the session gave it if it has none.
    pub(super) fn parse(line: &'a str, auto: u64) -> HeaderRef<'a> {
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
/// [`Parser::feed_events`](super::Parser::feed_events) hands out without allocating (the owned
/// [`GadgetCall`] is one [`CallRef::to_owned`] away).
#[derive(Debug, Clone, Copy)]
pub struct CallRef<'a> {
    pub header: HeaderRef<'a>,
    /// The block body, trimmed.
    pub parameters_raw: &'a str,
    pub parse_error: Option<&'a str>,
    pub(super) spans: &'a [ArgumentSpan],
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
            native: None,
        }
    }
}

/// More of one argument's raw value of a block still being written, for
/// live display (see [`ParserBuilder::partial_arguments`](super::ParserBuilder::partial_arguments)).
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
    /// [`ParserBuilder::text_deltas`](super::ParserBuilder::text_deltas) the next piece of one).
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
    /// [`ParserBuilder::text_deltas`](super::ParserBuilder::text_deltas), the next piece of such a segment).
    Text(String),
    /// A completed block.
    Call(GadgetCall),
    /// More of an argument of the block still open (with
    /// [`ParserBuilder::partial_arguments`](super::ParserBuilder::partial_arguments)).
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
