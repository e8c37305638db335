//! The tasks of one replica, in its memory: what a single machine needs.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, DetailedTask};
use serde_json::Value;

use gadget_core::client::ClientId;

use super::entry::{
    FETCHED_RESULT_TTL, MAX_KEPT_RESULT_BYTES, MAX_TASKS, Phase, State, TASK_TTL, TaskEntry,
    error_object, not_found, now_ms, task_id,
};

/// The tasks of this replica.
pub(crate) struct TaskStore {
    tasks: Mutex<HashMap<String, Arc<TaskEntry>>>,
    /// How long a task is kept: [`TASK_TTL`] (a test shortens it).
    ttl: Duration,
    /// The budget of kept results: [`MAX_KEPT_RESULT_BYTES`] (a test
    /// shrinks it).
    kept_budget: u64,
}

impl Default for TaskStore {
    fn default() -> Self {
        TaskStore {
            tasks: Mutex::default(),
            ttl: TASK_TTL,
            kept_budget: MAX_KEPT_RESULT_BYTES,
        }
    }
}

/// Why a task was not created.
#[derive(Debug, thiserror::Error)]
#[error(
    "this server already keeps {MAX_TASKS} tasks that have not expired; try again later, or call without the tasks extension"
)]
pub(crate) struct TooManyTasks;

impl TaskStore {
    fn tasks(&self) -> MutexGuard<'_, HashMap<String, Arc<TaskEntry>>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new task of `owner`, working. Expired tasks are dropped first;
    /// an expired task still running is stopped.
    pub(crate) fn create(&self, owner: &ClientId) -> Result<Arc<TaskEntry>, TooManyTasks> {
        let mut tasks = self.tasks();
        let now = Instant::now();
        tasks.retain(|_, task| {
            let keep = task.state().expires > now;
            if !keep {
                task.signal.raise();
            }
            keep
        });
        if tasks.len() >= MAX_TASKS {
            return Err(TooManyTasks);
        }
        let id = task_id();
        let entry = Arc::new(TaskEntry::new(id.clone(), owner, self.ttl));
        tasks.insert(id, entry.clone());
        Ok(entry)
    }

    /// The task `caller` made with this id, unless it expired; else
    /// `-32602`, the same answer whether no task has the id or another
    /// caller's does.
    pub(crate) fn get(&self, id: &str, caller: &ClientId) -> Result<Arc<TaskEntry>, McpError> {
        let tasks = self.tasks();
        match tasks.get(id) {
            Some(task) if task.state().expires > Instant::now() && caller.owns(&task.owner) => {
                Ok(task.clone())
            }
            _ => Err(not_found(id)),
        }
    }

    /// `tasks/get`: the task as its owner sees it. Once it shows an
    /// ended task's result, the task is kept only [`FETCHED_RESULT_TTL`]
    /// longer.
    pub(crate) fn detailed(&self, id: &str, caller: &ClientId) -> Result<DetailedTask, McpError> {
        let task = self.get(id, caller)?;
        let detailed = task.detailed();
        if task.is_terminal() {
            let mut state = task.state();
            state.expires = state.expires.min(Instant::now() + FETCHED_RESULT_TTL);
        }
        Ok(detailed)
    }

    /// The call of `task` ended: its result is kept, and the oldest ended
    /// tasks' results are dropped while the kept results are over the
    /// budget (this one's last: one result alone is within the limits).
    pub(crate) fn finish(&self, task: &TaskEntry, ended: Result<CallToolResponse, McpError>) {
        task.finish(ended);
        let tasks = self.tasks();
        let mut kept: Vec<(Instant, &Arc<TaskEntry>, u64)> = tasks
            .values()
            .filter_map(|t| {
                let state = t.state();
                Some((state.ended?, t, state.kept_bytes))
            })
            .filter(|(_, _, bytes)| *bytes > 0)
            .collect();
        let mut total: u64 = kept.iter().map(|(_, _, bytes)| bytes).sum();
        if total <= self.kept_budget {
            return;
        }
        kept.sort_by_key(|(at, t, _)| (std::ptr::eq(&***t, task), *at));
        for (_, dropped, bytes) in kept {
            if total <= self.kept_budget {
                break;
            }
            let mut state = dropped.state();
            state.phase = Phase::Failed(error_object(
                -32603,
                &format!(
                    "the result was dropped: this server keeps at most {} MiB of task results, and newer ones took its place; call again",
                    self.kept_budget >> 20
                ),
            ));
            state.kept_bytes = 0;
            state.updated_ms = now_ms();
            total -= bytes;
        }
    }

    /// `tasks/cancel`: raises the abort signal of a running task; a task
    /// that ended stays as it ended.
    pub(crate) fn cancel(&self, id: &str, caller: &ClientId) -> Result<(), McpError> {
        let task = self.get(id, caller)?;
        if !task.is_terminal() {
            task.state().cancel_requested = true;
            task.signal.raise();
        }
        Ok(())
    }

    /// `tasks/update`: files the answers to questions the task waits on
    /// (an answer to no pending question, or not of its question's shape,
    /// is ignored) and wakes the gadget.
    pub(crate) fn update(
        &self,
        id: &str,
        caller: &ClientId,
        responses: BTreeMap<String, Value>,
    ) -> Result<(), McpError> {
        let task = self.get(id, caller)?;
        {
            let mut state = task.state();
            let State { phase, answers, .. } = &mut *state;
            if let Phase::InputRequired(open) = phase {
                for (key, response) in responses {
                    if open.contains_key(&key) {
                        open.remove(&key);
                        answers.insert(key, response);
                    }
                }
            }
            state.updated_ms = now_ms();
        }
        task.updates.send_modify(|n| *n += 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
