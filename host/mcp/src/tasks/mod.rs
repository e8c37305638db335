//! MCP's Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) over
//! the one call path: a `tools/call` of a gadget its manifest lists under
//! `[tasks]`, from a client that declared the extension, answers at once
//! with a task handle while the call runs on; `tasks/get` tells its status
//! (and inlines the result once it ends), `tasks/update` answers what the
//! running gadget asks (the task waits `input_required` meanwhile, each
//! question under its key, and a partial answer keeps it waiting for the
//! rest), `tasks/cancel` raises the gadget's abort signal.
//!
//! Tasks live in this replica's memory ([`TaskStore`]), or, for replicas
//! that share a store (`gadget serve --state`), in that store
//! ([`shared::SharedTasks`]), where any replica answers for them and a
//! replica's death leaves its tasks failed, not lost. Either way they are
//! bounded in number ([`MAX_TASKS`] running on a replica), age
//! ([`TASK_TTL`], [`FETCHED_RESULT_TTL`] once its result was fetched) and
//! the bytes of the results they keep ([`MAX_KEPT_RESULT_BYTES`]), found
//! by an unguessable id. A task belongs to the caller that created it
//! ([`ClientId`]): to anyone else it does not exist (see
//! docs/mcp-and-serving.md).

pub(crate) mod shared;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, DetailedTask, InputRequest as McpInputRequest, InputRequests, JsonObject,
    Task, TaskPayload, TaskStatus,
};
use serde_json::Value;

use gadget_core::ask::{AskFailure, InputRequest, Kinds, Reply};
use gadget_core::client::ClientId;
use gadget_core::signal::AbortSignal;
use gadget_core::tool::{Answer, HumanInput, Replies};

use crate::inputs::{declared, input_request, reply_of};

/// The most tasks one replica keeps, running or ended: each holds its
/// result (up to the result limit) until it expires, so this caps their
/// memory. Creating one more, when every slot holds a task that has not
/// expired, is refused.
pub const MAX_TASKS: usize = 1024;

/// How long a task is kept after it is created (its `ttlMs`): long
/// enough for a client to come back for a long call's result, short
/// enough that results do not pile up.
pub const TASK_TTL: Duration = Duration::from_secs(30 * 60);

/// How long a task is kept once its result was fetched by `tasks/get`:
/// the client has it, so the server need not hold it for the whole
/// [`TASK_TTL`]; a little while so a lost response can be fetched again.
pub const FETCHED_RESULT_TTL: Duration = Duration::from_secs(60);

/// The most bytes of results (as JSON) the tasks of this replica keep at
/// once: a result may be up to the 4 MiB result limit and is kept for
/// [`TASK_TTL`], so without a bound a few hundred tasks would hold a GiB.
/// 64 MiB keeps sixteen results of the largest size, and thousands of
/// ordinary ones. Past it, the oldest ended tasks' results are dropped
/// (their status says so).
pub const MAX_KEPT_RESULT_BYTES: u64 = 64 << 20;

/// How often a client is told to poll `tasks/get` (`pollIntervalMs`).
pub const TASK_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Where a task is.
#[derive(Debug, Clone)]
enum Phase {
    Working,
    /// Waiting for the answers to these questions, by key.
    InputRequired(InputRequests),
    Completed(JsonObject),
    Failed(JsonObject),
    Cancelled,
}

/// What one task knows of itself.
struct State {
    phase: Phase,
    /// When it is dropped: [`TASK_TTL`] after it was made, sooner once
    /// its result was fetched.
    expires: Instant,
    /// The bytes of its kept result (counted in the store's budget).
    kept_bytes: u64,
    /// When it ended (the order its result is dropped in, oldest first).
    ended: Option<Instant>,
    updated_ms: u64,
    /// `tasks/cancel` came while it ran: however the call ends, the task
    /// ends cancelled.
    cancel_requested: bool,
    /// Answers given so far to the questions it waits on.
    answers: HashMap<String, Value>,
}

/// One task.
pub(crate) struct TaskEntry {
    id: String,
    /// Who created it: the only caller it answers.
    owner: ClientId,
    created_ms: u64,
    ttl: Duration,
    signal: AbortSignal,
    state: Mutex<State>,
    /// Bumped by every `tasks/update`, so the waiting gadget looks again.
    updates: tokio::sync::watch::Sender<u64>,
}

