//! Parameter schemas: compiling a gadget's JSON Schema once, filling in
//! `default` values, and validating a call's parameters against it.
//!
//! Pure: no wasmtime, no tokio, no I/O. Errors read the way llmist writes
//! them, so a model trained on llmist output recognises them:
//!
//! ```text
//! Invalid parameters for 'Calculator':
//!   - a: "x" is not of type "number"
//! ```

use std::fmt;

use serde_json::{Map, Value};

use crate::parser::GadgetCall;

/// How many validation problems one error message lists at most; a model
/// needs the first few, not a wall of text for a badly wrong call.
pub const MAX_REPORTED_ISSUES: usize = 20;

/// A parameters schema's text, in bytes: generated schemas of real tools
/// are a few KiB; 64 KiB bounds what the host parses, compiles and puts
/// in the prompt.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;

/// Nesting of a schema document (objects and arrays), in levels: a tool's
/// parameters nested 30 objects deep are not something a model can fill.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// Subschemas one value may be checked against (through `allOf`, `anyOf`,
/// `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas` and `$ref`):
/// the cost of validating one value. Nested combinators multiply (ten
/// levels of two-way `oneOf` is 1,024), which is how a schema makes
/// validation exponential; real schemas stay under a hundred.
pub const MAX_SCHEMA_COST: u64 = 1_000;

/// Bytes that filling in `default` values may add to one call's
/// parameters: a default repeated for every item of a long array cannot
/// grow them past this.
pub const MAX_DEFAULTS_EXPANSION_BYTES: usize = 1 << 20;

/// A compiled parameters schema.
pub struct ParamSchema {
    /// The schema as the gadget declared it (`None`: takes no parameters).
    schema: Option<Value>,
    validator: Option<jsonschema::Validator>,
    /// How block-format arguments are typed by this schema, worked out once.
    coercions: crate::parser::Coercions,
    /// Whether the schema has a `default` anywhere: without one, filling
    /// in defaults (a walk of schema and parameters on every call) is
    /// skipped.
    has_defaults: bool,
    /// Whether some value is declared a URL or a path (`format`): only
    /// then do argument rules need the schema to see what a value is.
    value_formats: bool,
}

impl fmt::Debug for ParamSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParamSchema")
            .field("schema", &self.schema)
            .finish()
    }
}

/// Whether `schema` declares a URL or a path anywhere (within the nesting
/// a schema may have).
fn has_value_format(schema: &Value, depth: usize) -> bool {
    if depth > 64 {
        return false;
    }
    match schema {
        Value::Object(map) => map.iter().any(|(key, value)| {
            (key == "format"
                && value
                    .as_str()
                    .is_some_and(|f| crate::approval::ValueKind::of_format(f).is_some()))
                || has_value_format(value, depth + 1)
        }),
        Value::Array(items) => items.iter().any(|v| has_value_format(v, depth + 1)),
        _ => false,
    }
}

/// Why a schema could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("parameters schema is not valid JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("parameters schema must describe an object (\"type\": \"object\"), found {0}")]
    NotAnObject(String),
    #[error("parameters schema does not compile: {0}")]
    Invalid(String),
    #[error("parameters schema is refused: {0}")]
    TooCostly(String),
}

/// One problem with a call's parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Issue {
    /// Dotted path to the value (`options.tags.0`), or `root`.
    pub path: String,
    pub message: String,
}

/// Parameters that do not fit the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationFailure {
    pub gadget: String,
    pub issues: Vec<Issue>,
}

