//! What a gadget asks over stateless HTTP (protocol 2026-07-28): the
//! call ends `input_required` with the questions and a signed
//! `requestState`; the client asks, then calls again with the answers and
//! the state; the host runs the gadget again from the start, and
//! [`Replay`] answers its asks in order: the rounds the state recorded
//! from the state, the round the client just answered from its
//! `inputResponses`, and a new round ends the call again (with a state
//! that records one more round).
//!
//! The state binds the gadget, its validated arguments (SHA-256 of the
//! canonical JSON), every round so far (the SHA-256 of its questions and
//! the answers), the round now asked and when it was issued, under an
//! HMAC with the server's key ([`ApprovalKey`], the same on every replica
//! that shares [`crate::approval::APPROVAL_KEY_ENV`]), so any replica can
//! continue a call another began. A state that does not verify, is for
//! another gadget or other arguments, or is older than
//! [`ASK_STATE_MAX_AGE`] is refused (`-32602`). A gadget that asks
//! something else than the round recorded (it does not ask the same
//! questions in the same order for the same arguments) fails the call
//! with a clear error: its answers would belong to other questions.
//!
//! A client that has not declared what a question needs is not asked:
//! the request fails with `MissingRequiredClientCapability` (-32021)
//! naming it. A gadget that can do without checks `answerable()` first.

use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{InputRequests, InputRequiredResult, InputResponses};
use serde_json::Value;
use sha2::{Digest, Sha256};

use gadget_core::ask::{AskFailure, InputRequest, Kinds, Reply};
use gadget_core::tool::{Answer, HumanInput, Replies};

use crate::approval::{ApprovalKey, digest, now_ms};
use crate::inputs::{input_request, reply_of};

/// The longest state a client may echo, in bytes: answers live in it
/// (a sampled text, a form), so it is larger than an approval's.
pub const MAX_ASK_STATE_BYTES: usize = 256 << 10;

/// The most rounds of questions one call may ask over stateless HTTP
/// (the official SDK clients stop at 10 by default).
pub const MAX_ASK_ROUNDS: usize = 10;

/// How long a state holds after it was issued: the time a person has to
/// answer one round (as the wait of an `ask` mid-call).
pub const ASK_STATE_MAX_AGE: Duration = gadget_core::limits::DEFAULT_ASK_WAIT;

/// Keys of the host's own input requests (an approval, an older gadget's
/// ask-human), which a gadget's question may not use.
const RESERVED_KEYS: &[&str] = &[crate::approval::APPROVAL_KEY, crate::ask::ASK_HUMAN_KEY];

/// The purpose a state's signature is made for.
const PURPOSE: &str = "gadget-host ask state v1";

/// One round of questions, as the state keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Round {
    /// SHA-256 of the questions (keys and questions, in order), hex.
    asked: String,
    answers: Vec<Reply>,
}

/// What a state binds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct AskState {
    gadget: String,
    /// Who asked ([`ClientId::binding`]): the state answers nobody else,
    /// so another caller's identical call never runs on these answers.
    client: String,
    /// SHA-256 of the canonical validated arguments, hex.
    arguments: String,
    rounds: Vec<Round>,
    /// The fingerprint of the round the client is asked now.
    pending: String,
    issued_ms: u64,
    /// The approval this call carries from an earlier round trip (its
    /// state and the person's reply), so a call that was approved is not
    /// asked again while it asks its own questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approval: Option<(String, Value)>,
}

/// The fingerprint of one round of questions.
fn fingerprint(requests: &[InputRequest]) -> String {
    let text = serde_json::to_string(requests).unwrap_or_default();
    gadget_core::audit::hex(&Sha256::digest(text.as_bytes()))
}

/// Why a state was refused (the request fails with `-32602`).
#[derive(Debug, thiserror::Error)]
#[error("this call's requestState does not hold: {0}")]
pub struct StateRefused(String);

/// What happened to the asks of one run, for the call's result.
pub(crate) enum Ended {
    /// No ask went unanswered.
    Answered,
    /// The client is to answer these and call again.
    Asked(InputRequiredResult),
    /// The gadget asked what the client did not declare it can answer.
    Missing(Kinds),
    /// The asks cannot go on: the gadget asked something other than what
    /// it asked before, or the answers so far outgrew a request state.
    Failed(String),
}

