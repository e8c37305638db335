//! The MCP server: every loaded, granted, allowed gadget as a tool.
//!
//! - `tools/list`: name, title (the label), description, `inputSchema`, and
//!   annotations: what the manifest declares, overridden by what the grants
//!   imply (a plugin with HTTP or a read-write directory is neither
//!   read-only nor closed-world, whatever it says).
//! - `tools/call`: the arguments validated as `gadget call` validates them,
//!   then one call in a fresh instance with all its limits and grants. A
//!   gadget error, a validation error or a timeout is a result with
//!   `isError: true` and the text the model would read; details become
//!   structured content.
//! - While a call runs, its progress becomes progress notifications (when
//!   the client sent a progress token) and its logs become log messages at
//!   or above the client's level; `notifications/cancelled` raises the
//!   call's abort signal.
//! - *ask-human*: the gadget's question goes to the person through MCP
//!   elicitation and their answer is the call's result, as llmist makes it.
//!   On protocol 2026-07-28 and later this is stateless (the result is
//!   `input_required` with one form elicitation; the client calls again with
//!   the answer in `inputResponses`), so it works behind a load balancer.
//!   On older protocols over stdio the server asks with `elicitation/create`
//!   while the call waits. A client that cannot elicit (or stateless HTTP on
//!   an older protocol, where a server request has no way back) gets an
//!   error result carrying the question.
//! - A call the operator's rules make wait for approval asks the client's
//!   person the same ways ([`crate::approval`]); a deny rule refuses it.

// MCP log messages (`logging/setLevel`, `notifications/message`) are what
// clients show today; rmcp 3.1 marks them deprecated for a SEP that has no
// replacement yet.
#![allow(deprecated, reason = "MCP logging has no replacement yet (SEP-2577)")]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitResult, Implementation, InitializeResult, InputRequest, InputRequests,
    InputRequiredResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, SetLevelRequestParams,
    Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;

use gadget_core::call::Outcome;
use gadget_core::ledger::CallEvent;
use gadget_core::tool::{Tool as GadgetTool, Tools};

use crate::approval::{APPROVAL_KEY, ApprovalKey, ClientAsk, McpApprover};
use crate::ask::{
    ClientPerson, answer_result, can_elicit, elicitation, elicits_mid_call, is_modern,
};
use crate::logs::{level_rank, mcp_level, operator_log};
use crate::metrics::{CallOutcome, Metrics};
use gadget_core::approval::{ApprovalEvent, Approvals, Rules};

/// The server over one set of tools. Cheap to clone: one per MCP session.
#[derive(Clone)]
pub struct GadgetServer {
    /// The tools served (the gadgets, then the policy's agents); replaced
    /// whole when the plugins are reloaded (a call in flight keeps the
    /// tool it started with).
    tools: Arc<std::sync::RwLock<Arc<dyn Tools>>>,
    metrics: Arc<Metrics>,
    /// The least severe log level the client wants (`logging/setLevel`);
    /// warnings and errors until it says.
    level: Arc<Mutex<LoggingLevel>>,
    /// Numbers the calls of this process (invocation ids `mcp_N`).
    calls: Arc<AtomicU64>,
    /// Cancelled when the server stops waiting for calls (end of a drain):
    /// every running call gets its abort signal.
    shutdown: tokio_util::sync::CancellationToken,
    /// Whether a request to the client (`elicitation/create`) can reach it
    /// and be answered during a call: true on stdio, false on stateless
    /// HTTP, where the client's answer would arrive on a request no session
    /// ties back to the call.
    server_requests: bool,
    /// False while the tools are still being loaded (a client may
    /// initialize meanwhile): lists and calls wait for it.
    loaded: tokio::sync::watch::Receiver<bool>,
    /// The operator's approval rules; a call that waits for approval asks
    /// the client's person (see [`crate::approval`]).
    rules: Arc<Rules>,
    /// Signs the state of a stateless approval round trip.
    approval_key: ApprovalKey,
    /// The audit journal every call is recorded in, if any.
    journal: Option<Arc<gadget_exec::audit::Journal>>,
}

/// How long a list or a call waits for the tools still being loaded:
/// past the longest compile a loader allows, so it only fires when
/// loading is stuck.
pub const LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// The key of the one input request an ask-human outcome makes, and of
/// the answer the client sends back.
pub const ASK_HUMAN_KEY: &str = "ask_human";

/// The field of the elicitation form that holds the person's answer.
pub const ANSWER_FIELD: &str = "answer";

