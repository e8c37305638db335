//! A text toolkit for agents: five gadgets from one component.
//!
//! - `TextStats`: line, word, character and byte counts.
//! - `RegexFind`: every match of a pattern, with line numbers.
//! - `RegexReplace`: replace every match of a pattern.
//! - `JsonFormat`: pretty-print (or minify) JSON, reporting where it is invalid.
//! - `JsonQuery`: the value at a JSON Pointer inside a document.
//!
//! Bad input (an invalid regex, invalid JSON, a pointer that leads nowhere)
//! is an `invalid-arguments` error whose message tells the model what to fix.

use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, Value, json};
use regex::RegexBuilder;
use schemars::JsonSchema;
use serde::Deserialize;

/// Compiled regexes are capped so a pathological pattern is refused quickly
/// instead of eating the call's memory limit (bytes of compiled program).
const REGEX_SIZE_LIMIT_BYTES: usize = 1 << 20;

/// How many matches `RegexFind` lists at most, so a pattern like `.` on a
/// large text does not flood the model's context.
const MAX_MATCHES_LIMIT: usize = 1000;

#[derive(Debug, Deserialize, JsonSchema)]
struct TextParams {
    /// The text to measure.
    text: String,
}

struct TextStats;

impl Gadget for TextStats {
    type Params = TextParams;
    const NAME: &'static str = "TextStats";
    const LABEL: Option<&'static str> = Some("Text statistics");
    const DESCRIPTION: &'static str =
        "Counts the lines, words, characters (Unicode scalar values) and UTF-8 bytes of a text.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "text": "one two\nthree" }))
                .output("lines: 2, words: 3, characters: 13, bytes: 13"),
        ]
    }

    fn invoke(params: TextParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let text = params.text;
        let lines = text.lines().count();
        let words = text.split_whitespace().count();
        let characters = text.chars().count();
        let bytes = text.len();
        Ok(Outcome::result(format!(
            "lines: {lines}, words: {words}, characters: {characters}, bytes: {bytes}"
        ))
        .with_details(
            json!({ "lines": lines, "words": words, "characters": characters, "bytes": bytes }),
        ))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct FindParams {
    /// The text to search.
    text: String,
    /// A regular expression (Rust `regex` syntax: no look-around or backreferences).
    pattern: String,
    /// Match letters regardless of case.
    #[serde(default)]
    case_insensitive: bool,
    /// The most matches to list.
    #[serde(default = "default_max_matches")]
    #[schemars(range(min = 1, max = 1000))]
    max_matches: usize,
}

fn default_max_matches() -> usize {
    50
}

fn compile(pattern: &str, case_insensitive: bool) -> Result<regex::Regex, GadgetError> {
    RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT_BYTES)
        .build()
        .map_err(|e| GadgetError::invalid_arguments(format!("invalid pattern: {e}")))
}

struct RegexFind;

