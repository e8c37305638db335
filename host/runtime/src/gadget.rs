//! [`WasmGadget`]: one gadget of a loaded component, a [`Tool`] that runs
//! each call in a fresh instance under its plugin's limits.

use std::sync::Arc;

use gadget_core::access::{Access, Declared, FileAccess};
use gadget_core::limits::Limits;
use gadget_core::tool::{BoxFuture, Tool, ToolCall, ToolCard};

use crate::plugin::Plugin;
use crate::runtime::{GuestAnswer, GuestOp, GuestRun};
use crate::{CallError, CallObserver, CallReport, CallRequest};

/// One gadget, ready to call.
#[derive(Debug)]
pub struct WasmGadget {
    /// Its spec, named as it is served (with the operator's prefix); its
    /// compiled schema; its timeout, and whether the gadget or its
    /// manifest chose it (a run's default timeout does not replace a
    /// chosen one); the calls its exclusive calls run alone among.
    pub card: ToolCard,
    /// The name its component knows it by.
    pub component_name: String,
    pub plugin: Arc<Plugin>,
    /// The plugin's limits with the gadget's own timeout applied.
    pub limits: Limits,
}

impl WasmGadget {
    /// Runs one call with already-validated parameters, under the
    /// gadget's own limits.
    pub async fn invoke(
        &self,
        params: String,
        invocation_id: &str,
        observer: Option<CallObserver>,
    ) -> CallReport {
        let request = CallRequest {
            gadget: self.card.spec.name.clone(),
            component_name: Some(self.component_name.clone()),
            invocation_id: invocation_id.to_string(),
            params,
            limits: self.limits.clone(),
            signal: None,
            observer,
            grants: Some(self.plugin.access.grants.clone()),
            trace_parent: None,
            request_denials: None,
            human: None,
        };
        self.invoke_request(request).await
    }

    /// Runs a call built by the caller (own limits, cancel flag).
    pub async fn invoke_request(&self, request: CallRequest) -> CallReport {
        let run = GuestRun {
            op: GuestOp::Invoke,
            call: request,
        };
        match self.plugin.runtime.run(&self.plugin.pre, run).await {
            Ok(GuestAnswer::Invoked(report)) => report,
            // `Invoke` is answered with a report; anything else is a host
            // bug, the call's failure rather than a panic.
            Ok(_) => CallReport::of(
                Err(CallError::Crashed {
                    gadget: self.card.spec.name.clone(),
                    reason: "the runtime answered a call with another kind of answer".into(),
                }),
                std::time::Duration::ZERO,
            ),
            Err(error) => CallReport::of(Err(error), std::time::Duration::ZERO),
        }
    }
}

impl Tool for WasmGadget {
    fn card(&self) -> &ToolCard {
        &self.card
    }

    fn origin(&self) -> Option<Arc<gadget_core::tool::Origin>> {
        Some(self.plugin.origin.clone())
    }

    /// Its plugin's grants: what the manifest asks for AND the operator
    /// grants.
    fn access(&self) -> Access {
        let grants = &self.plugin.access.grants.grants;
        Access {
            files: grants
                .files
                .iter()
                .map(|f| FileAccess {
                    path: f.guest.clone(),
                    writable: f.mode == crate::manifest::FileMode::ReadWrite,
                })
                .collect(),
            http: grants.http.origins.iter().map(|o| o.describe()).collect(),
            config: grants.config.iter().map(|c| c.key.clone()).collect(),
            llm: grants
                .llm
                .as_ref()
                .map(|llm| llm.models.clone())
                .unwrap_or_default(),
            outside: None,
        }
    }

    fn declared(&self) -> Declared {
        let declared = &self.plugin.access.annotations;
        Declared {
            read_only: declared.read_only,
            destructive: declared.destructive,
            idempotent: declared.idempotent,
            open_world: declared.open_world,
            tasks: self.plugin.access.tasks.support(&self.component_name),
        }
    }

    fn run(&self, call: ToolCall) -> BoxFuture<'_, CallReport> {
        let request = CallRequest {
            gadget: self.card.spec.name.clone(),
            component_name: Some(self.component_name.clone()),
            invocation_id: call.id,
            params: call.params.to_string(),
            limits: Limits {
                timeout: call.deadline.unwrap_or(self.limits.timeout),
                ..self.limits.clone()
            },
            signal: call.signal,
            observer: call.observer,
            grants: Some(self.plugin.access.grants.clone()),
            trace_parent: call.scope.trace.as_ref().map(|t| t.traceparent.clone()),
            request_denials: call.scope.approvals.as_ref().and_then(|a| {
                a.rules.request_denials(
                    &self.card.spec.name,
                    self.card.schema.schema_for_rules(),
                    &call.scope.client,
                )
            }),
            human: call.scope.human.clone(),
        };
        Box::pin(async move {
            let mut report = self.invoke_request(request).await;
            // A plugin granted none of what it asks for is not offered; one
            // called anyway (by name) most likely failed for want of it.
            if !self.plugin.is_available()
                && let Err(CallError::Failed { message } | CallError::InvalidArguments { message }) =
                    &mut report.outcome
            {
                let missing: Vec<String> = self
                    .plugin
                    .missing_grants()
                    .map(|n| n.to_string())
                    .collect();
                message.push_str(&format!(
                    "\n(plugin '{}' is granted none of what it asks for: {})",
                    self.plugin.identity.name,
                    missing.join("; ")
                ));
            }
            report
        })
    }
}
