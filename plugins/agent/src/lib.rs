//! Agent control gadgets: how a model ends its task or asks a person.
//!
//! - `TaskComplete` returns the *finish* outcome: the current response still
//!   runs to its end, then the agent loop stops (llmist's TaskCompletionSignal).
//! - `AskUser` returns the *ask-human* outcome: the host's human-input
//!   handler answers, and the answer is the call's result (llmist's
//!   HumanInputRequiredException, with its events and error texts).
//!
//! The ask-human outcome is contract 0.2.0's (0.3.0 replaced it with the
//! `ask` import, which returns answers to the running gadget), so this
//! plugin is bound to `gadget:plugin@0.2.0` by hand rather than through
//! gadget-sdk, which targets 0.3.0. It is also the shipped proof that a
//! 0.2.0 component keeps working beside 0.3.0 ones.

wit_bindgen::generate!({
    path: "../../wit/gadget@0.2.0",
    world: "plugin",
});

use exports::gadget::plugin::gadget::Guest;
use gadget::plugin::types::{CallResult, Example, GadgetError, GadgetSpec, Outcome};
use serde_json::{Value, json};

struct Agent;

fn spec(
    name: &str,
    label: &str,
    description: &str,
    field: (&str, &str),
    example: Value,
) -> GadgetSpec {
    let (property, about) = field;
    GadgetSpec {
        name: name.to_string(),
        label: Some(label.to_string()),
        description: description.to_string(),
        parameters_schema: json!({
            "type": "object",
            "properties": { property: { "type": "string", "description": about } },
            "required": [property],
        })
        .to_string(),
        examples: vec![Example {
            params: example.to_string(),
            output: None,
            comment: None,
        }],
        timeout_ms: None,
        // TaskComplete lets the other calls of the response finish before
        // the loop is told to end.
        exclusive: name == "TaskComplete",
        max_concurrent: None,
    }
}

/// The one string parameter both gadgets take, not blank.
fn field(params: &str, name: &str, why: &str) -> Result<String, GadgetError> {
    let value: Value =
        serde_json::from_str(params).map_err(|e| GadgetError::InvalidArguments(e.to_string()))?;
    match value[name].as_str() {
        Some(text) if !text.trim().is_empty() => Ok(text.to_string()),
        _ => Err(GadgetError::InvalidArguments(why.to_string())),
    }
}

impl Guest for Agent {
    fn specs() -> Vec<GadgetSpec> {
        vec![
            spec(
                "TaskComplete",
                "Task complete",
                "Declares the task complete and ends the conversation after this response. Call it once, when everything asked for is done.",
                ("summary", "What was done, for the person who asked."),
                json!({ "summary": "Renamed the 3 files and updated the index." }),
            ),
            spec(
                "AskUser",
                "Ask the user",
                "Asks the person you are working for a question and returns their answer. Use it when a decision is theirs to make.",
                (
                    "question",
                    "The question, phrased so a person can answer it without context.",
                ),
                json!({ "question": "Should the backup overwrite yesterday's?" }),
            ),
        ]
    }

    fn invoke(
        _invocation_id: String,
        name: String,
        params: String,
    ) -> Result<Outcome, GadgetError> {
        if name.eq_ignore_ascii_case("TaskComplete") {
            let summary = field(&params, "summary", "summary must say what was done")?;
            return Ok(Outcome::Finish(CallResult {
                result: summary,
                cost: None,
                details: None,
            }));
        }
        if name.eq_ignore_ascii_case("AskUser") {
            return Ok(Outcome::AskHuman(field(
                &params,
                "question",
                "question must not be empty",
            )?));
        }
        Err(GadgetError::Failed(format!(
            "this component has no gadget named '{name}'"
        )))
    }
}

export!(Agent);