impl Gadget for RegexFind {
    type Params = FindParams;
    const NAME: &'static str = "RegexFind";
    const LABEL: Option<&'static str> = Some("Find with a regular expression");
    const DESCRIPTION: &'static str = "Finds every match of a regular expression in a text and lists each with its line number (1-based).";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "text": "error: a\nok\nerror: b", "pattern": "error: (\\w+)" }))
                .output("2 matches\nline 1: error: a\nline 3: error: b"),
        ]
    }

    fn invoke(params: FindParams, ctx: &Context) -> Result<Outcome, GadgetError> {
        let regex = compile(&params.pattern, params.case_insensitive)?;
        let max = params.max_matches.clamp(1, MAX_MATCHES_LIMIT);
        let line_starts: Vec<usize> = std::iter::once(0)
            .chain(params.text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let mut total = 0usize;
        let mut listed = Vec::new();
        for m in regex.find_iter(&params.text) {
            total += 1;
            if listed.len() < max {
                let line = line_starts.partition_point(|&start| start <= m.start());
                listed.push(format!("line {line}: {}", m.as_str()));
            }
            if total.is_multiple_of(10_000) {
                ctx.check_cancelled()?;
            }
        }
        let mut out = format!("{total} match{}", if total == 1 { "" } else { "es" });
        for line in &listed {
            out.push('\n');
            out.push_str(line);
        }
        if total > listed.len() {
            out.push_str(&format!("\n({} more not shown)", total - listed.len()));
        }
        Ok(Outcome::result(out).with_details(json!({ "total": total })))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ReplaceParams {
    /// The text to change.
    text: String,
    /// A regular expression (Rust `regex` syntax).
    pattern: String,
    /// The replacement; `$1` or `${name}` insert capture groups, `$$` a literal `$`.
    replacement: String,
    /// Match letters regardless of case.
    #[serde(default)]
    case_insensitive: bool,
}

struct RegexReplace;

impl Gadget for RegexReplace {
    type Params = ReplaceParams;
    const NAME: &'static str = "RegexReplace";
    const LABEL: Option<&'static str> = Some("Replace with a regular expression");
    const DESCRIPTION: &'static str =
        "Replaces every match of a regular expression in a text and returns the new text.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "text": "2024-01-31", "pattern": "(\\d+)-(\\d+)-(\\d+)", "replacement": "$3/$2/$1" }))
                .output("31/01/2024"),
        ]
    }

    fn invoke(params: ReplaceParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let regex = compile(&params.pattern, params.case_insensitive)?;
        let count = regex.find_iter(&params.text).count();
        let replaced = regex.replace_all(&params.text, params.replacement.as_str());
        Ok(Outcome::result(replaced.into_owned()).with_details(json!({ "replacements": count })))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct FormatParams {
    /// The JSON document, as text.
    json: String,
    /// Spaces per indentation level; 0 prints the document on one line.
    #[serde(default = "default_indent")]
    #[schemars(range(max = 8))]
    indent: u8,
}

fn default_indent() -> u8 {
    2
}

fn parse_json(text: &str) -> Result<Value, GadgetError> {
    serde_json::from_str(text).map_err(|e| {
        GadgetError::invalid_arguments(format!(
            "not valid JSON: {e} (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}

struct JsonFormat;

impl Gadget for JsonFormat {
    type Params = FormatParams;
    const NAME: &'static str = "JsonFormat";
    const LABEL: Option<&'static str> = Some("Format JSON");
    const DESCRIPTION: &'static str = "Pretty-prints a JSON document with the given indentation (0 minifies it); invalid JSON is reported with its line and column.";

    fn examples() -> Vec<Example> {
        vec![Example::new(json!({ "json": "{\"a\":[1,2]}", "indent": 0 })).output("{\"a\":[1,2]}")]
    }

    fn invoke(params: FormatParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let value = parse_json(&params.json)?;
        if params.indent == 0 {
            return Ok(value.to_string().into());
        }
        let indent = " ".repeat(params.indent.min(8).into());
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
        serde::Serialize::serialize(&value, &mut serializer)?;
        Ok(String::from_utf8_lossy(&out).into_owned().into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct QueryParams {
    /// The JSON document, as text.
    json: String,
    /// A JSON Pointer (RFC 6901) such as `/items/0/name`; the empty string is the whole document.
    pointer: String,
}

struct JsonQuery;

impl Gadget for JsonQuery {
    type Params = QueryParams;
    const NAME: &'static str = "JsonQuery";
    const LABEL: Option<&'static str> = Some("Query JSON");
    const DESCRIPTION: &'static str = "Returns the value at a JSON Pointer (RFC 6901) inside a JSON document: strings as plain text, anything else as JSON.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(
                json!({ "json": "{\"items\":[{\"name\":\"bolt\"}]}", "pointer": "/items/0/name" }),
            )
            .output("bolt"),
        ]
    }

    fn invoke(params: QueryParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let value = parse_json(&params.json)?;
        if !params.pointer.is_empty() && !params.pointer.starts_with('/') {
            return Err(GadgetError::invalid_arguments(format!(
                "pointer '{}' must be empty or start with '/', for example '/{}'",
                params.pointer, params.pointer
            )));
        }
        match value.pointer(&params.pointer) {
            Some(Value::String(s)) => Ok(s.clone().into()),
            Some(other) => Ok(serde_json::to_string_pretty(other)?.into()),
            None => Err(GadgetError::invalid_arguments(format!(
                "nothing at pointer '{}'; {}",
                params.pointer,
                describe_keys(&value, &params.pointer)
            ))),
        }
    }
}

/// Tells the model what does exist at the deepest part of the pointer that
/// resolves, so it can correct the pointer in one step.
fn describe_keys(root: &Value, pointer: &str) -> String {
    let mut prefix = pointer;
    while let Some(cut) = prefix.rfind('/') {
        prefix = &prefix[..cut];
        if let Some(found) = root.pointer(prefix) {
            let place = if prefix.is_empty() {
                "the document"
            } else {
                prefix
            };
            return match found {
                Value::Object(map) => {
                    let keys: Vec<&str> = map.keys().take(20).map(String::as_str).collect();
                    format!("{place} has keys: {}", keys.join(", "))
                }
                Value::Array(items) => format!("{place} is an array of {} items", items.len()),
                _ => format!("{place} is a {}", kind(found)),
            };
        }
    }
    "the document is empty".to_string()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

gadget_sdk::export_gadgets!(TextStats, RegexFind, RegexReplace, JsonFormat, JsonQuery);
