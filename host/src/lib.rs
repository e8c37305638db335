//! # gadget-host
//!
//! A host for LLM tools ("gadgets") compiled to WebAssembly components.
//! Gadgets are loaded from plugin directories, described by the
//! `gadget:plugin@0.1.0` WIT contract (`wit/gadget.wit`), and run untrusted:
//! a fresh instance per call, nothing granted by default, limits on by
//! default, deadlines enforced by epoch interruption that doubles as the
//! gadget's abort signal.
//!
//! Data flows one way:
//!
//! ```text
//! plugins   plugin directories -> manifests -> compiled, pre-instantiated gadgets (Registry)
//! parser    the llmist block format, parsed as a stream (pure)
//! schedule  which call runs when: dependencies, policies, concurrency (pure)
//! params    JSON Schema defaults + validation (pure)
//! runtime   wasmtime: engine, epoch deadlines, store data, host imports, invoke
//! executor  a streamed response: parse -> schedule -> runtime, events out
//! viewer    output limiting and GadgetOutputViewer (pure)
//! render    the prompt and the history the model is shown (pure)
//! cli       the `gadget` commands; the only place that prints
//! ```
//!
//! Embedding, in short:
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use gadget_host::{plugins, runtime::{Runtime, RuntimeConfig}};
//!
//! let runtime = Arc::new(Runtime::new(&RuntimeConfig::default())?);
//! let options = plugins::LoadOptions::default();
//! let (registry, errors) =
//!     plugins::load_dirs(runtime.clone(), &["plugins".into()], &options, Arc::new(plugins::NoProgress)).await;
//! assert!(errors.is_empty());
//! let params = serde_json::json!({ "operation": "add", "a": 15, "b": 23 });
//! let report = registry.call("Calculator", params, "calc_1", None).await?;
//! println!("{:?} (cost ${})", report.outcome, report.cost);
//! # Ok(()) }
//! ```

pub mod executor;
pub mod limits;
pub mod params;
pub mod parser;
pub mod plugins;
pub mod render;
pub mod runtime;
pub mod schedule;
pub mod viewer;

#[doc(hidden)]
pub mod cli;
