//! The plugins' resources and prompts over MCP: `resources/list`,
//! `resources/templates/list`, `resources/read`, `prompts/list`,
//! `prompts/get` and `completion/complete`, from the catalogs of the
//! tools served ([`gadget_core::tool::Tools::catalogs`]). A read, a
//! prompt or a completion runs plugin code, so it goes through the one
//! call path's catalog arm (`gadget_exec::catalog::run_catalog`) in the same
//! scope a tool call gets: the journal, the rules, the rate limits, the
//! trace and the caller; it is stopped when the client goes away. It may
//! ask, as a tool does: over stateless HTTP the request ends
//! `input_required` and is replayed (`crate::replay`), on older sessions
//! the client answers mid-request.
//!
//! An unknown URI is `-32602` with the URI in the error's data (SEP-2164),
//! never an empty result; an unknown prompt or arguments that do not fit
//! it are `-32602` saying what would.

use std::sync::Arc;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, InputResponses, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Reference,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use gadget_core::approval::Approvals;
use gadget_core::ask::Kinds;
use gadget_core::call::CallError;
use gadget_core::catalog::{
    Catalog, CatalogAnswer, CatalogCall, CatalogError, CatalogOp, CompletionRef, MAX_COMPLETIONS,
    check_arguments, complete_from,
};
use gadget_core::content::{ResourceBody, ResourceContents, base64};
use gadget_core::scope::CallScope;
use gadget_core::signal::AbortSignal;
use gadget_core::tool::HumanInput;

use crate::approval::McpApprover;
use crate::caller::Caller;
use crate::content::block;
use crate::inputs::{ClientPerson, capabilities_for};
use crate::replay::{Ended, Replay};
use crate::server::GadgetServer;

/// A result from its JSON (every field the MCP schema names), complete
/// (rmcp drops `resultType` for a client of an older protocol).
fn list<T: serde::de::DeserializeOwned>(mut value: Value) -> Result<T, McpError> {
    value["resultType"] = json!("complete");
    serde_json::from_value(value).map_err(|e| McpError::internal_error(e.to_string(), None))
}

fn contents_json(contents: &ResourceContents) -> Value {
    let mut value = json!({"uri": contents.uri});
    if let Some(mime_type) = &contents.mime_type {
        value["mimeType"] = json!(mime_type);
    }
    match &contents.body {
        ResourceBody::Text(text) => value["text"] = json!(text),
        ResourceBody::Blob(bytes) => value["blob"] = json!(base64(bytes)),
    }
    value
}

/// Who answers what a read or a prompt asks, and the replay that must be
/// checked when it ends (stateless HTTP).
struct Asking {
    replay: Option<Arc<Replay>>,
    scope: Arc<CallScope>,
    caller: Caller,
}

impl GadgetServer {
    fn catalogs(&self) -> Vec<Arc<dyn Catalog>> {
        self.served().catalogs()
    }

