//! Tasks in the store the replicas share (`gadget serve --state`): each
//! task is a hash at `gadget-host:task:ID` (its owner's digest, the replica
//! running it, its status and timestamps, its result, the questions it
//! waits on and the answers given), expiring with the task, so `tasks/get`,
//! `tasks/update` and `tasks/cancel` answer the same from any replica.
//!
//! Every change is one Lua script, so two replicas never interleave
//! halfway. The replica running a task keeps it in memory too (its abort
//! signal and the wake-up of its questions); a cancel or an answer given on
//! another replica reaches it on the tasks' channel, and every lease
//! renewal looks again. A task whose replica's lease lapsed is failed by
//! the next read. A result whose write failed (the store was away) is
//! written again at each renewal until it lands or the task expires.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use redis::Script;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, DetailedTask, InputRequests, JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use gadget_core::ask::{AskFailure, InputRequest, Reply};
use gadget_core::client::ClientId;

use super::entry::{
    FETCHED_RESULT_TTL, MAX_KEPT_RESULT_BYTES, MAX_TASKS, Phase, TASK_POLL_INTERVAL, TASK_TTL,
    TaskEntry, ended_phase, error_object, not_found, now_ms, replies, task_id,
};
use crate::state::{LEASE_RENEWAL, LEASE_TTL, PREFIX, StateStore, TASK_CHANNEL};

/// The most tasks the store keeps at once, for all replicas together:
/// each holds its result until it expires, and the results are bounded by
/// [`MAX_KEPT_RESULT_BYTES`]; this bounds the rest (eight replicas' worth
/// of [`MAX_TASKS`]).
pub const MAX_STORED_TASKS: usize = 8 * MAX_TASKS;

/// How long a stopping replica waits for its tasks' results to be written
/// before it gives its lease back.
const STOP_WAIT: Duration = Duration::from_secs(3);

/// A result that could not be written yet.
struct Unwritten {
    id: String,
    status: &'static str,
    result: String,
    bytes: u64,
    until: Instant,
}

/// The tasks of every replica, in the shared store.
pub(crate) struct SharedTasks {
    store: Arc<StateStore>,
    /// The tasks this replica runs, by id.
    running: Mutex<HashMap<String, Arc<TaskEntry>>>,
    unwritten: Mutex<Vec<Unwritten>>,
    scripts: Scripts,
    /// The budget of kept results: [`MAX_KEPT_RESULT_BYTES`] (a test
    /// shrinks it).
    kept_budget: u64,
}

struct Scripts {
    create: Script,
    get: Script,
    update: Script,
    cancel: Script,
    finish: Script,
    questions: Script,
    reask: Script,
}

fn task_key(id: &str) -> String {
    format!("{PREFIX}task:{id}")
}