/// Longest question put in an elicitation, in bytes: what a person reads
/// in a dialog; the gadget's whole question stays in the error text of a
/// client that cannot ask.
pub const MAX_QUESTION_BYTES: usize = 16 << 10;

impl GadgetServer {
    pub fn new(tools: Arc<dyn Tools>, metrics: Arc<Metrics>) -> GadgetServer {
        GadgetServer {
            tools: Arc::new(std::sync::RwLock::new(tools)),
            metrics,
            level: Arc::new(Mutex::new(LoggingLevel::Warning)),
            calls: Arc::new(AtomicU64::new(0)),
            shutdown: tokio_util::sync::CancellationToken::new(),
            server_requests: false,
            loaded: tokio::sync::watch::channel(true).1,
            rules: Arc::new(Rules::none()),
            approval_key: ApprovalKey::random(),
            journal: None,
        }
    }

    /// Records every call in `journal`.
    pub fn with_journal(
        mut self,
        journal: Option<Arc<gadget_exec::audit::Journal>>,
    ) -> GadgetServer {
        self.journal = journal;
        self
    }

    /// Checks calls against the operator's approval rules; approval
    /// states are signed with `key` (the same on every replica).
    pub fn with_approvals(mut self, rules: Arc<Rules>, key: ApprovalKey) -> GadgetServer {
        self.rules = rules;
        self.approval_key = key;
        self
    }

    /// Serves while the tools are still being loaded: lists and calls wait
    /// until `loaded` says true (the loader then calls `replace_tools`).
    pub fn with_loading(mut self, loaded: tokio::sync::watch::Receiver<bool>) -> GadgetServer {
        self.loaded = loaded;
        self
    }

    /// Waits (at most [`LOAD_WAIT`]) for the tools being loaded.
    async fn until_loaded(&self) {
        let mut loaded = self.loaded.clone();
        let _ = tokio::time::timeout(LOAD_WAIT, loaded.wait_for(|done| *done)).await;
    }

    /// Whether the transport carries requests to the client and their
    /// answers back during a call (stdio: yes; stateless HTTP: no). Only
    /// then does ask-human use `elicitation/create` on protocols before
    /// 2026-07-28.
    pub fn with_server_requests(mut self, server_requests: bool) -> GadgetServer {
        self.server_requests = server_requests;
        self
    }

    /// Calls get their abort signal when `shutdown` is cancelled.
    pub fn with_shutdown(mut self, shutdown: tokio_util::sync::CancellationToken) -> GadgetServer {
        self.shutdown = shutdown;
        self
    }

    /// The tools now served.
    pub fn served(&self) -> Arc<dyn Tools> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Serves `tools` from now on (a reload); calls in flight finish with
    /// the tools they started with.
    pub fn replace_tools(&self, tools: Arc<dyn Tools>) {
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = tools;
    }

    /// The tools as MCP lists them: the gadgets in name order, then the
    /// agents.
    pub fn tools(&self) -> Vec<Tool> {
        self.served().all().iter().map(|t| tool_of(&**t)).collect()
    }

    /// The tool a call names, with its validated arguments, or the text
    /// of the refusal and the metric label.
    #[allow(clippy::type_complexity, reason = "a private pair of outcomes")]
    fn resolve(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<(Arc<dyn GadgetTool>, Value), (String, String)> {
        let tools = self.served();
        match tools.find(name) {
            Some(tool) => match gadget_exec::call::validate(&*tool, arguments) {
                Ok(params) => Ok((tool, params)),
                Err(failure) => Err((failure.to_string(), tool.name().to_string())),
            },
            // A name nobody serves is not a label: clients choose it, and
            // metric labels must stay a bounded set.
            None => Err((tools.refusal(name), "(unknown)".to_string())),
        }
    }
}

/// One tool (a gadget, an agent) as an MCP tool.
pub fn tool_of(tool: &dyn GadgetTool) -> Tool {
    let schema = match tool.schema().schema() {
        Some(Value::Object(object)) => object.clone(),
        // A tool without parameters takes an empty object.
        _ => serde_json::json!({"type": "object", "properties": {}})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    };
    let spec = tool.spec();
    let mut served = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(schema),
    );
    if let Some(label) = &spec.label {
        served = served.with_title(label.clone());
    }
    // Where a plugin's tool comes from, for clients and gateways that
    // check: its plugin, source, component digest and signature.
    if let Some(origin) = tool.origin() {
        let mut provenance = serde_json::json!({
            "plugin": origin.plugin,
            "source": origin.source,
            "signature": origin.signature,
        });
        // A tool with no component (an upstream MCP server's) has no digest.
        if !origin.digest.is_empty() {
            provenance["sha256"] = origin.digest.clone().into();
        }
        let mut meta = serde_json::Map::new();
        meta.insert(PROVENANCE_META.to_string(), provenance);
        served.meta = Some(meta.into());
    }
    served.with_annotations(annotations(tool))
}

