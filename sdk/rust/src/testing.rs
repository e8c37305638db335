//! A gadget's function in a unit test, without the host (llmist's
//! `testGadget`): `cargo test` runs [`call`] natively, and the calls the
//! gadget makes to the host (logs, costs, progress, updates, questions)
//! are recorded here instead, for the test to read.
//!
//! ```ignore
//! #[test]
//! fn counts_words() {
//!     let call = gadget_sdk::testing::call::<WordCount>(json!({ "text": "a b c" }));
//!     assert_eq!(call.text().as_deref(), Some("3 words"));
//!     gadget_sdk::testing::assert_examples::<WordCount>();
//! }
//! ```
//!
//! The parameters are read as the component reads them (serde, defaults
//! included); the JSON Schema's own checks (`minimum`, `pattern`, ...) are
//! the host's, so `gadget test` runs the real component for those. An LLM
//! completion and the `http` helper have no host here: a completion is
//! refused with a message saying so.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use crate::ask::{Answer, Answers, AskError, Question};
use crate::{Context, Gadget, GadgetError, Level, Outcome, Part};

/// The time a test call is told it has left, unless set.
pub const DEFAULT_TIME_LEFT: Duration = Duration::from_secs(30);

/// What surrounds a test call.
#[derive(Debug, Clone)]
pub struct Options {
    /// What [`Context::time_left`] says.
    pub time_left: Duration,
    /// What [`Context::cancelled`] says (to test the abort path).
    pub cancelled: bool,
    /// Text answers by question key, for [`Context::ask`]; a question
    /// without one is declined.
    pub answers: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            time_left: DEFAULT_TIME_LEFT,
            cancelled: false,
            answers: Vec::new(),
        }
    }
}

/// One log entry the gadget wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Log {
    pub level: Level,
    pub message: String,
    pub fields: Option<Value>,
}

/// Everything a test call produced.
#[derive(Debug, Clone)]
pub struct TestCall {
    /// How it ended.
    pub outcome: Result<Outcome, GadgetError>,
    pub logs: Vec<Log>,
    /// Reported (with [`Context::report_cost`]) plus returned cost, USD.
    pub cost: f64,
    pub progress: Vec<String>,
    pub updates: Vec<String>,
    /// The keys of the questions asked, in order.
    pub asked: Vec<String>,
}

impl TestCall {
    /// The text parts of a result (or the question of an ask-human
    /// outcome), joined by blank lines as the model reads them; `None` for
    /// an error.
    pub fn text(&self) -> Option<String> {
        match self.outcome.as_ref().ok()? {
            Outcome::Result(out) | Outcome::Finish(out) => Some(
                out.content
                    .iter()
                    .filter_map(|part| match part {
                        Part::Text(text) => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            ),
            Outcome::AskHuman(question) => Some(question.clone()),
        }
    }

    /// The error, when the call failed.
    pub fn error(&self) -> Option<&GadgetError> {
        self.outcome.as_ref().err()
    }
}

/// What the gadget's context recorded (see [`Context`]).
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    pub(crate) time_left: Duration,
    pub(crate) cancelled: bool,
    pub(crate) answers: Vec<(String, String)>,
    logs: Vec<Log>,
    pub(crate) cost: f64,
    pub(crate) progress: Vec<String>,
    pub(crate) updates: Vec<String>,
    asked: Vec<String>,
}

impl Recorded {
    pub(crate) fn log(&mut self, level: Level, message: &str, fields: Option<Value>) {
        self.logs.push(Log {
            level,
            message: message.to_string(),
            fields,
        });
    }

