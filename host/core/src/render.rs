//! What the model reads: the instruction prompt for a set of gadgets, each
//! gadget's usage text (also quoted in parse and validation errors), and
//! the history of a response (each finished call re-rendered as a block,
//! then `Result (id): ...`).
//!
//! The structure and wording are llmist 18.4.0's (`LLMMessageBuilder`,
//! `getInstruction`, `formatSchemaAsPlainText`, the error formatter),
//! byte for byte on its own example (see the tests), with the configured
//! markers everywhere. Deliberate differences:
//! - a parameter with a `default` is listed as optional and shows the
//!   default (llmist lists it as required, though the model may omit it);
//! - the properties of objects inside arrays are listed too;
//! - a gadget whose schema has no properties gets no empty "Parameters:"
//!   section;
//! - error texts quote examples with the configured start and end markers
//!   (llmist uses its defaults there).
//!
//! Pure: no I/O, no wasmtime, no tokio.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::parser;
use crate::schema;

/// The three block-format markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Markers {
    pub start: String,
    pub end: String,
    pub arg: String,
}

impl Default for Markers {
    fn default() -> Self {
        Markers {
            start: parser::DEFAULT_START.into(),
            end: parser::DEFAULT_END.into(),
            arg: parser::DEFAULT_ARG.into(),
        }
    }
}

/// llmist's opening instruction.
const MAIN_INSTRUCTION: &str = "⚠️ CRITICAL: RESPOND ONLY WITH GADGET INVOCATIONS\nDO NOT use function calling or tool calling\nYou must output the exact text markers shown below in plain text.\nEACH MARKER MUST START WITH A NEWLINE.\n\n";

/// llmist's "HOW TO INVOKE GADGETS" section, with `{START}`, `{END}` and
/// `{ARG}` standing for the markers.
const USAGE_TEMPLATE: &str = include_str!("render/usage.txt");

/// One gadget, as the prompt describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct GadgetDoc {
    pub name: String,
    pub description: String,
    /// The parameters schema (`None`: takes no parameters).
    pub schema: Option<Value>,
    pub examples: Vec<ExampleDoc>,
}

/// One example call.
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleDoc {
    pub comment: Option<String>,
    pub params: Value,
    pub output: Option<String>,
}

/// The whole instruction prompt for `gadgets`, in the given order.
pub fn prompt(gadgets: &[GadgetDoc], markers: &Markers) -> String {
    let mut out = String::from(MAIN_INSTRUCTION);
    out.push_str("AVAILABLE GADGETS\n=================\n");
    for gadget in gadgets {
        out.push_str("\nGADGET: ");
        out.push_str(&gadget.name);
        out.push('\n');
        out.push_str(&instruction(gadget, markers));
        out.push_str("\n\n---");
    }
    out.push_str("\n\n");
    out.push_str(&usage(markers));
    out
}

/// The block-format section of the prompt, with the markers filled in.
pub fn usage(markers: &Markers) -> String {
    USAGE_TEMPLATE
        .replace("{START}", &markers.start)
        .replace("{END}", &markers.end)
        .replace("{ARG}", &markers.arg)
}

/// The gadget's schema when it lists properties (a schema without any has
/// nothing to show).
fn listed_properties(gadget: &GadgetDoc) -> Option<&Value> {
    gadget.schema.as_ref().filter(|s| {
        s.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
    })
}

/// One gadget's usage text: description, parameters, examples.
pub fn instruction(gadget: &GadgetDoc, markers: &Markers) -> String {
    let mut parts: Vec<String> = vec![gadget.description.clone()];
    // A schema without properties has nothing to list (llmist prints an
    // empty "Parameters:" section).
    if let Some(schema) = listed_properties(gadget) {
        parts.push("\n\nParameters:".into());
        parts.push(schema_text(schema));
    }
    if !gadget.examples.is_empty() {
        parts.push("\n\nExamples:".into());
        for (i, example) in gadget.examples.iter().enumerate() {
            if i > 0 {
                parts.extend(["".into(), "---".into(), "".into()]);
            }
            if let Some(comment) = &example.comment {
                parts.push(format!("# {comment}"));
            }
            parts.push(format!("{}{}", markers.start, gadget.name));
            parts.push(block_parameters(&example.params, &markers.arg));
            parts.push(markers.end.clone());
            if let Some(output) = &example.output {
                parts.extend(["".into(), "Expected Output:".into(), output.clone()]);
            }
        }
    }
    parts.join("\n")
}

