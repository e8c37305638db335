//! # gadget-host
//!
//! A host for LLM tools ("gadgets") compiled to WebAssembly components.
//! Gadgets are loaded from plugin directories, described by the
//! `gadget:plugin@0.1.0` WIT contract (`wit/gadget@0.1.0/`), and run
//! untrusted: a fresh instance per call, nothing granted by default,
//! limits on by default, deadlines enforced by epoch interruption that
//! doubles as the gadget's abort signal.
//!
//! This crate is the front end (the `gadget` binary, the only place that
//! prints) and the library facade over the workspace's crates, whose
//! boundaries keep data flowing one way:
//!
//! ```text
//! gadget-core     (pure) parser, schedule, params, schema, tool, call, ledger,
//!                 events, viewer, render, limits: no wasmtime, tokio or reqwest
//! gadget-exec     the executor: a streamed response -> Tool calls -> events
//!                 (core + tokio; knows nothing of WebAssembly)
//! gadget-runtime  wasmtime: engine, epoch deadlines, store, host imports;
//!                 the plugin loader, the registry, WasmGadget (a Tool)
//! gadget-agent    the agent loop: LLM providers (reqwest, SSE) streaming
//!                 into the executor, llmist's history, costs, retries
//! gadget-host     this crate: the commands and their views
//! ```
//!
//! Embedding, in short:
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use gadget_host::{loader, runtime::{Runtime, RuntimeConfig}};
//!
//! let runtime = Arc::new(Runtime::new(&RuntimeConfig::default())?);
//! let options = loader::LoadOptions::default();
//! let (registry, errors) =
//!     loader::load_dirs(runtime.clone(), &["plugins".into()], &options, Arc::new(loader::NoProgress)).await;
//! assert!(errors.is_empty());
//! let params = serde_json::json!({ "operation": "add", "a": 15, "b": 23 });
//! let report = registry.call("Calculator", params, "calc_1", None).await?;
//! println!("{:?} (cost ${})", report.outcome, report.cost);
//! # Ok(()) }
//! ```

pub use gadget_agent as agent;
pub use gadget_core::{
    ask, call, events, ledger, limits, params, parser, render, schedule, schema, tool, viewer,
};
pub use gadget_exec as executor;
pub use gadget_runtime as runtime;
pub use gadget_runtime::{describe, loader, manifest, registry};

#[doc(hidden)]
pub mod cli;