/// Who owns a task, as the store keeps it: a digest of the caller, never
/// its name, token or session.
fn owner_digest(client: &ClientId) -> String {
    Sha256::digest(client.binding().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl SharedTasks {
    pub(crate) fn new(store: Arc<StateStore>) -> SharedTasks {
        SharedTasks {
            store,
            running: Mutex::default(),
            unwritten: Mutex::default(),
            scripts: Scripts {
                create: Script::new(CREATE),
                get: Script::new(GET),
                update: Script::new(UPDATE),
                cancel: Script::new(CANCEL),
                finish: Script::new(FINISH),
                questions: Script::new(QUESTIONS),
                reask: Script::new(REASK),
            },
            kept_budget: MAX_KEPT_RESULT_BYTES,
        }
    }

    fn running(&self) -> MutexGuard<'_, HashMap<String, Arc<TaskEntry>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn failed(&self, error: crate::state::StateError) -> McpError {
        McpError::internal_error(
            format!("{error}; the tasks are kept there, so try again shortly"),
            None,
        )
    }

    /// A new task of `owner`, working, run by this replica.
    pub(crate) async fn create(&self, owner: &ClientId) -> Result<Arc<TaskEntry>, McpError> {
        if self.running().len() >= MAX_TASKS {
            return Err(McpError::internal_error(
                format!(
                    "this replica already runs {MAX_TASKS} tasks; try again later, or call without the tasks extension"
                ),
                None,
            ));
        }
        let id = task_id();
        let now = now_ms();
        let mut invocation = self.scripts.create.prepare_invoke();
        invocation
            .key(format!("{PREFIX}task-index"))
            .key(task_key(&id))
            .key(self.store.lease_key())
            .arg(now)
            .arg(MAX_STORED_TASKS)
            .arg(TASK_TTL.as_millis() as u64)
            .arg(&id)
            .arg(owner_digest(owner))
            .arg(self.store.replica())
            .arg(LEASE_TTL.as_millis() as u64);
        let created: u8 = self
            .store
            .script(&invocation)
            .await
            .map_err(|e| self.failed(e))?;
        if created == 0 {
            return Err(McpError::internal_error(
                format!(
                    "the shared store already keeps {MAX_STORED_TASKS} tasks that have not expired; try again later, or call without the tasks extension"
                ),
                None,
            ));
        }
        let entry = Arc::new(TaskEntry::new(id.clone(), owner, TASK_TTL));
        self.running().insert(id, entry.clone());
        Ok(entry)
    }

    /// `tasks/get`, from the store; a task whose replica's lease lapsed is
    /// failed first, and an ended one is kept only [`FETCHED_RESULT_TTL`]
    /// longer.
    pub(crate) async fn detailed(
        &self,
        id: &str,
        caller: &ClientId,
    ) -> Result<DetailedTask, McpError> {
        let mut invocation = self.scripts.get.prepare_invoke();
        invocation
            .key(task_key(id))
            .key(format!("{PREFIX}kept"))
            .key(format!("{PREFIX}kept-bytes"))
            .key(format!("{PREFIX}task-index"))
            .arg(owner_digest(caller))
            .arg(now_ms())
            .arg(FETCHED_RESULT_TTL.as_millis() as u64)
            .arg(id)
            .arg(format!("{PREFIX}lease:"))
            .arg(LEASE_TTL.as_secs());
        let fields: Option<HashMap<String, String>> = self
            .store
            .script(&invocation)
            .await
            .map_err(|e| self.failed(e))?;
        match fields {
            Some(fields) if !fields.is_empty() => Ok(detailed_of(id, &fields)),
            _ => Err(not_found(id)),
        }
    }

    /// A script that answers 0 when the caller owns no task `id`: that
    /// answer as `-32602`, as for an id nobody has.
    async fn owned(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
        id: &str,
    ) -> Result<(), McpError> {
        let known: u8 = self
            .store
            .script(invocation)
            .await
            .map_err(|e| self.failed(e))?;
        match known {
            0 => Err(not_found(id)),
            _ => Ok(()),
        }
    }

    /// `tasks/update`: files the answers to questions the task waits on
    /// and tells the replica running it.
    pub(crate) async fn update(
        &self,
        id: &str,
        caller: &ClientId,
        responses: BTreeMap<String, Value>,
    ) -> Result<(), McpError> {
        let mut invocation = self.scripts.update.prepare_invoke();
        invocation
            .key(task_key(id))
            .arg(owner_digest(caller))
            .arg(now_ms())
            .arg(TASK_CHANNEL)
            .arg(id);
        for (key, response) in responses {
            invocation.arg(key).arg(response.to_string());
        }
        self.owned(&invocation, id).await?;
        self.wake(id);
        Ok(())
    }

    /// `tasks/cancel`: marks a running task cancelled and tells the
    /// replica running it; a task that ended stays as it ended.
    pub(crate) async fn cancel(&self, id: &str, caller: &ClientId) -> Result<(), McpError> {
        let mut invocation = self.scripts.cancel.prepare_invoke();
        invocation
            .key(task_key(id))
            .arg(owner_digest(caller))
            .arg(TASK_CHANNEL)
            .arg(id);
        self.owned(&invocation, id).await?;
        self.cancelled(id);
        Ok(())
    }

    /// The call of `task` ended: its result is written (or kept to be
    /// written at the next renewal, if the store is away).
    pub(crate) async fn finish(
        &self,
        task: &Arc<TaskEntry>,
        ended: Result<CallToolResponse, McpError>,
    ) {
        let (phase, bytes) = ended_phase(ended);
        let (status, result) = match phase {
            Phase::Completed(result) => ("completed", result),
            Phase::Failed(error) => ("failed", error),
            _ => (
                "failed",
                error_object(-32603, "the call ended without a result"),
            ),
        };
        let result = serde_json::to_string(&result).unwrap_or_else(|_| "{}".into());
        let unwritten = Unwritten {
            id: task.id.clone(),
            status,
            result,
            bytes,
            until: Instant::now() + TASK_TTL,
        };
        if self.write(&unwritten).await.is_err() {
            self.unwritten
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(unwritten);
        }
        self.running().remove(&task.id);
    }

    async fn write(&self, ended: &Unwritten) -> Result<(), crate::state::StateError> {
        let dropped = serde_json::to_string(&error_object(
            -32603,
            &format!(
                "the result was dropped: the replicas keep at most {} MiB of task results, and newer ones took its place; call again",
                self.kept_budget >> 20
            ),
        ))
        .unwrap_or_default();
        let mut invocation = self.scripts.finish.prepare_invoke();
        invocation
            .key(task_key(&ended.id))
            .key(format!("{PREFIX}kept"))
            .key(format!("{PREFIX}kept-bytes"))
            .arg(ended.status)
            .arg(&ended.result)
            .arg(ended.bytes)
            .arg(now_ms())
            .arg(self.kept_budget)
            .arg(&ended.id)
            .arg(format!("{PREFIX}task:"))
            .arg(dropped);
        self.store.script::<u8>(&invocation).await.map(|_| ())
    }

    /// The running task `id`, if this replica runs it.
    fn local(&self, id: &str) -> Option<Arc<TaskEntry>> {
        self.running().get(id).cloned()
    }

    fn cancelled(&self, id: &str) {
        if let Some(task) = self.local(id) {
            task.state().cancel_requested = true;
            task.signal.raise();
        }
    }

    fn wake(&self, id: &str) {
        if let Some(task) = self.local(id) {
            task.updates.send_modify(|n| *n += 1);
        }
    }

    /// What a task's gadget asks, through the store: the questions are
    /// written there (any replica shows them), and the gadget waits for
    /// answers given on any replica; an answer not of its question's shape
    /// is asked again.
    pub(crate) async fn ask(
        &self,
        task: &TaskEntry,
        gadget: &str,
        requests: &[InputRequest],
        open: InputRequests,
        updates: &mut tokio::sync::watch::Receiver<u64>,
    ) -> Result<Vec<Reply>, AskFailure> {
        self.set_questions(&task.id, "input_required", &open)
            .await
            .map_err(|e| AskFailure::Unavailable(e.to_string()))?;
        {
            let mut state = task.state();
            state.answers.clear();
            state.phase = Phase::InputRequired(open);
        }
        loop {
            // A store away for a while is waited out: the renewals wake
            // this loop, and the call's abort signal ends it.
            if let Ok(answers) = self.answers(&task.id).await {
                task.state().answers = answers.clone();
                if let Some(replies) = replies(task, gadget, requests) {
                    let _ = self
                        .set_questions(&task.id, "working", &InputRequests::new())
                        .await;
                    task.set(Phase::Working);
                    return Ok(replies);
                }
                // The answers that did not fit were dropped: ask them again.
                let kept = task.state().answers.clone();
                let reopened: InputRequests = match &task.state().phase {
                    Phase::InputRequired(open) => open
                        .iter()
                        .filter(|(key, _)| answers.contains_key(*key) && !kept.contains_key(*key))
                        .map(|(key, request)| (key.clone(), request.clone()))
                        .collect(),
                    _ => InputRequests::new(),
                };
                if !reopened.is_empty() {
                    let _ = self.reask(&task.id, &reopened).await;
                }
            }
            if updates.changed().await.is_err() {
                return Err(AskFailure::Cancelled);
            }
        }
    }

    /// Sets the task's status and the questions it waits on (none:
    /// working again), dropping every earlier question and answer.
    async fn set_questions(
        &self,
        id: &str,
        status: &str,
        open: &InputRequests,
    ) -> Result<(), crate::state::StateError> {
        let mut invocation = self.scripts.questions.prepare_invoke();
        invocation.key(task_key(id)).arg(status).arg(now_ms());
        for (key, request) in open {
            invocation
                .arg(key)
                .arg(serde_json::to_string(request).unwrap_or_default());
        }
        self.store.script::<u8>(&invocation).await.map(|_| ())
    }

    async fn reask(&self, id: &str, open: &InputRequests) -> Result<(), crate::state::StateError> {
        let mut invocation = self.scripts.reask.prepare_invoke();
        invocation.key(task_key(id)).arg(now_ms());
        for (key, request) in open {
            invocation
                .arg(key)
                .arg(serde_json::to_string(request).unwrap_or_default());
        }
        self.store.script::<u8>(&invocation).await.map(|_| ())
    }

    /// The answers given so far to the questions a task waits on.
    async fn answers(&self, id: &str) -> Result<HashMap<String, Value>, crate::state::StateError> {
        let mut connection = self.store.connection();
        let key = task_key(id);
        let fields: HashMap<String, String> = self
            .store
            .bounded(async move {
                redis::cmd("HGETALL")
                    .arg(&key)
                    .query_async(&mut connection)
                    .await
            })
            .await?;
        Ok(fields
            .into_iter()
            .filter_map(|(field, value)| {
                let key = field.strip_prefix("answer:")?;
                Some((key.to_string(), serde_json::from_str(&value).ok()?))
            })
            .collect())
    }

    /// Until `stop`: renews this replica's lease, listens on the tasks'
    /// channel, and at each renewal looks for cancels and answers its
    /// running tasks missed and writes the results that could not be
    /// written. Then gives the lease back, once the tasks it ran have
    /// written their results (or [`STOP_WAIT`] passed).
    pub(crate) async fn keep(self: Arc<Self>, stop: CancellationToken) {
        let listening = tokio::spawn(self.clone().listen(stop.clone()));
        let mut renewals = tokio::time::interval(LEASE_RENEWAL);
        loop {
            tokio::select! {
                _ = renewals.tick() => self.renew().await,
                () = stop.cancelled() => break,
            }
        }
        let waited = Instant::now();
        while !self.running().is_empty() && waited.elapsed() < STOP_WAIT {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.retry_unwritten().await;
        self.store.release_lease().await;
        let _ = listening.await;
    }

    async fn renew(&self) {
        if self.store.renew_lease().await.is_err() {
            return;
        }
        self.retry_unwritten().await;
        let running: Vec<Arc<TaskEntry>> = self.running().values().cloned().collect();
        if running.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        for task in &running {
            pipe.cmd("HMGET")
                .arg(task_key(&task.id))
                .arg("cancel")
                .arg("status");
        }
        let mut connection = self.store.connection();
        let Ok(states) = self
            .store
            .bounded(pipe.query_async::<Vec<(Option<String>, Option<String>)>>(&mut connection))
            .await
        else {
            return;
        };
        for (task, (cancel, status)) in running.iter().zip(states) {
            // Cancelled on a replica whose message was lost, expired, or
            // failed by another replica while this one could not renew its
            // lease: the call's result has nowhere to go.
            let ended = !matches!(status.as_deref(), Some("working" | "input_required"));
            if cancel.as_deref() == Some("1") || ended {
                task.state().cancel_requested = true;
                task.signal.raise();
            }
            task.updates.send_modify(|n| *n += 1);
        }
    }

    async fn retry_unwritten(&self) {
        let pending =
            std::mem::take(&mut *self.unwritten.lock().unwrap_or_else(|p| p.into_inner()));
        for ended in pending {
            if ended.until > Instant::now() && self.write(&ended).await.is_err() {
                self.unwritten
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(ended);
            }
        }
    }

    /// The tasks' channel: `cancel:ID` and `update:ID` for the tasks this
    /// replica runs. A lost connection is made again (a second apart).
    async fn listen(self: Arc<Self>, stop: CancellationToken) {
        while !stop.is_cancelled() {
            let pubsub = match self.store.subscribe().await {
                Ok(pubsub) => pubsub,
                Err(_) => {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        () = stop.cancelled() => return,
                    }
                }
            };
            let mut messages = pubsub.into_on_message();
            loop {
                tokio::select! {
                    message = messages.next() => match message {
                        Some(message) => {
                            let payload: String = message.get_payload().unwrap_or_default();
                            match payload.split_once(':') {
                                Some(("cancel", id)) => self.cancelled(id),
                                Some(("update", id)) => self.wake(id),
                                _ => {}
                            }
                        }
                        None => break,
                    },
                    () = stop.cancelled() => return,
                }
            }
        }
    }
}

/// What `tasks/get` answers, from a task's fields in the store.
fn detailed_of(id: &str, fields: &HashMap<String, String>) -> DetailedTask {
    let number = |name: &str| {
        fields
            .get(name)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let task = Task::new(
        id.to_string(),
        TaskStatus::Working,
        gadget_core::audit::rfc3339(number("created_ms")),
        gadget_core::audit::rfc3339(number("updated_ms")),
    )
    .with_ttl_ms(number("ttl_ms"))
    .with_poll_interval_ms(TASK_POLL_INTERVAL.as_millis() as u64);
    let object = || -> JsonObject {
        fields
            .get("result")
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or_else(|| error_object(-32603, "the task's result could not be read"))
    };
    let payload = match fields.get("status").map(String::as_str) {
        Some("input_required") => TaskPayload::InputRequired {
            input_requests: fields
                .iter()
                .filter_map(|(field, raw)| {
                    let key = field.strip_prefix("ask:")?;
                    Some((key.to_string(), serde_json::from_str(raw).ok()?))
                })
                .collect(),
        },
        Some("completed") => TaskPayload::Completed { result: object() },
        Some("failed") => TaskPayload::Failed { error: object() },
        Some("cancelled") => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    DetailedTask::new(task, payload)
}

/// Creates a task, unless the store keeps [`MAX_STORED_TASKS`] that have
/// not expired; takes the lease of the replica that will run it.
/// KEYS: the index of tasks by expiry, the task, the lease. ARGV: now (ms),
/// the bound, the TTL (ms), the id, the owner's digest, the replica, the
/// lease's TTL (ms).
const CREATE: &str = r"
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
redis.call('HSET', KEYS[2], 'owner', ARGV[5], 'replica', ARGV[6], 'status', 'working',
  'created_ms', ARGV[1], 'updated_ms', ARGV[1], 'ttl_ms', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], 1, 'PX', ARGV[7])
return 1
";

/// The task as its owner sees it (nil for anyone else, or none): a running
/// task whose replica's lease lapsed is failed first; an ended one is kept
/// only the fetched TTL longer, and its result leaves the kept budget.
/// KEYS: the task, the kept results by end time, their bytes, the index.
/// ARGV: the owner's digest, now (ms), the fetched TTL (ms), the id, the
/// leases' prefix, the lease's TTL (s).
const GET: &str = r#"
local t = KEYS[1]
if redis.call('HGET', t, 'owner') ~= ARGV[1] then return false end
local status = redis.call('HGET', t, 'status')
if status == 'working' or status == 'input_required' then
  local replica = redis.call('HGET', t, 'replica')
  if redis.call('EXISTS', ARGV[5] .. replica) == 0 then
    status = 'failed'
    redis.call('HSET', t, 'status', status, 'updated_ms', ARGV[2], 'result',
      '{"code":-32603,"message":"the replica that ran this task (' .. replica ..
      ') stopped answering: its lease lapsed (' .. ARGV[6] ..
      ' s without renewal), so the call is lost; call again"}')
  end
end
if status ~= 'working' and status ~= 'input_required' then
  local fetched = tonumber(ARGV[3])
  if redis.call('PTTL', t) > fetched then
    redis.call('PEXPIRE', t, fetched)
    redis.call('ZADD', KEYS[4], 'XX', tonumber(ARGV[2]) + fetched, ARGV[4])
  end
  redis.call('ZREM', KEYS[2], ARGV[4])
  redis.call('HDEL', KEYS[3], ARGV[4])
end
return redis.call('HGETALL', t)
"#;

/// Files the answers to questions the task waits on (others are ignored)
/// and tells the replica running it. KEYS: the task. ARGV: the owner's
/// digest, now (ms), the channel, the id, then key and answer pairs.
const UPDATE: &str = r"
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') == 'input_required' then
  for i = 5, #ARGV, 2 do
    if redis.call('HDEL', KEYS[1], 'ask:' .. ARGV[i]) == 1 then
      redis.call('HSET', KEYS[1], 'answer:' .. ARGV[i], ARGV[i + 1])
    end
  end
end
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[2])
redis.call('PUBLISH', ARGV[3], 'update:' .. ARGV[4])
return 1
";

/// Marks a running task cancelled and tells the replica running it.
/// KEYS: the task. ARGV: the owner's digest, the channel, the id.
const CANCEL: &str = r"
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'working' or status == 'input_required' then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  redis.call('PUBLISH', ARGV[2], 'cancel:' .. ARGV[3])
end
return 1
";

/// Ends a task (cancelled, if a cancel came; a task already failed by a
/// lapsed lease stays failed) and keeps the kept results within their
/// budget, dropping the oldest others first. KEYS: the task, the kept
/// results by end time, their bytes. ARGV: the status, the result, its
/// bytes, now (ms), the budget, the id, the tasks' prefix, the dropped
/// result's error.
const FINISH: &str = r"
local t = KEYS[1]
local current = redis.call('HGET', t, 'status')
if current ~= 'working' and current ~= 'input_required' then return 0 end
for _, field in ipairs(redis.call('HKEYS', t)) do
  if string.sub(field, 1, 4) == 'ask:' or string.sub(field, 1, 7) == 'answer:' then
    redis.call('HDEL', t, field)
  end
end
if redis.call('HGET', t, 'cancel') == '1' then
  redis.call('HSET', t, 'status', 'cancelled', 'updated_ms', ARGV[4])
  return 1
end
redis.call('HSET', t, 'status', ARGV[1], 'result', ARGV[2], 'updated_ms', ARGV[4])
local bytes = tonumber(ARGV[3])
if bytes == 0 then return 1 end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[6])
redis.call('HSET', KEYS[3], ARGV[6], bytes)
local kept = redis.call('ZRANGE', KEYS[2], 0, -1)
local total = 0
for _, id in ipairs(kept) do
  if redis.call('EXISTS', ARGV[7] .. id) == 1 then
    total = total + tonumber(redis.call('HGET', KEYS[3], id) or '0')
  else
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
  end
