//! Every rule of the scheduler with plain values, and random sessions
//! against its invariants.

use super::*;
use std::time::{Duration, Instant};

fn spec(id: &str, deps: &[&str]) -> CallSpec {
    CallSpec {
        invocation_id: id.into(),
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
        gadget: Some(GadgetHints {
            key: "g".into(),
            exclusive: false,
            max_concurrent: 0,
            group: None,
        }),
    }
}

fn hinted(id: &str, key: &str, exclusive: bool, max_concurrent: u32) -> CallSpec {
    CallSpec {
        gadget: Some(GadgetHints {
            key: key.into(),
            exclusive,
            max_concurrent,
            group: None,
        }),
        ..spec(id, &[])
    }
}

/// A call of plugin `group`'s gadget.
fn grouped(id: &str, group: &str, exclusive: bool) -> CallSpec {
    CallSpec {
        gadget: Some(GadgetHints {
            key: String::new(),
            exclusive,
            max_concurrent: 0,
            group: Some(group.into()),
        }),
        ..spec(id, &[])
    }
}

fn skip(_: CallIx, _: &str, _: &str) -> DependencyPolicy {
    DependencyPolicy::Skip
}

/// A scheduler under test, naming calls by invocation id.
struct Harness {
    s: Scheduler,
    log: Vec<String>,
    policy: fn(CallIx, &str, &str) -> DependencyPolicy,
}

impl Harness {
    fn new(config: ScheduleConfig) -> Self {
        Harness {
            s: Scheduler::new(config),
            log: Vec::new(),
            policy: skip,
        }
    }
    fn record(&mut self, actions: Vec<Action>) {
        for action in actions {
            let id = |c: CallIx| self.s.spec(c).invocation_id.clone();
            let line = match action {
                Action::Start(c) => format!("start {}", id(c)),
                Action::Skip(c, reason) => format!("skip {}: {reason}", id(c)),
                Action::Fallback(c, text) => format!("fallback {}: {text}", id(c)),
                Action::DuplicateId(c) => format!("duplicate {}", id(c)),
            };
            self.log.push(line);
        }
    }
    fn add(&mut self, spec: CallSpec) -> &mut Self {
        let (_, actions) = self.s.add(spec, &mut self.policy);
        self.record(actions);
        self
    }
    fn done(&mut self, id: &str, outcome: Result<(), &str>) -> &mut Self {
        let call = self.s.call_of(id).expect("a known id");
        let actions = self.s.finished(
            call,
            outcome.map_err(str::to_string),
            true,
            &mut self.policy,
        );
        self.record(actions);
        self
    }
    fn end(&mut self) -> &mut Self {
        let actions = self.s.end_of_stream(&mut self.policy);
        self.record(actions);
        self
    }
    fn take(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log)
    }
}

#[test]
fn independent_calls_start_at_once_and_dependents_as_soon_as_their_dependencies_succeed() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("a", &[]))
        .add(spec("b", &[]))
        .add(spec("c", &["a"]));
    assert_eq!(h.take(), ["start a", "start b"]);
    h.done("a", Ok(()));
    assert_eq!(h.take(), ["start c"], "c does not wait for b");
    h.done("b", Ok(())).done("c", Ok(())).end();
    assert!(h.take().is_empty());
    assert!(h.s.idle());
}

#[test]
fn a_failed_dependency_skips_dependents_transitively_with_llmists_reasons() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("e1", &[]))
        .add(spec("e2", &["e1"]))
        .add(spec("e3", &["e2"]));
    h.take();
    h.done("e1", Err("boom"));
    assert_eq!(h.take(), ["skip e2: boom", "skip e3: Dependency failed"]);
    // A later call on a failed id is skipped at once.
    h.add(spec("e4", &["e1"]));
    assert_eq!(h.take(), ["skip e4: boom"]);
    assert!(h.s.idle());
}

#[test]
fn execute_anyway_and_fallback_policies() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.policy = |_, _, _| DependencyPolicy::ExecuteAnyway;
    h.add(spec("a", &[])).add(spec("b", &["a"]));
    h.take();
    h.done("a", Err("boom"));
    assert_eq!(h.take(), ["start b"]);

    let mut h = Harness::new(ScheduleConfig::default());
    h.policy = |_, _, _| DependencyPolicy::UseFallback("default value".into());
    h.add(spec("a", &[]))
        .add(spec("b", &["a"]))
        .add(spec("c", &["b"]));
    h.take();
    h.done("a", Err("boom"));
    assert_eq!(
        h.take(),
        ["fallback b: default value", "start c"],
        "a fallback counts as a success"
    );
}