impl fmt::Display for ValidationFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Invalid parameters for '{}':", self.gadget)?;
        for issue in &self.issues {
            write!(f, "\n  - {}: {}", issue.path, issue.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationFailure {}

impl ParamSchema {
    /// Compiles a schema given as text; the empty string means no parameters.
    pub fn compile(text: &str) -> Result<ParamSchema, SchemaError> {
        if text.trim().is_empty() {
            return Ok(ParamSchema {
                schema: None,
                validator: None,
                coercions: Default::default(),
                has_defaults: false,
                value_formats: false,
            });
        }
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(SchemaError::TooCostly(format!(
                "{} bytes, over the {MAX_SCHEMA_BYTES}-byte limit",
                text.len()
            )));
        }
        let schema: Value = serde_json::from_str(text)?;
        check_cost(&schema).map_err(SchemaError::TooCostly)?;
        match schema.get("type") {
            Some(Value::String(t)) if t == "object" => {}
            None if schema.get("properties").is_some() => {}
            other => {
                return Err(SchemaError::NotAnObject(
                    other.map_or_else(|| "no type".to_string(), Value::to_string),
                ));
            }
        }
        // Formats are checked (`format: email` means one): the prompt
        // shows them, so a call the model was told is wrong fails here,
        // at the door, not inside the gadget. Unknown formats (schemars'
        // `uint32`) are ignored, as JSON Schema says.
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(ParamSchema {
            coercions: crate::parser::Coercions::of(&schema),
            has_defaults: has_default(&schema),
            value_formats: has_value_format(&schema, 0),
            schema: Some(schema),
            validator: Some(validator),
        })
    }

    /// A call's parameters from its block-format arguments, typed by this
    /// schema as [`GadgetCall::parameters_with_schema`] types them, with
    /// the schema's coercions worked out at load instead of per argument.
    pub fn parameters_of(&self, call: &GadgetCall) -> Result<Map<String, Value>, String> {
        call.parameters_with_coercions(
            self.schema.as_ref().unwrap_or(&Value::Null),
            &self.coercions,
        )
    }

    /// The schema, if the gadget takes parameters.
    pub fn schema(&self) -> Option<&Value> {
        self.schema.as_ref()
    }

    /// The schema, when it declares some value a URL or a path: what the
    /// argument rules read it for ([`crate::approval::Rules::check`]). A
    /// schema that declares none costs the rules nothing per call.
    pub fn schema_for_rules(&self) -> Option<&Value> {
        self.schema.as_ref().filter(|_| self.value_formats)
    }

    /// Fills in defaults, then validates. Returns the parameters the gadget
    /// will receive.
    pub fn validate(&self, gadget: &str, mut params: Value) -> Result<Value, ValidationFailure> {
        let (Some(schema), Some(validator)) = (&self.schema, &self.validator) else {
            // A gadget without parameters gets an empty object whatever the
            // model wrote, as llmist passes params through unchecked.
            return Ok(Value::Object(Map::new()));
        };
        let mut budget = MAX_DEFAULTS_EXPANSION_BYTES;
        if self.has_defaults
            && let Err(needed) = apply_defaults_within(schema, &mut params, &mut budget)
        {
            return Err(ValidationFailure {
                gadget: gadget.to_string(),
                issues: vec![Issue {
                    path: "root".into(),
                    message: format!(
                        "filling in default values would add more than {MAX_DEFAULTS_EXPANSION_BYTES} bytes (the next default alone is {needed}); give the values instead"
                    ),
                }],
            });
        }
        // The common case, valid parameters, without collecting errors.
        if validator.is_valid(&params) {
            return Ok(params);
        }
        let issues: Vec<Issue> = validator
            .iter_errors(&params)
            .take(MAX_REPORTED_ISSUES)
            .map(|error| match error.kind() {
                // Said at the missing parameter, as zod (and so llmist)
                // says it: `- text: is required`, not `- root: "text" is a
                // required property`.
                jsonschema::error::ValidationErrorKind::Required {
                    property: Value::String(property),
                } => {
                    let at = error.instance_path().to_string();
                    let pointer =
                        format!("{at}/{}", property.replace('~', "~0").replace('/', "~1"));
                    Issue {
                        path: dotted_path(&pointer),
                        message: "is required (missing)".to_string(),
                    }
                }
                _ => Issue {
                    path: dotted_path(&error.instance_path().to_string()),
                    message: error.to_string(),
                },
            })
            .collect();
        if issues.is_empty() {
            Ok(params)
        } else {
            Err(ValidationFailure {
                gadget: gadget.to_string(),
                issues,
            })
        }
    }
}

/// Fills in `default` values for missing properties, recursively through
/// nested objects (and objects inside arrays), as zod's `.default()` does.
/// A missing object property whose schema has no default but whose own
/// properties do is left missing: defaults never invent structure.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    let mut unbounded = usize::MAX;
    let _ = apply_defaults_within(schema, value, &mut unbounded);
}

/// Whether a `default` keyword appears anywhere in `schema`.
fn has_default(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.contains_key("default") || map.values().any(has_default),
        Value::Array(items) => items.iter().any(has_default),
        _ => false,
    }
}

