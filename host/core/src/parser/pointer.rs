//! JSON pointers into the parameters being built, as llmist sets them.

use serde_json::{Map, Value};

use super::js::{is_js_space, json_type};

/// Writes `value` at a `/`-separated pointer (no `~0`/`~1` unescaping, as
/// llmist). Containers are created on the way: an array when the next
/// segment is all ASCII digits, else an object.
pub(super) fn set_by_pointer(root: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    // Most arguments are top-level names: one insert, no segment list.
    if !pointer.contains('/')
        && let Value::Object(map) = root
    {
        map.insert(pointer.to_string(), value);
        return Ok(());
    }
    let segments: Vec<&str> = pointer.split('/').collect();
    let mut current = root;
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let fresh = || {
            if segments.get(i + 1).is_some_and(|next| is_ascii_index(next)) {
                Value::Array(Vec::new())
            } else {
                Value::Object(Map::new())
            }
        };
        current = match current {
            Value::Object(map) => {
                if last {
                    map.insert(segment.to_string(), value);
                    return Ok(());
                }
                map.entry(segment.to_string()).or_insert_with(fresh)
            }
            Value::Array(items) => {
                let index = parse_index(segment)
                    .ok_or_else(|| format!("Invalid array index: {segment}"))?;
                if index > items.len() {
                    return Err(format!(
                        "Array index gap: expected {}, got {index}",
                        items.len()
                    ));
                }
                if last {
                    if index == items.len() {
                        items.push(value);
                    } else {
                        items[index] = value;
                    }
                    return Ok(());
                }
                if index == items.len() {
                    items.push(fresh());
                }
                &mut items[index]
            }
            scalar => {
                return Err(format!(
                    "Cannot write '{segment}' below the {} value at '{}' (pointer '{pointer}')",
                    json_type(scalar),
                    segments[..i].join("/")
                ));
            }
        };
    }
    Ok(())
}

pub(super) fn is_ascii_index(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit())
}

/// JavaScript's `parseInt(segment, 10)` for array indices: leading
/// whitespace, then digits (a sign makes it negative, so invalid).
pub(super) fn parse_index(segment: &str) -> Option<usize> {
    let digits: &str = segment.trim_start_matches(is_js_space);
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    digits[..end].parse().ok().or(Some(usize::MAX))
}