#[test]
fn self_dependencies_are_dropped_and_a_call_on_only_itself_is_skipped() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("s1", &["s1"]))
        .add(spec("x", &[]))
        .add(spec("s2", &["s2", "x"]));
    assert_eq!(
        h.take(),
        [
            "skip s1: Gadget \"s1\" cannot depend on itself (self-referential dependency)",
            "start x"
        ]
    );
    h.done("x", Ok(()));
    assert_eq!(h.take(), ["start s2"]);
}

#[test]
fn a_cycle_is_skipped_as_soon_as_it_closes_and_its_dependents_follow() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("x", &["y"])).add(spec("z", &["x"]));
    assert!(h.take().is_empty());
    h.add(spec("y", &["x"]));
    assert_eq!(
        h.take(),
        [
            "skip x: Circular dependency detected: \"x\" depends on \"y\" which also depends on \"x\" (directly or indirectly)",
            "skip y: Circular dependency detected: \"y\" depends on \"x\" which also depends on \"y\" (directly or indirectly)",
            "skip z: Dependency failed",
        ]
    );
    assert!(h.s.idle(), "nothing waits for the end of the stream");
}

#[test]
fn ids_never_written_are_skipped_at_the_end_of_the_stream() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("m1", &["nope"])).add(spec("m2", &["m1"]));
    assert!(h.take().is_empty());
    h.end();
    assert_eq!(
        h.take(),
        [
            "skip m1: Dependency \"nope\" was never executed - check that the invocation ID exists and is spelled correctly",
            "skip m2: Dependency failed",
        ]
    );
    // A dependency written later in the stream is simply waited for.
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("late", &["early"])).add(spec("early", &[]));
    assert_eq!(h.take(), ["start early"]);
    h.done("early", Ok(()));
    assert_eq!(h.take(), ["start late"]);
}

#[test]
fn a_reused_id_fails_the_later_call_and_dependents_follow_the_first() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("d", &[]))
        .add(spec("d", &[]))
        .add(spec("after", &["d"]));
    assert_eq!(h.take(), ["start d", "duplicate d"]);
    h.done("d", Ok(()));
    assert_eq!(h.take(), ["start after"]);
    assert!(duplicate_id_error("d").contains("already used"));
}

#[test]
fn ids_of_earlier_responses_resolve_at_once() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("a", &[])).add(spec("f", &[]));
    h.done("a", Ok(())).done("f", Err("bad")).end();
    h.take();
    h.s.next_response();
    h.add(spec("b", &["a"])).add(spec("c", &["f"]));
    assert_eq!(h.take(), ["start b", "skip c: bad"]);
    // Ids stay unique across the session.
    h.add(spec("a", &[]));
    assert_eq!(h.take(), ["duplicate a"]);
}

#[test]
fn max_parallel_and_sequential_start_in_parse_order() {
    let config = ScheduleConfig {
        max_parallel: 2,
        ..ScheduleConfig::default()
    };
    let mut h = Harness::new(config);
    for id in ["a", "b", "c", "d"] {
        h.add(spec(id, &[]));
    }
    assert_eq!(h.take(), ["start a", "start b"]);
    h.done("b", Ok(()));
    assert_eq!(h.take(), ["start c"]);

    let mut h = Harness::new(ScheduleConfig {
        strategy: Strategy::Sequential,
        ..ScheduleConfig::default()
    });
    h.add(spec("a", &[])).add(spec("b", &[]));
    assert_eq!(h.take(), ["start a"]);
    h.done("a", Ok(()));
    assert_eq!(h.take(), ["start b"]);
}

#[test]
fn batches_start_together_and_the_next_waits_for_the_whole_batch() {
    let mut h = Harness::new(ScheduleConfig {
        strategy: Strategy::Batched { size: 2 },
        ..ScheduleConfig::default()
    });
    for id in ["a", "b", "c", "d", "e"] {
        h.add(spec(id, &[]));
    }
    assert_eq!(h.take(), ["start a", "start b"]);
    h.done("a", Ok(()));
    assert!(h.take().is_empty(), "b is still running");
    h.done("b", Ok(()));
    assert_eq!(h.take(), ["start c", "start d"]);
}

#[test]
fn exclusive_runs_alone_and_max_concurrent_applies_to_dependents_too() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("a", &[]))
        .add(hinted("x", "finish", true, 0))
        .add(spec("b", &[]));
    assert_eq!(h.take(), ["start a"], "x waits for a; b does not pass x");
    h.done("a", Ok(()));
    assert_eq!(h.take(), ["start x"]);
    h.done("x", Ok(()));
    assert_eq!(h.take(), ["start b"]);

    let mut h = Harness::new(ScheduleConfig::default());
    h.add(spec("p", &[]))
        .add(CallSpec {
            dependencies: vec!["p".into()],
            ..hinted("l1", "limited", false, 1)
        })
        .add(CallSpec {
            dependencies: vec!["p".into()],
            ..hinted("l2", "limited", false, 1)
        })
        .add(spec("free", &["p"]));
    assert_eq!(h.take(), ["start p"]);
    h.done("p", Ok(()));
    assert_eq!(h.take(), ["start l1", "start free"], "l2 waits for l1");
    h.done("l1", Ok(()));
    assert_eq!(h.take(), ["start l2"]);
}

