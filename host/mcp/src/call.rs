//! One `tools/call` of the MCP server, in the steps every call takes:
//! prepare (the tool and its validated arguments, or the refusal), scope
//! (the approvals this request carries, the journal, the trace, who is
//! asked mid-call), notifier (progress and logs on their way to the
//! client), run (the one call path, stopped by `notifications/cancelled`
//! or the server's shutdown), result (the MCP result of what it returned).
//! A gadget's question goes to the client's person here, the MCP way
//! (elicitation, or a stateless `input_required` round trip).

// MCP log messages are what clients show today (see server.rs).
#![allow(deprecated, reason = "MCP logging has no replacement yet (SEP-2577)")]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    ElicitRequest, ElicitResult, ElicitationCapability, FormElicitationCapability, InputRequest,
    InputRequests, InputRequiredResult, LoggingMessageNotificationParam, ProgressNotificationParam,
};
use serde_json::Value;

use gadget_core::approval::{ApprovalEvent, Approvals};
use gadget_core::call::{FailureKind, Outcome};
use gadget_core::ledger::{CallEvent, CallObserver};
use gadget_core::scope::CallScope;
use gadget_core::signal::AbortSignal;
use gadget_core::tool::Tool as GadgetTool;
use gadget_core::tool::ToolCall;
use gadget_exec::call::Finished;

use crate::approval::{APPROVAL_KEY, ClientAsk, McpApprover};
use crate::ask::{ASK_HUMAN_KEY, answer_result, elicitation};
use crate::caller::Caller;
use crate::inputs::{ClientPerson, capabilities_for};
use crate::logs::{level_rank, mcp_level, operator_log};
use crate::metrics::CallOutcome;
use crate::replay::{Ended, Replay, StateRefused};
use crate::server::GadgetServer;
use gadget_core::ask::Kinds;

