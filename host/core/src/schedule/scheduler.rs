//! The state machine: calls waiting, ready and running, settled as they
//! end, started as far as the limits allow.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::chunked::ChunkedVec;

use super::spec::{
    Action, CallIx, CallSpec, DependencyPolicy, MAX_DEPENDENCIES_PER_CALL, ScheduleConfig,
    SkipReason, Strategy, duplicate_id_error,
};

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

    /// The call that owns invocation id `id`, if any.
    pub fn call_of(&self, id: &str) -> Option<CallIx> {
        self.ids.get(id).copied()
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

    /// The run is stopped from outside: read no more, and skip every call
    /// of this response not started yet (calls running get the abort
    /// signal from the executor and end as they end).
    pub fn interrupt(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        self.skip_not_started(SkipReason::Interrupted, &mut actions);
        actions
    }

    /// Reads no more of this response and skips every call of it not
    /// started yet, for `reason`.
    fn skip_not_started(&mut self, reason: SkipReason, actions: &mut Vec<Action>) {
        self.stop_reading = true;
        for call in 0..self.nodes.len() {
            let node = &self.nodes[call];
            if node.response == self.response
                && matches!(node.state, State::Waiting { .. } | State::Ready)
            {
                self.unwait(call);
                self.nodes[call].state = State::Failed(None);
                actions.push(Action::Skip(call, reason.clone()));
            }
        }
        self.waiting_on.retain(|_, calls| !calls.is_empty());
    }

    /// Stop-on-error: skip every call of this response not started yet.
    fn halt(&mut self, failed: CallIx, actions: &mut Vec<Action>) {
        let failed_id = self.nodes[failed].spec.invocation_id.clone();
        self.halted_by = Some(failed_id.clone());
        self.skip_not_started(SkipReason::Halted { failed: failed_id }, actions);
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