/// Answers one run's asks: from the state, from the client's answers,
/// or by ending the call with the questions.
pub(crate) struct Replay {
    key: ApprovalKey,
    gadget: String,
    /// The caller's binding, signed into every state.
    client: String,
    /// The validated arguments, and their digest (SHA-256 of their
    /// canonical JSON, hex), made only when a state is read or written:
    /// most calls ask nothing.
    params: Value,
    arguments: std::sync::OnceLock<String>,
    kinds: Kinds,
    recorded: Vec<Round>,
    /// The round the client was asked, and its answers (`None`: a first
    /// call, or one with answers and no state: they answer the first
    /// round, whatever it asks).
    pending: Option<String>,
    responses: Option<InputResponses>,
    approval: Option<(String, Value)>,
    run: Mutex<Run>,
}

#[derive(Default)]
struct Run {
    /// The rounds this run has had answered (recorded, then new).
    rounds: Vec<Round>,
    asked: Option<Vec<InputRequest>>,
    missing: Option<Kinds>,
    diverged: Option<String>,
}

impl Replay {
    /// The replay for one call: `state` verified (when there is one),
    /// for this gadget and these arguments.
    pub(crate) fn new(
        key: &ApprovalKey,
        gadget: &str,
        params: &Value,
        client: &gadget_core::client::ClientId,
        kinds: Kinds,
        state: Option<&str>,
        responses: Option<InputResponses>,
    ) -> Result<Replay, StateRefused> {
        let mut replay = Replay {
            key: key.clone(),
            gadget: gadget.to_string(),
            client: client.binding(),
            params: params.clone(),
            arguments: std::sync::OnceLock::new(),
            kinds,
            recorded: Vec::new(),
            pending: None,
            responses,
            approval: None,
            run: Mutex::default(),
        };
        if let Some(state) = state {
            let state = replay.open(state)?;
            replay.recorded = state.rounds;
            replay.pending = Some(state.pending);
            replay.approval = state.approval;
        }
        Ok(replay)
    }

    fn arguments(&self) -> &String {
        self.arguments.get_or_init(|| digest(&self.params))
    }

    /// Verifies and reads an echoed state.
    fn open(&self, state: &str) -> Result<AskState, StateRefused> {
        let refuse = |why: &str| Err(StateRefused(why.to_string()));
        if state.len() > MAX_ASK_STATE_BYTES {
            return refuse(&format!("it is over {MAX_ASK_STATE_BYTES} bytes"));
        }
        let Some((signature, payload)) = state.split_once('.') else {
            return refuse("it is not one this server writes");
        };
        if !self.key.verify(PURPOSE, payload, signature) {
            return refuse(
                "it was not signed by this server (changed, forged, or from a replica with another GADGET_APPROVAL_KEY)",
            );
        }
        let Ok(state) = serde_json::from_str::<AskState>(payload) else {
            return refuse("it is not one this server writes");
        };
        if !state.gadget.eq_ignore_ascii_case(&self.gadget) {
            return refuse(&format!("it belongs to a call of '{}'", state.gadget));
        }
        if state.arguments != *self.arguments() {
            return refuse("the arguments differ from the call that asked");
        }
        if state.client != self.client {
            return refuse("it belongs to another caller's call");
        }
        let age = now_ms().saturating_sub(state.issued_ms);
        if age > ASK_STATE_MAX_AGE.as_millis() as u64 {
            return refuse(&format!(
                "it was issued {} s ago, over the {} s a round may take",
                age / 1000,
                ASK_STATE_MAX_AGE.as_secs()
            ));
        }
        Ok(state)
    }

    /// The approval an earlier round of this call carried, if any.
    pub(crate) fn carried_approval(&self) -> Option<&(String, Value)> {
        self.approval.as_ref()
    }

    /// Carries an approval into the states this run writes.
    pub(crate) fn carry_approval(&mut self, approval: Option<(String, Value)>) {
        if approval.is_some() {
            self.approval = approval;
        }
    }

