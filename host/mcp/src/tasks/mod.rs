//! MCP's Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) over
//! the one call path: a `tools/call` of a gadget its manifest lists under
//! `[tasks]`, from a client that declared the extension, answers at once
//! with a task handle while the call runs on; `tasks/get` tells its status
//! (and inlines the result once it ends), `tasks/update` answers what the
//! running gadget asks (the task waits `input_required` meanwhile, each
//! question under its key, and a partial answer keeps it waiting for the
//! rest), `tasks/cancel` raises the gadget's abort signal.
//!
//! Tasks live in this replica's memory ([`local::TaskStore`]), or, for
//! replicas that share a store (`gadget serve --state`), in that store
//! ([`shared::SharedTasks`]), where any replica answers for them and a
//! replica's death leaves its tasks failed, not lost. Either way they are
//! bounded in number (`MAX_TASKS` running on a replica), age (`TASK_TTL`,
//! `FETCHED_RESULT_TTL` once its result was fetched) and the bytes of the
//! results they keep (`MAX_KEPT_RESULT_BYTES`, all in [`entry`]), found by
//! an unguessable id. A task belongs to the caller that created it
//! (`ClientId`): to anyone else it does not exist (see
//! docs/mcp-and-serving.md).
//!
//! - [`entry`]: one task as the replica running it knows it, the bounds;
//! - [`local`]: the tasks of one replica, in memory;
//! - [`shared`]: the tasks of every replica, in the store they share;
//! - [`person`]: who answers what a task's gadget asks.

mod entry;
mod local;
mod person;
pub(crate) mod shared;

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, DetailedTask};
use serde_json::Value;

use gadget_core::client::ClientId;

pub(crate) use entry::TaskEntry;
use local::TaskStore;
pub(crate) use person::TaskPerson;

/// Where the tasks of a server are: this replica's memory, or the store
/// the replicas share.
pub(crate) enum Tasks {
    Local(TaskStore),
    Shared(Arc<shared::SharedTasks>),
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks::Local(TaskStore::default())
    }
}

impl Tasks {
    /// A new task of `owner`, working.
    pub(crate) async fn create(&self, owner: &ClientId) -> Result<Arc<TaskEntry>, McpError> {
        match self {
            Tasks::Local(store) => store
                .create(owner)
                .map_err(|e| McpError::internal_error(e.to_string(), None)),
            Tasks::Shared(store) => store.create(owner).await,
        }
    }

    /// `tasks/get`.
    pub(crate) async fn detailed(
        &self,
        id: &str,
        caller: &ClientId,
    ) -> Result<DetailedTask, McpError> {
        match self {
            Tasks::Local(store) => store.detailed(id, caller),
            Tasks::Shared(store) => store.detailed(id, caller).await,
        }
    }

    /// `tasks/update`.
    pub(crate) async fn update(
        &self,
        id: &str,
        caller: &ClientId,
        responses: BTreeMap<String, Value>,
    ) -> Result<(), McpError> {
        match self {
            Tasks::Local(store) => store.update(id, caller, responses),
            Tasks::Shared(store) => store.update(id, caller, responses).await,
        }
    }

    /// `tasks/cancel`.
    pub(crate) async fn cancel(&self, id: &str, caller: &ClientId) -> Result<(), McpError> {
        match self {
            Tasks::Local(store) => store.cancel(id, caller),
            Tasks::Shared(store) => store.cancel(id, caller).await,
        }
    }

    /// The call of `task` ended.
    pub(crate) async fn finish(
        &self,
        task: &Arc<TaskEntry>,
        ended: Result<CallToolResponse, McpError>,
    ) {
        match self {
            Tasks::Local(store) => store.finish(task, ended),
            Tasks::Shared(store) => store.finish(task, ended).await,
        }
    }

    /// The store the replicas share, if the tasks are there.
    pub(crate) fn shared(&self) -> Option<&Arc<shared::SharedTasks>> {
        match self {
            Tasks::Local(_) => None,
            Tasks::Shared(store) => Some(store),
        }
    }
}
