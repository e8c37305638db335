//! The shared task store against a real redis-server (Debian's, installed
//! by scripts/setup-tests.sh) on a free loopback port: ownership, a lapsed
//! lease (the lease deleted by hand, so no test waits it out), cancels and
//! the kept-results budget.

use std::process::{Child, Command, Stdio};

use super::*;

/// A redis-server for one test, stopped when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/setup-tests.sh installs it)");
        Redis { child, port }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Tasks in the store of `redis`, once it answers.
async fn tasks(redis: &Redis) -> Arc<SharedTasks> {
    let url = format!("redis://127.0.0.1:{}/0", redis.port);
    let store = Arc::new(StateStore::open(&url, None).unwrap());
    let started = Instant::now();
    while store.ping().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "redis-server did not answer"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Arc::new(SharedTasks::new(store))
}

fn me() -> ClientId {
    ClientId::subject("alice")
}

fn completed(text: &str) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(
        rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)]),
    ))
}

async fn status(tasks: &SharedTasks, id: &str) -> Value {
    serde_json::to_value(tasks.detailed(id, &me()).await.unwrap()).unwrap()
}

async fn field(tasks: &SharedTasks, id: &str, name: &str) -> Option<String> {
    let mut connection = tasks.store.connection();
    redis::cmd("HGET")
        .arg(task_key(id))
        .arg(name)
        .query_async(&mut connection)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_task_is_its_owners_alone_and_its_owner_is_kept_as_a_digest() {
    let redis = Redis::start();
    let tasks = tasks(&redis).await;
    let task = tasks.create(&me()).await.unwrap();
    assert_eq!(status(&tasks, &task.id).await["status"], "working");
    for other in [ClientId::subject("mallory"), ClientId::Anonymous(None)] {
        let hidden = tasks.detailed(&task.id, &other).await.unwrap_err();
        assert_eq!(hidden.code.0, -32602);
        assert!(tasks.cancel(&task.id, &other).await.is_err());
        assert!(
            tasks
                .update(&task.id, &other, BTreeMap::new())
                .await
                .is_err()
        );
    }
    assert!(!task.signal.is_raised(), "another caller cancelled it");
    let owner = field(&tasks, &task.id, "owner").await.unwrap();
    assert_eq!(owner, owner_digest(&me()));
    assert!(!owner.contains("alice"));
    assert_eq!(
        tasks.detailed("0123", &me()).await.unwrap_err().code.0,
        -32602
    );
}

#[tokio::test]
async fn a_task_whose_replicas_lease_lapsed_is_failed_and_stays_failed() {
    let redis = Redis::start();
    let tasks = tasks(&redis).await;
    let task = tasks.create(&me()).await.unwrap();
    let mut connection = tasks.store.connection();
    let _: () = redis::cmd("DEL")
        .arg(tasks.store.lease_key())
        .query_async(&mut connection)
        .await
        .unwrap();
    let failed = status(&tasks, &task.id).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains(tasks.store.replica()), "{message}");
    assert!(
        message.contains("lease lapsed (15 s without renewal)"),
        "{message}"
    );
    // The replica's late result does not bring it back.
    tasks.finish(&task, completed("late")).await;
    assert_eq!(status(&tasks, &task.id).await["status"], "failed");
    // Failed, it was fetched: kept a little while only.
    let mut connection = tasks.store.connection();
    let left: i64 = redis::cmd("PTTL")
        .arg(task_key(&task.id))
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(left <= FETCHED_RESULT_TTL.as_millis() as i64, "{left}");
}

#[tokio::test]
async fn a_cancel_raises_the_running_tasks_signal_and_it_ends_cancelled() {
    let redis = Redis::start();
    let tasks = tasks(&redis).await;
    let task = tasks.create(&me()).await.unwrap();
    tasks.cancel(&task.id, &me()).await.unwrap();
    assert!(task.signal.is_raised());
    assert_eq!(
        field(&tasks, &task.id, "cancel").await.as_deref(),
        Some("1")
    );
    tasks
        .finish(&task, Err(McpError::internal_error("stopped", None)))
        .await;
    assert_eq!(status(&tasks, &task.id).await["status"], "cancelled");
    assert!(tasks.running().is_empty());
    // Cancelling an ended task is acknowledged and changes nothing.
    tasks.cancel(&task.id, &me()).await.unwrap();
    assert_eq!(status(&tasks, &task.id).await["status"], "cancelled");
}

#[tokio::test]
async fn kept_results_stay_within_their_budget_for_every_replica_oldest_dropped_first() {
    let redis = Redis::start();
    let mut shared = Arc::into_inner(tasks(&redis).await).unwrap();
    shared.kept_budget = 3500;
    let tasks = Arc::new(shared);
    let big = "x".repeat(1000);
    let mut made = Vec::new();
    for _ in 0..4 {
        let task = tasks.create(&me()).await.unwrap();
        tasks.finish(&task, completed(&big)).await;
        made.push(task);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let first = status(&tasks, &made[0].id).await;
    assert_eq!(first["status"], "failed", "{first}");
    assert!(first.to_string().contains("was dropped"), "{first}");
    for task in &made[1..] {
        let kept = status(&tasks, &task.id).await;
        assert_eq!(kept["status"], "completed");
        assert!(kept.to_string().contains(&big));
    }
    // Fetched, they left the budget: a new result drops none of them.
    let task = tasks.create(&me()).await.unwrap();
    tasks.finish(&task, completed(&big)).await;
    for task in &made[1..] {
        assert_eq!(status(&tasks, &task.id).await["status"], "completed");
    }
}