impl TaskEntry {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, phase: Phase) {
        let mut state = self.state();
        state.phase = phase;
        state.updated_ms = now_ms();
    }

    /// The signal `tasks/cancel` raises.
    pub(crate) fn signal(&self) -> AbortSignal {
        self.signal.clone()
    }

    #[cfg(test)]
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// A new task of `owner`, working, kept for `ttl`.
    fn new(id: String, owner: &ClientId, ttl: Duration) -> TaskEntry {
        let created_ms = now_ms();
        TaskEntry {
            id,
            owner: owner.clone(),
            created_ms,
            ttl,
            signal: AbortSignal::new(),
            state: Mutex::new(State {
                phase: Phase::Working,
                expires: Instant::now() + ttl,
                kept_bytes: 0,
                ended: None,
                updated_ms: created_ms,
                cancel_requested: false,
                answers: HashMap::new(),
            }),
            updates: tokio::sync::watch::channel(0).0,
        }
    }

    /// The call ended: its result, or the protocol error that ended it,
    /// with the bytes it keeps. A task cancelled while it ran ends
    /// cancelled whatever the call returned.
    fn finish(&self, ended: Result<CallToolResponse, McpError>) {
        if self.state().cancel_requested {
            self.set(Phase::Cancelled);
            return self.ended(0);
        }
        let (phase, bytes) = ended_phase(ended);
        self.set(phase);
        self.ended(bytes);
    }

    fn ended(&self, kept_bytes: u64) {
        let mut state = self.state();
        state.kept_bytes = kept_bytes;
        state.ended = Some(Instant::now());
    }

    /// The task as a client sees it.
    fn task(&self) -> Task {
        let state = self.state();
        Task::new(
            self.id.clone(),
            TaskStatus::Working,
            gadget_core::audit::rfc3339(self.created_ms),
            gadget_core::audit::rfc3339(state.updated_ms),
        )
        .with_ttl_ms(self.ttl.as_millis() as u64)
        .with_poll_interval_ms(TASK_POLL_INTERVAL.as_millis() as u64)
    }

    /// What `tasks/get` answers.
    fn detailed(&self) -> DetailedTask {
        let task = self.task();
        let payload = match &self.state().phase {
            Phase::Working => TaskPayload::Working,
            Phase::InputRequired(requests) => TaskPayload::InputRequired {
                input_requests: requests.clone(),
            },
            Phase::Completed(result) => TaskPayload::Completed {
                result: result.clone(),
            },
            Phase::Failed(error) => TaskPayload::Failed {
                error: error.clone(),
            },
            Phase::Cancelled => TaskPayload::Cancelled,
        };
        DetailedTask::new(task, payload)
    }

    /// The handle `tools/call` answers with (status `working`).
    pub(crate) fn created(&self) -> Task {
        self.task()
    }

    fn is_terminal(&self) -> bool {
        matches!(
            self.state().phase,
            Phase::Completed(_) | Phase::Failed(_) | Phase::Cancelled
        )
    }
}

fn error_object(code: i32, message: &str) -> JsonObject {
    let mut object = JsonObject::new();
    object.insert("code".into(), code.into());
    object.insert("message".into(), message.into());
    object
}

/// How a task's call ended, as the task keeps it, and the bytes of what it
/// keeps.
fn ended_phase(ended: Result<CallToolResponse, McpError>) -> (Phase, u64) {
    let phase = match ended {
        Ok(CallToolResponse::Complete(result)) => match serde_json::to_value(result) {
            Ok(Value::Object(mut result)) => {
                result.insert("resultType".into(), "complete".into());
                Phase::Completed(result)
            }
            _ => Phase::Failed(error_object(-32603, "the result could not be encoded")),
        },
        Ok(_) => Phase::Failed(error_object(
            -32603,
            "the call ended asking in a way a task cannot carry (an ask-human outcome or an approval); call it without the tasks extension",
        )),
        Err(error) => {
            let mut object = error_object(error.code.0, &error.message);
            if let Some(data) = error.data {
                object.insert("data".into(), data);
            }
            Phase::Failed(object)
        }
    };
    let bytes = match &phase {
        Phase::Completed(object) | Phase::Failed(object) => {
            serde_json::to_vec(object).map_or(0, |v| v.len() as u64)
        }
        _ => 0,
    };
    (phase, bytes)
}

/// A new task's id: unguessable (128 random bits), hex.
fn task_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `-32602`, the same answer whether no task has the id or another
/// caller's does.
fn not_found(id: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "no task '{id}' here (unknown, or expired after {} s)",
            TASK_TTL.as_secs()
        ),
        None,
    )
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

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

/// Who answers what a task's gadget asks: the client, through
/// `tasks/get` (the questions) and `tasks/update` (the answers).
pub(crate) struct TaskPerson {
    pub(crate) task: Arc<TaskEntry>,
    /// What the client declared it answers.
    pub(crate) kinds: Kinds,
    /// Where the questions and answers are kept when the replicas share
    /// them (the answer may come to any replica).
    pub(crate) shared: Option<Arc<shared::SharedTasks>>,
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
                return store.ask(self, gadget, requests, open, &mut updates).await;
            }
            {
                let mut state = self.task.state();
                state.answers.clear();
                state.phase = Phase::InputRequired(open);
                state.updated_ms = now_ms();
            }
            loop {
                if let Some(replies) = self.replies(gadget, requests) {
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

impl TaskPerson {
    /// Every answer, once all are in; an answer not of its question's
    /// shape is asked again.
    pub(crate) fn replies(&self, gadget: &str, requests: &[InputRequest]) -> Option<Vec<Reply>> {
        let mut state = self.task.state();
        let mut replies = Vec::with_capacity(requests.len());
        let mut missing = false;
        for request in requests {
            match state
                .answers
                .get(&request.key)
                .and_then(|answer| reply_of(&request.question, answer))
            {
                Some(reply) => replies.push(reply),
                None => {
                    missing = true;
                    state.answers.remove(&request.key);
                    if let (Phase::InputRequired(open), Some(asked)) =
                        (&mut state.phase, input_request(gadget, request))
                    {
                        open.entry(request.key.clone()).or_insert(asked);
                    }
                }
            }
        }
        (!missing).then_some(replies)
    }
}

#[cfg(test)]
mod tests;