/// A parse error as the model sees it: the error, the gadget's usage (when
/// the gadget exists) and a reminder of the block format.
pub fn parse_error(
    gadget_name: &str,
    error: &str,
    gadget: Option<&GadgetDoc>,
    markers: &Markers,
) -> String {
    let mut parts = vec![
        format!("Error: Failed to parse parameters for '{gadget_name}':"),
        format!("  {error}"),
    ];
    if let Some(gadget) = gadget {
        parts.extend([
            "".into(),
            "Gadget Usage:".into(),
            instruction(gadget, markers),
        ]);
    }
    parts.extend([
        "".into(),
        "Block Format Reference:".into(),
        format!("  {}{gadget_name}", markers.start),
        format!("  {}parameterName", markers.arg),
        "  parameter value here".into(),
        format!("  {}", markers.end),
    ]);
    parts.join("\n")
}

/// A validation error (`Invalid parameters for 'X':\n  - a: ...`) as the
/// model sees it, with the gadget's usage.
pub fn validation_error(failure: &str, gadget: &GadgetDoc, markers: &Markers) -> String {
    format!(
        "Error: {failure}\n\nGadget Usage:\n{}",
        instruction(gadget, markers)
    )
}

/// A native tool call's parameters that do not fit, as the model sees
/// them: the failure and the parameters in words, without the block
/// format's examples (the model calls through the provider's tools, and
/// a block example would teach it the other format).
pub fn native_validation_error(failure: &str, gadget: &GadgetDoc) -> String {
    let mut text = format!("Error: {failure}");
    if let Some(schema) = listed_properties(gadget) {
        text.push_str(&format!(
            "

Parameters of '{}':
{}",
            gadget.name,
            schema_text(schema)
        ));
    }
    text
}

/// The error a model reads when it names a gadget that is not loaded
/// (llmist's wording): the names it could have written.
pub fn unknown_gadget(name: &str, available: &[String]) -> String {
    format!(
        "Gadget '{name}' not found.\n\nAvailable gadgets: {}",
        available.join(", ")
    )
}

/// The plain-text form of a parameters schema (llmist's
/// `formatSchemaAsPlainText`, with defaults shown and optional).
fn schema_text(schema: &Value) -> String {
    let properties = schema::properties(schema).unwrap_or_default();
    let (req, opt): (Vec<_>, Vec<_>) = properties.iter().partition(|p| p.required());
    let mut lines = Vec::new();
    if !req.is_empty() || !opt.is_empty() {
        let mut counts = Vec::new();
        if !req.is_empty() {
            counts.push(format!("{} required", req.len()));
        }
        if !opt.is_empty() {
            counts.push(format!("{} optional", opt.len()));
        }
        lines.push(counts.join(", "));
        lines.push(String::new());
    }
    for (title, group) in [
        ("REQUIRED Parameters:", &req),
        ("OPTIONAL Parameters:", &opt),
    ] {
        if group.is_empty() {
            continue;
        }
        if title.starts_with("OPTIONAL") && !req.is_empty() {
            lines.push(String::new());
        }
        lines.push(title.into());
        for property in group.iter() {
            lines.push(param_line(property, ""));
            children(property.schema, "  ", &mut lines);
        }
    }
    lines.join("\n")
}

/// The nested properties of an object (or of an array's object items),
/// indented.
fn children(prop: &Value, indent: &str, lines: &mut Vec<String>) {
    let Some(properties) = schema::nested_object(prop).and_then(schema::properties) else {
        return;
    };
    for child in &properties {
        lines.push(param_line(child, indent));
        children(child.schema, &format!("{indent}  "), lines);
    }
}

/// `- key (type) [required]: description - one of: "a", "b" (default: x)`.
fn param_line(property: &schema::Property<'_>, indent: &str) -> String {
    let prop = property.schema;
    let mut line = format!("{indent}- {}", property.name);
    let kind = schema::type_name(prop);
    if kind == "array" {
        let items = prop.get("items").map(schema::type_name);
        line.push_str(&format!(
            " (array of {})",
            items.as_deref().unwrap_or("any")
        ));
    } else if kind == "object" && prop.get("properties").is_some() {
        line.push_str(" (object)");
    } else {
        line.push_str(&format!(" ({kind})"));
    }
    if property.required() && !indent.is_empty() {
        line.push_str(" [required]");
    }
    if let Some(description) = property.description() {
        line.push_str(": ");
        line.push_str(description);
    }
    if let Some(values) = property.enum_values() {
        let values: Vec<String> = values
            .iter()
            .map(|v| format!("\"{}\"", js_string(v)))
            .collect();
        line.push_str(" - one of: ");
        line.push_str(&values.join(", "));
    }
    let bounds = property.bounds();
    if !bounds.is_empty() {
        line.push_str(&format!(" ({})", bounds.join(", ")));
    }
    if let Some(default) = property.default() {
        line.push_str(&format!(" (default: {})", compact(default)));
    }
    line
}