#[test]
fn a_plugins_exclusive_gadget_holds_only_that_plugins_calls() {
    let mut h = Harness::new(ScheduleConfig::default());
    h.add(grouped("p1", "evil", false))
        .add(grouped("x", "evil", true))
        .add(grouped("p2", "evil", false))
        .add(spec("other", &[]))
        .add(grouped("q", "good", false));
    // x waits for p1; p2 does not pass x; every other call starts.
    assert_eq!(h.take(), ["start p1", "start other", "start q"]);
    h.done("p1", Ok(()));
    assert_eq!(h.take(), ["start x"]);
    // While x runs, its plugin's calls wait and others start at once.
    h.add(spec("later", &[])).add(grouped("p3", "evil", false));
    assert_eq!(h.take(), ["start later"]);
    h.done("x", Ok(()));
    assert_eq!(h.take(), ["start p2", "start p3"]);
}

#[test]
fn many_dependencies_settle_in_linear_time_and_too_many_are_refused() {
    let mut h = Harness::new(ScheduleConfig {
        max_parallel: usize::MAX,
        ..ScheduleConfig::default()
    });
    let ids: Vec<String> = (0..MAX_DEPENDENCIES_PER_CALL)
        .map(|i| format!("c{i}"))
        .collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    for id in &refs {
        h.add(spec(id, &[]));
    }
    // Ten calls waiting on every one of them, each dependency twice.
    let mut doubled = refs.clone();
    doubled.extend(&refs);
    for i in 0..10 {
        h.add(spec(&format!("all{i}"), &doubled));
    }
    let mut too_many: Vec<String> = ids.clone();
    too_many.push("c0x".into());
    let too_many: Vec<&str> = too_many.iter().map(String::as_str).collect();
    h.add(spec("over", &too_many));
    let log = h.take();
    assert!(
        log.iter()
            .any(|l| l.starts_with("skip over") && l.contains("1001 dependencies")),
        "{log:?}"
    );
    let started = Instant::now();
    for id in &refs {
        h.done(id, Ok(()));
    }
    let log = h.take();
    assert_eq!(
        log.iter().filter(|l| l.starts_with("start all")).count(),
        10
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn max_calls_per_response_skips_the_next_call_and_stops_reading() {
    let mut h = Harness::new(ScheduleConfig {
        max_calls_per_response: Some(2),
        ..ScheduleConfig::default()
    });
    h.add(spec("a", &[]))
        .add(spec("b", &[]))
        .add(spec("c", &[]));
    assert_eq!(
        h.take(),
        [
            "start a",
            "start b",
            "skip c: Gadget limit (2) exceeded. Consider calling fewer gadgets per response."
        ]
    );
    assert!(h.s.stop_reading());
    h.s.next_response();
    assert!(!h.s.stop_reading());
}

#[test]
fn stop_on_error_skips_what_has_not_started_and_stops_reading() {
    let mut h = Harness::new(ScheduleConfig {
        stop_on_error: true,
        max_parallel: 1,
        ..ScheduleConfig::default()
    });
    h.add(spec("a", &[]))
        .add(spec("b", &[]))
        .add(spec("c", &["b"]));
    assert_eq!(h.take(), ["start a"]);
    h.done("a", Err("boom"));
    let log = h.take();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log.iter().all(|l| l.contains("stop-on-error")), "{log:?}");
    assert!(h.s.stop_reading());
    assert!(h.s.idle());
}

#[test]
fn an_interrupt_skips_every_call_not_started_and_stops_reading() {
    let mut h = Harness::new(ScheduleConfig {
        max_parallel: 1,
        ..ScheduleConfig::default()
    });
    h.add(spec("sleep", &[]))
        .add(spec("write", &[]))
        .add(spec("after", &["sleep"]));
    assert_eq!(h.take(), ["start sleep"]);
    let actions = h.s.interrupt();
    h.record(actions);
    let log = h.take();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log.iter()
            .all(|l| l.contains("(interrupted) before this call started")),
        "{log:?}"
    );
    assert!(h.s.stop_reading());
    // The running call ends (cancelled); nothing else starts.
    h.done("sleep", Err("cancelled"));
    assert_eq!(h.take(), Vec::<String>::new());
    assert!(h.s.idle());
}

