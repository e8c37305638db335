//! What the executor tells the scheduler (a call's spec, its gadget's
//! hints, the configuration) and what it gets back (actions, skip reasons).

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
    /// The run was stopped from outside (Ctrl-C, SIGTERM) before the
    /// call started.
    Interrupted,
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
            SkipReason::Interrupted => "interrupted",
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
            SkipReason::Interrupted => {
                f.write_str("Skipped: the run was stopped (interrupted) before this call started")
            }
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