/// A default value as the model would write it: strings bare, the rest
/// as JSON.
fn compact(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

/// JavaScript's `String(v)` for a JSON scalar.
fn js_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => js_number(n),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        // Not reached for scalars; objects print as JavaScript does.
        Value::Object(_) => "[object Object]".into(),
        Value::Array(items) => items.iter().map(js_string).collect::<Vec<_>>().join(","),
    }
}

/// A number as JavaScript prints it: integers without `.0`.
fn js_number(n: &serde_json::Number) -> String {
    if n.is_f64()
        && let Some(f) = n.as_f64()
        && f.fract() == 0.0
        && f.abs() < 1e21
    {
        return format!("{f:.0}");
    }
    n.to_string()
}

/// Parameters flattened to block form: nested objects and arrays become
/// pointers (`a/b/0`), scalars are printed as JavaScript's `String(v)`.
/// llmist's `formatBlockParameters`, including its quirks: an empty object
/// or array writes nothing (an empty nested object writes an empty line).
pub fn block_parameters(params: &Value, arg_marker: &str) -> String {
    let mut lines = Vec::new();
    if let Value::Object(map) = params {
        flatten(map, "", arg_marker, &mut lines);
    }
    lines.join("\n")
}

fn flatten(map: &Map<String, Value>, prefix: &str, arg: &str, lines: &mut Vec<String>) {
    for (key, value) in map {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}/{key}")
        };
        match value {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let item_path = format!("{path}/{i}");
                    match item {
                        Value::Object(inner) => {
                            let mut nested = Vec::new();
                            flatten(inner, &item_path, arg, &mut nested);
                            lines.push(nested.join("\n"));
                        }
                        // JavaScript's typeof [] is "object": a nested
                        // array recurses with its indices as keys.
                        Value::Array(inner) => {
                            let as_map: Map<String, Value> = inner
                                .iter()
                                .enumerate()
                                .map(|(j, v)| (j.to_string(), v.clone()))
                                .collect();
                            let mut nested = Vec::new();
                            flatten(&as_map, &item_path, arg, &mut nested);
                            lines.push(nested.join("\n"));
                        }
                        scalar => {
                            lines.push(format!("{arg}{item_path}"));
                            lines.push(js_string(scalar));
                        }
                    }
                }
            }
            Value::Object(inner) => {
                let mut nested = Vec::new();
                flatten(inner, &path, arg, &mut nested);
                lines.push(nested.join("\n"));
            }
            scalar => {
                lines.push(format!("{arg}{path}"));
                lines.push(js_string(scalar));
            }
        }
    }
}

/// One finished call, as the history shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    pub id: String,
    pub gadget: String,
    /// The validated parameters (or what could be parsed of them).
    pub parameters: Value,
    /// The result or error text the model sees.
    pub result: String,
    /// The call failed: `result` is its error (a native tool result says
    /// so, e.g. Anthropic's `is_error`; the block format's `Result (id):`
    /// line starts with `Error:`).
    pub failed: bool,
    /// The result's images, for a model that takes them (`result` names
    /// each in words, for one that does not).
    #[serde(skip)]
    pub images: Vec<crate::content::Media>,
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `assistant` or `user`.
    pub role: &'static str,
    pub content: String,
}

/// The messages llmist appends after a response: for each finished call,
/// in completion order, the call re-rendered as a block (assistant), then
/// `Result (id): text` (user). Skipped calls are not shown.
pub fn history<'a>(
    entries: impl IntoIterator<Item = &'a HistoryEntry>,
    markers: &Markers,
) -> Vec<Message> {
    let entries = entries.into_iter();
    let mut messages = Vec::with_capacity(entries.size_hint().0 * 2);
    for entry in entries {
        messages.push(Message {
            role: "assistant",
            content: format!(
                "{}{}:{}\n{}\n{}",
                markers.start,
                entry.gadget,
                entry.id,
                block_parameters(&entry.parameters, &markers.arg),
                markers.end
            ),
        });
        messages.push(Message {
            role: "user",
            content: result_line(entry),
        });
    }
    messages
}

