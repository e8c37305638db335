//! Which gadget call runs when: the dependency graph and the concurrency
//! rules of one session, as a pure state machine.
//!
//! The executor tells the [`Scheduler`] what happens (a call was parsed,
//! a call finished, the stream ended) and gets back [`Action`]s: start
//! this call, skip that one with a reason, give this one a fallback
//! result. No I/O, no clock, no tokio: every rule is unit-tested here with
//! plain values, and the executor only carries the actions out.
//!
//! The rules (llmist reference §4(a), with our deliberate differences):
//! - a call starts as soon as its block is complete and every dependency
//!   has succeeded, not in waves; concurrency limits apply to every call,
//!   dependents included;
//! - a failed dependency is resolved by a [`DependencyPolicy`]: skip
//!   (default, transitively), execute anyway, or a fallback result;
//! - self-dependencies are dropped; a call that depended only on itself is
//!   skipped. Cycles are skipped as soon as they close; ids never seen are
//!   skipped at the end of the stream, with llmist's texts;
//! - an invocation id already used in the session fails the later call
//!   (llmist hangs on this);
//! - ids of earlier responses in the session resolve at once.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::chunked::ChunkedVec;

/// A call's index in the session, in parse order.
pub type CallIx = usize;

/// How calls without pending dependencies share the machine (the seeds'
/// execution strategies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// As many at once as the limits allow.
    Parallel,
    /// One at a time, in parse order.
    Sequential,
    /// Groups of up to `size`: the next group starts when the whole group
    /// has finished (a checkpoint between groups).
    Batched { size: usize },
}

/// What to do with a call whose dependency failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DependencyPolicy {
    /// Skip it (and, in turn, its dependents). The default.
    Skip,
    /// Run it as if the dependency had succeeded.
    ExecuteAnyway,
    /// Do not run it; its result is this text, and it counts as a success.
    UseFallback(String),
}

/// The limits and switches of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleConfig {
    pub strategy: Strategy,
    /// Calls running at once, over all gadgets.
    pub max_parallel: usize,
    /// Calls accepted per response; the next one is skipped and the
    /// response is not read further. `None`: no limit.
    pub max_calls_per_response: Option<usize>,
    /// After the first failure, skip every call of the response not yet
    /// started, and stop reading it (the seeds' stop-on-error).
    pub stop_on_error: bool,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            strategy: Strategy::Parallel,
            max_parallel: DEFAULT_MAX_PARALLEL,
            max_calls_per_response: None,
            stop_on_error: false,
        }
    }
}

/// Dependencies one call may name: far more than any real plan needs, and
/// a bound on the bookkeeping one call can cost (each dependency is a
/// string kept until the call starts, and an entry in a reverse index).
pub const MAX_DEPENDENCIES_PER_CALL: usize = 1_000;

/// Calls running at once by default: enough to overlap I/O-bound gadgets
/// (a 100-call response of 200 ms sleeps finishes in about one sleep),
/// few enough that each instance's memory reservation stays modest.
pub const DEFAULT_MAX_PARALLEL: usize = 128;

/// What the scheduler needs to know of one parsed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSpec {
    pub invocation_id: String,
    /// As parsed (deduplicated, in order).
    pub dependencies: Vec<String>,
    /// The gadget's concurrency hints; `None` when the call will not run a
    /// gadget (an unknown name, a parse error): it finishes at once.
    pub gadget: Option<GadgetHints>,
}

/// A gadget's own concurrency hints (from its spec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GadgetHints {
    /// The gadget's name, case-folded: the key its `max_concurrent` counts
    /// by. Only a gadget with a limit is counted, so only its key is read
    /// (others may leave it empty and save a copy per call).
    pub key: String,
    /// Runs alone: it waits for running calls to finish, and nothing starts
    /// beside it. Within its `group` only, when it has one.
    pub exclusive: bool,
    /// Calls of this gadget running at once; 0 means no limit.
    pub max_concurrent: u32,
    /// The calls an exclusive call of this group runs alone among: a
    /// plugin's own calls, so that a third-party plugin declaring itself
    /// `exclusive` holds only its own calls, not the whole run. `None`: the
    /// whole run (trusted tools, and plugins the operator lets hold it).
    /// Only groups with an exclusive gadget need one; calls with a group
    /// are counted per group.
    pub group: Option<std::sync::Arc<str>>,
}

