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

/// What the prompt shows of a property is what the door enforces:
/// bounds and the formats JSON Schema names; a generator's numeric
/// hint (`uint32`) is no format and passes.
#[test]
fn formats_and_bounds_are_enforced() {
    let schema = ParamSchema::compile(
        &json!({
            "type": "object",
            "properties": {
                "to": { "type": "string", "format": "email" },
                "count": { "type": "integer", "minimum": 1, "maximum": 10, "format": "uint32" }
            },
            "required": ["to", "count"]
        })
        .to_string(),
    )
    .unwrap();
    assert!(
        schema
            .validate("Mail", json!({"to": "ada@example.com", "count": 3}))
            .is_ok()
    );
    let failure = schema
        .validate("Mail", json!({"to": "not an address", "count": 11}))
        .unwrap_err()
        .to_string();
    assert!(failure.contains("- to: "), "{failure}");
    assert!(failure.contains("- count: "), "{failure}");
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
fn a_missing_required_field_is_reported_at_its_name() {
    let failure = calculator()
        .validate("Calculator", json!({ "operation": "add" }))
        .unwrap_err();
    // "root" was the validator's word; a model reads the parameter's name.
    assert_eq!(failure.issues[0].path, "a");
    assert_eq!(
        failure.issues[0].message, "is required (missing)",
        "{failure}"
    );
    assert!(
        failure.to_string().contains("- a: is required (missing)"),
        "{failure}"
    );
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

/// `levels` of two-way `oneOf`, each branch the next level.
fn nested_one_of(levels: usize) -> Value {
    let mut schema = json!({ "type": "string" });
    for _ in 0..levels {
        schema = json!({ "oneOf": [schema.clone(), schema] });
    }
    json!({ "type": "object", "properties": { "x": schema } })
}

#[test]
fn exponential_combinators_are_refused_at_compile_time() {
    assert!(ParamSchema::compile(&nested_one_of(5).to_string()).is_ok());
    let started = std::time::Instant::now();
    // 8 levels visit 511 subschemas, under the budget; 10 visit 2,047.
    assert!(ParamSchema::compile(&nested_one_of(8).to_string()).is_ok());
    let error = ParamSchema::compile(&nested_one_of(10).to_string())
        .unwrap_err()
        .to_string();
    assert!(error.contains("over the limit of 1000"), "{error}");
    assert!(error.contains("/properties/x"), "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn shared_refs_that_multiply_are_counted() {
    // Each level refers to the previous one twice: small text,
    // exponential validation.
    let mut defs = serde_json::Map::new();
    defs.insert("l0".into(), json!({ "type": "string" }));
    for level in 1..=20 {
        let previous = format!("#/$defs/l{}", level - 1);
        defs.insert(
            format!("l{level}"),
            json!({ "anyOf": [{ "$ref": previous }, { "$ref": previous }] }),
        );
    }
    let schema = json!({
        "type": "object",
        "$defs": defs,
        "properties": { "x": { "$ref": "#/$defs/l20" } }
    });
    let error = ParamSchema::compile(&schema.to_string())
        .unwrap_err()
        .to_string();
    assert!(error.contains("subschemas"), "{error}");
}

#[test]
fn ref_cycles_on_the_same_value_are_refused_and_recursive_types_allowed() {
    let looping = json!({
        "type": "object",
        "$defs": { "a": { "anyOf": [{ "$ref": "#/$defs/a" }, { "type": "string" }] } },
        "properties": { "x": { "$ref": "#/$defs/a" } }
    });
    let error = ParamSchema::compile(&looping.to_string())
        .unwrap_err()
        .to_string();
    assert!(error.contains("$ref cycle"), "{error}");
    // A tree: the reference descends into a property first.
    let tree = json!({
        "type": "object",
        "$defs": { "node": {
            "type": "object",
            "properties": { "children": { "type": "array", "items": { "$ref": "#/$defs/node" } } }
        } },
        "properties": { "root": { "$ref": "#/$defs/node" } }
    });
    let schema = ParamSchema::compile(&tree.to_string()).unwrap();
    let params = json!({ "root": { "children": [{ "children": [] }] } });
    assert!(schema.validate("T", params).is_ok());
    let remote = json!({ "type": "object", "properties": { "x": { "$ref": "https://example.test/s.json" } } });
    let error = ParamSchema::compile(&remote.to_string())
        .unwrap_err()
        .to_string();
    assert!(error.contains("only local references"), "{error}");
}

#[test]
fn oversized_or_deep_schemas_are_refused() {
    let big = json!({ "type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES) });
    let error = ParamSchema::compile(&big.to_string())
        .unwrap_err()
        .to_string();
    assert!(error.contains("over the 65536-byte limit"), "{error}");
    let mut deep = json!({ "type": "string" });
    for _ in 0..40 {
        deep = json!({ "type": "object", "properties": { "a": deep } });
    }
    let error = ParamSchema::compile(&deep.to_string())
        .unwrap_err()
        .to_string();
    assert!(error.contains("levels deep"), "{error}");
}

#[test]
fn defaults_cannot_expand_without_bound() {
    // A 4 KiB default on every item: a few hundred items are fine, a
    // thousand would add 4 MiB.
    let schema = ParamSchema::compile(
        &json!({
            "type": "object",
            "properties": { "items": { "type": "array", "items": {
                "type": "object",
                "properties": { "pad": { "type": "string", "default": "p".repeat(4096) } }
            } } }
        })
        .to_string(),
    )
    .unwrap();
    let few = json!({ "items": vec![json!({}); 100] });
    assert!(schema.validate("T", few).is_ok());
    let many = json!({ "items": vec![json!({}); 1000] });
    let failure = schema.validate("T", many).unwrap_err();
    assert!(
        failure
            .to_string()
            .contains("would add more than 1048576 bytes"),
        "{failure}"
    );
}