/// `Result (id): text`; a failed call's text starts with `Error:`, as
/// llmist's own formatted errors (parse, validation, unknown gadget) and
/// an OpenAI native tool result do, so a model tells a failure from a
/// result. llmist writes a thrown error's bare message there, and a model
/// read `Result (f1): b must not be 0` as the answer; this is a difference
/// on purpose (docs/events.md).
fn result_line(entry: &HistoryEntry) -> String {
    if entry.failed && !entry.result.starts_with("Error:") {
        format!("Result ({}): Error: {}", entry.id, entry.result)
    } else {
        format!("Result ({}): {}", entry.id, entry.result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// llmist's own example (render-prompt.mjs): the schema zod produced
    /// for it, and the system prompt llmist rendered, byte for byte.
    const LLMIST_SCHEMA: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"operation":{"type":"string","enum":["add","subtract","multiply","divide"],"description":"The operation to perform"},"a":{"type":"number","description":"First operand"},"b":{"type":"number","description":"Second operand"},"precision":{"default":2,"description":"Decimal places","type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},"options":{"description":"Extra options","type":"object","properties":{"round":{"type":"boolean","description":"Round the result"},"tags":{"description":"Labels","type":"array","items":{"type":"string"}}},"required":["round"],"additionalProperties":false}},"required":["operation","a","b","precision"],"additionalProperties":false}"#;

    const LLMIST_PROMPT: &str =
        include_str!("../../../tests/cases/render/llmist-system-prompt.exact.txt");

    fn llmist_examples() -> Vec<ExampleDoc> {
        vec![
            ExampleDoc {
                comment: Some("Add two numbers".into()),
                params: json!({"operation": "add", "a": 15, "b": 23}),
                output: Some("38".into()),
            },
            ExampleDoc {
                comment: None,
                params: json!({"operation": "divide", "a": 10, "b": 4,
                               "options": {"round": true, "tags": ["x", "y"]}}),
                output: Some("2.5".into()),
            },
        ]
    }

    #[test]
    fn the_prompt_matches_llmist_byte_for_byte_but_for_defaults() {
        let schema: Value = serde_json::from_str(LLMIST_SCHEMA).unwrap();
        let examples = llmist_examples();
        let gadgets = [
            GadgetDoc {
                name: "Calculator".into(),
                description: "Performs arithmetic on two numbers.".into(),
                schema: Some(schema),
                examples,
            },
            GadgetDoc {
                name: "Ping".into(),
                description: "Replies pong. No parameters.".into(),
                schema: None,
                examples: vec![],
            },
        ];
        // The one deliberate difference: `precision` has a default, so it
        // is optional and says so.
        let expected = LLMIST_PROMPT
            .replace("4 required, 1 optional", "3 required, 2 optional")
            .replace("- precision (integer): Decimal places\n", "")
            .replace(
                "OPTIONAL Parameters:\n",
                "OPTIONAL Parameters:\n- precision (integer): Decimal places (default: 2)\n",
            );
        assert_eq!(prompt(&gadgets, &Markers::default()), expected);
    }

    #[test]
    fn custom_markers_reach_every_part() {
        let markers = Markers {
            start: "<<<START:".into(),
            end: "<<<END".into(),
            arg: "@param:".into(),
        };
        let examples = llmist_examples();
        let schema: Value = serde_json::from_str(LLMIST_SCHEMA).unwrap();
        let text = prompt(
            &[GadgetDoc {
                name: "Calculator".into(),
                description: "d".into(),
                schema: Some(schema),
                examples,
            }],
            &markers,
        );
        assert!(!text.contains("!!!"), "{text}");
        assert!(text.contains("<<<START:Calculator\n@param:operation\nadd\n"));
        assert!(text.contains("  1. Start marker: <<<START:gadget_name\n"));
        assert!(text.contains("- Value ends when the next @param: or <<<END appears"));
    }

    #[test]
    fn history_is_llmists_rendering() {
        let entries = [HistoryEntry {
            id: "calc_1".into(),
            gadget: "Calculator".into(),
            parameters: json!({"operation": "add", "a": 15, "b": 23,
                               "options": {"round": true, "tags": ["x", "y"]}}),
            result: "38".into(),
            failed: false,
            images: Vec::new(),
        }];
        let messages = history(&entries, &Markers::default());
        assert_eq!(
            messages,
            vec![
                Message {
                    role: "assistant",
                    content: "!!!GADGET_START:Calculator:calc_1\n!!!ARG:operation\nadd\n!!!ARG:a\n15\n!!!ARG:b\n23\n!!!ARG:options/round\ntrue\n!!!ARG:options/tags/0\nx\n!!!ARG:options/tags/1\ny\n!!!GADGET_END".into()
                },
                Message {
                    role: "user",
                    content: "Result (calc_1): 38".into()
                }
            ]
        );
    }

    #[test]
    fn a_failed_call_reads_as_an_error_and_only_once() {
        let entry = |id: &str, result: &str, failed| HistoryEntry {
            id: id.into(),
            gadget: "Calculator".into(),
            parameters: json!({}),
            result: result.into(),
            failed,
            images: Vec::new(),
        };
        let entries = [
            entry("f1", "b must not be 0", true),
            entry("f2", "Error: Gadget 'Nope' not found.", true),
            entry("ok", "Error: is what the gadget printed", false),
        ];
        let results: Vec<String> = history(&entries, &Markers::default())
            .into_iter()
            .filter(|m| m.role == "user")
            .map(|m| m.content)
            .collect();
        assert_eq!(
            results,
            [
                "Result (f1): Error: b must not be 0",
                "Result (f2): Error: Gadget 'Nope' not found.",
                "Result (ok): Error: is what the gadget printed",
            ]
        );
    }

    #[test]
    fn numbers_print_as_javascript_does() {
        assert_eq!(
            block_parameters(&json!({"a": 2.0, "b": 2.5, "c": -0.125, "d": 1e21}), "@"),
            "@a\n2\n@b\n2.5\n@c\n-0.125\n@d\n1e+21"
        );
    }

    #[test]
    fn bounds_and_formats_are_shown() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "description": "How many.", "minimum": 1, "maximum": 100, "default": 5},
            "ratio": {"type": "number", "exclusiveMinimum": 0},
            "to": {"type": "string", "format": "email", "maxLength": 254},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "id": {"type": "integer", "format": "uint32"}
        }, "required": ["n"]});
        let text = schema_text(&schema);
        assert!(
            text.contains("- n (integer): How many. (1 to 100) (default: 5)"),
            "{text}"
        );
        assert!(text.contains("- ratio (number) (over 0)"), "{text}");
        assert!(
            text.contains("- to (string) (at most 254 characters, format: email)"),
            "{text}"
        );
        assert!(
            text.contains("- tags (array of string) (at most 3 items)"),
            "{text}"
        );
        assert!(
            text.contains("- id (integer)\n") || text.ends_with("- id (integer)"),
            "{text}"
        );
    }

    #[test]
    fn errors_quote_the_usage() {
        let doc = GadgetDoc {
            name: "Typed".into(),
            description: "Takes n.".into(),
            schema: Some(
                json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}),
            ),
            examples: vec![],
        };
        let markers = Markers::default();
        assert_eq!(
            parse_error("Typed", "Duplicate pointer: n", Some(&doc), &markers),
            "Error: Failed to parse parameters for 'Typed':\n  Duplicate pointer: n\n\nGadget Usage:\nTakes n.\n\n\nParameters:\n1 required\n\nREQUIRED Parameters:\n- n (number)\n\nBlock Format Reference:\n  !!!GADGET_START:Typed\n  !!!ARG:parameterName\n  parameter value here\n  !!!GADGET_END"
        );
        assert_eq!(
            validation_error(
                "Invalid parameters for 'Typed':\n  - n: bad",
                &doc,
                &markers
            ),
            "Error: Invalid parameters for 'Typed':\n  - n: bad\n\nGadget Usage:\nTakes n.\n\n\nParameters:\n1 required\n\nREQUIRED Parameters:\n- n (number)"
        );
        // A native call is told its parameters, never a block example.
        let native = native_validation_error("Invalid parameters for 'Typed':\n  - n: bad", &doc);
        assert_eq!(
            native,
            "Error: Invalid parameters for 'Typed':\n  - n: bad\n\nParameters of 'Typed':\n1 required\n\nREQUIRED Parameters:\n- n (number)"
        );
    }
}
