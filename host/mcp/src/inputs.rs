//! A gadget's questions (the `ask` import) as MCP requests to the client,
//! and the client's results as answers: a text or a form is
//! `elicitation/create`, a sample `sampling/createMessage`, roots
//! `roots/list`. The same shapes serve both ways of asking: requests sent
//! while the call runs (older protocols) and the `inputRequests` of an
//! `input_required` result (2026-07-28).
//!
//! [`ClientPerson`] is the client asked while a call runs.
//!
//! The client's results are untrusted: one that does not have the shape
//! its request asks for is no answer ([`reply_of`] returns `None`), and
//! the question is asked again.

use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, ElicitationAction, InputRequest as McpInputRequest, ServerRequest,
};
use serde_json::{Value, json};

use gadget_core::ask::{AskFailure, InputRequest, Kinds, Question, Reply, Root};
use gadget_core::llm::LlmRole;
use gadget_core::tool::Replies;

use crate::ask::{ANSWER_FIELD, MAX_QUESTION_BYTES, answer_text, elicitation};

/// The most roots a client's answer may name that a gadget is given.
pub const MAX_ROOTS: usize = 256;

/// The kinds of question a client with these capabilities answers.
pub(crate) fn kinds_of(capabilities: Option<&ClientCapabilities>) -> Kinds {
    let Some(capabilities) = capabilities else {
        return Kinds::NONE;
    };
    let mut kinds = Kinds::NONE;
    if capabilities
        .elicitation
        .as_ref()
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
    {
        kinds = kinds.with(Kinds::TEXT).with(Kinds::FORM);
    }
    if capabilities.sampling.is_some() {
        kinds = kinds.with(Kinds::SAMPLE);
    }
    if capabilities.roots.is_some() {
        kinds = kinds.with(Kinds::ROOTS);
    }
    kinds
}

/// The client capabilities that answer `kinds` (for the
/// `MissingRequiredClientCapability` error that names them).
pub(crate) fn capabilities_for(kinds: Kinds) -> ClientCapabilities {
    let mut value = serde_json::Map::new();
    if kinds.contains(Kinds::TEXT) || kinds.contains(Kinds::FORM) {
        value.insert("elicitation".into(), json!({"form": {}}));
    }
    if kinds.contains(Kinds::SAMPLE) {
        value.insert("sampling".into(), json!({}));
    }
    if kinds.contains(Kinds::ROOTS) {
        value.insert("roots".into(), json!({}));
    }
    serde_json::from_value(Value::Object(value)).unwrap_or_default()
}

/// `Unavailable`, naming the capability, when a client that declared
/// `kinds` cannot be asked `request`.
pub(crate) fn declared(kinds: Kinds, request: &InputRequest) -> Result<(), AskFailure> {
    let kind = request.question.kind();
    if kinds.contains(kind) {
        return Ok(());
    }
    Err(AskFailure::Unavailable(format!(
        "this client did not declare what a '{}' question needs ({})",
        kind.name(),
        serde_json::to_string(&capabilities_for(kind)).unwrap_or_default()
    )))
}

/// The request (method and params) that asks `question` of the client.
pub(crate) fn request_json(gadget: &str, question: &Question) -> Value {
    let cut = |text: &str| gadget_core::ledger::truncate(text.to_string(), MAX_QUESTION_BYTES);
    match question {
        Question::Text { text } => json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": format!("{gadget} asks: {}", cut(text)),
                "requestedSchema": {
                    "type": "object",
                    "properties": {ANSWER_FIELD: {"type": "string", "title": "Answer"}},
                    "required": [ANSWER_FIELD],
                },
            },
        }),
        Question::Form { message, schema } => json!({
            "method": "elicitation/create",
            "params": {"mode": "form", "message": cut(message), "requestedSchema": schema},
        }),
        Question::Sample {
            messages,
            system_prompt,
            max_tokens,
        } => {
            // Sampling has no system role: system messages join the
            // system prompt, in order.
            let mut system: Vec<String> = system_prompt.iter().cloned().collect();
            let mut conversation = Vec::new();
            for (role, text) in messages {
                match role {
                    LlmRole::System => system.push(text.clone()),
                    LlmRole::User | LlmRole::Assistant => conversation.push(json!({
                        "role": if *role == LlmRole::User { "user" } else { "assistant" },
                        "content": {"type": "text", "text": text},
                    })),
                }
            }
            let mut params = json!({"messages": conversation, "maxTokens": max_tokens});
            if !system.is_empty() {
                params["systemPrompt"] = Value::String(system.join("\n\n"));
            }
            json!({"method": "sampling/createMessage", "params": params})
        }
        Question::Roots => json!({"method": "roots/list", "params": {}}),
    }
}