/// [`apply_defaults`], adding at most `budget` bytes (of JSON text); on
/// `Err(size)` the default that did not fit was `size` bytes.
fn apply_defaults_within(
    schema: &Value,
    value: &mut Value,
    budget: &mut usize,
) -> Result<(), usize> {
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return Ok(());
            };
            for (key, property_schema) in properties {
                match map.get_mut(key) {
                    Some(existing) => apply_defaults_within(property_schema, existing, budget)?,
                    None => {
                        if let Some(default) = property_schema.get("default") {
                            let size = json_size(default) + key.len();
                            *budget = budget.checked_sub(size).ok_or(size)?;
                            let mut filled = default.clone();
                            apply_defaults_within(property_schema, &mut filled, budget)?;
                            map.insert(key.clone(), filled);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    apply_defaults_within(item_schema, item, budget)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The length of a value's compact JSON text, without writing it.
fn json_size(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Keywords whose subschemas apply to the value itself (not to a child):
/// each multiplies the work of validating that value.
const SAME_VALUE_LISTS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
const SAME_VALUE_SCHEMAS: [&str; 4] = ["not", "if", "then", "else"];

/// Refuses schemas that could stall validation: nested deeper than
/// [`MAX_SCHEMA_DEPTH`], a `$ref` cycle that never descends into a child
/// value (validation would never end), a `$ref` the host cannot resolve
/// locally, or a cost (subschemas one value is checked against) over
/// [`MAX_SCHEMA_COST`].
pub fn check_cost(schema: &Value) -> Result<(), String> {
    let depth = json_depth(schema);
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "nested {depth} levels deep, over the limit of {MAX_SCHEMA_DEPTH}"
        ));
    }
    let mut costs = std::collections::HashMap::new();
    let mut visiting = Vec::new();
    check_subschemas(schema, schema, "", &mut costs, &mut visiting)
}

fn json_depth(value: &Value) -> usize {
    // Iterative: the depth check must not itself recurse without bound.
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match value {
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Checks the cost of every subschema of `node` (at `pointer` in `root`),
/// whichever value it ends up applied to.
fn check_subschemas(
    root: &Value,
    node: &Value,
    pointer: &str,
    costs: &mut std::collections::HashMap<String, u64>,
    visiting: &mut Vec<String>,
) -> Result<(), String> {
    let cost = same_value_cost(root, node, pointer, costs, visiting)?;
    if cost > MAX_SCHEMA_COST {
        let at = if pointer.is_empty() {
            "the root"
        } else {
            pointer
        };
        return Err(format!(
            "validating one value at {at} would check it against {cost} subschemas (nested anyOf/oneOf/allOf/$ref), over the limit of {MAX_SCHEMA_COST}"
        ));
    }
    match node {
        Value::Object(map) => {
            for (key, child) in map {
                let child_pointer =
                    format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                check_subschemas(root, child, &child_pointer, costs, visiting)?;
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                check_subschemas(root, child, &format!("{pointer}/{index}"), costs, visiting)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// How many subschemas validating one value against `node` visits, `$ref`s
/// followed (memoised by pointer; a cycle on the same value is an error).
fn same_value_cost(
    root: &Value,
    node: &Value,
    pointer: &str,
    costs: &mut std::collections::HashMap<String, u64>,
    visiting: &mut Vec<String>,
) -> Result<u64, String> {
    let Value::Object(map) = node else {
        return Ok(1);
    };
    if let Some(&cost) = costs.get(pointer) {
        return Ok(cost);
    }
    if visiting.iter().any(|p| p == pointer) {
        return Err(format!(
            "$ref cycle through {pointer} that never descends into a property or item: validating would never end"
        ));
    }
    visiting.push(pointer.to_string());
    let mut cost: u64 = 1;
    let add = |cost: &mut u64, child: u64| *cost = cost.saturating_add(child);
    for keyword in SAME_VALUE_LISTS {
        if let Some(Value::Array(branches)) = map.get(keyword) {
            for (index, branch) in branches.iter().enumerate() {
                let at = format!("{pointer}/{keyword}/{index}");
                add(
                    &mut cost,
                    same_value_cost(root, branch, &at, costs, visiting)?,
                );
            }
        }
    }
    for keyword in SAME_VALUE_SCHEMAS {
        if let Some(branch) = map.get(keyword) {
            let at = format!("{pointer}/{keyword}");
            add(
                &mut cost,
                same_value_cost(root, branch, &at, costs, visiting)?,
            );
        }
    }
    if let Some(Value::Object(dependents)) = map.get("dependentSchemas") {
        for (key, branch) in dependents {
            let at = format!("{pointer}/dependentSchemas/{key}");
            add(
                &mut cost,
                same_value_cost(root, branch, &at, costs, visiting)?,
            );
        }
    }
    for keyword in ["$dynamicRef", "$recursiveRef"] {
        if map.contains_key(keyword) {
            return Err(format!("{keyword} at {pointer} is not supported; use $ref"));
        }
    }
    if let Some(reference) = map.get("$ref") {
        let target_pointer = reference
            .as_str()
            .and_then(|r| r.strip_prefix('#'))
            .filter(|p| p.is_empty() || p.starts_with('/'))
            .ok_or_else(|| {
                format!(
                    "$ref {reference} at {pointer}: only local references (#/...) are supported"
                )
            })?;
        let target = root.pointer(target_pointer).ok_or_else(|| {
            format!("$ref {reference} at {pointer} points at nothing in the schema")
        })?;
        add(
            &mut cost,
            same_value_cost(root, target, target_pointer, costs, visiting)?,
        );
    }
    visiting.pop();
    costs.insert(pointer.to_string(), cost);
    Ok(cost)
}

/// `/options/tags/0` → `options.tags.0`; the empty pointer → `root`.
fn dotted_path(pointer: &str) -> String {
    if pointer.is_empty() || pointer == "/" {
        return "root".to_string();
    }
    pointer
        .trim_start_matches('/')
        .split('/')
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests;
