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

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, SetLevelRequestParams,
    SubscribeRequestParams, Tool, ToolAnnotations, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;

use gadget_core::approval::Rules;
use gadget_core::scope::Recorder;
use gadget_core::tool::{Tool as GadgetTool, Tools};

use crate::approval::ApprovalKey;
pub use crate::ask::{ANSWER_FIELD, ASK_HUMAN_KEY, MAX_QUESTION_BYTES};
use crate::metrics::Metrics;

/// The server over one set of tools. Cheap to clone: one per MCP session.
#[derive(Clone)]
pub struct GadgetServer {
    /// The tools served (the gadgets, then the policy's agents); replaced
    /// whole when the plugins are reloaded (a call in flight keeps the
    /// tool it started with).
    pub(crate) tools: Arc<std::sync::RwLock<Arc<dyn Tools>>>,
    pub(crate) metrics: Arc<Metrics>,
    /// The least severe log level the client wants (`logging/setLevel`);
    /// warnings and errors until it says.
    pub(crate) level: Arc<Mutex<LoggingLevel>>,
    /// Numbers the calls of this process (invocation ids `mcp_N`).
    pub(crate) calls: Arc<AtomicU64>,
    /// Cancelled when the server stops waiting for calls (end of a drain):
    /// every running call gets its abort signal.
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
    /// Whether a request to the client (`elicitation/create`) can reach it
    /// and be answered during a call: true on stdio, false on stateless
    /// HTTP, where the client's answer would arrive on a request no session
    /// ties back to the call.
    pub(crate) server_requests: bool,
    /// False while the tools are still being loaded (a client may
    /// initialize meanwhile): lists and calls wait for it.
    pub(crate) loaded: tokio::sync::watch::Receiver<bool>,
    /// The operator's approval rules; a call that waits for approval asks
    /// the client's person (see [`crate::approval`]).
    pub(crate) rules: Arc<Rules>,
    /// Signs the state of a stateless approval round trip.
    pub(crate) approval_key: ApprovalKey,
    /// Where every call is recorded (the audit journal), if anywhere.
    pub(crate) recorder: Option<Arc<dyn Recorder>>,
    /// The operator's rate limits, shared by every client.
    pub(crate) rates: Option<Arc<gadget_core::rate::RateLimits>>,
    /// The resource URIs this session subscribed to (`resources/subscribe`):
    /// told `resources/updated` when a reload may have changed them.
    pub(crate) subscriptions: Arc<Mutex<std::collections::BTreeSet<String>>>,
    /// Counts reloads: every `subscriptions/listen` stream (2026-07-28)
    /// is told the lists changed when it moves.
    pub(crate) reloads: Arc<tokio::sync::watch::Sender<u64>>,
    /// The calls running or ended as MCP tasks, shared by every session
    /// of this replica (and every replica, when they share a store).
    pub(crate) tasks: Arc<crate::tasks::Tasks>,
}

/// The most resource URIs one session may subscribe to: each is a
/// notification on every reload.
pub const MAX_SUBSCRIPTIONS: usize = 1024;

