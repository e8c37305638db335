//! Approvals in the executor, with fake tools and approvers on tokio's
//! paused clock (deterministic): only the waiting call waits, its deadline
//! starts when it is approved, an unanswered approval is denied at the
//! timeout and its dependents are skipped, a session-wide approval covers
//! later calls, a stop ends the wait, and deny rules refuse by argument.

mod support;

use std::time::Duration;

use gadget_core::approval::{
    ApprovalRequest, Approvals, Approver, Decider, RuleAction, RuleSpec, Rules, Verdict,
    VerdictFuture,
};
use support::*;

/// Answers each request after `delay` with `verdict`; counts the asks.
struct Scripted {
    delay: Duration,
    verdict: Option<Verdict>,
    asked: AtomicUsize,
}

impl Approver for Scripted {
    fn decide<'a>(&'a self, _request: &'a ApprovalRequest) -> VerdictFuture<'a> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            match &self.verdict {
                Some(verdict) => verdict.clone(),
                // Nobody ever answers.
                None => std::future::pending().await,
            }
        })
    }
}

fn scripted(delay_ms: u64, verdict: Option<Verdict>) -> Arc<Scripted> {
    Arc::new(Scripted {
        delay: Duration::from_millis(delay_ms),
        verdict,
        asked: AtomicUsize::new(0),
    })
}

fn approved(for_session: bool) -> Option<Verdict> {
    Some(Verdict::Approved {
        by: Decider::Terminal,
        for_session,
    })
}

/// When each run began, and the timeout it was given.
type Runs = Arc<Mutex<Vec<(tokio::time::Instant, Option<Duration>)>>>;

/// Records when its run began (the deadline the runtime computes starts
/// there) and the timeout it was given.
fn timed(started: Runs) -> Arc<dyn Tool> {
    fake(spec("Guarded", ""), move |call| {
        started
            .lock()
            .unwrap()
            .push((tokio::time::Instant::now(), call.deadline));
        Box::pin(async move { report(result("guarded ran"), 0.0) })
    })
}

fn gated(tools: Vec<Arc<dyn Tool>>, rules: Rules, approver: Arc<dyn Approver>) -> Executor {
    Executor::new(toolbox(tools), ExecConfig::default())
        .unwrap()
        .with_approvals(Arc::new(Approvals::new(Arc::new(rules), approver)))
}

fn position(events: &[ExecEvent], wanted: impl Fn(&ExecEvent) -> bool) -> usize {
    events
        .iter()
        .position(wanted)
        .unwrap_or_else(|| panic!("no such event: {events:#?}"))
}