end
local budget = tonumber(ARGV[5])
for _, id in ipairs(kept) do
  if total <= budget then break end
  if id ~= ARGV[6] and redis.call('EXISTS', ARGV[7] .. id) == 1 then
    total = total - tonumber(redis.call('HGET', KEYS[3], id) or '0')
    redis.call('HSET', ARGV[7] .. id, 'status', 'failed', 'result', ARGV[8], 'updated_ms', ARGV[4])
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
  end
end
return 1
";

/// Sets a running task's status and the questions it waits on, dropping
/// every earlier question and answer. KEYS: the task. ARGV: the status, now
/// (ms), then key and question pairs.
const QUESTIONS: &str = r"
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'working' and status ~= 'input_required' then return 0 end
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(field, 1, 4) == 'ask:' or string.sub(field, 1, 7) == 'answer:' then
    redis.call('HDEL', KEYS[1], field)
  end
end
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], 'ask:' .. ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'updated_ms', ARGV[2])
return 1
";

/// Asks again the questions whose answers did not fit. KEYS: the task.
/// ARGV: now (ms), then key and question pairs.
const REASK: &str = r"
if redis.call('HGET', KEYS[1], 'status') ~= 'input_required' then return 0 end
for i = 2, #ARGV, 2 do
  redis.call('HDEL', KEYS[1], 'answer:' .. ARGV[i])
  redis.call('HSET', KEYS[1], 'ask:' .. ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[1])
return 1
";

#[cfg(test)]
mod tests;