/// Why a call was skipped. The texts are llmist's where it has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// A dependency failed (or was itself skipped) and the policy said skip.
    DependencyFailed {
        dependency: String,
        error: String,
    },
    SelfDependency {
        id: String,
    },
    Cycle {
        id: String,
        other: String,
    },
    Missing {
        dependency: String,
    },
    TooManyCalls {
        limit: usize,
    },
    /// The call names more dependencies than [`MAX_DEPENDENCIES_PER_CALL`].
    TooManyDependencies {
        count: usize,
    },
    /// Stop-on-error: an earlier call of the response failed.
    Halted {
        failed: String,
    },
}

impl SkipReason {
    /// The id llmist reports as `failedDependency`.
    pub fn failed_dependency(&self) -> &str {
        match self {
            SkipReason::DependencyFailed { dependency, .. } => dependency,
            SkipReason::SelfDependency { id } => id,
            SkipReason::Cycle { other, .. } => other,
            SkipReason::Missing { dependency } => dependency,
            SkipReason::TooManyCalls { .. } => "maxGadgetsPerResponse",
            SkipReason::TooManyDependencies { .. } => "maxDependenciesPerCall",
            SkipReason::Halted { failed } => failed,
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::DependencyFailed { error, .. } => f.write_str(error),
            SkipReason::SelfDependency { id } => write!(
                f,
                "Gadget \"{id}\" cannot depend on itself (self-referential dependency)"
            ),
            SkipReason::Cycle { id, other } => write!(
                f,
                "Circular dependency detected: \"{id}\" depends on \"{other}\" which also depends on \"{id}\" (directly or indirectly)"
            ),
            SkipReason::Missing { dependency } => write!(
                f,
                "Dependency \"{dependency}\" was never executed - check that the invocation ID exists and is spelled correctly"
            ),
            SkipReason::TooManyCalls { limit } => write!(
                f,
                "Gadget limit ({limit}) exceeded. Consider calling fewer gadgets per response."
            ),
            SkipReason::TooManyDependencies { count } => write!(
                f,
                "The call names {count} dependencies, over the limit of {MAX_DEPENDENCIES_PER_CALL} per call: split the work"
            ),
            SkipReason::Halted { failed } => write!(
                f,
                "Skipped: call \"{failed}\" failed earlier in this response and stop-on-error is on"
            ),
        }
    }
}

/// What the executor must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Start(CallIx),
    Skip(CallIx, SkipReason),
    /// The call does not run; its result is this text (a dependency policy's fallback).
    Fallback(CallIx, String),
    /// The call fails without running: its invocation id is taken.
    DuplicateId(CallIx),
}

/// The text of a [`Action::DuplicateId`] failure.
pub fn duplicate_id_error(id: &str) -> String {
    format!(
        "Invocation id \"{id}\" is already used by an earlier call in this session; give each call its own id"
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Waiting for dependency ids to finish: `deps` were unsettled when the
    /// call was parsed, `pending` of them still are. A counter, not a list
    /// to remove from: settling a dependency is O(1) per dependent however
    /// many dependencies it has (30,000 calls and 10 calls depending on
    /// all of them took 14-22 s of CPU with removal from a list).
    Waiting {
        deps: Vec<String>,
        pending: usize,
    },
    Ready,
    Running,
    Succeeded,
    /// Failed, or skipped (`error: None`: "Dependency failed" for its dependents).
    Failed(Option<String>),
}

#[derive(Debug, Clone)]
struct Node {
    spec: CallSpec,
    state: State,
    response: u64,
}

/// How an id of the session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Settled {
    Succeeded,
    Failed(Option<String>),
}