#[tokio::test(start_paused = true)]
async fn only_the_waiting_call_waits_and_its_deadline_starts_when_approved() {
    let started = Arc::new(Mutex::new(Vec::new()));
    let rules = Rules::new(vec!["Guarded".into()], Vec::new(), None).unwrap();
    let approver = scripted(500, approved(false));
    let mut executor = gated(vec![timed(started.clone()), echo()], rules, approver);
    let t0 = tokio::time::Instant::now();
    let response = format!(
        "{}{}",
        block("Guarded", "a", "", &[]),
        block("Echo", "b", "", &[("text", "free"), ("delay_ms", "100")]),
    );
    let (events, summary) = run(&mut executor, &response).await;
    assert_eq!(summary.succeeded, 2, "{events:#?}");
    let requested = position(
        &events,
        |e| matches!(e, ExecEvent::ApprovalRequested { id, .. } if id == "a"),
    );
    let decided = position(
        &events,
        |e| matches!(e, ExecEvent::ApprovalDecided { id, approved: true, by: Decider::Terminal, .. } if id == "a"),
    );
    let a_started = position(
        &events,
        |e| matches!(e, ExecEvent::CallStarted { id, .. } if id == "a"),
    );
    let b_finished = position(
        &events,
        |e| matches!(e, ExecEvent::CallFinished { id, .. } if id == "b"),
    );
    // The free call ran and finished while the guarded one waited.
    assert!(
        requested < b_finished && b_finished < decided,
        "{events:#?}"
    );
    assert!(decided < a_started, "{events:#?}");
    // The tool ran only after the approval, with its whole timeout.
    let runs = started.lock().unwrap().clone();
    assert_eq!(runs.len(), 1);
    assert!(
        runs[0].0 - t0 >= Duration::from_millis(500),
        "{:?}",
        runs[0].0 - t0
    );
    assert_eq!(runs[0].1, Some(Duration::from_secs(30)));
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_approval_is_denied_at_the_timeout_and_dependents_are_skipped() {
    let started = Arc::new(Mutex::new(Vec::new()));
    let rules = Rules::new(
        vec!["guarded".into()],
        Vec::new(),
        Some(Duration::from_millis(1500)),
    )
    .unwrap();
    let mut executor = gated(
        vec![timed(started.clone()), echo()],
        rules,
        scripted(0, None),
    );
    let t0 = tokio::time::Instant::now();
    let response = format!(
        "{}{}",
        block("Guarded", "a", "", &[]),
        block("Echo", "after", "a", &[("text", "never")]),
    );
    let (events, summary) = run(&mut executor, &response).await;
    assert_eq!((summary.failed, summary.skipped), (1, 1), "{events:#?}");
    let (_, _, error) = finished(&events, "a");
    let error = error.unwrap();
    assert_eq!(error.kind, FailureKind::NotApproved);
    assert!(
        error.message.contains("nobody approved it within 1500 ms"),
        "{}",
        error.message
    );
    assert!(
        events.iter().any(|e| matches!(e,
        ExecEvent::ApprovalDecided { id, approved: false, by: Decider::Timeout, .. } if id == "a"))
    );
    assert!(events.iter().any(|e| matches!(e,
        ExecEvent::CallSkipped { id, reason, .. } if id == "after" && reason.failed_dependency() == "a")));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ExecEvent::CallStarted { id, .. } if id == "a"))
    );
    assert!(started.lock().unwrap().is_empty(), "the tool never ran");
    assert!(tokio::time::Instant::now() - t0 >= Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn a_session_approval_covers_later_calls_and_a_stop_ends_the_wait() {
    let started = Arc::new(Mutex::new(Vec::new()));
    let rules = Rules::new(vec!["Guarded".into()], Vec::new(), None).unwrap();
    let approver = scripted(10, approved(true));
    let mut executor = gated(vec![timed(started.clone())], rules, approver.clone());
    let response = format!(
        "{}{}",
        block("Guarded", "first", "", &[]),
        block("Guarded", "second", "first", &[]),
    );
    let (events, summary) = run(&mut executor, &response).await;
    assert_eq!(summary.succeeded, 2, "{events:#?}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1, "asked once");
    assert!(events.iter().any(|e| matches!(e,
        ExecEvent::ApprovalDecided { id, approved: true, by: Decider::Session, .. } if id == "second")));

    // Nobody answers; the run is stopped: the wait ends at once.
    let rules = Rules::new(vec!["Guarded".into()], Vec::new(), None).unwrap();
    let mut executor = gated(vec![timed(started.clone())], rules, scripted(0, None));
    let abort = executor.abort_handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        abort.abort();
    });
    let t0 = tokio::time::Instant::now();
    let (events, _) = run(&mut executor, &block("Guarded", "held", "", &[])).await;
    assert!(tokio::time::Instant::now() - t0 < Duration::from_secs(1));
    assert!(events.iter().any(|e| matches!(e,
        ExecEvent::ApprovalDecided { id, approved: false, by: Decider::Stopped, .. } if id == "held")), "{events:#?}");
    assert_eq!(started.lock().unwrap().len(), 2, "the held call never ran");
}

#[tokio::test(start_paused = true)]
async fn rules_on_arguments_refuse_or_ask_and_leave_the_rest_alone() {
    let spec_of = |action, glob: &str, reason: &str| RuleSpec {
        gadget: "Echo".into(),
        param: "/text".into(),
        matches: Some(glob.into()),
        regex: None,
        action,
        reason: Some(reason.into()),
        kind: None,
        client: None,
    };
    let rules = Rules::new(
        Vec::new(),
        vec![
            spec_of(RuleAction::Deny, "*secret*", "secrets stay home"),
            spec_of(RuleAction::Approve, "ask *", "asking first"),
        ],
        None,
    )
    .unwrap();
    let approver = scripted(0, approved(false));
    let mut executor = gated(vec![echo()], rules, approver.clone());
    let response = format!(
        "{}{}{}",
        block("Echo", "denied", "", &[("text", "the secret plan")]),
        block("Echo", "asked", "", &[("text", "ask first")]),
        block("Echo", "free", "", &[("text", "hello")]),
    );
    let (events, summary) = run(&mut executor, &response).await;
    assert_eq!((summary.succeeded, summary.failed), (2, 1), "{events:#?}");
    let (_, _, error) = finished(&events, "denied");
    let error = error.unwrap();
    assert_eq!(error.kind, FailureKind::NotApproved);
    assert!(
        error.message.contains("secrets stay home"),
        "{}",
        error.message
    );
    assert!(events.iter().any(|e| matches!(e,
        ExecEvent::ApprovalDecided { id, approved: false, by: Decider::Rule, .. } if id == "denied")));
    assert_eq!(
        approver.asked.load(Ordering::SeqCst),
        1,
        "only 'asked' was asked"
    );
    assert_eq!(finished(&events, "asked").1.as_deref(), Some("ask first"));
    assert_eq!(finished(&events, "free").1.as_deref(), Some("hello"));
}
