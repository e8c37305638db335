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
//!
//! `spec` holds what the executor tells the scheduler and what it gets
//! back; `scheduler` the state machine itself.

mod scheduler;
mod spec;
#[cfg(test)]
mod tests;

pub use scheduler::Scheduler;
pub use spec::{
    Action, CallIx, CallSpec, DEFAULT_MAX_PARALLEL, DependencyPolicy, GadgetHints,
    MAX_DEPENDENCIES_PER_CALL, ScheduleConfig, SkipReason, Strategy, duplicate_id_error,
};