/// The `inputRequests` entry for `request`.
pub(crate) fn input_request(gadget: &str, request: &InputRequest) -> Option<McpInputRequest> {
    serde_json::from_value(request_json(gadget, &request.question)).ok()
}

/// The client's result for `question` as the gadget's answer; `None` when
/// it is not a result of the request the question made.
pub(crate) fn reply_of(question: &Question, result: &Value) -> Option<Reply> {
    match question {
        Question::Text { .. } | Question::Form { .. } => {
            let action = result.get("action")?.as_str()?;
            match action {
                "accept" => {
                    let content = result.get("content")?.as_object()?;
                    Some(match question {
                        Question::Text { .. } => Reply::Text(match content.get(ANSWER_FIELD) {
                            Some(Value::String(text)) => text.clone(),
                            _ => Value::Object(content.clone()).to_string(),
                        }),
                        _ => Reply::Form(Value::Object(content.clone())),
                    })
                }
                "decline" => Some(Reply::Declined),
                "cancel" => Some(Reply::Cancelled),
                _ => None,
            }
        }
        Question::Sample { .. } => {
            // One content block or (newer clients) a list of them.
            let content = result.get("content")?;
            let blocks = match content {
                Value::Array(blocks) => blocks.iter().collect(),
                block => vec![block],
            };
            let text: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            (!text.is_empty() || !blocks.is_empty()).then(|| Reply::Sample(text.join("\n")))
        }
        Question::Roots => {
            let roots = result.get("roots")?.as_array()?;
            roots
                .iter()
                .take(MAX_ROOTS)
                .map(|root| {
                    Some(Root {
                        uri: root.get("uri")?.as_str()?.to_string(),
                        name: root.get("name").and_then(Value::as_str).map(str::to_string),
                    })
                })
                .collect::<Option<Vec<Root>>>()
                .map(Reply::Roots)
        }
    }
}

/// The client, asked while a call runs (older protocols, on a session
/// that can take requests from the server): its person answers over
/// elicitation (a gadget's questions, what an upstream MCP server asks),
/// its model over sampling, and it names its roots.
pub(crate) struct ClientPerson {
    pub(crate) peer: rmcp::Peer<RoleServer>,
    /// What the client declared it answers.
    pub(crate) kinds: Kinds,
}

impl gadget_exec::HumanInput for ClientPerson {
    // The call's own question is answered the MCP way (call.rs).
    fn answers_outcome(&self) -> bool {
        false
    }

