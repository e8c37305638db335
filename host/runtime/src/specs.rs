//! What a component's specs may hold: names, labels, descriptions,
//! examples and schemas, each bounded, checked before anything is served.

use gadget_core::params::ParamSchema;
use serde_json::Value;

use crate::GadgetSpec;

/// Gadget names: what the model writes after `!!!GADGET_START:`, so no `:`
/// or whitespace; 64 bytes at most, the longest tool name OpenAI accepts.
pub const MAX_GADGET_NAME_BYTES: usize = 64;

/// Gadgets one component may declare: more is a mistake or an attack (no
/// prompt could list them), and each costs load time and registry memory.
pub const MAX_GADGETS_PER_COMPONENT: usize = 256;

/// A gadget's label, in bytes: a short name for UIs.
pub const MAX_LABEL_BYTES: usize = 128;

/// A gadget's description, in bytes: the model reads it in every prompt,
/// so it is bounded like a long paragraph of instructions (about 2,000
/// tokens), not by what a gadget would like to say.
pub const MAX_DESCRIPTION_BYTES: usize = 8 << 10;

/// Examples per gadget: each is repeated in every prompt.
pub const MAX_EXAMPLES: usize = 16;

/// Each part of an example (params, output, comment), in bytes.
pub const MAX_EXAMPLE_PART_BYTES: usize = 8 << 10;

/// Everything a component's specs hold together, in bytes of text: the
/// per-field limits times the gadget count would allow far more than any
/// real plugin (or prompt) needs.
pub const MAX_SPECS_TOTAL_BYTES: usize = 1 << 20;

/// Bytes of text one spec holds (for [`MAX_SPECS_TOTAL_BYTES`]).
pub(crate) fn spec_text_bytes(spec: &GadgetSpec) -> usize {
    spec.name.len()
        + spec.label.as_ref().map_or(0, String::len)
        + spec.description.len()
        + spec.parameters_schema.len()
        + spec
            .examples
            .iter()
            .map(|e| {
                e.params.len()
                    + e.output.as_ref().map_or(0, String::len)
                    + e.comment.as_ref().map_or(0, String::len)
            })
            .sum::<usize>()
}

/// Checks one spec: its name, its schema, and every example's params.
pub fn check_spec(spec: &GadgetSpec) -> Result<ParamSchema, String> {
    check_gadget_name(&spec.name)?;
    if spec.description.trim().is_empty() {
        return Err("description is empty; the model needs it to know what the gadget does".into());
    }
    let over = |what: &str, len: usize, limit: usize| {
        (len > limit).then(|| format!("{what} is {len} bytes, over the limit of {limit}"))
    };
    let too_big =
        over("description", spec.description.len(), MAX_DESCRIPTION_BYTES).or_else(|| {
            over(
                "label",
                spec.label.as_ref().map_or(0, String::len),
                MAX_LABEL_BYTES,
            )
        });
    if let Some(reason) = too_big {
        return Err(reason);
    }
    if spec.examples.len() > MAX_EXAMPLES {
        return Err(format!(
            "{} examples, over the limit of {MAX_EXAMPLES}",
            spec.examples.len()
        ));
    }
    for (index, example) in spec.examples.iter().enumerate() {
        let parts = [
            ("params", example.params.len()),
            ("output", example.output.as_ref().map_or(0, String::len)),
            ("comment", example.comment.as_ref().map_or(0, String::len)),
        ];
        for (part, len) in parts {
            if let Some(reason) = over(part, len, MAX_EXAMPLE_PART_BYTES) {
                return Err(format!("example {}: {reason}", index + 1));
            }
        }
    }
    let schema = ParamSchema::compile(&spec.parameters_schema).map_err(|e| e.to_string())?;
    for (index, example) in spec.examples.iter().enumerate() {
        let params: Value = serde_json::from_str(&example.params)
            .map_err(|e| format!("example {}: params are not valid JSON: {e}", index + 1))?;
        schema
            .validate(&spec.name, params)
            .map_err(|failure| format!("example {}: {failure}", index + 1))?;
    }
    if spec.max_concurrent == Some(0) {
        return Err("max-concurrent is 0, so the gadget could never run".into());
    }
    Ok(schema)
}

/// Letters, digits and `_`, starting with a letter, at most 64 bytes.
pub fn check_gadget_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_GADGET_NAME_BYTES {
        return Err(format!(
            "name '{}…' is {} bytes, over the limit of {MAX_GADGET_NAME_BYTES}",
            name.chars().take(MAX_GADGET_NAME_BYTES).collect::<String>(),
            name.len()
        ));
    }
    let ok = !name.is_empty()
        && name.len() <= MAX_GADGET_NAME_BYTES
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "name '{name}' must be 1 to {MAX_GADGET_NAME_BYTES} ASCII letters, digits or '_', starting with a letter"
        ))
    }
}