proptest::proptest! {
    /// Random responses (ids, dependencies on earlier, later, missing
    /// and own ids, duplicates, hints), random outcomes and finishing
    /// order, every strategy: every call ends exactly once, nothing
    /// starts before its dependencies succeeded, the limits hold, and
    /// the session ends idle.
    #[test]
    fn every_call_ends_once_and_no_rule_is_broken(
        calls in proptest::collection::vec(
            (0u8..12, proptest::collection::vec(0u8..14, 0..3), 0u8..6, proptest::bool::ANY),
            0..16,
        ),
        strategy in 0u8..3,
        max_parallel in 1usize..4,
        finish_order in proptest::collection::vec(proptest::num::usize::ANY, 0..64),
    ) {
        let strategy = match strategy {
            0 => Strategy::Parallel,
            1 => Strategy::Sequential,
            _ => Strategy::Batched { size: 2 },
        };
        let config = ScheduleConfig { strategy, max_parallel, ..ScheduleConfig::default() };
        let limit = if strategy == Strategy::Sequential { 1 } else { max_parallel };
        let mut s = Scheduler::new(config);
        let mut ended = vec![0u32; calls.len()];
        let mut succeeded: Vec<String> = Vec::new();
        let mut running: Vec<CallIx> = Vec::new();
        let mut order = finish_order.into_iter();
        let mut policy = |_: CallIx, _: &str, _: &str| DependencyPolicy::Skip;
        let apply = |actions: Vec<Action>, s: &Scheduler, running: &mut Vec<CallIx>, ended: &mut [u32], succeeded: &[String]| {
            for action in actions {
                match action {
                    Action::Start(c) => {
                        for dep in &s.spec(c).dependencies {
                            if *dep != s.spec(c).invocation_id {
                                assert!(succeeded.contains(dep), "{} started before {dep}", s.spec(c).invocation_id);
                            }
                        }
                        running.push(c);
                        assert!(running.len() <= limit, "{} running, limit {limit}", running.len());
                        let hints = |c: &CallIx| s.spec(*c).gadget.clone().unwrap();
                        let exclusive = running.iter().filter(|c| hints(c).exclusive && hints(c).group.is_none()).count();
                        assert!(exclusive == 0 || running.len() == 1, "an exclusive call ran beside others");
                        let grouped = running.iter().filter(|c| hints(c).group.is_some()).count();
                        let group_exclusive = running.iter().filter(|c| hints(c).exclusive && hints(c).group.is_some()).count();
                        assert!(group_exclusive == 0 || grouped == 1, "a group's exclusive call ran beside its group");
                    }
                    Action::Skip(c, _) | Action::Fallback(c, _) | Action::DuplicateId(c) => ended[c] += 1,
                }
            }
        };
        for (i, (id, deps, hint, fails)) in calls.iter().enumerate() {
            let spec = CallSpec {
                invocation_id: format!("c{id}"),
                dependencies: deps.iter().map(|d| format!("c{d}")).collect(),
                // 4 and 5: a plugin's calls, 4 exclusive within it.
                gadget: Some(GadgetHints { key: format!("g{}", hint % 2), exclusive: *hint == 3 || *hint == 4, max_concurrent: u32::from(*hint == 2), group: (*hint >= 4).then(|| "plugin".into()) }),
            };
            let (call, actions) = s.add(spec, &mut policy);
            assert_eq!(call, i);
            apply(actions, &s, &mut running, &mut ended, &succeeded);
            // Sometimes finish a running call between parses.
            if let Some(pick) = order.next().filter(|p| p % 2 == 0 && !running.is_empty()) {
                let c = running.remove(pick % running.len());
                ended[c] += 1;
                let outcome = if calls[c].3 { Err("failed".to_string()) } else { succeeded.push(s.spec(c).invocation_id.clone()); Ok(()) };
                let actions = s.finished(c, outcome, true, &mut policy);
                apply(actions, &s, &mut running, &mut ended, &succeeded);
            }
            let _ = fails;
        }
        let actions = s.end_of_stream(&mut policy);
        apply(actions, &s, &mut running, &mut ended, &succeeded);
        while !running.is_empty() {
            let pick = order.next().unwrap_or(0);
            let c = running.remove(pick % running.len());
            ended[c] += 1;
            let outcome = if calls[c].3 { Err("failed".to_string()) } else { succeeded.push(s.spec(c).invocation_id.clone()); Ok(()) };
            let actions = s.finished(c, outcome, true, &mut policy);
            apply(actions, &s, &mut running, &mut ended, &succeeded);
        }
        proptest::prop_assert!(ended.iter().all(|&n| n == 1), "ended counts {:?}", ended);
        proptest::prop_assert!(s.idle());
    }
}
