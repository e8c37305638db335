//! JavaScript's rules where llmist's behaviour follows them: what counts
//! as white space, how text is trimmed, and the names of JSON types.

use serde_json::Value;

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