/// The scheduling state of one session (one or more responses).
#[derive(Debug)]
pub struct Scheduler {
    config: ScheduleConfig,
    /// One per call of the session, by index (never moved as it grows).
    nodes: ChunkedVec<Node>,
    /// Invocation id -> the call that owns it.
    ids: HashMap<String, CallIx>,
    /// Dependency id -> calls waiting for it.
    waiting_on: HashMap<String, Vec<CallIx>>,
    ready: BTreeSet<CallIx>,
    running: usize,
    running_exclusive: bool,
    running_per_gadget: HashMap<String, u32>,
    /// Calls running per group (only calls with a group).
    running_per_group: HashMap<std::sync::Arc<str>, u32>,
    /// Groups whose exclusive call is running.
    exclusive_groups: HashSet<std::sync::Arc<str>>,
    /// Starts left in the open batch (`Strategy::Batched`).
    batch_left: usize,
    response: u64,
    calls_this_response: usize,
    /// Set when this response must not be read further.
    stop_reading: bool,
    halted_by: Option<String>,
}

impl Scheduler {
    pub fn new(config: ScheduleConfig) -> Scheduler {
        Scheduler {
            config,
            nodes: ChunkedVec::new(),
            ids: HashMap::new(),
            waiting_on: HashMap::new(),
            ready: BTreeSet::new(),
            running: 0,
            running_exclusive: false,
            running_per_gadget: HashMap::new(),
            running_per_group: HashMap::new(),
            exclusive_groups: HashSet::new(),
            batch_left: 0,
            response: 0,
            calls_this_response: 0,
            stop_reading: false,
            halted_by: None,
        }
    }

    /// Starts the next response of the session: ids of earlier responses
    /// stay resolvable, the per-response limits start over.
    pub fn next_response(&mut self) {
        self.response += 1;
        self.calls_this_response = 0;
        self.stop_reading = false;
        self.halted_by = None;
    }

    /// Calls running now.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Whether a call of an `exclusive` gadget is running (nothing else
    /// starts until it ends).
    pub fn exclusive_running(&self) -> bool {
        self.running_exclusive
    }

    /// For a call of a group: whether the group's exclusive call is
    /// running, and how many of the group's calls are.
    pub fn group_state(&self, call: CallIx) -> Option<(&str, bool, u32)> {
        let group = self.nodes[call].spec.gadget.as_ref()?.group.as_ref()?;
        Some((
            group,
            self.exclusive_groups.contains(group),
            self.running_per_group.get(group).copied().unwrap_or(0),
        ))
    }

    /// Whether the call is ready to start but has not started.
    pub fn is_ready(&self, call: CallIx) -> bool {
        self.nodes[call].state == State::Ready
    }

    /// Whether the executor should stop reading the current response.
    pub fn stop_reading(&self) -> bool {
        self.stop_reading
    }

    /// Whether every call of the session has ended (nothing waits or runs).
    pub fn idle(&self) -> bool {
        self.running == 0
            && self.ready.is_empty()
            && !self
                .nodes
                .iter()
                .any(|n| matches!(n.state, State::Waiting { .. }))
    }

    /// The spec of a call.
    pub fn spec(&self, call: CallIx) -> &CallSpec {
        &self.nodes[call].spec
    }

