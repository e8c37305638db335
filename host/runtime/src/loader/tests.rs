//! Specs and plugin files checked at load.

use super::*;
use crate::Example;

fn spec(schema: &str, examples: &[&str]) -> GadgetSpec {
    GadgetSpec {
        name: "Tool".into(),
        label: None,
        description: "Does things.".into(),
        parameters_schema: schema.into(),
        examples: examples
            .iter()
            .map(|p| Example {
                params: p.to_string(),
                output: None,
                comment: None,
            })
            .collect(),
        timeout_ms: None,
        exclusive: false,
        max_concurrent: None,
    }
}

const SCHEMA: &str = r#"{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}"#;

#[test]
fn gadget_names_are_checked() {
    assert!(check_gadget_name("Calculator_2").is_ok());
    for bad in [
        "",
        "2fast",
        "has space",
        "a:b",
        "dash-ed",
        &"x".repeat(MAX_GADGET_NAME_BYTES + 1),
    ] {
        assert!(check_gadget_name(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn spec_fields_over_their_limits_are_refused_with_the_limit() {
    let mut long_comment = spec(SCHEMA, &[r#"{"n":1}"#]);
    long_comment.examples[0].comment = Some("c".repeat(MAX_EXAMPLE_PART_BYTES + 1));
    assert_eq!(
        check_spec(&long_comment).unwrap_err(),
        format!(
            "example 1: comment is {} bytes, over the limit of {MAX_EXAMPLE_PART_BYTES}",
            MAX_EXAMPLE_PART_BYTES + 1
        )
    );
    let mut long_description = spec(SCHEMA, &[]);
    long_description.description = "d".repeat(MAX_DESCRIPTION_BYTES + 1);
    assert!(
        check_spec(&long_description)
            .unwrap_err()
            .starts_with("description is 8193 bytes")
    );
    let mut bad = spec(SCHEMA, &[]);
    bad.name = "n".repeat(10_000);
    let error = check_spec(&bad).unwrap_err();
    assert!(
        error.len() < 200,
        "the message quotes the name cut: {error}"
    );
}

#[test]
fn specs_with_bad_examples_or_hints_are_refused() {
    assert!(check_spec(&spec(SCHEMA, &[r#"{"n":1}"#])).is_ok());
    let bad_example = check_spec(&spec(SCHEMA, &[r#"{"n":1}"#, r#"{"n":"x"}"#])).unwrap_err();
    assert!(
        bad_example.starts_with("example 2: Invalid parameters for 'Tool':"),
        "{bad_example}"
    );
    assert!(
        check_spec(&spec(SCHEMA, &["{"]))
            .unwrap_err()
            .contains("not valid JSON")
    );
    let mut zero = spec(SCHEMA, &[]);
    zero.max_concurrent = Some(0);
    assert!(
        check_spec(&zero)
            .unwrap_err()
            .contains("max-concurrent is 0")
    );
    let mut blank = spec(SCHEMA, &[]);
    blank.description = "  ".into();
    assert!(
        check_spec(&blank)
            .unwrap_err()
            .contains("description is empty")
    );
}

#[tokio::test]
async fn an_oversized_component_file_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.wasm");
    // Sparse: takes no disk space, but its size is over the limit.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(MAX_COMPONENT_BYTES + 1)
        .unwrap();
    let runtime = Arc::new(Runtime::new(&crate::RuntimeConfig::default()).unwrap());
    let error = load_plugin(
        &runtime,
        PluginSource::Wasm(path),
        &LoadOptions::default(),
        &NoProgress,
    )
    .await
    .unwrap_err();
    assert!(
        error
            .reason
            .to_string()
            .contains("over the 268435456-byte limit"),
        "{error}"
    );
}
