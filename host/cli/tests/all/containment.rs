//! Each misbehaving fixture is contained with a clear error, and the next
//! call on the same runtime is served normally.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gadget_host::limits::Limits;
use gadget_host::loader::Registry;
use gadget_host::runtime::{CallError, CallReport, CallRequest, EpochMode, LogSource, Outcome};
use serde_json::json;

use crate::common;

/// Runs a fixture gadget with the given limits (defaults otherwise).
async fn run_with(
    registry: &Registry,
    name: &str,
    params: serde_json::Value,
    limits: Limits,
) -> CallReport {
    let (gadget, params) = registry.prepare(name, params).expect("prepare");
    let request = CallRequest {
        gadget: gadget.card.spec.name.clone(),
        component_name: None,
        invocation_id: "t1".into(),
        params: params.to_string(),
        limits,
        signal: None,
        observer: None,
        grants: None,
        trace_parent: None,
        request_denials: None,
        human: None,
    };
    gadget.invoke_request(request).await
}

/// The proof that the host is still healthy: a normal call succeeds.
async fn next_call_is_served(registry: &Registry) {
    let report = registry
        .call("Echo", json!({ "text": "still here" }), "next", None)
        .await
        .expect("prepare Echo");
    assert_eq!(
        report.outcome,
        Ok(Outcome::Result {
            result: "still here".into(),
            details: None,
            rich: None
        })
    );
}

/// What the host noted about a call (refused costs, dropped details).
fn host_warnings(report: &CallReport) -> Vec<&str> {
    report
        .logs
        .iter()
        .filter(|l| l.source == LogSource::Host)
        .map(|l| l.message.as_str())
        .collect()
}