    /// A call was parsed. Returns its index and what to do now.
    pub fn add(
        &mut self,
        spec: CallSpec,
        policy: &mut dyn FnMut(CallIx, &str, &str) -> DependencyPolicy,
    ) -> (CallIx, Vec<Action>) {
        let call = self.nodes.len();
        let id = spec.invocation_id.clone();
        // Each dependency once: a dependent is counted once per id it waits on.
        let mut unique = HashSet::new();
        let deps: Vec<String> = spec
            .dependencies
            .iter()
            .filter(|d| **d != id && unique.insert(d.as_str()))
            .cloned()
            .collect();
        let only_self = deps.is_empty() && !spec.dependencies.is_empty();
        self.nodes.push(Node {
            spec,
            state: State::Waiting {
                deps: Vec::new(),
                pending: 0,
            },
            response: self.response,
        });
        let mut actions = Vec::new();
        if self.stop_reading {
            // Not reachable through a well-behaved executor; still an answer.
            let reason = match &self.halted_by {
                Some(failed) => SkipReason::Halted {
                    failed: failed.clone(),
                },
                None => SkipReason::TooManyCalls {
                    limit: self.config.max_calls_per_response.unwrap_or(0),
                },
            };
            self.nodes[call].state = State::Failed(None);
            actions.push(Action::Skip(call, reason));
            return (call, actions);
        }
        self.calls_this_response += 1;
        if let Some(limit) = self.config.max_calls_per_response
            && self.calls_this_response > limit
        {
            self.stop_reading = true;
            self.nodes[call].state = State::Failed(None);
            actions.push(Action::Skip(call, SkipReason::TooManyCalls { limit }));
            return (call, actions);
        }
        if self.ids.contains_key(&id) {
            // The id keeps pointing at its first owner.
            self.nodes[call].state = State::Failed(Some(duplicate_id_error(&id)));
            // Its dependents wait for the owner: nothing settles here.
            actions.push(Action::DuplicateId(call));
            return (call, actions);
        }
        self.ids.insert(id.clone(), call);
        if deps.len() > MAX_DEPENDENCIES_PER_CALL {
            self.nodes[call].state = State::Failed(None);
            actions.push(Action::Skip(
                call,
                SkipReason::TooManyDependencies { count: deps.len() },
            ));
            self.settle(call, policy, &mut actions);
            self.pump(&mut actions);
            return (call, actions);
        }
        if only_self {
            self.nodes[call].state = State::Failed(None);
            actions.push(Action::Skip(call, SkipReason::SelfDependency { id }));
            self.settle(call, policy, &mut actions);
            self.pump(&mut actions);
            return (call, actions);
        }
        // Dependencies already settled resolve now; the others are awaited.
        let mut pending = Vec::new();
        let mut failed = None;
        for dep in deps {
            match self.settled(&dep) {
                Some(Settled::Succeeded) => {}
                Some(Settled::Failed(error)) => {
                    if failed.is_none() {
                        failed = Some((dep, error));
                    }
                }
                None => pending.push(dep),
            }
        }
        if let Some((dep, error)) = failed
            && !self.apply_policy(call, &dep, error, policy, &mut actions)
        {
            self.pump(&mut actions);
            return (call, actions);
        }
        if pending.is_empty() {
            self.nodes[call].state = State::Ready;
            self.ready.insert(call);
        } else {
            for dep in &pending {
                self.waiting_on.entry(dep.clone()).or_default().push(call);
            }
            let count = pending.len();
            self.nodes[call].state = State::Waiting {
                deps: pending,
                pending: count,
            };
            if let Some(other) = self.cycle_through(call) {
                self.skip_cycle(call, other, policy, &mut actions);
            }
        }
        self.pump(&mut actions);
        (call, actions)
    }

    /// A started call ended. `halt`: stop-on-error applies to this failure
    /// (the executor's error handler may have let it pass).
    pub fn finished(
        &mut self,
        call: CallIx,
        outcome: Result<(), String>,
        halt: bool,
        policy: &mut dyn FnMut(CallIx, &str, &str) -> DependencyPolicy,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.nodes[call].state == State::Running {
            self.running -= 1;
            if let Some(hints) = &self.nodes[call].spec.gadget {
                if let Some(group) = &hints.group {
                    if let Some(count) = self.running_per_group.get_mut(group) {
                        *count = count.saturating_sub(1);
                    }
                    if hints.exclusive {
                        self.exclusive_groups.remove(group);
                    }
                } else if hints.exclusive {
                    self.running_exclusive = false;
                }
                if hints.max_concurrent > 0
                    && let Some(count) = self.running_per_gadget.get_mut(&hints.key)
                {
                    *count = count.saturating_sub(1);
                }
            }
        }
        let failed = outcome.is_err();
        self.nodes[call].state = match outcome {
            Ok(()) => State::Succeeded,
            Err(error) => State::Failed(Some(error)),
        };
        self.settle(call, policy, &mut actions);
        if failed && halt && self.config.stop_on_error && self.halted_by.is_none() {
            self.halt(call, &mut actions);
        }
        self.pump(&mut actions);
        actions
    }