impl GadgetServer {
    /// One `tools/call`: prepare, scope, notifier, run, result.
    pub(crate) async fn call(
        &self,
        mut request: CallToolRequestParams,
        caller: &Caller,
    ) -> Result<CallToolResponse, McpError> {
        self.until_loaded().await;
        let name = request.name.to_string();
        if let Some(responses) = &request.input_responses
            && let Some(response) = responses.get(ASK_HUMAN_KEY)
        {
            let state = request.request_state.as_deref();
            return Ok(self.answered(&name, state, response, caller.started).into());
        }
        let arguments = Value::Object(request.arguments.take().unwrap_or_default());
        let (gadget, params) = match self.prepare(&name, arguments, caller) {
            Ok(prepared) => prepared,
            Err(refused) => return Ok((*refused).into()),
        };
        if self.as_task(&*gadget, &params, &request, caller)? {
            return self.start_task(gadget, params, &request, caller).await;
        }
        let replay = match self.replay(&*gadget, &params, &request, caller) {
            Ok(replay) => replay,
            Err(refused) => {
                self.metrics
                    .rejected(gadget.name(), caller.started.elapsed());
                return Err(McpError::invalid_params(refused.to_string(), None));
            }
        };
        let scope = match self.scope(&*gadget, &params, &request, replay.as_ref(), caller) {
            Ok(scope) => scope,
            Err(refused) => return Ok((*refused).into()),
        };
        let id = self.call_id();
        let (observer, forward) = self.notifier(&id, gadget.name(), caller);
        self.metrics.started();
        let call = ToolCall {
            id: id.clone(),
            params: Arc::new(params),
            deadline: None,
            signal: Some(AbortSignal::new()),
            observer: Some(observer),
            scope,
        };
        // Every notification of the call reaches the client before its
        // result: the forwarding ends when the call drops its observer.
        let (finished, ()) = tokio::join!(
            self.run_until(gadget.clone(), call, caller.gone.cancelled()),
            forward
        );
        if let Some(replay) = &replay {
            match replay.ended() {
                Ended::Answered => {}
                Ended::Asked(input_required) => {
                    self.metrics.finished(
                        gadget.name(),
                        CallOutcome::InputRequired,
                        caller.started.elapsed(),
                    );
                    return Ok(input_required.into());
                }
                Ended::Missing(kinds) => {
                    self.metrics.finished(
                        gadget.name(),
                        CallOutcome::HumanInput,
                        caller.started.elapsed(),
                    );
                    return Err(McpError::missing_required_client_capability(
                        capabilities_for(kinds),
                    ));
                }
                Ended::Failed(why) => {
                    self.metrics.finished(
                        gadget.name(),
                        CallOutcome::HumanInput,
                        caller.started.elapsed(),
                    );
                    return Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into());
                }
            }
        }
        self.result(gadget.name(), &id, finished, caller).await
    }

    /// Over stateless HTTP (2026-07-28), what answers the gadget's asks:
    /// the replay of the rounds `requestState` records and the answers
    /// this request carries. An approval answered by this request travels
    /// on in the states the call's asks write. `Err`: the state does not
    /// hold.
    fn replay(
        &self,
        gadget: &dyn GadgetTool,
        params: &Value,
        request: &CallToolRequestParams,
        caller: &Caller,
    ) -> Result<Option<Arc<Replay>>, StateRefused> {
        if !caller.modern {
            return Ok(None);
        }
        let kinds = caller.kinds();
        let approval = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(APPROVAL_KEY))
            .map(|reply| {
                let state = request.request_state.clone().unwrap_or_default();
                (state, reply.clone())
            });
        // The state of an approval is the approval's, not the asks'.
        let (state, responses) = match approval {
            Some(_) => (None, None),
            None => (
                request.request_state.as_deref(),
                request.input_responses.clone(),
            ),
        };
        let mut replay = Replay::new(
            &self.approval_key,
            gadget.name(),
            params,
            &caller.client,
            kinds,
            state,
            responses,
        )?;
        replay.carry_approval(approval);
        Ok(Some(Arc::new(replay)))
    }

    /// The tool a call names and its validated arguments, or the refusal
    /// (counted, and kept by the journal).
    fn prepare(
        &self,
        name: &str,
        arguments: Value,
        caller: &Caller,
    ) -> Result<(Arc<dyn GadgetTool>, Value), Box<CallToolResult>> {
        // Metrics and messages use the name as served, whatever the case
        // the client wrote.
        self.resolve(name, arguments).map_err(|(text, label)| {
            self.metrics.rejected(&label, caller.started.elapsed());
            let kind = if label == "(unknown)" {
                FailureKind::UnknownGadget
            } else {
                FailureKind::InvalidParameters
            };
            let failure = gadget_exec::Failure::new(kind, text.clone());
            let scope = CallScope {
                recorder: self.recorder.clone(),
                client: caller.client.clone(),
                ..CallScope::default()
            };
            gadget_exec::call::refused(&scope, "(mcp)", name, &failure);
            Box::new(CallToolResult::error(vec![ContentBlock::text(text)]))
        })
    }

    /// What surrounds this call: the approvals (and the answer to an
    /// earlier approval request, which must bind this very call, else
    /// nothing runs), the journal, the client's trace, and the client's
    /// person for what a tool asks mid-call.
    pub(crate) fn scope(
        &self,
        gadget: &dyn GadgetTool,
        params: &Value,
        request: &CallToolRequestParams,
        replay: Option<&Arc<Replay>>,
        caller: &Caller,
    ) -> Result<Arc<CallScope>, Box<CallToolResult>> {
        let name = gadget.name();
        // The person's answer to an approval request: in this request, or
        // carried by the state of the call's own questions.
        let reply = match request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(APPROVAL_KEY))
        {
            Some(reply) => Some((request.request_state.as_deref(), reply)),
            None => replay
                .and_then(|r| r.carried_approval())
                .map(|(state, reply)| (Some(state.as_str()), reply)),
        };
        let approver = match reply {
            Some((state, reply)) => {
                let call = crate::approval::ApprovedCall {
                    gadget: name,
                    params,
                    client: &caller.client,
                };
                if let Err(why) = crate::approval::check_state(
                    &self.approval_key,
                    state,
                    &call,
                    self.rules.timeout(),
                ) {
                    self.metrics.rejected(name, caller.started.elapsed());
                    return Err(Box::new(CallToolResult::error(vec![ContentBlock::text(
                        format!(
                            "This call of '{name}' carries an approval that does not hold: {why}. Call it again without inputResponses to ask for approval."
                        ),
                    )])));
                }
                McpApprover::Answered(crate::approval::verdict_of(reply))
            }
            None => McpApprover::Ask(self.client_ask(caller)),
        };
        let approvals = (!self.rules.is_empty())
            .then(|| Arc::new(Approvals::new(self.rules.clone(), Arc::new(approver))));
        // Who answers what the gadget asks: the replay over stateless
        // HTTP; on older protocols the client mid-call, when the session
        // can take requests from the server.
        let kinds = caller.kinds();
        let human = match (replay, caller.out.peer()) {
            (Some(replay), _) => Some(replay.clone() as Arc<dyn gadget_exec::HumanInput>),
            (None, Some(peer)) => (self.server_requests && kinds != Kinds::NONE).then(|| {
                Arc::new(ClientPerson {
                    peer: peer.clone(),
                    kinds,
                }) as Arc<dyn gadget_exec::HumanInput>
            }),
            (None, None) => None,
        };
        Ok(self.scope_of(approvals, human, caller))
    }

    /// What surrounds any request of `caller` into plugin code (a call or
    /// a catalog request): these approvals and this person, the journal,
    /// the rate limits, the caller's trace and identity.
    pub(crate) fn scope_of(
        &self,
        approvals: Option<Arc<Approvals>>,
        human: Option<Arc<dyn gadget_exec::HumanInput>>,
        caller: &Caller,
    ) -> Arc<CallScope> {
        Arc::new(CallScope {
            approvals,
            recorder: self.recorder.clone(),
            trace: caller.trace.clone(),
            human,
            rates: self.rates.clone(),
            client: caller.client.clone(),
        })
    }

    /// The call's observer, and what forwards what it sees to the client
    /// (to be run beside the call; it ends once the observer is dropped):
    /// progress and logs leave through a channel, since the observer runs
    /// inside the call and must not wait for the client.
    pub(crate) fn notifier(
        &self,
        id: &str,
        gadget: &str,
        caller: &Caller,
    ) -> (
        CallObserver,
        impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Notice>();
        let min_level = level_rank(*self.level.lock().unwrap_or_else(|p| p.into_inner()));
        let gadget_name = gadget.to_string();
        let logged_id = id.to_string();
        let observer: CallObserver = Arc::new(move |event: &CallEvent| match event {
            CallEvent::Progress(message) => {
                let _ = tx.send(Notice::Progress(message.clone()));
            }
            CallEvent::Measured {
                done,
                total,
                message,
            } => {
                let _ = tx.send(Notice::Measured(*done, *total, message.clone()));
            }
            CallEvent::Log(entry) => {
                // The operator's log (stderr, filtered by -v or RUST_LOG
                // with the target `gadget`), then the client's at its level.
                operator_log(&logged_id, &gadget_name, entry);
                if level_rank(mcp_level(entry.level)) < min_level {
                    return;
                }
                let data = serde_json::json!({
                    "message": entry.message,
                    "fields": entry.fields,
                    "source": entry.source,
                });
                let mut param = LoggingMessageNotificationParam::new(mcp_level(entry.level), data);
                param.logger = Some(gadget_name.clone());
                let _ = tx.send(Notice::Log(param));
            }
            // Who let a call run (or not) is the operator's to see.
            CallEvent::Approval(ApprovalEvent::Decided {
                approved,
                by,
                reason,
            }) => {
                tracing::info!(
                    call = %logged_id,
                    gadget = %gadget_name,
                    approved,
                    by = by.as_str(),
                    reason = reason.as_deref().unwrap_or_default(),
                    "approval decided"
                );
            }
            _ => {}
        });
        let progress_token = caller.progress_token.clone();
        let out = caller.out.clone();
        let forward = async move {
            // The last progress told: each must be more (MCP requires it).
            let mut last: Option<f64> = None;
            while let Some(notice) = rx.recv().await {
                match notice {
                    // A status line counts one step past the last report.
                    Notice::Progress(message) => {
                        if let Some(token) = &progress_token {
                            let step = last.map_or(1.0, |l| l.floor() + 1.0);
                            last = Some(step);
                            let mut param = ProgressNotificationParam::new(token.clone(), step);
                            param.message = Some(message);
                            out.progress(param).await;
                        }
                    }
                    // Numbers as the gadget gave them (the ledger let
                    // through only growing ones); status lines after them
                    // count on from there.
                    Notice::Measured(done, total, message) => {
                        if let Some(token) = &progress_token
                            && last.is_none_or(|l| done > l)
                        {
                            last = Some(done);
                            let mut param = ProgressNotificationParam::new(token.clone(), done);
                            param.total = total;
                            param.message = message;
                            out.progress(param).await;
                        }
                    }
                    Notice::Log(param) => out.log(param).await,
                }
            }
        };
        (observer, forward)
    }

    /// The one call path (gadget-exec) for `call`, whose abort signal is
    /// raised when `client_gone` completes (the client cancelled or went
    /// away) or the server shuts down; the gadget gets its grace period,
    /// then the instance stops. A panic under it is this call's `crashed`
    /// failure (counted, answered, its slot freed). A question is answered
    /// by [`Self::result`], the MCP way, not by a handler in the path.
    pub(crate) async fn run_until(
        &self,
        gadget: Arc<dyn GadgetTool>,
        call: ToolCall,
        client_gone: impl std::future::Future<Output = ()>,
    ) -> Finished {
        let signal = call.signal.clone().unwrap_or_default();
        let run = gadget_exec::call::run(gadget, call);
        self.until_stopped(run, &signal, client_gone).await
    }

    /// The next invocation id of this process (`mcp_N`).
    pub(crate) fn call_id(&self) -> String {
        format!("mcp_{}", self.calls.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// `run` to its end; when the client goes away or the server shuts
    /// down first, `signal` is raised and `run` still ends (its answer
    /// and records are not lost).
    pub(crate) async fn until_stopped<T>(
        &self,
        run: impl std::future::Future<Output = T>,
        signal: &AbortSignal,
        client_gone: impl std::future::Future<Output = ()>,
    ) -> T {
        tokio::pin!(run);
        tokio::select! {
            done = &mut run => return done,
            _ = client_gone => {}
            _ = self.shutdown.cancelled() => {}
        }
        signal.raise();
        run.await
    }

    /// The MCP result of how the call ended.
    pub(crate) async fn result(
        &self,
        name: &str,
        id: &str,
        finished: Finished,
        caller: &Caller,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(request) = finished.deferred {
            self.metrics
                .finished(name, CallOutcome::InputRequired, caller.started.elapsed());
            return Ok(crate::approval::input_required(
                &self.approval_key,
                &request,
                &caller.client,
            )
            .into());
        }
        let result = match finished.report.outcome {
            Ok(Outcome::Result {
                result,
                details,
                rich,
            })
            | Ok(Outcome::Finish {
                result,
                details,
                rich,
            }) => {
                self.metrics
                    .finished(name, CallOutcome::Ok, caller.started.elapsed());
                let mut done =
                    CallToolResult::success(crate::content::blocks(result, rich.as_deref()));
                // The gadget's structured result when it gave one; else
                // its details, as before contract 0.3.0.
                let structured = rich.and_then(|r| r.structured);
                done.structured_content = structured.or(details).map(|d| match d {
                    Value::Object(_) => d,
                    other => serde_json::json!({ "details": other }),
                });
                done
            }
            Ok(Outcome::AskHuman { question }) => {
                let asked = self.ask(name, id, &question, caller).await;
                let outcome = match &asked {
                    Asked::Later(_) => CallOutcome::InputRequired,
                    Asked::Refused(_) => CallOutcome::HumanInput,
                    Asked::Answered(answer) if answer.is_error == Some(true) => {
                        CallOutcome::HumanInput
                    }
                    Asked::Answered(_) => CallOutcome::AskHuman,
                };
                self.metrics
                    .finished(name, outcome, caller.started.elapsed());
                match asked {
                    Asked::Answered(result) => result,
                    Asked::Later(input_required) => return Ok(input_required.into()),
                    Asked::Refused(error) => return Err(error),
                }
            }
            Err(error) => {
                self.metrics.finished(
                    name,
                    CallOutcome::Failed(error.kind()),
                    caller.started.elapsed(),
                );
                CallToolResult::error(vec![ContentBlock::text(error.to_string())])
            }
        };
        Ok(result.into())
    }
}

/// What became of a gadget's question.
enum Asked {
    /// The call's result: the person's answer, or why there is none.
    Answered(CallToolResult),
    /// The client is to ask and call again (protocol 2026-07-28 and later).
    Later(InputRequiredResult),
    /// The client did not declare what asking needs (protocol 2026-07-28
    /// and later): the request fails with `MissingRequiredClientCapability`
    /// (-32021, HTTP 400), naming the capability.
    Refused(McpError),
}

/// What the server keeps of a question between the two halves of a
/// stateless ask (in `requestState`, echoed by the client): the tool and
/// the call that asked, to check that an answer belongs to this tool.
#[derive(serde::Serialize, serde::Deserialize)]
struct AskState {
    gadget: String,
    call: String,
}

impl GadgetServer {
    /// How this request's client can be asked to approve a call.
    pub(crate) fn client_ask(&self, caller: &Caller) -> ClientAsk {
        let peer = caller.out.peer().filter(|_| self.server_requests);
        if !caller.can_elicit() {
            ClientAsk::Cannot("this client cannot ask a person (no elicitation capability)")
        } else if caller.modern {
            ClientAsk::RoundTrip
        } else if let Some(peer) = peer {
            ClientAsk::Request(peer.clone())
        } else {
            ClientAsk::Cannot(
                "over stateless HTTP the server can ask a person only on protocol 2026-07-28 or later",
            )
        }
    }

    /// Puts a gadget's question to the person at the client, in the way
    /// the connection allows.
    async fn ask(&self, gadget: &str, call_id: &str, question: &str, caller: &Caller) -> Asked {
        let can_elicit = caller.can_elicit();
        let modern = caller.modern;
        let cannot = |why: &str| {
            Asked::Answered(CallToolResult::error(vec![ContentBlock::text(format!(
                "Gadget '{gadget}' needs a person to answer: {question}\n({why}: answer it in your next message to the model.)"
            ))]))
        };
        if !can_elicit && modern {
            let mut required = ClientCapabilities::default();
            let mut elicitation = ElicitationCapability::new();
            elicitation.form = Some(FormElicitationCapability::default());
            required.elicitation = Some(elicitation);
            return Asked::Refused(McpError::missing_required_client_capability(required));
        }
        if !can_elicit {
            return cannot("This client cannot ask a person (no elicitation capability)");
        }
        let params = elicitation(gadget, question);
        if modern {
            let state = AskState {
                gadget: gadget.to_string(),
                call: call_id.to_string(),
            };
            let mut requests = InputRequests::new();
            requests.insert(
                ASK_HUMAN_KEY.to_string(),
                InputRequest::Elicitation(ElicitRequest::new(params)),
            );
            let state = serde_json::to_string(&state).unwrap_or_default();
            return Asked::Later(InputRequiredResult::new(Some(requests), Some(state)));
        }
        let Some(peer) = caller.out.peer().filter(|_| self.server_requests) else {
            return cannot(
                "Over stateless HTTP the server can ask a person only on protocol 2026-07-28 or later",
            );
        };
        // The person may take a while: the wait is not the gadget's (its
        // instance is gone), and a cancelled call stops waiting.
        let answer = tokio::select! {
            answer = peer.create_elicitation(params) => answer,
            _ = caller.gone.cancelled() => {
                return Asked::Answered(CallToolResult::error(vec![ContentBlock::text(format!(
                    "Gadget '{gadget}' asked a person, and the call was cancelled before they answered."
                ))]));
            }
        };
        Asked::Answered(match answer {
            Ok(result) => answer_result(gadget, result),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
                "Gadget '{gadget}' needs a person to answer: {question}\n(The client could not ask one: {error}.)"
            ))]),
        })
    }

    /// The second half of a stateless ask: the client's answer to the
    /// question `state` names. The gadget does not run again; as in llmist,
    /// the answer is the call's result. `state` is the client's echo and is
    /// not trusted: it must name this tool, and a forged one can only make
    /// the client's own answer its result, which it could write itself.
    fn answered(
        &self,
        name: &str,
        state: Option<&str>,
        response: &Value,
        started: Instant,
    ) -> CallToolResult {
        let served = self.served().find(name).map(|t| t.name().to_string());
        let state: Option<AskState> = state.and_then(|s| serde_json::from_str(s).ok());
        let (Some(served), Some(state)) = (served, state) else {
            self.metrics.rejected("(unknown)", started.elapsed());
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "This call of '{name}' carries an answer (inputResponses.{ASK_HUMAN_KEY}) to no question this server asked of that tool: call it again without inputResponses."
            ))]);
        };
        if state.gadget != served {
            self.metrics.rejected(&served, started.elapsed());
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "This call of '{served}' carries an answer to a question of '{}': call '{served}' again without inputResponses.",
                state.gadget
            ))]);
        }
        let result = match serde_json::from_value::<ElicitResult>(response.clone()) {
            Ok(result) => answer_result(&served, result),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
                "The answer to gadget '{served}''s question (call {}) is not an elicitation result: {error}",
                state.call
            ))]),
        };
        let outcome = if result.is_error == Some(true) {
            CallOutcome::HumanInput
        } else {
            CallOutcome::AskHuman
        };
        self.metrics.answered(&served, outcome, started.elapsed());
        result
    }
}

/// What the call reports while it runs, on its way to the client.
enum Notice {
    Progress(String),
    Measured(f64, Option<f64>, Option<String>),
    Log(LoggingMessageNotificationParam),
}

#[cfg(test)]
mod tests;