/// How long a list or a call waits for the tools still being loaded:
/// past the longest compile a loader allows, so it only fires when
/// loading is stuck.
pub const LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

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
            recorder: None,
            rates: None,
            subscriptions: Arc::default(),
            reloads: Arc::new(tokio::sync::watch::channel(0).0),
            tasks: Arc::default(),
        }
    }

    /// The server for one more session: everything shared but what the
    /// session subscribes to.
    pub fn for_session(&self) -> GadgetServer {
        GadgetServer {
            subscriptions: Arc::default(),
            ..self.clone()
        }
    }

    /// The resource URIs this session subscribed to.
    pub fn subscribed(&self) -> Vec<String> {
        let subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        subscriptions.iter().cloned().collect()
    }

    /// Records every call in `journal`.
    pub fn with_journal(
        mut self,
        journal: Option<Arc<gadget_exec::audit::Journal>>,
    ) -> GadgetServer {
        self.recorder = journal.map(|journal| journal.recorder());
        self
    }

    /// Checks calls against the operator's approval rules; approval
    /// states are signed with `key` (the same on every replica).
    pub fn with_approvals(mut self, rules: Arc<Rules>, key: ApprovalKey) -> GadgetServer {
        self.rules = rules;
        self.approval_key = key;
        self
    }

    /// Holds every call to the operator's rate limits.
    pub fn with_rates(mut self, rates: Option<Arc<gadget_core::rate::RateLimits>>) -> GadgetServer {
        self.rates = rates;
        self
    }

    /// Keeps the tasks and the rate-limit windows in `store`, shared with
    /// the other replicas. Call after [`GadgetServer::with_rates`]; the
    /// HTTP server keeps the lease while it serves.
    pub fn with_state(mut self, store: Arc<crate::state::StateStore>) -> GadgetServer {
        if let Some(rates) = &self.rates {
            rates.share(store.clone());
        }
        let tasks = Arc::new(crate::tasks::shared::SharedTasks::new(store));
        self.tasks = Arc::new(crate::tasks::Tasks::Shared(tasks));
        self
    }

    /// Serves while the tools are still being loaded: lists and calls wait
    /// until `loaded` says true (the loader then calls `replace_tools`).
    pub fn with_loading(mut self, loaded: tokio::sync::watch::Receiver<bool>) -> GadgetServer {
        self.loaded = loaded;
        self
    }

    /// Waits (at most [`LOAD_WAIT`]) for the tools being loaded.
    pub(crate) async fn until_loaded(&self) {
        // Loaded (nearly always): no timer armed, nothing awaited.
        if *self.loaded.borrow() {
            return;
        }
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
        self.reloads.send_modify(|n| *n += 1);
    }

    /// The tools as MCP lists them: the gadgets in name order, then the
    /// agents.
    pub fn tools(&self) -> Vec<Tool> {
        self.served().all().iter().map(|t| tool_of(&**t)).collect()
    }

    /// The tool a call names, with its validated arguments, or the text
    /// of the refusal and the metric label.
    #[allow(clippy::type_complexity, reason = "a private pair of outcomes")]
    pub(crate) fn resolve(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<(Arc<dyn GadgetTool>, Value), (String, String)> {
        let tools = self.served();
        match tools.find(name) {
            Some(tool) => match gadget_exec::call::prepare(&*tool, arguments) {
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
            "source": shown_source(&origin.source),
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

/// A plugin's source as clients see it: an absolute path of this machine
/// is cut to its last two components (`plugins/datetime`), since a remote
/// client has no use for the host's directory layout and should not learn
/// it; a relative path and an `oci://` reference are as the operator
/// wrote them.
fn shown_source(source: &str) -> String {
    if !source.starts_with('/') {
        return source.to_string();
    }
    let mut tail: Vec<&str> = source
        .rsplit('/')
        .filter(|c| !c.is_empty())
        .take(2)
        .collect();
    tail.reverse();
    tail.join("/")
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

impl ServerHandler for GadgetServer {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_completions()
            .enable_tasks()
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
        self.call(request, &crate::caller::Caller::of(&context))
            .await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let caller = crate::caller::client_of(&context);
        Ok(GetTaskResult::new(
            self.tasks.detailed(&request.task_id, &caller).await?,
        ))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = crate::caller::client_of(&context);
        self.tasks
            .update(&request.task_id, &caller, request.input_responses)
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = crate::caller::client_of(&context);
        self.tasks.cancel(&request.task_id, &caller).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.list_resources_of().await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.list_templates_of().await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.read_resource_of(request, context).await
    }

    /// A `subscriptions/listen` stream (2026-07-28) gets what it asks for
    /// of what the server advertises (the SDK intersects the two).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    /// Until the client ends it or the server stops: after each reload,
    /// the lists it listens to changed, and so may the resources it named.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut reloads = self.reloads.subscribe();
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                _ = self.shutdown.cancelled() => return Ok(()),
                changed = reloads.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    // The sink sends only what the stream accepted.
                    let sink = context.sink();
                    let _ = sink.notify_tool_list_changed().await;
                    let _ = sink.notify_prompt_list_changed().await;
                    let _ = sink.notify_resource_list_changed().await;
                    for uri in &uris {
                        let _ = sink.notify_resource_updated(uri.clone()).await;
                    }
                }
            }
        }
    }

    /// Any URI may be subscribed to (a reload may bring its resource);
    /// a reload tells the session `resources/updated` for each.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let mut subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        if subscriptions.len() >= MAX_SUBSCRIPTIONS && !subscriptions.contains(&request.uri) {
            return Err(McpError::invalid_params(
                format!(
                    "this session already subscribes to {MAX_SUBSCRIPTIONS} resources, the most it may; unsubscribe from one first"
                ),
                None,
            ));
        }
        subscriptions.insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let mut subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        subscriptions.remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.list_prompts_of().await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.get_prompt_of(request, context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.complete_of(request, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::shown_source;

    #[test]
    fn clients_see_no_absolute_path_of_the_host() {
        assert_eq!(
            shown_source("/srv/ops/gadget-host/plugins/datetime"),
            "plugins/datetime"
        );
        assert_eq!(shown_source("/plugins/x/"), "plugins/x");
        assert_eq!(shown_source("plugins/calculator"), "plugins/calculator");
        assert_eq!(
            shown_source("oci://127.0.0.1:5000/gadgets/calc:1"),
            "oci://127.0.0.1:5000/gadgets/calc:1"
        );
    }
}
