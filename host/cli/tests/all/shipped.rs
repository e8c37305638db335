//! The shipped plugins, called through the registry: the behaviours their
//! specs promise, including the errors a model must be able to act on.

use std::sync::Arc;

use gadget_host::loader::{self, LoadOptions, NoProgress, Registry};
use gadget_host::runtime::{CallError, EpochMode, Outcome};
use serde_json::{Value, json};

use crate::common;

async fn shipped() -> Registry {
    let runtime = common::runtime(EpochMode::Ticker);
    let dirs = [common::shipped_plugins()];
    let (registry, errors) = loader::load_dirs(
        runtime.clone(),
        &dirs,
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    registry
}

async fn result(registry: &Registry, name: &str, params: Value) -> Result<Outcome, CallError> {
    registry
        .call(name, params, "t1", None)
        .await
        .expect("valid call")
        .outcome
}

fn text(outcome: Result<Outcome, CallError>) -> String {
    match outcome {
        Ok(Outcome::Result { result, .. }) => result,
        other => panic!("expected a result, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_example_runs_and_matches_its_output() {
    let registry = shipped().await;
    let mut checked = 0;
    for gadget in registry.gadgets() {
        for example in &gadget.card.spec.examples {
            let Some(expected) = &example.output else {
                continue;
            };
            if gadget.card.spec.name == "CurrentTime" {
                continue; // the clock moves
            }
            if gadget.card.spec.name == "Summarize" {
                continue; // a model writes it (tests/all/llm.rs runs it against a scripted one)
            }
            let params: Value = serde_json::from_str(&example.params).unwrap();
            let got = text(result(&registry, &gadget.card.spec.name, params).await);
            assert_eq!(
                &got, expected,
                "{} example {}",
                gadget.card.spec.name, example.params
            );
            checked += 1;
        }
    }
    assert!(checked >= 9, "only {checked} examples have outputs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calculator_does_arithmetic_and_refuses_division_by_zero() {
    let registry = shipped().await;
    let calc = |op: &str, a: f64, b: f64| json!({ "operation": op, "a": a, "b": b });
    assert_eq!(
        text(result(&registry, "Calculator", calc("multiply", 6.0, 7.0)).await),
        "42"
    );
    assert_eq!(
        text(result(&registry, "calculator", calc("subtract", 1.5, 2.0)).await),
        "-0.5"
    );
    let error = result(&registry, "Calculator", calc("divide", 1.0, 0.0))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), "invalid-arguments");
    assert!(error.to_string().contains("division by zero"));
    let rejected = registry
        .prepare("Calculator", json!({ "operation": "pow", "a": 1, "b": 2 }))
        .unwrap_err();
    assert!(
        rejected
            .to_string()
            .starts_with("Invalid parameters for 'Calculator':\n  - operation: "),
        "{rejected}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_toolkit_reports_bad_input_as_fixable_errors() {
    let registry = shipped().await;
    let error = result(
        &registry,
        "RegexFind",
        json!({ "text": "x", "pattern": "(" }),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("invalid pattern"), "{error}");
    let error = result(&registry, "JsonFormat", json!({ "json": "{\"a\": }" }))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("line 1, column 7"), "{error}");
    let error = result(
        &registry,
        "JsonQuery",
        json!({ "json": "{\"items\":[1,2]}", "pointer": "/item/0" }),
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("the document has keys: items"),
        "{error}"
    );
    let found = text(
        result(
            &registry,
            "RegexFind",
            json!({ "text": "a\nb\na", "pattern": "a", "max_matches": 1 }),
        )
        .await,
    );
    assert_eq!(found, "2 matches\nline 1: a\n(1 more not shown)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datetime_validates_calendar_dates() {
    let registry = shipped().await;
    let error = result(
        &registry,
        "DaysBetween",
        json!({ "from": "2023-02-29", "to": "2023-03-01" }),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("does not exist"), "{error}");
    let leap = text(
        result(
            &registry,
            "AddDays",
            json!({ "date": "2000-02-28", "days": 1 }),
        )
        .await,
    );
    assert_eq!(leap, "2000-02-29 (Tuesday)");
    let now = text(result(&registry, "CurrentTime", json!({})).await);
    assert!(
        now.contains('T') && now.contains("Z (") && now.contains("unix "),
        "{now}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_gadgets_finish_and_ask_a_human() {
    let registry = shipped().await;
    let finish = result(&registry, "TaskComplete", json!({ "summary": "done" })).await;
    assert_eq!(
        finish,
        Ok(Outcome::Finish {
            result: "done".into(),
            details: None,
            rich: None
        })
    );
    let ask = result(&registry, "AskUser", json!({ "question": "Proceed?" })).await;
    assert_eq!(
        ask,
        Ok(Outcome::AskHuman {
            question: "Proceed?".into()
        })
    );
    assert!(registry.get("TaskComplete").unwrap().card.spec.exclusive);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_schemas_carry_descriptions_defaults_enums_and_optionals() {
    let runtime = common::runtime(EpochMode::Ticker);
    let hello = common::workspace().join("examples/hello-gadget");
    common::guests();
    let registry = common::load(&runtime, vec![loader::PluginSource::Dir(hello)]).await;
    let schema = registry
        .get("Greet")
        .unwrap()
        .card
        .schema
        .schema()
        .unwrap()
        .clone();
    let props = &schema["properties"];
    assert_eq!(props["name"]["description"], "Who to greet.");
    assert_eq!(props["tone"]["default"], "friendly");
    assert_eq!(props["tone"]["enum"], json!(["friendly", "formal"]));
    assert_eq!(props["times"]["default"], 1);
    assert_eq!(props["times"]["maximum"], 5);
    assert_eq!(schema["required"], json!(["name"]));
    assert!(
        !schema.to_string().contains("$ref"),
        "subschemas are inlined: {schema}"
    );
    // Defaults are filled in before the gadget sees the parameters.
    let report = registry
        .call("Greet", json!({ "name": "Ada" }), "t1", None)
        .await
        .unwrap();
    assert_eq!(
        report.outcome,
        Ok(Outcome::Result {
            result: "Hello, Ada!".into(),
            details: Some(json!({ "times": 1 })),
            rich: None
        })
    );
    assert_eq!(report.cost, 0.0001);
    assert_eq!(report.logs[0].message, "greeting Ada");
}

#[tokio::test]
async fn sequence_lists_numbers_and_refuses_too_many_or_a_wrong_step() {
    let registry = shipped().await;
    assert_eq!(
        text(
            result(
                &registry,
                "Sequence",
                json!({"start": 10, "end": 0, "step": -5})
            )
            .await
        ),
        "10\n5\n0"
    );
    // MAX_SEQUENCE_ITEMS (100,000) is the last count accepted.
    let last = text(result(&registry, "Sequence", json!({"start": 1, "end": 100_000})).await);
    assert_eq!(last.lines().count(), 100_000);
    let over = result(&registry, "Sequence", json!({"start": 1, "end": 100_001})).await;
    assert_eq!(
        over,
        Err(CallError::InvalidArguments {
            message: "that is 100001 numbers; at most 100000 per call".into()
        })
    );
    let wrong_way = result(
        &registry,
        "Sequence",
        json!({"start": 1, "end": 5, "step": -1}),
    )
    .await;
    assert_eq!(
        wrong_way,
        Err(CallError::InvalidArguments {
            message: "step -1 never gets from 1 to 5".into()
        })
    );
}

#[tokio::test]
async fn sleep_waits_and_refuses_waits_past_its_cap() {
    let registry = shipped().await;
    let started = std::time::Instant::now();
    assert_eq!(
        text(result(&registry, "Sleep", json!({"ms": 120})).await),
        "slept 120 ms"
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(120));
    // MAX_SLEEP_MS (600,000) is refused at once, not slept on.
    let over = result(&registry, "Sleep", json!({"ms": 600_001})).await;
    assert_eq!(
        over,
        Err(CallError::InvalidArguments {
            message: "ms must be at most 600000, got 600001".into()
        })
    );
}