fn limits_of(registry: &Registry, name: &str) -> Limits {
    registry.get(name).unwrap().limits.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_forever_is_trapped_after_deadline_plus_grace_manual_epoch() {
    let runtime = common::runtime(EpochMode::Manual);
    let registry = common::misbehave(&runtime).await;
    let limits = limits_of(&registry, "LoopForever");
    assert_eq!(
        limits.timeout,
        Duration::from_millis(100),
        "the spec's timeout applies"
    );
    let grace = limits.grace.as_millis() as u64;

    let registry = Arc::new(registry);
    let handle = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.call("LoopForever", json!({}), "t1", None).await })
    };
    // Let the call start (its deadline is armed when it starts, from the
    // manual clock, which has not moved).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!handle.is_finished());
    // Up to the deadline and through most of the grace period: still running.
    runtime.clock().advance(100 + grace - 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!handle.is_finished(), "trapped before deadline + grace");
    // One more tick: the epoch callback traps it.
    runtime.clock().advance(2);
    let report = tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .expect("trap fires")
        .unwrap()
        .unwrap();
    assert_eq!(
        report.outcome,
        Err(CallError::Timeout {
            gadget: "LoopForever".into(),
            timeout_ms: 100
        })
    );
    assert_eq!(
        report.outcome.unwrap_err().to_string(),
        "Gadget 'LoopForever' execution exceeded timeout of 100ms"
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gadget_stopping_on_the_deadline_signal_returns_the_timeout_not_a_trap() {
    let runtime = common::runtime(EpochMode::Manual);
    let registry = Arc::new(common::misbehave(&runtime).await);
    let handle = {
        let registry = registry.clone();
        tokio::spawn(async move {
            registry
                .call("LoopUntilCancelled", json!({}), "t1", None)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!handle.is_finished());
    // Exactly the deadline: the abort signal rises; the grace period has not
    // passed (the manual clock stands still), so only the gadget can end it.
    // Stopping on the deadline's signal is reported as the timeout.
    runtime.clock().advance(100);
    let report = tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .expect("returns")
        .unwrap()
        .unwrap();
    assert_eq!(
        report.outcome,
        Err(CallError::Timeout {
            gadget: "LoopUntilCancelled".into(),
            timeout_ms: 100,
        })
    );
    assert_eq!(report.progress, vec!["working until cancelled".to_string()]);
    next_call_is_served(&registry).await;
}

/// A gadget that saw the deadline's abort signal and returned an error of
/// its own timed out: the model, dependents, the journal and the spans
/// are told the cause (it was reported as the gadget's own failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_returned_after_the_deadline_is_the_timeout() {
    let runtime = common::runtime(EpochMode::Manual);
    let registry = Arc::new(common::misbehave(&runtime).await);
    let handle = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.call("GiveUpOnSignal", json!({}), "t1", None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!handle.is_finished());
    runtime.clock().advance(100);
    let report = tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .expect("returns")
        .unwrap()
        .unwrap();
    assert_eq!(
        report.outcome,
        Err(CallError::Timeout {
            gadget: "GiveUpOnSignal".into(),
            timeout_ms: 100,
        })
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_cancellation_raises_the_abort_signal() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let (gadget, _) = registry.prepare("LoopUntilCancelled", json!({})).unwrap();
    let cancel = gadget_core::signal::AbortSignal::new();
    let request = CallRequest {
        gadget: gadget.card.spec.name.clone(),
        component_name: None,
        invocation_id: "t1".into(),
        params: "{}".into(),
        limits: Limits {
            timeout: Duration::from_secs(60),
            ..gadget.limits.clone()
        },
        signal: Some(cancel.clone()),
        observer: None,
        grants: None,
        trace_parent: None,
        request_denials: None,
        human: None,
    };
    let started = Instant::now();
    let call = gadget.invoke_request(request);
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.raise();
    };
    let (report, ()) = tokio::join!(call, canceller);
    assert!(
        matches!(report.outcome, Err(CallError::Cancelled { .. })),
        "{:?}",
        report.outcome
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_gadgets_yield_so_others_keep_running() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = Arc::new(common::misbehave(&runtime).await);
    // Two spinning gadgets on a two-worker runtime would starve every other
    // task if they did not yield; Echo calls must still complete promptly.
    let mut spinners = Vec::new();
    for _ in 0..2 {
        let registry = registry.clone();
        spinners.push(tokio::spawn(async move {
            let mut limits = registry.get("LoopForever").unwrap().limits.clone();
            limits.timeout = Duration::from_secs(3);
            run_with(&registry, "LoopForever", json!({}), limits).await
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    for _ in 0..5 {
        next_call_is_served(&registry).await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "echo calls were starved: {:?}",
        started.elapsed()
    );
    for spinner in spinners {
        let report = spinner.await.unwrap();
        assert!(
            matches!(report.outcome, Err(CallError::Timeout { .. })),
            "{:?}",
            report.outcome
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_in_a_host_import_past_the_deadline_is_timed_out() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let started = Instant::now();
    let report = registry
        .call("BlockInHost", json!({}), "t1", None)
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(
        report.outcome,
        Err(CallError::Timeout {
            gadget: "BlockInHost".into(),
            timeout_ms: 100
        })
    );
    // Generous: the point is it did not sleep for the hour it asked for.
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    assert!(
        elapsed >= Duration::from_millis(100),
        "fired early: {elapsed:?}"
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_bomb_hits_the_memory_limit() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let limits = Limits {
        memory_bytes: 32 << 20,
        ..limits_of(&registry, "MemoryBomb")
    };
    let report = run_with(&registry, "MemoryBomb", json!({}), limits).await;
    assert_eq!(
        report.outcome,
        Err(CallError::MemoryLimit {
            gadget: "MemoryBomb".into(),
            limit_bytes: 32 << 20
        })
    );
    assert!(
        report
            .outcome
            .unwrap_err()
            .to_string()
            .contains("memory limit of 33554432 bytes (32 MiB)")
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbounded_recursion_is_a_stack_overflow() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let report = registry
        .call("Recurse", json!({}), "t1", None)
        .await
        .unwrap();
    match &report.outcome {
        Err(CallError::Crashed { gadget, reason }) => {
            assert_eq!(gadget, "Recurse");
            assert!(reason.contains("stack overflow"), "{reason}");
        }
        other => panic!("expected a crash, got {other:?}"),
    }
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_a_crash_with_the_panic_message() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let report = registry.call("Panic", json!({}), "t1", None).await.unwrap();
    match &report.outcome {
        Err(CallError::Crashed { reason, .. }) => {
            assert!(reason.contains("unreachable"), "{reason}");
            assert!(reason.contains("deliberate panic in fixture"), "{reason}");
        }
        other => panic!("expected a crash, got {other:?}"),
    }
    let report = registry
        .call("Unreachable", json!({}), "t2", None)
        .await
        .unwrap();
    assert!(
        matches!(&report.outcome, Err(CallError::Crashed { reason, .. }) if reason.contains("unreachable"))
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_result_is_refused_with_sizes() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let limits = Limits {
        result_bytes: 1 << 20,
        ..limits_of(&registry, "Oversized")
    };
    let report = run_with(
        &registry,
        "Oversized",
        json!({ "bytes": 2 << 20 }),
        limits.clone(),
    )
    .await;
    assert_eq!(
        report.outcome,
        Err(CallError::ResultTooLarge {
            gadget: "Oversized".into(),
            size_bytes: 2 << 20,
            limit_bytes: 1 << 20
        })
    );
    // Exactly at the limit is fine.
    let report = run_with(&registry, "Oversized", json!({ "bytes": 1 << 20 }), limits).await;
    assert!(report.outcome.is_ok(), "{:?}", report.outcome.err());
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_is_bounded_and_counted() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let limits = limits_of(&registry, "LogFlood");
    let report = run_with(&registry, "LogFlood", json!({}), limits.clone()).await;
    assert_eq!(
        report.outcome,
        Ok(Outcome::Result {
            result: "flooded".into(),
            details: None,
            rich: None
        })
    );
    let kept: usize = report.logs.iter().map(|l| l.message.len()).sum::<usize>()
        + report.progress.iter().map(String::len).sum::<usize>()
        + report
            .updates
            .iter()
            .map(|u| u.partial.len())
            .sum::<usize>();
    assert!(kept as u64 <= limits.log_bytes, "kept {kept} bytes");
    assert!(
        report.dropped_log_entries > 10_000,
        "dropped {}",
        report.dropped_log_entries
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_floods_are_captured_up_to_the_limit() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let limits = limits_of(&registry, "StdioFlood");
    let report = run_with(&registry, "StdioFlood", json!({}), limits.clone()).await;
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    for captured in [&report.stdout, &report.stderr] {
        assert_eq!(captured.bytes.len() as u64, limits.stdio_bytes);
        assert_eq!(captured.dropped, (16 << 20) - limits.stdio_bytes);
    }
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_finite_and_negative_costs_are_refused_and_logged() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let report = registry
        .call("BadCost", json!({}), "t1", None)
        .await
        .unwrap();
    assert!(report.outcome.is_ok());
    assert_eq!(report.cost, 0.25, "only the valid report counts");
    let warnings = host_warnings(&report);
    // The first refusal is shown, the others counted in one line.
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(
        warnings[0].contains("NaN") && warnings[0].contains("finite"),
        "{warnings:?}"
    );
    assert!(warnings[1].contains("returned cost -3"), "{warnings:?}");
    assert!(
        warnings[2].contains("refused 3 reported costs in all"),
        "{warnings:?}"
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_costs_survive_a_failure() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let report = registry
        .call("CostThenFail", json!({}), "t1", None)
        .await
        .unwrap();
    assert_eq!(
        report.outcome,
        Err(CallError::Failed {
            message: "the upstream API said no".into()
        })
    );
    assert_eq!(report.cost, 0.01);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_gets_a_fresh_instance_and_calls_run_in_parallel() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = Arc::new(common::misbehave(&runtime).await);
    let mut handles = Vec::new();
    for i in 0..64 {
        let registry = registry.clone();
        handles.push(tokio::spawn(async move {
            registry
                .call(
                    "Echo",
                    json!({ "text": format!("n{i}") }),
                    &format!("c{i}"),
                    None,
                )
                .await
        }));
    }
    for (i, handle) in handles.into_iter().enumerate() {
        let report = handle.await.unwrap().unwrap();
        assert_eq!(
            report.outcome,
            Ok(Outcome::Result {
                result: format!("n{i}"),
                details: None,
                rich: None
            })
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_json_from_a_gadget_is_refused_unparsed_and_the_call_succeeds() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let report = registry
        .call("JsonBombs", json!({}), "t1", None)
        .await
        .unwrap();
    assert_eq!(
        report.outcome,
        Ok(Outcome::Result {
            result: "done".into(),
            details: None,
            rich: None
        }),
        "the details are dropped, the result kept"
    );
    let gadget_logs: Vec<_> = report
        .logs
        .iter()
        .filter(|l| l.source == LogSource::Gadget)
        .collect();
    assert!(!gadget_logs.is_empty());
    for log in &gadget_logs {
        let note = log.fields["fields_dropped"].as_str().unwrap_or_default();
        assert!(note.contains("over the 16384-byte limit"), "{log:?}");
    }
    assert!(report.updates.iter().all(|u| u.details.is_none()));
    let warnings = host_warnings(&report);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("result's details") && w.contains("65536-byte limit")),
        "{warnings:?}"
    );
    // Everything kept is within the call's log volume.
    let kept: usize = report
        .logs
        .iter()
        .map(|l| l.message.len() + l.fields.to_string().len())
        .sum();
    assert!(kept < 64 << 10, "kept {kept} bytes");
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_flood_is_counted_not_logged_and_the_total_stays_finite() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let report = registry
        .call("CostFlood", json!({}), "t1", None)
        .await
        .unwrap();
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    assert!(report.cost.is_finite(), "{}", report.cost);
    assert_eq!(report.cost, f64::MAX);
    let warnings = host_warnings(&report);
    assert!(warnings.len() <= 3, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("refused 2000001 reported costs in all")),
        "{warnings:?}"
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gadget_that_exits_is_reported_as_exited_with_its_status() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let report = registry.call("Exit", json!({}), "t1", None).await.unwrap();
    let error = report.outcome.unwrap_err();
    // WASI 0.2's `exit` carries success or failure only: status 3 is 1.
    assert_eq!(
        error,
        CallError::Exited {
            gadget: "Exit".into(),
            status: 1
        }
    );
    assert_eq!(
        error.to_string(),
        "Gadget 'Exit' exited with status 1 instead of returning a result"
    );
    next_call_is_served(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_error_message_is_cut_to_the_message_limit() {
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::misbehave(&runtime).await;
    let report = registry
        .call("HugeError", json!({}), "t1", None)
        .await
        .unwrap();
    let Err(CallError::Failed { message }) = report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert!(message.len() < (16 << 10) + 64, "{}", message.len());
    assert!(message.ends_with(&format!("[truncated {} bytes]", (20 << 20) - (16 << 10))));
}