/// The `_meta` key of a tool's provenance in `tools/list` (MCP's
/// reverse-DNS prefix rule for `_meta` keys).
pub const PROVENANCE_META: &str = "dev.gadget-host/provenance";

/// What the tool declares, with its access's word over it: reaching the
/// network or writing a directory is neither read-only nor closed-world.
pub fn annotations(tool: &dyn GadgetTool) -> ToolAnnotations {
    let effects = tool.access().effects(&tool.declared());
    let mut annotations = match &tool.spec().label {
        Some(label) => ToolAnnotations::with_title(label.clone()),
        None => ToolAnnotations::new(),
    };
    annotations = annotations.read_only(effects.read_only);
    if let Some(destructive) = effects.destructive {
        annotations = annotations.destructive(destructive);
    }
    if let Some(idempotent) = effects.idempotent {
        annotations = annotations.idempotent(idempotent);
    }
    annotations.open_world(effects.open_world)
}

/// What became of a gadget's question.
enum Asked {
    /// The call's result: the person's answer, or why there is none.
    Answered(CallToolResult),
    /// The client is to ask and call again (protocol 2026-07-28 and later).
    Later(InputRequiredResult),
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
    fn client_ask(&self, context: &RequestContext<RoleServer>) -> ClientAsk {
        let can_elicit = can_elicit(context);
        let modern = is_modern(context);
        if !can_elicit {
            ClientAsk::Cannot("this client cannot ask a person (no elicitation capability)")
        } else if modern {
            ClientAsk::RoundTrip
        } else if self.server_requests {
            ClientAsk::Request(context.peer.clone())
        } else {
            ClientAsk::Cannot(
                "over stateless HTTP the server can ask a person only on protocol 2026-07-28 or later",
            )
        }
    }

