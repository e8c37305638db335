//! The one walker over parameter schemas (JSON Schema as `serde_json`
//! values): what the prompt renders, what `gadget describe` shows and what
//! schema-aware coercion expects all read a schema through these helpers,
//! so they agree on what a property, a required field, an optional
//! wrapper or a type is.

use serde_json::Value;

/// One property of an object schema.
#[derive(Debug, Clone, Copy)]
pub struct Property<'a> {
    pub name: &'a str,
    pub schema: &'a Value,
    /// Listed in the object's `required`.
    pub listed_required: bool,
}

impl Property<'_> {
    /// The model must write it: listed as required and without a default
    /// (a field with a default is optional and shows it).
    pub fn required(&self) -> bool {
        self.listed_required && self.default().is_none()
    }

    pub fn default(&self) -> Option<&Value> {
        self.schema.get("default")
    }

    pub fn description(&self) -> Option<&str> {
        self.schema.get("description").and_then(Value::as_str)
    }

    pub fn enum_values(&self) -> Option<&Vec<Value>> {
        self.schema.get("enum").and_then(Value::as_array)
    }

    /// What the schema bounds beyond its type, in words a model reads:
    /// `1 to 100`, `at least 0`, `at most 200 characters`, `format:
    /// email` (the host enforces each; a model that knows them need not
    /// learn them from an error). Empty when nothing is bounded.
    pub fn bounds(&self) -> Vec<String> {
        let number = |key: &str| {
            self.schema
                .get(key)
                .filter(|v| v.as_f64().is_some_and(|n| n.abs() < TYPE_LIMIT))
        };
        let mut bounds = Vec::new();
        let low = number("minimum")
            .map(|v| (v, false))
            .or(number("exclusiveMinimum").map(|v| (v, true)));
        let high = number("maximum")
            .map(|v| (v, false))
            .or(number("exclusiveMaximum").map(|v| (v, true)));
        match (low, high) {
            (Some((low, false)), Some((high, false))) => bounds.push(format!("{low} to {high}")),
            (low, high) => {
                if let Some((low, exclusive)) = low {
                    bounds.push(if exclusive {
                        format!("over {low}")
                    } else {
                        format!("at least {low}")
                    });
                }
                if let Some((high, exclusive)) = high {
                    bounds.push(if exclusive {
                        format!("under {high}")
                    } else {
                        format!("at most {high}")
                    });
                }
            }
        }
        let (unit, min_key, max_key) = match self.schema.get("type").and_then(Value::as_str) {
            Some("array") => ("items", "minItems", "maxItems"),
            _ => ("characters", "minLength", "maxLength"),
        };
        match (number(min_key), number(max_key)) {
            (Some(low), Some(high)) => bounds.push(format!("{low} to {high} {unit}")),
            (Some(low), None) => bounds.push(format!("at least {low} {unit}")),
            (None, Some(high)) => bounds.push(format!("at most {high} {unit}")),
            (None, None) => {}
        }
        if let Some(format) = self.schema.get("format").and_then(Value::as_str)
            && KNOWN_FORMATS.contains(&format)
        {
            bounds.push(format!("format: {format}"));
        }
        bounds
    }
}

/// A bound this far from zero is a type's range that a schema generator
/// wrote (zod's `int()` writes ±(2^53 - 1), schemars a `u32`'s 2^32 - 1),
/// not the author's choice: not shown.
const TYPE_LIMIT: f64 = 2_147_483_647.0;

/// The string formats the host checks (JSON Schema's own; a generator's
/// numeric hints such as schemars' `uint32` are not formats a model
/// writes, and the type and bounds already say them).
pub const KNOWN_FORMATS: &[&str] = &[
    "date",
    "date-time",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
    "regex",
];

/// The names an object schema lists as `required`.
pub fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// An object schema's properties, in the schema's order; `None` when it
/// declares no `properties`.
pub fn properties(schema: &Value) -> Option<Vec<Property<'_>>> {
    let properties = schema.get("properties").and_then(Value::as_object)?;
    let required = required(schema);
    Some(
        properties
            .iter()
            .map(|(name, schema)| Property {
                name,
                schema,
                listed_required: required.contains(&name.as_str()),
            })
            .collect(),
    )
}

/// `anyOf` / `oneOf` of one schema and `null` (an optional field, as
/// schemars writes `Option<T>`) is that schema.
pub fn unwrap_optional(schema: &Value) -> &Value {
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let non_null: Vec<&Value> = options
                .iter()
                .filter(|o| o.get("type") != Some(&Value::from("null")))
                .collect();
            if let [only] = non_null.as_slice() {
                return only;
            }
        }
    }
    schema
}

/// The schema one step down a `/`-separated pointer: a property, or an
/// array's items at a numeric segment.
pub fn child<'a>(schema: &'a Value, segment: &str) -> Option<&'a Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(segment))
        .or_else(|| schema.get("items").filter(|_| is_index(segment)))
}

/// What the schema says at a `/`-separated pointer, looking through
/// optional wrappers at every step.
pub fn at<'a>(schema: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut current = unwrap_optional(schema);
    for segment in pointer.split('/') {
        current = unwrap_optional(child(current, segment)?);
    }
    Some(current)
}

fn is_index(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit())
}

/// The types a schema declares, `null` left out: its `type` (a name or a
/// list), or `string` for an enum of strings; empty when it declares none.
pub fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ if schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().all(Value::is_string)) =>
        {
            vec!["string"]
        }
        _ => Vec::new(),
    }
}

/// One type name for a schema, as the prompt shows it: its first type,
/// the one non-null option of an `anyOf` (`Option<T>`), else `any`.
pub fn type_name(schema: &Value) -> String {
    if let Some(first) = types(schema).first() {
        return first.to_string();
    }
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
        let kinds: Vec<String> = options
            .iter()
            .map(type_name)
            .filter(|t| t != "null")
            .collect();
        if kinds.len() == 1 {
            return kinds[0].clone();
        }
    }
    "any".into()
}

/// The object schema whose properties nest under `schema`: itself when it
/// is an object, its items when it is an array of objects.
pub fn nested_object(schema: &Value) -> Option<&Value> {
    match type_name(schema).as_str() {
        "object" => Some(schema),
        "array" => schema
            .get("items")
            .filter(|items| type_name(items) == "object"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn walks_properties_optional_wrappers_and_items() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "boolean"}}}},
                "mode": {"enum": ["a", "b"], "default": "a"},
            },
            "required": ["n", "mode"],
        });
        let props = properties(&schema).unwrap();
        let names: Vec<_> = props.iter().map(|p| (p.name, p.required())).collect();
        assert_eq!(names, [("n", true), ("tags", false), ("mode", false)]);
        assert_eq!(type_name(&schema["properties"]["n"]), "integer");
        assert_eq!(type_name(&schema["properties"]["mode"]), "string");
        assert_eq!(types(at(&schema, "n").unwrap()), ["integer"]);
        assert_eq!(types(at(&schema, "tags/0/k").unwrap()), ["boolean"]);
        assert!(at(&schema, "tags/x").is_none());
        assert!(nested_object(&schema["properties"]["tags"]).is_some());
        assert!(properties(&json!({"type": "string"})).is_none());
    }
}
