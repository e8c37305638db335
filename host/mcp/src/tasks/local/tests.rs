//! The in-memory task store's bounds and ownership.

use super::*;
use rmcp::model::TaskStatus;

fn me() -> ClientId {
    ClientId::subject("alice")
}

fn completed(text: &str) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(
        rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)]),
    ))
}

#[test]
fn a_task_answers_only_the_caller_that_made_it() {
    let store = TaskStore::default();
    let task = store.create(&me()).unwrap();
    let unknown = store.get("0123", &me()).err().unwrap();
    for other in [
        ClientId::subject("mallory"),
        ClientId::anonymous_on("a-session"),
        ClientId::Anonymous(None),
    ] {
        let hidden = store.get(task.id(), &other).err().unwrap();
        // The same answer as for an id nobody has, but the id.
        assert_eq!(hidden.code, unknown.code);
        assert!(
            hidden.message.starts_with("no task '"),
            "{}",
            hidden.message
        );
        assert!(store.cancel(task.id(), &other).is_err());
        assert!(store.update(task.id(), &other, BTreeMap::new()).is_err());
        assert!(store.detailed(task.id(), &other).is_err());
    }
    assert!(!task.signal().is_raised(), "another caller cancelled it");
    store.cancel(task.id(), &me()).unwrap();
    assert!(task.signal().is_raised());
}

#[test]
fn kept_results_stay_within_their_budget_oldest_dropped_first() {
    let store = TaskStore {
        kept_budget: 3500,
        ..TaskStore::default()
    };
    let big = "x".repeat(1000);
    let tasks: Vec<_> = (0..4).map(|_| store.create(&me()).unwrap()).collect();
    for task in &tasks {
        store.finish(task, completed(&big));
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = |t: &TaskEntry| store.detailed(t.id(), &me()).unwrap();
    // The first went to make room; the newest three are kept whole.
    let first = serde_json::to_value(status(&tasks[0])).unwrap();
    assert_eq!(first["status"], "failed", "{first}");
    assert!(first.to_string().contains("was dropped"), "{first}");
    for task in &tasks[1..] {
        assert_eq!(status(task).status(), TaskStatus::Completed);
    }
    let kept: u64 = store.tasks().values().map(|t| t.state().kept_bytes).sum();
    assert!(kept <= 3500, "{kept}");
}

#[test]
fn a_fetched_result_is_kept_a_shorter_time() {
    let store = TaskStore::default();
    let task = store.create(&me()).unwrap();
    let before = task.state().expires;
    // A working task fetched keeps its whole lifetime.
    store.detailed(task.id(), &me()).unwrap();
    assert_eq!(task.state().expires, before);
    store.finish(&task, completed("done"));
    store.detailed(task.id(), &me()).unwrap();
    let left = task.state().expires - Instant::now();
    assert!(left <= FETCHED_RESULT_TTL, "{left:?}");
}

#[test]
fn a_task_past_its_bound_is_refused_and_an_unknown_one_is_invalid_params() {
    let store = TaskStore::default();
    let first = store.create(&me()).unwrap();
    assert_eq!(store.get(first.id(), &me()).unwrap().id(), first.id());
    assert_eq!(store.get("nope", &me()).err().unwrap().code.0, -32602);
    for _ in 1..MAX_TASKS {
        store.create(&me()).unwrap();
    }
    let refused = store.create(&me()).err().unwrap();
    assert!(refused.to_string().contains("1024 tasks"), "{refused}");
}

#[test]
fn an_expired_task_is_gone_and_stopped_if_it_still_ran() {
    let store = TaskStore {
        ttl: Duration::ZERO,
        ..TaskStore::default()
    };
    let task = store.create(&me()).unwrap();
    assert_eq!(store.get(task.id(), &me()).err().unwrap().code.0, -32602);
    // The next task made drops it, raising its abort signal.
    store.create(&me()).unwrap();
    assert!(task.signal().is_raised());
    assert!(!store.tasks().contains_key(task.id()));
}

#[test]
fn cancelling_a_running_task_raises_its_signal_and_it_ends_cancelled() {
    let store = TaskStore::default();
    let task = store.create(&me()).unwrap();
    store.cancel(task.id(), &me()).unwrap();
    assert!(task.signal().is_raised());
    store.finish(&task, Err(McpError::internal_error("stopped", None)));
    assert_eq!(task.detailed().status(), TaskStatus::Cancelled);
    // Cancelling an ended task is acknowledged and changes nothing.
    store.cancel(task.id(), &me()).unwrap();
    assert_eq!(task.detailed().status(), TaskStatus::Cancelled);
}