    fn ask<'a>(
        &'a self,
        _call_id: &'a str,
        gadget: &'a str,
        question: &'a str,
    ) -> gadget_exec::Answer<'a> {
        Box::pin(async move {
            let result = self
                .peer
                .create_elicitation(elicitation(gadget, question))
                .await
                .map_err(|e| format!("the client could not ask a person: {e}"))?;
            match result.action {
                ElicitationAction::Accept => Ok(answer_text(result.content)),
                ElicitationAction::Decline => Err("the person declined".into()),
                _ => Err("the person dismissed the question".into()),
            }
        })
    }

    fn answerable(&self) -> Kinds {
        self.kinds
    }

    /// Each question in turn, as the request its kind makes.
    fn inputs<'a>(
        &'a self,
        _call_id: &'a str,
        gadget: &'a str,
        requests: &'a [InputRequest],
    ) -> Replies<'a> {
        Box::pin(async move {
            let mut replies = Vec::with_capacity(requests.len());
            for request in requests {
                declared(self.kinds, request)?;
                let sent = match input_request(gadget, request) {
                    Some(McpInputRequest::Elicitation(r)) => ServerRequest::ElicitRequest(r),
                    Some(McpInputRequest::CreateMessage(r)) => {
                        ServerRequest::CreateMessageRequest(r)
                    }
                    Some(McpInputRequest::ListRoots(r)) => ServerRequest::ListRootsRequest(r),
                    _ => {
                        return Err(AskFailure::Invalid(format!(
                            "question '{}' cannot be sent as an MCP request",
                            request.key
                        )));
                    }
                };
                let result = self.peer.send_request(sent).await.map_err(|e| {
                    AskFailure::Unavailable(format!("the client could not answer: {e}"))
                })?;
                let result = serde_json::to_value(result).unwrap_or(Value::Null);
                let reply = reply_of(&request.question, &result).ok_or_else(|| {
                    AskFailure::Unavailable(format!(
                        "the client's answer to '{}' is not a result of the request it was sent",
                        request.key
                    ))
                })?;
                replies.push(reply);
            }
            Ok(replies)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_question_is_a_request_the_sdk_reads() {
        let questions = [
            Question::Text {
                text: "Name?".into(),
            },
            Question::Form {
                message: "Confirm".into(),
                schema: json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
            },
            Question::Sample {
                messages: vec![
                    (LlmRole::System, "Be brief.".into()),
                    (LlmRole::User, "Capital of France?".into()),
                ],
                system_prompt: None,
                max_tokens: 100,
            },
            Question::Roots,
        ];
        for question in questions {
            let request = InputRequest {
                key: "k".into(),
                question: question.clone(),
            };
            assert!(input_request("G", &request).is_some(), "{question:?}");
        }
        let sample = request_json(
            "G",
            &Question::Sample {
                messages: vec![
                    (LlmRole::System, "Be brief.".into()),
                    (LlmRole::User, "Hi".into()),
                ],
                system_prompt: None,
                max_tokens: 5,
            },
        );
        assert_eq!(sample["params"]["systemPrompt"], "Be brief.");
        assert_eq!(sample["params"]["messages"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn results_become_answers_or_nothing() {
        let text = Question::Text { text: "?".into() };
        let form = Question::Form {
            message: "?".into(),
            schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        };
        let accept = json!({"action": "accept", "content": {"answer": "Ada"}});
        assert_eq!(reply_of(&text, &accept), Some(Reply::Text("Ada".into())));
        let named = json!({"action": "accept", "content": {"name": "Ada"}});
        assert_eq!(
            reply_of(&form, &named),
            Some(Reply::Form(json!({"name": "Ada"})))
        );
        assert_eq!(
            reply_of(&form, &json!({"action": "decline"})),
            Some(Reply::Declined)
        );
        assert_eq!(reply_of(&form, &json!(12345)), None);
        assert_eq!(reply_of(&form, &json!({"action": "accept"})), None);
        let sample = Question::Sample {
            messages: vec![],
            system_prompt: None,
            max_tokens: 1,
        };
        let said = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"});
        assert_eq!(
            reply_of(&sample, &said),
            Some(Reply::Sample("Paris".into()))
        );
        assert_eq!(reply_of(&sample, &json!({"model": "m"})), None);
        let roots = json!({"roots": [{"uri": "file:///w", "name": "w"}]});
        assert_eq!(
            reply_of(&Question::Roots, &roots),
            Some(Reply::Roots(vec![Root {
                uri: "file:///w".into(),
                name: Some("w".into())
            }]))
        );
        assert_eq!(reply_of(&Question::Roots, &json!({"roots": [{}]})), None);
        // A client naming more roots than a gadget is given: the first MAX_ROOTS.
        let many: Vec<Value> = (0..MAX_ROOTS + 10)
            .map(|i| json!({"uri": format!("file:///r{i}")}))
            .collect();
        let Some(Reply::Roots(kept)) = reply_of(&Question::Roots, &json!({"roots": many})) else {
            panic!("roots")
        };
        assert_eq!(kept.len(), MAX_ROOTS);
    }

    #[test]
    fn capabilities_decide_the_kinds() {
        let caps: ClientCapabilities = serde_json::from_value(json!({"sampling": {}})).unwrap();
        let kinds = kinds_of(Some(&caps));
        assert!(kinds.contains(Kinds::SAMPLE) && !kinds.contains(Kinds::FORM));
        assert_eq!(kinds_of(None), Kinds::NONE);
        let needed = serde_json::to_value(capabilities_for(Kinds::SAMPLE)).unwrap();
        assert_eq!(needed, json!({"sampling": {}}));
    }
}
