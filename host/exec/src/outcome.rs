//! A call's end as the executor records it: the tool's outcome as the
//! model reads it, and a question answered (or not) by a person.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use gadget_core::call::{CallError, FailureKind, Outcome, OutcomeKind};
use gadget_core::content::{Content, Media};
use gadget_core::schedule::CallIx;

use crate::state::{Ended, Live};
use crate::{Answer, Failure, HumanInput, NO_HUMAN_INPUT, call};

/// Tells the live view a call is asking, then asks the person.
pub(crate) struct Announced {
    pub(crate) human: Arc<dyn HumanInput>,
    pub(crate) live: mpsc::UnboundedSender<(CallIx, Live)>,
    pub(crate) ix: CallIx,
}

impl HumanInput for Announced {
    fn ask<'a>(&'a self, call_id: &'a str, gadget: &'a str, question: &'a str) -> Answer<'a> {
        let _ = self
            .live
            .send((self.ix, Live::Asking(question.to_string())));
        self.human.ask(call_id, gadget, question)
    }

    fn answerable(&self) -> gadget_core::ask::Kinds {
        self.human.answerable()
    }

    fn answers_outcome(&self) -> bool {
        self.human.answers_outcome()
    }

    fn inputs<'a>(
        &'a self,
        call_id: &'a str,
        gadget: &'a str,
        requests: &'a [gadget_core::ask::InputRequest],
    ) -> crate::Replies<'a> {
        use gadget_core::ask::Question;
        let shown: Vec<&str> = requests
            .iter()
            .map(|r| match &r.question {
                Question::Text { text } => text.as_str(),
                Question::Form { message, .. } => message.as_str(),
                Question::Sample { .. } => "(a completion by the client's model)",
                Question::Roots => "(the client's roots)",
            })
            .collect();
        let _ = self.live.send((self.ix, Live::Asking(shown.join(" / "))));
        self.human.inputs(call_id, gadget, requests)
    }
}

/// How a call that went through the one call path ended, for the
/// executor: a question without an answer is a `human-input` failure.
pub(crate) fn ended_of(ix: CallIx, finished: call::Finished) -> Ended {
    let call::Finished { report, answer, .. } = finished;
    let images = images_of(&report.outcome);
    let (outcome, details) = match settle(report.outcome) {
        Ok(settled) => settled,
        Err(_question) => (
            match answer {
                Some(answer) => answer
                    .map(|answer| (OutcomeKind::AskHuman, answer))
                    .map_err(|message| Failure::new(FailureKind::HumanInput, message)),
                None => Err(Failure::new(FailureKind::HumanInput, NO_HUMAN_INPUT)),
            },
            None,
        ),
    };
    Ended {
        call: ix,
        outcome,
        details,
        images,
        cost: report.cost,
        duration: report.duration,
    }
}

/// A result's image parts (copies: the result itself goes on to the
/// caller's events whole).
fn images_of(outcome: &Result<Outcome, CallError>) -> Vec<Media> {
    match outcome {
        Ok(Outcome::Result {
            rich: Some(rich), ..
        })
        | Ok(Outcome::Finish {
            rich: Some(rich), ..
        }) => rich
            .content
            .iter()
            .filter_map(|part| match part {
                Content::Image(media) => Some(media.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A tool's outcome as the model reads it, or the question it asks a
/// person (answered by the human-input handler).
pub(crate) fn settle(outcome: Result<Outcome, CallError>) -> Result<Settled, String> {
    match outcome {
        Ok(Outcome::Result {
            result, details, ..
        }) => Ok((Ok((OutcomeKind::Result, result)), details)),
        Ok(Outcome::Finish {
            result, details, ..
        }) => Ok((Ok((OutcomeKind::Finish, result)), details)),
        Ok(Outcome::AskHuman { question }) => Err(question),
        Err(error) => Ok((Err(runtime_failure(error)), None)),
    }
}

/// A call's outcome as the model reads it, and its details.
pub(crate) type Settled = (Result<(OutcomeKind, String), Failure>, Option<Value>);

pub(crate) fn runtime_failure(error: CallError) -> Failure {
    Failure::new(error.kind(), error.to_string())
}
