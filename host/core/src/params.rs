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

/// How many validation problems one error message lists at most; a model
/// needs the first few, not a wall of text for a badly wrong call.
pub const MAX_REPORTED_ISSUES: usize = 20;

/// A compiled parameters schema.
pub struct ParamSchema {
    /// The schema as the gadget declared it (`None`: takes no parameters).
    schema: Option<Value>,
    validator: Option<jsonschema::Validator>,
}

impl fmt::Debug for ParamSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParamSchema")
            .field("schema", &self.schema)
            .finish()
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
            });
        }
        let schema: Value = serde_json::from_str(text)?;
        match schema.get("type") {
            Some(Value::String(t)) if t == "object" => {}
            None if schema.get("properties").is_some() => {}
            other => {
                return Err(SchemaError::NotAnObject(
                    other.map_or_else(|| "no type".to_string(), Value::to_string),
                ));
            }
        }
        let validator = jsonschema::options()
            .should_validate_formats(false)
            .build(&schema)
            .map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(ParamSchema {
            schema: Some(schema),
            validator: Some(validator),
        })
    }

    /// The schema, if the gadget takes parameters.
    pub fn schema(&self) -> Option<&Value> {
        self.schema.as_ref()
    }

    /// Fills in defaults, then validates. Returns the parameters the gadget
    /// will receive.
    pub fn validate(&self, gadget: &str, mut params: Value) -> Result<Value, ValidationFailure> {
        let (Some(schema), Some(validator)) = (&self.schema, &self.validator) else {
            // A gadget without parameters gets an empty object whatever the
            // model wrote, as llmist passes params through unchecked.
            return Ok(Value::Object(Map::new()));
        };
        apply_defaults(schema, &mut params);
        let issues: Vec<Issue> = validator
            .iter_errors(&params)
            .take(MAX_REPORTED_ISSUES)
            .map(|error| Issue {
                path: dotted_path(&error.instance_path().to_string()),
                message: error.to_string(),
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
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (key, property_schema) in properties {
                match map.get_mut(key) {
                    Some(existing) => apply_defaults(property_schema, existing),
                    None => {
                        if let Some(default) = property_schema.get("default") {
                            let mut filled = default.clone();
                            apply_defaults(property_schema, &mut filled);
                            map.insert(key.clone(), filled);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
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
mod tests {
    use super::*;
    use serde_json::json;

    fn calculator() -> ParamSchema {
        ParamSchema::compile(
            &json!({
                "type": "object",
                "properties": {
                    "operation": { "type": "string", "enum": ["add", "subtract"] },
                    "a": { "type": "number" },
                    "b": { "type": "number", "default": 1 },
                    "options": {
                        "type": "object",
                        "properties": { "round": { "type": "boolean", "default": false } },
                        "default": {}
                    }
                },
                "required": ["operation", "a", "b"]
            })
            .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn defaults_are_applied_before_validation_and_recursively() {
        let params = calculator()
            .validate("Calculator", json!({ "operation": "add", "a": 2 }))
            .unwrap();
        assert_eq!(
            params,
            json!({ "operation": "add", "a": 2, "b": 1, "options": { "round": false } })
        );
    }

    #[test]
    fn errors_list_each_issue_in_llmist_form() {
        let failure = calculator()
            .validate("Calculator", json!({ "operation": "pow", "a": "x" }))
            .unwrap_err();
        let text = failure.to_string();
        assert!(
            text.starts_with("Invalid parameters for 'Calculator':\n  - "),
            "{text}"
        );
        let paths: Vec<&str> = failure.issues.iter().map(|i| i.path.as_str()).collect();
        assert!(paths.contains(&"operation"), "{paths:?}");
        assert!(paths.contains(&"a"), "{paths:?}");
        assert_eq!(text.lines().count(), 1 + failure.issues.len());
    }

    #[test]
    fn a_missing_required_field_is_reported_at_root() {
        let failure = calculator()
            .validate("Calculator", json!({ "operation": "add" }))
            .unwrap_err();
        assert_eq!(failure.issues[0].path, "root");
        assert!(failure.issues[0].message.contains("\"a\""), "{failure}");
    }

    #[test]
    fn nested_paths_are_dotted() {
        let failure = calculator()
            .validate(
                "Calculator",
                json!({ "operation": "add", "a": 1, "options": { "round": "yes" } }),
            )
            .unwrap_err();
        assert_eq!(failure.issues[0].path, "options.round");
    }

    #[test]
    fn empty_schema_means_no_parameters() {
        let schema = ParamSchema::compile("").unwrap();
        assert_eq!(
            schema.validate("Now", json!({ "x": 1 })).unwrap(),
            json!({})
        );
    }

    #[test]
    fn bad_schemas_are_refused_with_the_reason() {
        assert!(matches!(
            ParamSchema::compile("{"),
            Err(SchemaError::NotJson(_))
        ));
        assert!(matches!(
            ParamSchema::compile(r#"{"type":"string"}"#),
            Err(SchemaError::NotAnObject(_))
        ));
        assert!(matches!(
            ParamSchema::compile(r#"{"type":"object","properties":{"a":{"type":"nope"}}}"#),
            Err(SchemaError::Invalid(_))
        ));
    }

    #[test]
    fn json_pointer_escapes_are_undone() {
        assert_eq!(dotted_path("/a~1b/c~0d"), "a/b.c~d");
        assert_eq!(dotted_path(""), "root");
    }
}
