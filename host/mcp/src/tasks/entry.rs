//! One MCP task as the replica running it knows it ([`TaskEntry`]): its
//! status, the questions it waits on and the answers given, its abort
//! signal; and the bounds every task store keeps.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, DetailedTask, InputRequests, JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::Value;

use gadget_core::ask::{InputRequest, Reply};
use gadget_core::client::ClientId;
use gadget_core::signal::AbortSignal;

use crate::inputs::{input_request, reply_of};

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
pub(super) enum Phase {
    Working,
    /// Waiting for the answers to these questions, by key.
    InputRequired(InputRequests),
    Completed(JsonObject),
    Failed(JsonObject),
    Cancelled,
}

/// What one task knows of itself.
pub(super) struct State {
    pub(super) phase: Phase,
    /// When it is dropped: [`TASK_TTL`] after it was made, sooner once
    /// its result was fetched.
    pub(super) expires: Instant,
    /// The bytes of its kept result (counted in the store's budget).
    pub(super) kept_bytes: u64,
    /// When it ended (the order its result is dropped in, oldest first).
    pub(super) ended: Option<Instant>,
    pub(super) updated_ms: u64,
    /// `tasks/cancel` came while it ran: however the call ends, the task
    /// ends cancelled.
    pub(super) cancel_requested: bool,
    /// Answers given so far to the questions it waits on.
    pub(super) answers: HashMap<String, Value>,
}

/// One task.
pub(crate) struct TaskEntry {
    pub(super) id: String,
    /// Who created it: the only caller it answers.
    pub(super) owner: ClientId,
    pub(super) created_ms: u64,
    pub(super) ttl: Duration,
    pub(super) signal: AbortSignal,
    pub(super) state: Mutex<State>,
    /// Bumped by every `tasks/update`, so the waiting gadget looks again.
    pub(super) updates: tokio::sync::watch::Sender<u64>,
}

impl TaskEntry {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set(&self, phase: Phase) {
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
    pub(super) fn new(id: String, owner: &ClientId, ttl: Duration) -> TaskEntry {
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
    pub(super) fn finish(&self, ended: Result<CallToolResponse, McpError>) {
        if self.state().cancel_requested {
            self.set(Phase::Cancelled);
            return self.ended(0);
        }
        let (phase, bytes) = ended_phase(ended);
        self.set(phase);
        self.ended(bytes);
    }

    pub(super) fn ended(&self, kept_bytes: u64) {
        let mut state = self.state();
        state.kept_bytes = kept_bytes;
        state.ended = Some(Instant::now());
    }

    /// The task as a client sees it.
    pub(super) fn task(&self) -> Task {
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
    pub(super) fn detailed(&self) -> DetailedTask {
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

    pub(super) fn is_terminal(&self) -> bool {
        matches!(
            self.state().phase,
            Phase::Completed(_) | Phase::Failed(_) | Phase::Cancelled
        )
    }
}

pub(super) fn error_object(code: i32, message: &str) -> JsonObject {
    let mut object = JsonObject::new();
    object.insert("code".into(), code.into());
    object.insert("message".into(), message.into());
    object
}

/// How a task's call ended, as the task keeps it, and the bytes of what it
/// keeps.
pub(super) fn ended_phase(ended: Result<CallToolResponse, McpError>) -> (Phase, u64) {
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
pub(super) fn task_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `-32602`, the same answer whether no task has the id or another
/// caller's does.
pub(super) fn not_found(id: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "no task '{id}' here (unknown, or expired after {} s)",
            TASK_TTL.as_secs()
        ),
        None,
    )
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every answer, once all are in; an answer not of its question's
/// shape is asked again.
pub(super) fn replies(
    task: &TaskEntry,
    gadget: &str,
    requests: &[InputRequest],
) -> Option<Vec<Reply>> {
    let mut state = task.state();
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
