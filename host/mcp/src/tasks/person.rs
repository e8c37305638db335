//! Who answers what a task's gadget asks: the client, through `tasks/get`
//! (the questions) and `tasks/update` (the answers), on this replica or,
//! when the replicas share a store, on any of them.

use std::sync::Arc;

use rmcp::model::{InputRequest as McpInputRequest, InputRequests};

use gadget_core::ask::{AskFailure, InputRequest, Kinds};
use gadget_core::tool::{Answer, HumanInput, Replies};

use super::entry::{Phase, TaskEntry, now_ms, replies};
use super::shared::SharedTasks;
use crate::inputs::{declared, input_request};

/// Who answers what a task's gadget asks: the client, through
/// `tasks/get` (the questions) and `tasks/update` (the answers).
pub(crate) struct TaskPerson {
    pub(crate) task: Arc<TaskEntry>,
    /// What the client declared it answers.
    pub(crate) kinds: Kinds,
    /// Where the questions and answers are kept when the replicas share
    /// them (the answer may come to any replica).
    pub(crate) shared: Option<Arc<SharedTasks>>,
}

impl HumanInput for TaskPerson {
    // The call's own question is answered the MCP way (call.rs).
    fn answers_outcome(&self) -> bool {
        false
    }

    /// An older gadget's ask-human outcome is not answered in a task.
    fn ask<'a>(&'a self, _call_id: &'a str, _gadget: &'a str, _question: &'a str) -> Answer<'a> {
        Box::pin(async { Err("a task cannot carry an ask-human outcome".to_string()) })
    }

    fn answerable(&self) -> Kinds {
        self.kinds
    }

    fn inputs<'a>(
        &'a self,
        _call_id: &'a str,
        gadget: &'a str,
        requests: &'a [InputRequest],
    ) -> Replies<'a> {
        Box::pin(async move {
            let mut open = InputRequests::new();
            for request in requests {
                declared(self.kinds, request)?;
                let Some(asked): Option<McpInputRequest> = input_request(gadget, request) else {
                    return Err(AskFailure::Invalid(format!(
                        "question '{}' cannot be sent as an MCP request",
                        request.key
                    )));
                };
                open.insert(request.key.clone(), asked);
            }
            let mut updates = self.task.updates.subscribe();
            if let Some(store) = &self.shared {
                return store
                    .ask(&self.task, gadget, requests, open, &mut updates)
                    .await;
            }
            {
                let mut state = self.task.state();
                state.answers.clear();
                state.phase = Phase::InputRequired(open);
                state.updated_ms = now_ms();
            }
            loop {
                if let Some(replies) = replies(&self.task, gadget, requests) {
                    self.task.set(Phase::Working);
                    return Ok(replies);
                }
                // The abort signal (tasks/cancel, the deadline) ends the
                // wait in the ask door, which drops this future.
                if updates.changed().await.is_err() {
                    return Err(AskFailure::Cancelled);
                }
            }
        })
    }
}