    /// The response's stream ended: ids still awaited were never written.
    pub fn end_of_stream(
        &mut self,
        policy: &mut dyn FnMut(CallIx, &str, &str) -> DependencyPolicy,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        // No id appears after the stream: one pass finds every call waiting
        // on one never written (settling them releases others through
        // `settle`, never makes a new one missing).
        let missing: Vec<(CallIx, String)> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(call, node)| {
                let State::Waiting { deps, .. } = &node.state else {
                    return None;
                };
                deps.iter()
                    .find(|d| !self.ids.contains_key(*d))
                    .map(|d| (call, d.clone()))
            })
            .collect();
        for (call, dependency) in missing {
            if !matches!(self.nodes[call].state, State::Waiting { .. }) {
                continue; // skipped meanwhile, through another missing id
            }
            self.unwait(call);
            self.nodes[call].state = State::Failed(None);
            actions.push(Action::Skip(call, SkipReason::Missing { dependency }));
            self.settle(call, policy, &mut actions);
        }
        self.pump(&mut actions);
        actions
    }

    /// How an id has ended, if it has.
    fn settled(&self, id: &str) -> Option<Settled> {
        let call = *self.ids.get(id)?;
        match &self.nodes[call].state {
            State::Succeeded => Some(Settled::Succeeded),
            State::Failed(error) => Some(Settled::Failed(error.clone())),
            _ => None,
        }
    }

    /// Applies the dependency policy to `call`, whose dependency `dep`
    /// failed. Returns whether the call may still run.
    fn apply_policy(
        &mut self,
        call: CallIx,
        dep: &str,
        error: Option<String>,
        policy: &mut dyn FnMut(CallIx, &str, &str) -> DependencyPolicy,
        actions: &mut Vec<Action>,
    ) -> bool {
        let error = error.unwrap_or_else(|| "Dependency failed".to_string());
        match policy(call, dep, &error) {
            DependencyPolicy::ExecuteAnyway => true,
            DependencyPolicy::Skip => {
                self.unwait(call);
                self.nodes[call].state = State::Failed(None);
                actions.push(Action::Skip(
                    call,
                    SkipReason::DependencyFailed {
                        dependency: dep.to_string(),
                        error,
                    },
                ));
                self.settle(call, policy, actions);
                false
            }
            DependencyPolicy::UseFallback(text) => {
                self.unwait(call);
                self.nodes[call].state = State::Succeeded;
                actions.push(Action::Fallback(call, text));
                self.settle(call, policy, actions);
                false
            }
        }
    }

    /// `call` has settled (succeeded or failed): its waiting dependents move on.
    fn settle(
        &mut self,
        call: CallIx,
        policy: &mut dyn FnMut(CallIx, &str, &str) -> DependencyPolicy,
        actions: &mut Vec<Action>,
    ) {
        // Most calls have no dependents: no copy of the id for them.
        let Some(dependents) = self.waiting_on.remove(&self.nodes[call].spec.invocation_id) else {
            return;
        };
        let id = self.nodes[call].spec.invocation_id.clone();
        let outcome = self.nodes[call].state.clone();
        for dependent in dependents {
            // A call skipped while it waited is no longer counted here.
            let State::Waiting { pending, .. } = &mut self.nodes[dependent].state else {
                continue;
            };
            *pending = pending.saturating_sub(1);
            let now_ready = *pending == 0;
            let may_run = match &outcome {
                State::Failed(error) => {
                    self.apply_policy(dependent, &id, error.clone(), policy, actions)
                }
                _ => true,
            };
            if may_run && now_ready {
                self.nodes[dependent].state = State::Ready;
                self.ready.insert(dependent);
            }
        }
    }

    /// Stops waiting for `call`'s dependencies. Its entries in
    /// `waiting_on` stay (removing them would cost a scan per dependency);
    /// `settle` passes over calls that no longer wait.
    fn unwait(&mut self, call: CallIx) {
        self.ready.remove(&call);
    }

    /// A dependency path from `call` back to itself through calls that
    /// still wait: returns the dependency of `call` on that path.
    fn cycle_through(&self, call: CallIx) -> Option<String> {
        let target = &self.nodes[call].spec.invocation_id;
        let State::Waiting { deps: first, .. } = &self.nodes[call].state else {
            return None;
        };
        // One walk for all starts: what an earlier start reached without
        // coming back is not walked again (linear in the waiting graph).
        let mut seen: HashSet<&str> = HashSet::new();
        for start in first {
            let mut stack = vec![start.as_str()];
            while let Some(id) = stack.pop() {
                if id == target {
                    return Some(start.clone());
                }
                if !seen.insert(id) {
                    continue;
                }
                if let Some(&next) = self.ids.get(id)
                    && let State::Waiting { deps, .. } = &self.nodes[next].state
                {
                    stack.extend(deps.iter().map(String::as_str));
                }
            }
        }
        None
    }

    /// Skips every waiting call on a cycle through `call`.
    fn skip_cycle(
        &mut self,
        call: CallIx,
        other: String,
        policy: &mut dyn FnMut(CallIx, &str, &str) -> DependencyPolicy,
        actions: &mut Vec<Action>,
    ) {
        // The cycle's members: waiting calls reachable from `call` that
        // reach back to it (one walk each way, not one per call).
        let forward = self.waiting_reachable(call, |s, c| s.waits_for(c));
        let backward = self.waiting_reachable(call, |s, c| s.waiting_for(c));
        let mut members: Vec<CallIx> = forward.intersection(&backward).copied().collect();
        members.sort_unstable();
        for &member in &members {
            let id = self.nodes[member].spec.invocation_id.clone();
            let other = if member == call {
                other.clone()
            } else {
                self.next_on_cycle(member, &members)
            };
            self.unwait(member);
            self.nodes[member].state = State::Failed(None);
            actions.push(Action::Skip(member, SkipReason::Cycle { id, other }));
        }
        for member in members {
            self.settle(member, policy, actions);
        }
    }

    /// Waiting calls reachable from `from` (itself included) by `next`.
    fn waiting_reachable(
        &self,
        from: CallIx,
        next: impl Fn(&Scheduler, CallIx) -> Vec<CallIx>,
    ) -> HashSet<CallIx> {
        let mut seen = HashSet::new();
        let mut stack = vec![from];
        while let Some(c) = stack.pop() {
            if !matches!(self.nodes[c].state, State::Waiting { .. }) || !seen.insert(c) {
                continue;
            }
            stack.extend(next(self, c));
        }
        seen
    }

    /// The calls `call` waits for.
    fn waits_for(&self, call: CallIx) -> Vec<CallIx> {
        match &self.nodes[call].state {
            State::Waiting { deps, .. } => deps
                .iter()
                .filter_map(|d| self.ids.get(d))
                .copied()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The calls waiting for `call`.
    fn waiting_for(&self, call: CallIx) -> Vec<CallIx> {
        self.waiting_on
            .get(&self.nodes[call].spec.invocation_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The dependency of `member` that stays on the cycle.
    fn next_on_cycle(&self, member: CallIx, members: &[CallIx]) -> String {
        let State::Waiting { deps, .. } = &self.nodes[member].state else {
            return String::new();
        };
        deps.iter()
            .find(|d| self.ids.get(*d).is_some_and(|c| members.contains(c)))
            .cloned()
            .unwrap_or_default()
    }

    /// Stop-on-error: skip every call of this response not started yet.
    fn halt(&mut self, failed: CallIx, actions: &mut Vec<Action>) {
        let failed_id = self.nodes[failed].spec.invocation_id.clone();
        self.halted_by = Some(failed_id.clone());
        self.stop_reading = true;
        for call in 0..self.nodes.len() {
            let node = &self.nodes[call];
            if node.response == self.response
                && matches!(node.state, State::Waiting { .. } | State::Ready)
            {
                self.unwait(call);
                self.nodes[call].state = State::Failed(None);
                actions.push(Action::Skip(
                    call,
                    SkipReason::Halted {
                        failed: failed_id.clone(),
                    },
                ));
            }
        }
        self.waiting_on.retain(|_, calls| !calls.is_empty());
    }

    /// Starts ready calls, in parse order, as far as the limits allow.
    fn pump(&mut self, actions: &mut Vec<Action>) {
        let max = match self.config.strategy {
            Strategy::Sequential => 1,
            _ => self.config.max_parallel.max(1),
        };
        // Walk the ready set in order without copying it: with thousands
        // of calls queued behind the parallelism limit, a copy per finished
        // call made a response quadratic.
        let mut after: Option<CallIx> = None;
        // Groups whose exclusive call waits in this pass: the group's later
        // calls do not pass it (or it could wait forever).
        let mut held_groups: Vec<std::sync::Arc<str>> = Vec::new();
        loop {
            if self.running >= max || self.running_exclusive {
                break;
            }
            let next = match after {
                None => self.ready.iter().next(),
                Some(prev) => self
                    .ready
                    .range((std::ops::Bound::Excluded(prev), std::ops::Bound::Unbounded))
                    .next(),
            };
            let Some(&call) = next else { break };
            after = Some(call);
            if let Strategy::Batched { size } = self.config.strategy
                && self.batch_left == 0
            {
                if self.running > 0 {
                    break; // the open batch has not finished
                }
                self.batch_left = size.max(1);
            }
            let (exclusive, max_concurrent, group) = match &self.nodes[call].spec.gadget {
                Some(hints) => (hints.exclusive, hints.max_concurrent, hints.group.clone()),
                None => (false, 0, None),
            };
            if let Some(group) = &group {
                if self.exclusive_groups.contains(group) || held_groups.contains(group) {
                    continue; // its group is held; other calls may start
                }
                if exclusive && self.running_per_group.get(group).is_some_and(|&n| n > 0) {
                    held_groups.push(group.clone());
                    continue;
                }
            } else if exclusive && self.running > 0 {
                break; // it waits for the running calls; nothing passes it
            }
            // Only gadgets with a limit are counted (no lookup otherwise).
            let limited = max_concurrent > 0;
            if limited {
                let key = &self.nodes[call].spec.gadget.as_ref().expect("hinted").key;
                let count = self.running_per_gadget.get(key).copied().unwrap_or(0);
                if count >= max_concurrent {
                    continue; // others may still start
                }
            }
            self.ready.remove(&call);
            self.nodes[call].state = State::Running;
            self.running += 1;
            if let Strategy::Batched { .. } = self.config.strategy {
                self.batch_left -= 1;
            }
            match group {
                Some(group) => {
                    if exclusive {
                        self.exclusive_groups.insert(group.clone());
                    }
                    *self.running_per_group.entry(group).or_insert(0) += 1;
                }
                None if exclusive => self.running_exclusive = true,
                None => {}
            }
            if limited {
                let key = &self.nodes[call].spec.gadget.as_ref().expect("hinted").key;
                match self.running_per_gadget.get_mut(key) {
                    Some(count) => *count += 1,
                    None => {
                        self.running_per_gadget.insert(key.clone(), 1);
                    }
                }
            }
            actions.push(Action::Start(call));
        }
    }
}

#[cfg(test)]
mod tests {
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
            let call = self.s.ids[id];
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
}