    /// Puts a gadget's question to the person at the client, in the way
    /// the connection allows.
    async fn ask(
        &self,
        gadget: &str,
        call_id: &str,
        question: &str,
        context: &RequestContext<RoleServer>,
    ) -> Asked {
        let can_elicit = can_elicit(context);
        let modern = is_modern(context);
        let cannot = |why: &str| {
            Asked::Answered(CallToolResult::error(vec![ContentBlock::text(format!(
                "Gadget '{gadget}' needs a person to answer: {question}\n({why}: answer it in your next message to the model.)"
            ))]))
        };
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
        if !self.server_requests {
            return cannot(
                "Over stateless HTTP the server can ask a person only on protocol 2026-07-28 or later",
            );
        }
        // The person may take a while: the wait is not the gadget's (its
        // instance is gone), and a cancelled call stops waiting.
        let answer = tokio::select! {
            answer = context.peer.create_elicitation(params) => answer,
            _ = context.ct.cancelled() => {
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
    Log(LoggingMessageNotificationParam),
}

impl ServerHandler for GadgetServer {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("gadget-host", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools are gadgets running as sandboxed WebAssembly components: each call runs in a fresh instance with only what the operator granted.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.until_loaded().await;
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.level.lock().unwrap_or_else(|p| p.into_inner()) = request.level;
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.until_loaded().await;
        let started = Instant::now();
        let name = request.name.to_string();
        if let Some(responses) = &request.input_responses
            && let Some(response) = responses.get(ASK_HUMAN_KEY)
        {
            return Ok(self
                .answered(&name, request.request_state.as_deref(), response, started)
                .into());
        }
        // Metrics and messages use the name as served, whatever the case
        // the client wrote.
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let (gadget, params) = match self.resolve(&name, arguments) {
            Ok(resolved) => resolved,
            Err((text, label)) => {
                self.metrics.rejected(&label, started.elapsed());
                if let Some(journal) = &self.journal {
                    let kind = if label == "(unknown)" {
                        gadget_core::call::FailureKind::UnknownGadget
                    } else {
                        gadget_core::call::FailureKind::InvalidParameters
                    };
                    let failure = gadget_exec::Failure::new(kind, text.clone());
                    journal.refused("(mcp)", &name, &failure);
                }
                return Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into());
            }
        };
        let name = gadget.name().to_string();
        // The second half of an approval round trip: the state must bind
        // this very call, else nothing runs.
        let approver = match request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(APPROVAL_KEY))
        {
            Some(reply) => {
                if let Err(why) = crate::approval::check_state(
                    &self.approval_key,
                    request.request_state.as_deref(),
                    &name,
                    &params,
                    self.rules.timeout(),
                ) {
                    self.metrics.rejected(&name, started.elapsed());
                    return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "This call of '{name}' carries an approval that does not hold: {why}. Call it again without inputResponses to ask for approval."
                    ))])
                    .into());
                }
                McpApprover::Answered(crate::approval::verdict_of(reply))
            }
            None => McpApprover::Ask(self.client_ask(&context)),
        };
        let approvals = (!self.rules.is_empty())
            .then(|| Arc::new(Approvals::new(self.rules.clone(), Arc::new(approver))));
        let id = format!("mcp_{}", self.calls.fetch_add(1, Ordering::Relaxed) + 1);
        let call_id = id.clone();

        // Progress and logs leave through a channel: the observer runs on
        // the call's task and must not wait for the client.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Notice>();
        let min_level = level_rank(*self.level.lock().unwrap_or_else(|p| p.into_inner()));
        let gadget_name = name.clone();
        let logged_id = id.clone();
        let observer: gadget_core::ledger::CallObserver =
            Arc::new(move |event: &CallEvent| match event {
                CallEvent::Progress(message) => {
                    let _ = tx.send(Notice::Progress(message.clone()));
                }
                CallEvent::Log(entry) => {
                    // The operator's log (stderr, filtered by -v or
                    // RUST_LOG with the target `gadget`), then the client's
                    // at its level.
                    operator_log(&logged_id, &gadget_name, entry);
                    if level_rank(mcp_level(entry.level)) < min_level {
                        return;
                    }
                    let data = serde_json::json!({
                        "message": entry.message,
                        "fields": entry.fields,
                        "source": entry.source,
                    });
                    let mut param =
                        LoggingMessageNotificationParam::new(mcp_level(entry.level), data);
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
        let progress_token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let forward = tokio::spawn(async move {
            let mut step = 0.0;
            while let Some(notice) = rx.recv().await {
                match notice {
                    Notice::Progress(message) => {
                        if let Some(token) = &progress_token {
                            step += 1.0;
                            let mut param = ProgressNotificationParam::new(token.clone(), step);
                            param.message = Some(message);
                            let _ = peer.notify_progress(param).await;
                        }
                    }
                    Notice::Log(param) => {
                        let _ = peer.notify_logging_message(param).await;
                    }
                }
            }
        });

        // notifications/cancelled (or the session ending) raises the abort
        // signal; the gadget gets its grace period, then the instance stops.
        let cancel = Arc::new(AtomicBool::new(false));
        let raise = cancel.clone();
        let cancelled = context.ct.clone();
        let shutdown = self.shutdown.clone();
        let watcher = tokio::spawn(async move {
            tokio::select! {
                _ = cancelled.cancelled() => {}
                _ = shutdown.cancelled() => {}
            }
            raise.store(true, Ordering::Relaxed);
        });

        self.metrics.started();
        // The one call path (gadget-exec): a panic under it is this call's
        // `crashed` failure (counted, answered, its slot freed); dropping
        // the request (the client went away) drops the call and stops it.
        // A question is answered here, the MCP way (elicitation or an
        // input-required round trip), not by a handler in the path.
        // What a tool asks mid-call (an upstream server's elicitation) goes
        // to this client's person, when it can be asked while a call runs.
        let ask = (self.server_requests && elicits_mid_call(&context)).then(|| {
            Arc::new(ClientPerson {
                peer: context.peer.clone(),
            }) as Arc<dyn gadget_exec::HumanInput>
        });
        let options = gadget_exec::call::CallOptions {
            invocation_id: id,
            timeout: None,
            cancel: Some(cancel),
            observer: Some(observer),
            human: None,
            ask,
            approvals,
            journal: self.journal.clone(),
            trace: crate::trace::parent_of(&context),
        };
        let finished = gadget_exec::call::run(gadget.clone(), Arc::new(params), options).await;
        watcher.abort();
        let _ = forward.await;
        if let Some(request) = finished.deferred {
            self.metrics
                .finished(&name, CallOutcome::InputRequired, started.elapsed());
            return Ok(crate::approval::input_required(&self.approval_key, &request).into());
        }
        let report = finished.report;
        let result = match report.outcome {
            Ok(Outcome::Result { result, details }) | Ok(Outcome::Finish { result, details }) => {
                self.metrics
                    .finished(&name, CallOutcome::Ok, started.elapsed());
                let mut done = CallToolResult::success(vec![ContentBlock::text(result)]);
                done.structured_content = details.map(|d| match d {
                    Value::Object(_) => d,
                    other => serde_json::json!({ "details": other }),
                });
                done
            }
            Ok(Outcome::AskHuman { question }) => {
                let asked = self.ask(&name, &call_id, &question, &context).await;
                let outcome = match &asked {
                    Asked::Later(_) => CallOutcome::InputRequired,
                    Asked::Answered(answer) if answer.is_error == Some(true) => {
                        CallOutcome::HumanInput
                    }
                    Asked::Answered(_) => CallOutcome::AskHuman,
                };
                self.metrics.finished(&name, outcome, started.elapsed());
                match asked {
                    Asked::Answered(result) => result,
                    Asked::Later(input_required) => return Ok(input_required.into()),
                }
            }
            Err(error) => {
                self.metrics
                    .finished(&name, CallOutcome::Failed(error.kind()), started.elapsed());
                CallToolResult::error(vec![ContentBlock::text(error.to_string())])
            }
        };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ElicitRequestParams;

    fn server() -> GadgetServer {
        GadgetServer::new(
            Arc::new(gadget_core::tool::Toolbox::new()),
            Arc::new(Metrics::new()),
        )
    }

    fn text(result: &CallToolResult) -> String {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    #[test]
    fn an_answer_to_no_question_is_refused_and_runs_nothing() {
        let accept = serde_json::json!({"action": "accept", "content": {"answer": "yes"}});
        for state in [
            None,
            Some("not json"),
            Some(r#"{"gadget":"AskUser","call":"mcp_1"}"#),
        ] {
            // No tool of that name is served: whatever the state says.
            let result = server().answered("AskUser", state, &accept, Instant::now());
            assert_eq!(result.is_error, Some(true));
            assert!(
                text(&result).contains("no question this server asked"),
                "{}",
                text(&result)
            );
        }
    }

    #[test]
    fn an_answer_counts_only_for_the_tool_that_asked() {
        // A served tool (the built-in viewer, served as any tool is).
        let limiter = Arc::new(Mutex::new(gadget_core::viewer::OutputLimiter::new(100)));
        let mut tools = gadget_core::tool::Toolbox::new();
        let _ = tools.insert(Arc::new(gadget_core::viewer::OutputViewer::new(limiter)));
        let server = GadgetServer::new(Arc::new(tools), Arc::new(Metrics::new()));
        let accept = serde_json::json!({"action": "accept", "content": {"answer": "yes"}});
        let other = r#"{"gadget":"AskUser","call":"mcp_1"}"#;
        let result = server.answered("GadgetOutputViewer", Some(other), &accept, Instant::now());
        assert_eq!(result.is_error, Some(true));
        assert!(
            text(&result).contains("carries an answer to a question of 'AskUser'"),
            "{}",
            text(&result)
        );
        let own = r#"{"gadget":"GadgetOutputViewer","call":"mcp_2"}"#;
        let result = server.answered("gadgetoutputviewer", Some(own), &accept, Instant::now());
        assert_eq!(
            (text(&result), result.is_error),
            ("yes".into(), Some(false))
        );
    }

    #[test]
    fn a_reply_becomes_the_result_or_says_why_not() {
        let reply = |v: Value| answer_result("AskUser", serde_json::from_value(v).unwrap());
        let ok = reply(serde_json::json!({"action": "accept", "content": {"answer": "blue"}}));
        assert_eq!((text(&ok), ok.is_error), ("blue".into(), Some(false)));
        // A client that sent other fields: the person's words are kept whole.
        let other = reply(serde_json::json!({"action": "accept", "content": {"colour": "red"}}));
        assert_eq!(text(&other), r#"{"colour":"red"}"#);
        let declined = reply(serde_json::json!({"action": "decline"}));
        assert_eq!(declined.is_error, Some(true));
        assert!(text(&declined).contains("declined"));
        let cancelled = reply(serde_json::json!({"action": "cancel"}));
        assert!(text(&cancelled).contains("dismissed"));
    }

    #[test]
    fn a_long_question_is_cut_for_the_dialog() {
        let question = "why? ".repeat(10_000);
        let ElicitRequestParams::FormElicitationParams { message, .. } =
            elicitation("AskUser", &question)
        else {
            panic!("a form");
        };
        assert!(
            message.len() <= MAX_QUESTION_BYTES + 64,
            "{}",
            message.len()
        );
    }
}
