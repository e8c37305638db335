//! The `ask` import of gadget:plugin@0.3.0: a running gadget's questions,
//! checked ([`gadget_core::ask::check_requests`]), put to whoever answers
//! this call (the [`HumanInput`] the front end set: a terminal, an MCP
//! client, the replay of a stateless MCP call), and the answers handed
//! back to the same running instance.
//!
//! The wait is not the gadget's: the call's clocks stop while it lasts
//! (see [`crate::deadline::CallTime::pause`]), and it has its own bound
//! ([`gadget_core::limits::Limits::ask_wait`]). The abort signal ends it.
//! An answerer that suspends the call (a stateless MCP call, which ends
//! to be called again with the answers) stops the instance here: the
//! gadget never sees that ask return.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::HasData;

use gadget_core::ask::{self, AskFailure, InputRequest, Kinds, Question, Reply};
use gadget_core::llm::LlmRole;
use gadget_core::tool::HumanInput;

use crate::bindings::v0_3_0::gadget::plugin::ask as wit;
use crate::bindings::v0_3_0::gadget::plugin::llm as wit_llm;
use crate::host_imports::GuestCall;

/// What the `ask` interface sees of a call's store.
pub(crate) struct AskCall<'a> {
    pub call: GuestCall<'a>,
    pub human: Option<&'a Arc<dyn HumanInput>>,
    pub wait: Duration,
    /// Set when the answerer suspended the call: the keys it waits for.
    pub awaiting: &'a mut Option<Vec<String>>,
}

/// The `ask` interface's [`HasData`]: linked with a getter that returns
/// an [`AskCall`].
pub(crate) struct AskDoor;

impl HasData for AskDoor {
    type Data<'a> = AskCall<'a>;
}

impl wit::Host for AskCall<'_> {
    fn answerable(&mut self) -> wit::Kinds {
        let kinds = self.human.map_or(Kinds::NONE, |h| h.answerable());
        let mut flags = wit::Kinds::empty();
        for (kind, flag) in [
            (Kinds::TEXT, wit::Kinds::TEXT),
            (Kinds::FORM, wit::Kinds::FORM),
            (Kinds::SAMPLE, wit::Kinds::SAMPLE),
            (Kinds::ROOTS, wit::Kinds::ROOTS),
        ] {
            if kinds.contains(kind) {
                flags |= flag;
            }
        }
        flags
    }

    async fn ask(
        &mut self,
        requests: Vec<wit::InputRequest>,
    ) -> wasmtime::Result<Result<Vec<wit::Answer>, wit::AskError>> {
        let at = self.call.elapsed_ms();
        let requests = match requests.into_iter().map(request_of).collect() {
            Ok(requests) => requests,
            Err(why) => return Ok(Err(wit::AskError::Invalid(why))),
        };
        let requests: Vec<InputRequest> = requests;
        if let Err(why) = ask::check_requests(&requests) {
            return Ok(Err(wit::AskError::Invalid(why)));
        }
        let Some(human) = self.human.cloned() else {
            return Ok(Err(wit::AskError::Unavailable(
                "no one answers questions in this call (answer at the terminal or with --answers under gadget run and gadget agent; an MCP client answers under gadget mcp and gadget serve)".into(),
            )));
        };
        // Whether the answerer can answer each kind is its own to say: a
        // terminal says no to a sample, an MCP client may end the call
        // with the capability it lacks.
        if self.call.time.aborted || self.call.time.externally_cancelled() {
            return Ok(Err(wit::AskError::Cancelled));
        }
        let keys: Vec<String> = requests.iter().map(|r| r.key.clone()).collect();
        self.call.ledger.host_info(
            format!("asks {}", keys.join(", ")),
            serde_json::json!({"keys": keys}),
            at,
        );
        let signal = self.call.time.signal.clone();
        let (gadget, id) = (
            self.call.gadget.to_string(),
            self.call.invocation_id.to_string(),
        );
        let paused_at = self.call.time.pause();
        let answered = tokio::select! {
            replies = human.inputs(&id, &gadget, &requests) => Some(replies),
            _ = tokio::time::sleep(self.wait) => None,
            _ = gadget_core::signal::raised(signal.as_ref()) => Some(Err(AskFailure::Cancelled)),
        };
        self.call.time.resume(paused_at);
        let at = self.call.elapsed_ms();
        let replies = match answered {
            None => {
                let seconds = self.wait.as_secs();
                self.call.ledger.host_warning(
                    format!("no answer to {} within {seconds} s", keys.join(", ")),
                    at,
                );
                return Ok(Err(wit::AskError::Timeout));
            }
            Some(Ok(replies)) if replies.len() == requests.len() => replies,
            Some(Ok(replies)) => {
                return Ok(Err(wit::AskError::Unavailable(format!(
                    "the answerer gave {} answers to {} questions",
                    replies.len(),
                    requests.len()
                ))));
            }
            Some(Err(AskFailure::Suspended)) => {
                self.call.ledger.host_info(
                    format!(
                        "the call ends here, to be called again with answers to {}",
                        keys.join(", ")
                    ),
                    serde_json::Value::Null,
                    at,
                );
                *self.awaiting = Some(keys);
                return Err(wasmtime::format_err!(
                    "the call was suspended until its questions are answered"
                ));
            }
            Some(Err(failure)) => return Ok(Err(error_of(failure))),
        };
        self.call.ledger.host_info(
            format!("answered {}", keys.join(", ")),
            serde_json::Value::Null,
            at,
        );
        Ok(Ok(replies
            .into_iter()
            .map(|reply| self.answer_of(reply))
            .collect()))
    }
}