    /// The scope of one read or prompt: `binding` and `params` are what
    /// a stateless round trip's state is bound to (with the caller).
    fn asking(
        &self,
        binding: &str,
        params: &Value,
        responses: Option<InputResponses>,
        state: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Asking, McpError> {
        let caller = Caller::of(context);
        let kinds = caller.kinds();
        let (replay, human) = if caller.modern {
            let replay = Replay::new(
                &self.approval_key,
                binding,
                params,
                &caller.client,
                kinds,
                state,
                responses,
            )
            .map_err(|refused| McpError::invalid_params(refused.to_string(), None))?;
            let replay = Arc::new(replay);
            (Some(replay.clone()), Some(replay as Arc<dyn HumanInput>))
        } else if self.server_requests && kinds != Kinds::NONE {
            let person = ClientPerson {
                peer: context.peer.clone(),
                kinds,
            };
            (None, Some(Arc::new(person) as Arc<dyn HumanInput>))
        } else {
            (None, None)
        };
        let scope = self.catalog_scope(human, &caller);
        Ok(Asking {
            replay,
            scope,
            caller,
        })
    }

    /// The scope a catalog request runs in: what a tool call's has (the
    /// rules with this client's person as approver, the journal, the rate
    /// limits, the trace, the caller) and `human` for what it asks.
    fn catalog_scope(&self, human: Option<Arc<dyn HumanInput>>, caller: &Caller) -> Arc<CallScope> {
        let approvals = (!self.rules.is_empty()).then(|| {
            let approver = McpApprover::Ask(self.client_ask(caller));
            Arc::new(Approvals::new(self.rules.clone(), Arc::new(approver)))
        });
        self.scope_of(approvals, human, caller)
    }

    /// Runs `op` in `catalog`'s plugin through the one call path, stopped
    /// when the client goes away or the server shuts down.
    async fn run_catalog(
        &self,
        catalog: &dyn Catalog,
        op: CatalogOp,
        scope: Arc<CallScope>,
        caller: &Caller,
    ) -> Result<CatalogAnswer, CatalogError> {
        let id = format!(
            "mcp_{}",
            self.calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1
        );
        let (observer, forward) = self.notifier(&id, catalog.plugin(), caller);
        let forward = tokio::spawn(forward);
        let signal = AbortSignal::new();
        let call = CatalogCall {
            id,
            op,
            signal: Some(signal.clone()),
            observer: Some(observer),
            scope,
        };
        let run = gadget_exec::catalog::run_catalog(catalog, call);
        let answer = self
            .until_stopped(run, &signal, caller.gone.cancelled())
            .await;
        let _ = forward.await;
        answer
    }

    pub(crate) async fn list_resources_of(&self) -> Result<ListResourcesResult, McpError> {
        self.until_loaded().await;
        let resources: Vec<Value> = self
            .catalogs()
            .iter()
            .flat_map(|c| c.specs().resources.clone())
            .map(|r| {
                json!({"uri": r.uri, "name": r.name, "title": r.title,
                       "description": r.description, "mimeType": r.mime_type, "size": r.size})
            })
            .map(drop_nulls)
            .collect();
        list(json!({ "resources": resources }))
    }

    pub(crate) async fn list_templates_of(&self) -> Result<ListResourceTemplatesResult, McpError> {
        self.until_loaded().await;
        let templates: Vec<Value> = self
            .catalogs()
            .iter()
            .flat_map(|c| c.specs().templates.clone())
            .map(|t| {
                json!({"uriTemplate": t.uri_template, "name": t.name, "title": t.title,
                       "description": t.description, "mimeType": t.mime_type})
            })
            .map(drop_nulls)
            .collect();
        list(json!({ "resourceTemplates": templates }))
    }

    pub(crate) async fn list_prompts_of(&self) -> Result<ListPromptsResult, McpError> {
        self.until_loaded().await;
        let prompts: Vec<Value> = self
            .catalogs()
            .iter()
            .flat_map(|c| c.specs().prompts.clone())
            .map(|p| {
                let arguments: Vec<Value> = p
                    .arguments
                    .iter()
                    .map(|a| {
                        drop_nulls(json!({"name": a.name, "description": a.description,
                                          "required": a.required}))
                    })
                    .collect();
                drop_nulls(json!({"name": p.name, "title": p.title,
                                  "description": p.description, "arguments": arguments}))
            })
            .collect();
        list(json!({ "prompts": prompts }))
    }

    /// `resources/read`: the first catalog that serves the URI reads it.
    pub(crate) async fn read_resource_of(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.until_loaded().await;
        let uri = request.uri.clone();
        let not_found =
            || McpError::invalid_params("Resource not found", Some(json!({"uri": uri})));
        let Some(catalog) = self.catalogs().into_iter().find(|c| c.specs().serves(&uri)) else {
            return Err(not_found());
        };
        let asking = self.asking(
            &format!("resource {uri}"),
            &json!({"uri": uri}),
            request.input_responses.clone(),
            request.request_state.as_deref(),
            &context,
        )?;
        let op = CatalogOp::Read { uri: uri.clone() };
        let read = self
            .run_catalog(&*catalog, op, asking.scope.clone(), &asking.caller)
            .await;
        if let Some(early) = ended(asking.replay.as_deref())? {
            return Ok(early.into());
        }
        match read {
            Ok(CatalogAnswer::Read(contents)) if contents.is_empty() => Err(not_found()),
            Ok(CatalogAnswer::Read(contents)) => {
                let contents: Vec<Value> = contents.iter().map(contents_json).collect();
                Ok(list::<ReadResourceResult>(json!({ "contents": contents }))?.into())
            }
            Ok(_) => Err(failed(catalog.plugin(), mismatched())),
            Err(CatalogError::NotFound { .. }) => Err(not_found()),
            Err(error) => Err(failed(catalog.plugin(), error)),
        }
    }

    /// `prompts/get`: the catalog that has the prompt renders it, once its
    /// arguments fit.
    pub(crate) async fn get_prompt_of(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.until_loaded().await;
        let name = request.name.clone();
        let catalogs = self.catalogs();
        let Some((catalog, prompt)) = catalogs
            .iter()
            .find_map(|c| c.specs().prompt(&name).map(|p| (c, p.clone())))
        else {
            let names: Vec<String> = catalogs
                .iter()
                .flat_map(|c| c.specs().prompts.iter().map(|p| p.name.clone()))
                .collect();
            return Err(McpError::invalid_params(
                format!(
                    "no prompt is named '{name}' (served: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
                Some(json!({"name": name})),
            ));
        };
        let arguments: Vec<(String, String)> = request
            .arguments
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(text) => (k, text),
                other => (k, other.to_string()),
            })
            .collect();
        check_arguments(&prompt, &arguments).map_err(|why| McpError::invalid_params(why, None))?;
        let params = Value::Object(request.arguments.clone().unwrap_or_default());
        let asking = self.asking(
            &format!("prompt {name}"),
            &params,
            request.input_responses.clone(),
            request.request_state.as_deref(),
            &context,
        )?;
        let op = CatalogOp::Prompt { name, arguments };
        let rendered = self
            .run_catalog(&**catalog, op, asking.scope.clone(), &asking.caller)
            .await;
        if let Some(early) = ended(asking.replay.as_deref())? {
            return Ok(early.into());
        }
        let rendered = match rendered.map_err(|error| failed(catalog.plugin(), error))? {
            CatalogAnswer::Prompt(rendered) => rendered,
            _ => return Err(failed(catalog.plugin(), mismatched())),
        };
        let messages: Vec<Value> = rendered
            .messages
            .iter()
            .map(|m| json!({"role": m.role, "content": block(&m.content)}))
            .collect();
        let mut result = json!({ "messages": messages });
        if let Some(description) = rendered.description {
            result["description"] = json!(description);
        }
        Ok(list::<GetPromptResult>(result)?.into())
    }

