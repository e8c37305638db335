//! Agent control gadgets: how a model ends its task or asks a person.
//!
//! - `TaskComplete` returns the *finish* outcome: the current response still
//!   runs to its end, then the agent loop stops (llmist's TaskCompletionSignal).
//! - `AskUser` returns the *ask-human* outcome: the host's human-input
//!   handler answers, and the answer is the call's result.

use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, json};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
struct CompleteParams {
    /// What was done, for the person who asked.
    summary: String,
}

struct TaskComplete;

impl Gadget for TaskComplete {
    type Params = CompleteParams;
    const NAME: &'static str = "TaskComplete";
    const LABEL: Option<&'static str> = Some("Task complete");
    const DESCRIPTION: &'static str = "Declares the task complete and ends the conversation after this response. Call it once, when everything asked for is done.";
    // Let the other calls of the response finish before the loop is told to end.
    const EXCLUSIVE: bool = true;

    fn examples() -> Vec<Example> {
        vec![Example::new(
            json!({ "summary": "Renamed the 3 files and updated the index." }),
        )]
    }

    fn invoke(params: CompleteParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        if params.summary.trim().is_empty() {
            return Err(GadgetError::invalid_arguments(
                "summary must say what was done",
            ));
        }
        Ok(Outcome::finish(params.summary))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AskParams {
    /// The question, phrased so a person can answer it without context.
    question: String,
}

struct AskUser;

impl Gadget for AskUser {
    type Params = AskParams;
    const NAME: &'static str = "AskUser";
    const LABEL: Option<&'static str> = Some("Ask the user");
    const DESCRIPTION: &'static str = "Asks the person you are working for a question and returns their answer. Use it when a decision is theirs to make.";

    fn examples() -> Vec<Example> {
        vec![Example::new(
            json!({ "question": "Should the backup overwrite yesterday's?" }),
        )]
    }

    fn invoke(params: AskParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        if params.question.trim().is_empty() {
            return Err(GadgetError::invalid_arguments("question must not be empty"));
        }
        Ok(Outcome::ask_human(params.question))
    }
}

gadget_sdk::export_gadgets!(TaskComplete, AskUser);