impl AskCall<'_> {
    /// An answer as the gadget reads it.
    fn answer_of(&self, reply: Reply) -> wit::Answer {
        match reply {
            Reply::Text(text) => wit::Answer::Text(text),
            Reply::Form(value) => wit::Answer::Form(value.to_string()),
            Reply::Sample(text) => wit::Answer::Sample(text),
            Reply::Roots(roots) => wit::Answer::Roots(
                roots
                    .into_iter()
                    .map(|r| wit::Root {
                        uri: r.uri,
                        name: r.name,
                    })
                    .collect(),
            ),
            Reply::Declined => wit::Answer::Declined,
            Reply::Cancelled => wit::Answer::Cancelled,
        }
    }
}

fn error_of(failure: AskFailure) -> wit::AskError {
    match failure {
        AskFailure::Unavailable(why) => wit::AskError::Unavailable(why),
        AskFailure::Timeout(_) => wit::AskError::Timeout,
        AskFailure::Cancelled => wit::AskError::Cancelled,
        AskFailure::Invalid(why) => wit::AskError::Invalid(why),
        AskFailure::Suspended => wit::AskError::Unavailable("the call was suspended".into()),
    }
}

/// A question of the contract as the host's; a form's schema must be
/// JSON.
fn request_of(request: wit::InputRequest) -> Result<InputRequest, String> {
    let question = match request.question {
        wit::Question::Text(text) => Question::Text { text },
        wit::Question::Form(form) => Question::Form {
            message: form.message,
            schema: serde_json::from_str(&form.schema).map_err(|e| {
                format!(
                    "the form of {:?} has a schema that is not JSON: {e}",
                    request.key
                )
            })?,
        },
        wit::Question::Sample(sample) => Question::Sample {
            messages: sample
                .messages
                .into_iter()
                .map(|m| {
                    let role = match m.role {
                        wit_llm::Role::System => LlmRole::System,
                        wit_llm::Role::User => LlmRole::User,
                        wit_llm::Role::Assistant => LlmRole::Assistant,
                    };
                    (role, m.content)
                })
                .collect(),
            system_prompt: sample.system_prompt,
            max_tokens: sample.max_tokens,
        },
        wit::Question::Roots => Question::Roots,
    };
    Ok(InputRequest {
        key: request.key,
        question,
    })
}