    /// `completion/complete`: an argument's examples when it has some,
    /// else the plugin's own `complete`.
    pub(crate) async fn complete_of(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.until_loaded().await;
        let catalogs = self.catalogs();
        let argument = request.argument.name.clone();
        let value = request.argument.value.clone();
        let arguments: Vec<(String, String)> = request
            .context
            .and_then(|c| c.arguments)
            .map(|a| a.into_iter().collect())
            .unwrap_or_default();
        let (catalog, reference, offered) = match &request.r#ref {
            Reference::Prompt(p) => {
                let Some((catalog, prompt)) = catalogs
                    .iter()
                    .find_map(|c| c.specs().prompt(&p.name).map(|s| (c, s.clone())))
                else {
                    return Err(McpError::invalid_params(
                        format!("no prompt is named '{}'", p.name),
                        None,
                    ));
                };
                let offered = prompt
                    .arguments
                    .iter()
                    .find(|a| a.name == argument)
                    .map(|a| a.examples.clone())
                    .unwrap_or_default();
                (catalog, CompletionRef::Prompt(p.name.clone()), offered)
            }
            Reference::Resource(r) => {
                let Some(catalog) = catalogs
                    .iter()
                    .find(|c| c.specs().templates.iter().any(|t| t.uri_template == r.uri))
                else {
                    return Err(McpError::invalid_params(
                        format!("no resource template is {}", r.uri),
                        None,
                    ));
                };
                (catalog, CompletionRef::Resource(r.uri.clone()), Vec::new())
            }
            other => {
                return Err(McpError::invalid_params(
                    format!("cannot complete a {} reference", other.reference_type()),
                    None,
                ));
            }
        };
        let mut values = if offered.is_empty() {
            let op = CatalogOp::Complete {
                reference,
                argument,
                value,
                context: arguments,
            };
            let caller = Caller::of(&context);
            let scope = self.catalog_scope(None, &caller);
            match self
                .run_catalog(&**catalog, op, scope, &caller)
                .await
                .map_err(|error| failed(catalog.plugin(), error))?
            {
                CatalogAnswer::Complete(values) => values,
                _ => return Err(failed(catalog.plugin(), mismatched())),
            }
        } else {
            complete_from(&offered, &value)
        };
        values.truncate(MAX_COMPLETIONS);
        let total = values.len();
        list(json!({"completion": {"values": values, "total": total, "hasMore": false}}))
    }
}

/// A read or prompt that ended asking (stateless HTTP): the result that
/// says so, or the error when it cannot be asked.
fn ended(replay: Option<&Replay>) -> Result<Option<rmcp::model::InputRequiredResult>, McpError> {
    match replay.map(Replay::ended) {
        None | Some(Ended::Answered) => Ok(None),
        Some(Ended::Asked(result)) => Ok(Some(result)),
        Some(Ended::Missing(kinds)) => Err(McpError::missing_required_client_capability(
            capabilities_for(kinds),
        )),
        Some(Ended::Failed(why)) => Err(McpError::invalid_params(why, None)),
    }
}

/// A plugin's failure to read or render, as the client is told it.
fn failed(plugin: &str, error: CatalogError) -> McpError {
    match error {
        CatalogError::Failed(CallError::Failed { message })
        | CatalogError::Failed(CallError::InvalidArguments { message }) => {
            McpError::internal_error(format!("plugin '{plugin}': {message}"), None)
        }
        other => McpError::internal_error(format!("plugin '{plugin}': {other}"), None),
    }
}

/// A catalog answer of another kind than its request (a host bug),
/// reported as the request's failure rather than a panic.
fn mismatched() -> CatalogError {
    CatalogError::Failed(CallError::Failed {
        message: "the host answered a catalog request with another kind of answer".into(),
    })
}

/// Drops the `null` fields of an object (absent is how MCP says none).
fn drop_nulls(mut value: Value) -> Value {
    if let Value::Object(fields) = &mut value {
        fields.retain(|_, v| !v.is_null());
    }
    value
}
