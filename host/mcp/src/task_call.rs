//! A `tools/call` that runs as a task (the Tasks extension; the store and
//! the task's answerer are in [`crate::tasks`]): whether it does, and
//! starting it on the one call path.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResponse;
use serde_json::Value;

use crate::approval::APPROVAL_KEY;
use crate::server::GadgetServer;
use crate::tasks::TaskPerson;

impl GadgetServer {
    /// Whether this call runs as a task: the gadget's manifest lists it
    /// under `[tasks]` and the request declared the extension (for the
    /// session, or in its own `_meta`). A gadget that runs only as a task
    /// refuses a client without it (`-32021`, naming the extension). A
    /// call that waits for approval runs within the request until it is
    /// approved (the approval is a round trip of the request itself).
    pub(crate) fn as_task(
        &self,
        gadget: &dyn gadget_core::tool::Tool,
        params: &Value,
        request: &rmcp::model::CallToolRequestParams,
        caller: &crate::caller::Caller,
    ) -> Result<bool, McpError> {
        use gadget_core::access::TaskSupport;
        let support = gadget.declared().tasks;
        if support == TaskSupport::Forbidden {
            return Ok(false);
        }
        let declared = caller.supports_tasks();
        if !declared {
            if support == TaskSupport::Required {
                self.metrics
                    .rejected(gadget.name(), caller.started.elapsed());
                return Err(McpError::missing_required_client_capability(
                    rmcp::model::ClientCapabilities::builder()
                        .enable_tasks()
                        .build(),
                ));
            }
            return Ok(false);
        }
        let approved = request
            .input_responses
            .as_ref()
            .is_some_and(|r| r.contains_key(APPROVAL_KEY));
        let waits = matches!(
            self.rules.check_for(
                gadget.name(),
                params,
                gadget.schema().schema_for_rules(),
                &caller.client,
            ),
            gadget_core::approval::Admission::Ask { .. }
        );
        Ok(approved || !waits)
    }

    /// Starts the call as a task and answers with its handle; the call
    /// runs on (its abort signal is the task's, raised by `tasks/cancel`,
    /// the server's shutdown or the task's expiry), and how it ends is
    /// the task's status: a result (a gadget's own error included) is
    /// `completed`; a crash of the component or a protocol error is
    /// `failed`.
    pub(crate) async fn start_task(
        &self,
        gadget: Arc<dyn gadget_core::tool::Tool>,
        params: Value,
        request: &rmcp::model::CallToolRequestParams,
        caller: &crate::caller::Caller,
    ) -> Result<CallToolResponse, McpError> {
        let scope = match self.scope(&*gadget, &params, request, None, caller) {
            Ok(scope) => scope,
            Err(refused) => return Ok((*refused).into()),
        };
        let task = self.tasks.create(&caller.client).await.inspect_err(|_| {
            self.metrics
                .rejected(gadget.name(), caller.started.elapsed());
        })?;
        let mut scope = Arc::unwrap_or_clone(scope);
        scope.human = Some(Arc::new(TaskPerson {
            task: task.clone(),
            kinds: caller.kinds(),
            shared: self.tasks.shared().cloned(),
        }));
        let id = self.call_id();
        let (observer, forward) = self.notifier(&id, gadget.name(), caller);
        self.metrics.started();
        let server = self.clone();
        let caller = caller.clone();
        let handle = task.clone();
        tokio::spawn(async move {
            let name = gadget.name().to_string();
            let forward = tokio::spawn(forward);
            let call = gadget_core::tool::ToolCall {
                id: id.clone(),
                params: Arc::new(params),
                deadline: None,
                signal: Some(handle.signal()),
                observer: Some(observer),
                scope: Arc::new(scope),
            };
            let finished = server.run_until(gadget, call, std::future::pending()).await;
            let _ = forward.await;
            let crashed = match &finished.report.outcome {
                Err(error) if error.kind() == gadget_core::call::FailureKind::Crashed => {
                    Some(error.to_string())
                }
                _ => None,
            };
            let ended = server.result(&name, &id, finished, &caller).await;
            let ended = match crashed {
                Some(why) => Err(McpError::internal_error(why, None)),
                None => ended,
            };
            server.tasks.finish(&handle, ended).await;
        });
        Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
            task.created(),
        )))
    }
}
