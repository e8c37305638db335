//! A block's body: its arguments split out, their JSON pointers checked,
//! fences stripped, and the parameters built.

use std::ops::Range;

use memchr::memmem::Finder;
use serde_json::{Map, Value};

use super::coerce::coerce;
use super::js::{is_js_space, js_trim, json_type};
use super::pointer::{is_ascii_index, parse_index, set_by_pointer};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ArgumentSpan {
    pub(super) pointer: Range<usize>,
    pub(super) value: Range<usize>,
}

/// The (pointer, raw value) pairs of a parameter section.
pub(super) fn arguments_of<'a>(
    raw: &'a str,
    spans: &'a [ArgumentSpan],
) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'a {
    spans
        .iter()
        .map(move |span| (&raw[span.pointer.clone()], &raw[span.value.clone()]))
}

/// Trims a block body and splits its parameter section into `spans`
/// (relative to the trimmed body); returns the trimmed body and the parse
/// error, if any. `marks` are the argument markers the scan found in the
/// body, if it recorded them; otherwise (and when trimming or fence
/// stripping cut through one) the parameter section is searched again.
pub(super) fn parse_body<'a>(
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
pub(super) fn find_short(byte: u8, haystack: &[u8]) -> Option<usize> {
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
pub(super) const POINTER_CHECK_MAX_ARGUMENTS: usize = 64;

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
pub(super) struct PointerNode {
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
pub(super) fn build_parameters<'a>(
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
