//! # gadget-runtime
//!
//! The wasmtime side of gadget-host: one engine, one linker, one
//! `InstancePre` per component, and a fresh `Store` (so a fresh instance)
//! for every call. Around it: the plugin [`loader`] (directories,
//! [`manifest`]s, the compiled-component [`cache`]), the [`registry`] of
//! loaded gadgets, and [`WasmGadget`], the [`Tool`](gadget_core::tool::Tool)
//! that runs one of them. The WIT bindings live in [`bindings`] only, one
//! module per contract version; nothing outside this crate sees them.
//!
//! A call runs under [`Limits`]: a deadline enforced by epoch interruption
//! (at the deadline the abort signal is raised and the gadget gets a grace
//! period to return; then the epoch callback traps), an outer tokio timeout
//! for time spent blocked inside host imports (where epochs cannot reach),
//! a memory limit per instance, and bounded capture of results, logs and
//! stdio. While it runs, a busy gadget yields to the async executor every
//! [`YIELD_INTERVAL_TICKS`] ms so it cannot starve other calls.
//!
//! Nothing is granted by default: the WASI context has no preopened
//! directories, no network, no environment and no arguments.

mod ask;
pub(crate) mod bindings;
pub mod cache;
pub(crate) mod catalog;
mod claims;
mod config_log;
mod deadline;
pub mod describe;
mod epoch;
pub(crate) mod files;
mod gadget;
pub(crate) mod grants;
mod host_imports;
mod http;
pub mod journal_key;
mod limiter;
pub mod llm;
pub mod loader;
pub mod lockfile;
pub mod manifest;
pub(crate) mod memory_budget;
pub(crate) mod notes;
pub mod oci;
pub(crate) mod origins;
mod outcome;
pub mod plugin;
mod plugin_files;
pub mod policy;
mod pool;
pub mod provenance;
pub mod registry;
mod requests;
pub(crate) mod resolve;
mod runtime;
pub mod sensitive;
mod specs;
mod state;
mod stdio;
mod store;

pub use epoch::{EPOCH_TICK, EpochClock, EpochMode};
pub use gadget::WasmGadget;
pub use gadget_core::call::{
    CallError, CallReport, Captured, Example, FailureKind, GadgetSpec, Outcome, OutcomeKind,
};
pub use gadget_core::ledger::{
    CallEvent, CallObserver, LogEntry, LogLevel, LogSource, Update, invalid_cost,
};
pub use gadget_core::limits::Limits;
pub use memory_budget::{
    DEFAULT_MEMORY_BUDGET_PERCENT, FALLBACK_MEMORY_BUDGET, default_memory_budget,
};

pub use bindings::{GADGET_EXPORT, WIT_PACKAGE};
pub use deadline::YIELD_INTERVAL_TICKS;
pub use limiter::ADMISSION_HEADROOM;
pub use pool::{POOL_CONCURRENT_INSTANCES, pooling_config};
pub use runtime::{CallRequest, PluginPre, Runtime, RuntimeConfig, RuntimeError, SPECS_TIMEOUT};
pub use state::CallState;
