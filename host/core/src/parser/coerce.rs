//! Argument values as llmist reads them: JSON-looking text coerced, or
//! coerced by the gadget's schema; JavaScript's number and space rules.

use serde_json::{Map, Number, Value};

use super::js::js_trim;
use super::pointer::set_by_pointer;

/// llmist's schema-less coercion: multi-line values stay strings; `true` /
/// `false` are booleans; `-?digits(.digits)?` is a number when finite;
/// anything else is the original, untrimmed text.
pub fn coerce(value: &str) -> Value {
    if memchr::memchr(b'\n', value.as_bytes()).is_some() {
        return Value::String(value.to_string());
    }
    let t = js_trim(value);
    match t {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if is_plain_decimal(t)
        && let Ok(number) = t.parse::<f64>()
        && number.is_finite()
    {
        return json_number(number);
    }
    Value::String(value.to_string())
}

/// `^-?\d+(\.\d+)?$` with ASCII digits, as JavaScript's `\d`.
fn is_plain_decimal(t: &str) -> bool {
    let t = t.strip_prefix('-').unwrap_or(t);
    let (int, frac) = match t.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (t, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(int) && frac.is_none_or(digits)
}

/// A JSON number as JavaScript would print it: integers without a
/// fraction (and `-0` as `0`), others as doubles.
pub fn json_number(number: f64) -> Value {
    if number.fract() == 0.0 && number.abs() < 9_007_199_254_740_992.0 {
        Value::Number(Number::from(number as i64))
    } else {
        Number::from_f64(number).map_or(Value::Null, Value::Number)
    }
}

/// The type a schema expects at one place, for schema-aware coercion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expected {
    String,
    Number,
    Boolean,
    /// Unions, unknown paths, anything else: the schema-less rules.
    Unknown,
}

/// Rebuilds a call's parameters from its raw argument values, coerced by
/// the gadget's schema as llmist's executor does: a string field keeps the
/// raw text untrimmed (`"42"` stays `"42"`); a number field takes
/// JavaScript's `Number(trimmed)` when finite (`1e3`, `0x10`, `+5`, `.5`);
/// a boolean field takes exactly `true` / `false`; unions and unknown paths
/// fall back to the schema-less rules; multi-line values are never coerced
/// to numbers or booleans.
pub fn coerce_with_schema<'a>(
    arguments: impl IntoIterator<Item = (&'a str, &'a str)>,
    schema: &Value,
) -> Result<Map<String, Value>, String> {
    coerce_by(arguments, |pointer| expected_at(schema, pointer))
}

/// Most properties a schema's [`Coercions`] list: looking one up is a scan
/// of this many names at most, faster than hashing for the few parameters
/// a gadget has; a larger schema is walked per argument instead.
const MAX_LISTED_COERCIONS: usize = 16;

/// What a schema expects of each of its top-level properties, worked out
/// once instead of walking the schema (a handful of map lookups through
/// optional wrappers) for every argument of every call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Coercions {
    top_level: Vec<(String, Expected)>,
}

impl Coercions {
    pub(crate) fn of(schema: &Value) -> Coercions {
        let properties = crate::schema::unwrap_optional(schema)
            .get("properties")
            .and_then(Value::as_object);
        let top_level = match properties {
            Some(properties) if properties.len() <= MAX_LISTED_COERCIONS => properties
                .keys()
                .map(|name| (name.clone(), expected_at(schema, name)))
                .collect(),
            _ => Vec::new(),
        };
        Coercions { top_level }
    }

    /// What `schema` (the one these were made of) expects at `pointer`.
    pub(super) fn expected(&self, schema: &Value, pointer: &str) -> Expected {
        match self.top_level.iter().find(|(name, _)| name == pointer) {
            Some((_, expected)) => *expected,
            None => expected_at(schema, pointer),
        }
    }
}

pub(super) fn coerce_by<'a>(
    arguments: impl IntoIterator<Item = (&'a str, &'a str)>,
    expected: impl Fn(&str) -> Expected,
) -> Result<Map<String, Value>, String> {
    let mut root = Value::Object(Map::new());
    for (pointer, raw) in arguments {
        let value = match expected(pointer) {
            Expected::String => Value::String(raw.to_string()),
            _ if memchr::memchr(b'\n', raw.as_bytes()).is_some() => Value::String(raw.to_string()),
            Expected::Number => match js_number(js_trim(raw)) {
                Some(number) => json_number(number),
                None => Value::String(raw.to_string()),
            },
            Expected::Boolean => match js_trim(raw) {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(raw.to_string()),
            },
            Expected::Unknown => coerce(raw),
        };
        set_by_pointer(&mut root, pointer, value)?;
    }
    match root {
        Value::Object(map) => Ok(map),
        _ => Err("parameters are not an object".into()),
    }
}

/// What the schema expects at a `/`-separated pointer.
pub(super) fn expected_at(schema: &Value, pointer: &str) -> Expected {
    let Some(at) = crate::schema::at(schema, pointer) else {
        return Expected::Unknown;
    };
    // `schema::types` without its list (this runs for every argument of
    // every call): one declared type, `null` aside, or an enum of strings.
    let mut declared = None;
    match at.get("type") {
        Some(Value::String(t)) => declared = Some(t.as_str()),
        Some(Value::Array(types)) => {
            for t in types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
            {
                if declared.replace(t).is_some() {
                    return Expected::Unknown;
                }
            }
        }
        _ => {
            if at
                .get("enum")
                .and_then(Value::as_array)
                .is_some_and(|e| e.iter().all(Value::is_string))
            {
                declared = Some("string");
            }
        }
    }
    match declared {
        Some("string") => Expected::String,
        Some("number" | "integer") => Expected::Number,
        Some("boolean") => Expected::Boolean,
        _ => Expected::Unknown,
    }
}

/// JavaScript's `Number(text)` for already-trimmed, non-empty text, when
/// finite: decimal with optional sign, fraction and exponent, or `0x`,
/// `0o`, `0b` integers.
pub(super) fn js_number(text: &str) -> Option<f64> {
    if text.is_empty() {
        return None;
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = text.strip_prefix(prefix) {
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            // Digit by digit, as doubles, so long literals round like JS (every
            // digit was checked above, so `to_digit` cannot fail here).
            let value = digits.chars().fold(0f64, |acc, c| {
                acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
            });
            return value.is_finite().then_some(value);
        }
    }
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    if !mantissa_ok || !exponent_ok {
        return None;
    }
    text.parse::<f64>().ok().filter(|n| n.is_finite())
}