    /// How the run's asks ended.
    pub(crate) fn ended(&self) -> Ended {
        let run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = &run.diverged {
            return Ended::Failed(why.clone());
        }
        if let Some(kinds) = run.missing {
            return Ended::Missing(kinds);
        }
        let Some(asked) = &run.asked else {
            return Ended::Answered;
        };
        let state = AskState {
            gadget: self.gadget.clone(),
            client: self.client.clone(),
            arguments: self.arguments().clone(),
            rounds: run.rounds.clone(),
            pending: fingerprint(asked),
            issued_ms: now_ms(),
            approval: self.approval.clone(),
        };
        let payload = serde_json::to_string(&state).unwrap_or_default();
        let state = format!("{}.{payload}", self.key.sign(PURPOSE, &payload));
        // A state the client would echo and this server then refuse is
        // no way on: the call fails now, saying why.
        if state.len() > MAX_ASK_STATE_BYTES {
            return Ended::Failed(format!(
                "gadget '{}' has had {} bytes of answers and questions, over the {MAX_ASK_STATE_BYTES} a request state may carry: it must ask for less",
                self.gadget,
                state.len()
            ));
        }
        // Every question converts: `answer` refused those that do not.
        let requests: InputRequests = asked
            .iter()
            .filter_map(|r| Some((r.key.clone(), input_request(&self.gadget, r)?)))
            .collect();
        Ended::Asked(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// One `ask` of the run.
    fn answer(&self, requests: &[InputRequest]) -> Result<Vec<Reply>, AskFailure> {
        // The host's own input requests travel beside the gadget's: an
        // answer under their keys would be read as theirs.
        if let Some(request) = requests
            .iter()
            .find(|r| RESERVED_KEYS.contains(&r.key.as_str()))
        {
            return Err(AskFailure::Invalid(format!(
                "key '{}' is the host's own over MCP (reserved: {}); use another",
                request.key,
                RESERVED_KEYS.join(", ")
            )));
        }
        let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        let missing = requests
            .iter()
            .map(|r| r.question.kind())
            .filter(|kind| !self.kinds.contains(*kind))
            .fold(Kinds::NONE, Kinds::with);
        if missing != Kinds::NONE {
            run.missing = Some(missing);
            return Err(AskFailure::Suspended);
        }
        let round = run.rounds.len();
        let asked = fingerprint(requests);
        if let Some(recorded) = self.recorded.get(round) {
            if recorded.asked != asked {
                return Err(self.diverge(&mut run, round));
            }
            run.rounds.push(recorded.clone());
            return Ok(recorded.answers.clone());
        }
        if round == self.recorded.len()
            && let Some(responses) = &self.responses
        {
            if self.pending.as_ref().is_some_and(|p| p != &asked) {
                return Err(self.diverge(&mut run, round));
            }
            // Every question needs a well-formed answer; else the round
            // is asked again (what the client sent is no answer).
            let answers: Option<Vec<Reply>> = requests
                .iter()
                .map(|r| reply_of(&r.question, responses.get(&r.key)?))
                .collect();
            if let Some(answers) = answers {
                run.rounds.push(Round {
                    asked,
                    answers: answers.clone(),
                });
                return Ok(answers);
            }
        }
        // A question the client cannot be sent would never be answered.
        if let Some(request) = requests
            .iter()
            .find(|r| input_request(&self.gadget, r).is_none())
        {
            return Err(AskFailure::Invalid(format!(
                "question '{}' cannot be sent to an MCP client (a form's schema must be one elicitation allows: an object of string, number, integer, boolean and enum properties)",
                request.key
            )));
        }
        if round >= MAX_ASK_ROUNDS {
            return Err(AskFailure::Invalid(format!(
                "a call may ask at most {MAX_ASK_ROUNDS} rounds of questions over stateless HTTP"
            )));
        }
        run.asked = Some(requests.to_vec());
        Err(AskFailure::Suspended)
    }

    fn diverge(&self, run: &mut Run, round: usize) -> AskFailure {
        let why = format!(
            "gadget '{}' asked other questions in round {} than when this call began: a gadget must ask the same questions in the same order for the same arguments (call it again without inputResponses and requestState to start over)",
            self.gadget,
            round + 1
        );
        run.diverged = Some(why.clone());
        AskFailure::Invalid(why)
    }
}

impl HumanInput for Replay {
    // The call's own question is answered the MCP way (call.rs).
    fn answers_outcome(&self) -> bool {
        false
    }

    /// An `ask-human` outcome of an older gadget is answered the MCP way
    /// by the call's result, never here.
    fn ask<'a>(&'a self, _call_id: &'a str, _gadget: &'a str, _question: &'a str) -> Answer<'a> {
        Box::pin(async { Err("asked by the call's result".to_string()) })
    }

    fn answerable(&self) -> Kinds {
        self.kinds
    }

    fn inputs<'a>(
        &'a self,
        _call_id: &'a str,
        _gadget: &'a str,
        requests: &'a [InputRequest],
    ) -> Replies<'a> {
        let answered = self.answer(requests);
        Box::pin(async move { answered })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gadget_core::ask::Question;
    use gadget_core::client::ClientId;
    use serde_json::json;

    fn form(key: &str) -> InputRequest {
        InputRequest {
            key: key.into(),
            question: Question::Form {
                message: format!("{key}?"),
                schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            },
        }
    }

    fn state_of(ended: Ended) -> String {
        let Ended::Asked(result) = ended else {
            panic!("asked")
        };
        result.request_state.unwrap()
    }

    fn responses(pairs: &[(&str, Value)]) -> Option<InputResponses> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    const ALL: Kinds = Kinds::TEXT
        .with(Kinds::FORM)
        .with(Kinds::SAMPLE)
        .with(Kinds::ROOTS);

    #[test]
    fn rounds_replay_in_order_and_a_new_round_asks_again() {
        let key = ApprovalKey::random();
        let params = json!({"x": 1});
        let first = Replay::new(
            &key,
            "G",
            &params,
            &ClientId::Local,
            Kinds::FORM,
            None,
            None,
        )
        .unwrap();
        assert_eq!(first.answer(&[form("a")]), Err(AskFailure::Suspended));
        let state = state_of(first.ended());
        let accept = json!({"action": "accept", "content": {"name": "Ada"}});
        let second = Replay::new(
            &key,
            "G",
            &params,
            &ClientId::Local,
            Kinds::FORM,
            Some(&state),
            responses(&[("a", accept.clone())]),
        )
        .unwrap();
        let answers = second.answer(&[form("a")]).unwrap();
        assert_eq!(answers, vec![Reply::Form(json!({"name": "Ada"}))]);
        assert_eq!(second.answer(&[form("b")]), Err(AskFailure::Suspended));
        let state = state_of(second.ended());
        let third = Replay::new(
            &key,
            "G",
            &params,
            &ClientId::Local,
            Kinds::FORM,
            Some(&state),
            responses(&[("b", json!({"action": "decline"}))]),
        )
        .unwrap();
        assert_eq!(third.answer(&[form("a")]).unwrap(), answers);
        assert_eq!(third.answer(&[form("b")]).unwrap(), vec![Reply::Declined]);
        assert!(matches!(third.ended(), Ended::Answered));
    }

    #[test]
    fn a_state_holds_only_for_its_gadget_arguments_and_bytes() {
        let key = ApprovalKey::random();
        let params = json!({"x": 1});
        let first = Replay::new(&key, "G", &params, &ClientId::Local, ALL, None, None).unwrap();
        let _ = first.answer(&[form("a")]);
        let state = state_of(first.ended());
        let tampered = format!("{state}-TAMPERED");
        for (gadget, params, state, why) in [
            ("G", json!({"x": 1}), tampered.as_str(), "not signed"),
            (
                "H",
                json!({"x": 1}),
                state.as_str(),
                "belongs to a call of 'G'",
            ),
            ("G", json!({"x": 2}), state.as_str(), "arguments differ"),
            (
                "G",
                json!({"x": 1}),
                "nonsense",
                "not one this server writes",
            ),
        ] {
            let refused = Replay::new(
                &key,
                gadget,
                &params,
                &ClientId::Local,
                ALL,
                Some(state),
                None,
            )
            .err()
            .unwrap();
            assert!(refused.to_string().contains(why), "{refused}");
        }
        let other_key = ApprovalKey::random();
        assert!(
            Replay::new(
                &other_key,
                "G",
                &params,
                &ClientId::Local,
                ALL,
                Some(&state),
                None
            )
            .is_err()
        );
    }

    #[test]
    fn other_questions_than_recorded_fail_the_call() {
        let key = ApprovalKey::random();
        let params = json!({});
        let first = Replay::new(&key, "G", &params, &ClientId::Local, ALL, None, None).unwrap();
        let _ = first.answer(&[form("a")]);
        let state = state_of(first.ended());
        let accept = json!({"action": "accept", "content": {"name": "Ada"}});
        let replay = Replay::new(
            &key,
            "G",
            &params,
            &ClientId::Local,
            ALL,
            Some(&state),
            responses(&[("a", accept)]),
        )
        .unwrap();
        assert!(matches!(
            replay.answer(&[form("z")]),
            Err(AskFailure::Invalid(_))
        ));
        let Ended::Failed(why) = replay.ended() else {
            panic!("diverged")
        };
        assert!(why.contains("same questions in the same order"), "{why}");
    }

    #[test]
    fn missing_or_malformed_answers_ask_again_and_undeclared_kinds_are_named() {
        let key = ApprovalKey::random();
        for sent in [json!(12345), json!({"action": "accept"})] {
            let replay = Replay::new(
                &key,
                "G",
                &json!({}),
                &ClientId::Local,
                ALL,
                None,
                responses(&[("wrong", json!({})), ("a", sent)]),
            )
            .unwrap();
            assert_eq!(replay.answer(&[form("a")]), Err(AskFailure::Suspended));
            assert!(matches!(replay.ended(), Ended::Asked(_)));
        }
        let replay = Replay::new(
            &key,
            "G",
            &json!({}),
            &ClientId::Local,
            Kinds::SAMPLE,
            None,
            None,
        )
        .unwrap();
        assert_eq!(replay.answer(&[form("a")]), Err(AskFailure::Suspended));
        assert!(matches!(replay.ended(), Ended::Missing(k) if k == Kinds::FORM));
    }

    #[test]
    fn a_state_over_its_bytes_or_age_is_refused_and_never_written() {
        let key = ApprovalKey::random();
        let params = json!({});
        let huge = "x".repeat(MAX_ASK_STATE_BYTES + 1);
        let refused = Replay::new(&key, "G", &params, &ClientId::Local, ALL, Some(&huge), None)
            .err()
            .unwrap();
        assert!(refused.to_string().contains("bytes"), "{refused}");
        // A state signed by this key, issued past its lifetime.
        let old = AskState {
            gadget: "G".into(),
            client: ClientId::Local.binding(),
            arguments: digest(&params),
            rounds: vec![],
            pending: fingerprint(&[form("a")]),
            issued_ms: now_ms() - ASK_STATE_MAX_AGE.as_millis() as u64 - 1000,
            approval: None,
        };
        let payload = serde_json::to_string(&old).unwrap();
        let old = format!("{}.{payload}", key.sign(PURPOSE, &payload));
        let refused = Replay::new(&key, "G", &params, &ClientId::Local, ALL, Some(&old), None)
            .err()
            .unwrap();
        assert!(refused.to_string().contains("issued"), "{refused}");
        // Answers that would outgrow a state end the call instead.
        let big = json!({"action": "accept", "content": {"name": "y".repeat(MAX_ASK_STATE_BYTES)}});
        let replay = Replay::new(
            &key,
            "G",
            &params,
            &ClientId::Local,
            ALL,
            None,
            responses(&[("a", big)]),
        )
        .unwrap();
        replay.answer(&[form("a")]).unwrap();
        assert_eq!(replay.answer(&[form("b")]), Err(AskFailure::Suspended));
        assert!(matches!(replay.ended(), Ended::Failed(why) if why.contains("ask for less")));
    }

    #[test]
    fn a_question_no_client_can_be_sent_is_refused() {
        let replay = Replay::new(
            &ApprovalKey::random(),
            "G",
            &json!({}),
            &ClientId::Local,
            ALL,
            None,
            None,
        )
        .unwrap();
        let nested = InputRequest {
            key: "n".into(),
            question: Question::Form {
                message: "?".into(),
                schema: json!({"type": "object", "properties": {"o": {"type": "object"}}}),
            },
        };
        assert!(matches!(
            replay.answer(&[nested]),
            Err(AskFailure::Invalid(why)) if why.contains("cannot be sent")
        ));
    }

    #[test]
    fn the_hosts_own_keys_are_refused() {
        let key = ApprovalKey::random();
        let replay = Replay::new(&key, "G", &json!({}), &ClientId::Local, ALL, None, None).unwrap();
        assert!(matches!(
            replay.answer(&[form("approval")]),
            Err(AskFailure::Invalid(why)) if why.contains("reserved")
        ));
    }

    #[test]
    fn rounds_are_bounded() {
        let key = ApprovalKey::random();
        let mut state = None;
        let accept = json!({"action": "accept", "content": {"name": "Ada"}});
        for round in 0..MAX_ASK_ROUNDS {
            let key_name = format!("k{round}");
            let replay = Replay::new(
                &key,
                "G",
                &json!({}),
                &ClientId::Local,
                ALL,
                state.as_deref(),
                round
                    .checked_sub(1)
                    .and_then(|r| responses(&[(&format!("k{r}"), accept.clone())])),
            )
            .unwrap();
            for earlier in 0..round {
                replay.answer(&[form(&format!("k{earlier}"))]).unwrap();
            }
            assert_eq!(
                replay.answer(&[form(&key_name)]),
                Err(AskFailure::Suspended)
            );
            state = Some(state_of(replay.ended()));
        }
        let last = MAX_ASK_ROUNDS - 1;
        let replay = Replay::new(
            &key,
            "G",
            &json!({}),
            &ClientId::Local,
            ALL,
            state.as_deref(),
            responses(&[(&format!("k{last}"), accept.clone())]),
        )
        .unwrap();
        for earlier in 0..MAX_ASK_ROUNDS {
            replay.answer(&[form(&format!("k{earlier}"))]).unwrap();
        }
        assert!(matches!(
            replay.answer(&[form("one-more")]),
            Err(AskFailure::Invalid(why)) if why.contains("at most 10 rounds")
        ));
    }
}