    /// Each question answered from [`Options::answers`], else declined.
    pub(crate) fn ask(&mut self, questions: Vec<Question>) -> Result<Answers, AskError> {
        if questions.is_empty() {
            return Err(AskError::Invalid("no questions".into()));
        }
        let answers = questions
            .iter()
            .map(|question| {
                let key = question.key().to_string();
                self.asked.push(key.clone());
                let answer = self
                    .answers
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map_or(Answer::Declined, |(_, text)| Answer::Text(text.clone()));
                (key, answer)
            })
            .collect();
        Ok(Answers::from_pairs(answers))
    }
}

/// The recorder, whatever a panicking gadget left it as.
pub(crate) fn lock(recorded: &Mutex<Recorded>) -> MutexGuard<'_, Recorded> {
    recorded.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `G` on `params` (a JSON object) with default [`Options`].
pub fn call<G: Gadget>(params: Value) -> TestCall {
    call_with::<G>(params, Options::default())
}

/// Runs `G` on `params` with `options`.
pub fn call_with<G: Gadget>(params: Value, options: Options) -> TestCall {
    let recorded = Arc::new(Mutex::new(Recorded {
        time_left: options.time_left,
        cancelled: options.cancelled,
        answers: options.answers,
        ..Recorded::default()
    }));
    let ctx = Context {
        invocation_id: "gadget_test".into(),
        test: Some(recorded.clone()),
    };
    let outcome = match serde_json::from_value::<G::Params>(params) {
        Ok(params) => G::invoke(params, &ctx),
        Err(e) => Err(GadgetError::InvalidArguments(e.to_string())),
    };
    drop(ctx);
    let recorded = std::mem::take(&mut *lock(&recorded));
    let returned = match &outcome {
        Ok(Outcome::Result(out) | Outcome::Finish(out)) => out.cost.unwrap_or(0.0),
        _ => 0.0,
    };
    TestCall {
        outcome,
        logs: recorded.logs,
        cost: recorded.cost + returned,
        progress: recorded.progress,
        updates: recorded.updates,
        asked: recorded.asked,
    }
}

/// Runs every example of `G` and panics, naming each, when one fails or
/// its result differs from the example's output (ends trimmed): what the
/// model is shown must be what the gadget does.
pub fn assert_examples<G: Gadget>() {
    let mut wrong = Vec::new();
    for (i, example) in G::examples().into_iter().enumerate() {
        let call = call::<G>(example.params.clone());
        match (call.text(), &example.output) {
            (None, _) => wrong.push(format!(
                "example {} ({}): failed: {}",
                i + 1,
                example.params,
                call.error().map(ToString::to_string).unwrap_or_default()
            )),
            (Some(text), Some(expected)) if text.trim() != expected.trim() => wrong.push(format!(
                "example {} ({}):\n  expected: {}\n  got:      {}",
                i + 1,
                example.params,
                expected.trim(),
                text.trim()
            )),
            _ => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {}'s examples do not hold:\n{}",
        wrong.len(),
        G::NAME,
        wrong.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Example, json};

    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    struct Params {
        text: String,
        #[serde(default)]
        shout: bool,
    }

    struct Echo;

    impl Gadget for Echo {
        type Params = Params;
        const NAME: &'static str = "Echo";
        const DESCRIPTION: &'static str = "Echoes.";

        fn examples() -> Vec<Example> {
            vec![Example::new(json!({"text": "hi"})).output("hi")]
        }

        fn invoke(params: Params, ctx: &Context) -> Result<Outcome, GadgetError> {
            ctx.check_cancelled()?;
            ctx.info("echoing");
            ctx.report_cost(0.25);
            ctx.progress("half way");
            if params.text.is_empty() {
                return Err(GadgetError::invalid_arguments("nothing to echo"));
            }
            let text = if params.shout {
                match ctx.ask_text("Really shout?").map_err(GadgetError::failed)? {
                    Some(yes) if yes == "yes" => params.text.to_uppercase(),
                    _ => params.text,
                }
            } else {
                params.text
            };
            Ok(Outcome::result(text).with_cost(0.5))
        }
    }

    #[test]
    fn a_call_records_what_it_asked_of_the_host() {
        let echoed = call::<Echo>(json!({"text": "hi"}));
        assert_eq!(echoed.text().as_deref(), Some("hi"));
        assert_eq!(echoed.cost, 0.75);
        assert_eq!(echoed.logs[0].message, "echoing");
        assert_eq!(echoed.progress, ["half way"]);
        let failed = call::<Echo>(json!({"text": ""}));
        assert_eq!(
            failed.error(),
            Some(&GadgetError::InvalidArguments("nothing to echo".into()))
        );
        let unreadable = call::<Echo>(json!({"txet": "hi"}));
        assert!(
            matches!(unreadable.error(), Some(GadgetError::InvalidArguments(m)) if m.contains("text"))
        );
        assert_examples::<Echo>();
    }

    #[test]
    fn questions_are_answered_from_the_options_and_the_abort_signal_is_set() {
        let options = Options {
            answers: vec![("answer".into(), "yes".into())],
            ..Options::default()
        };
        let shouted = call_with::<Echo>(json!({"text": "hi", "shout": true}), options);
        assert_eq!(shouted.text().as_deref(), Some("HI"));
        assert_eq!(shouted.asked, ["answer"]);
        let declined = call::<Echo>(json!({"text": "hi", "shout": true}));
        assert_eq!(declined.text().as_deref(), Some("hi"));
        let cancelled = call_with::<Echo>(
            json!({"text": "hi"}),
            Options {
                cancelled: true,
                ..Options::default()
            },
        );
        assert_eq!(cancelled.error(), Some(&GadgetError::Cancelled));
    }

    #[test]
    #[should_panic(expected = "example 1 ({\"text\":\"hi\"}):\n  expected: bye\n  got:      hi")]
    fn a_wrong_example_is_named() {
        struct Wrong;
        impl Gadget for Wrong {
            type Params = Params;
            const NAME: &'static str = "Wrong";
            const DESCRIPTION: &'static str = "Says the wrong thing.";
            fn examples() -> Vec<Example> {
                vec![Example::new(json!({"text": "hi"})).output("bye")]
            }
            fn invoke(params: Params, ctx: &Context) -> Result<Outcome, GadgetError> {
                Echo::invoke(params, ctx)
            }
        }
        assert_examples::<Wrong>();
    }
}
