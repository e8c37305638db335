//! # gadget-core
//!
//! The pure half of gadget-host: everything that decides, and nothing that
//! runs WebAssembly, waits on a clock or touches the network. The crate
//! boundary is the guarantee: it depends on no wasmtime, tokio, reqwest or
//! clap, and `scripts/test.sh` fails if `cargo tree -p gadget-core` ever
//! shows one of them.
//!
//! ```text
//! parser    the llmist block format, parsed as a stream
//! schedule  which call runs when: dependencies, policies, concurrency
//! params    JSON Schema defaults and validation; schema  the one schema walker
//! tool      the `Tool` trait the executor runs, and `Tools`, a set of them
//! call      the domain types of a call: spec, outcome, error, report, kinds
//! ledger    what a call reports while it runs: logs, costs, progress, updates
//! effect    each door a call used (an HTTP request, a completion)
//! events    what the executor reports: `ExecEvent`, `Failure`, summaries
//! viewer    output limiting and the built-in GadgetOutputViewer tool
//! render    the prompt, usage texts and the history the model is shown
//! limits    every limit, its unit and its reason; timeouts resolved once
//! address   one classifier of IP addresses for every door that connects
//! access    what a tool may touch, and the effects it declares
//! approval  the operator's approval and argument rules, and who decides
//! ask       what a running gadget asks (the `ask` import) and the answers
//! catalog   the resources and prompts a plugin serves, and completion
//! audit     the audit journal: its records, their hash chain, verification
//! client    who is calling: a subject, or anonymous on its connection
//! scope     what surrounds a session's calls: approvals, recorder, trace, person
//! glob      gadget-name patterns; text  text bounded at a character boundary
//! signal    the abort signal: read at once, or awaited
//! fuzz      a small mutational fuzzer for the doors' fuzz targets
//! ```
//!
//! ## Words
//!
//! - A **gadget** is what the model calls by name in the block format; a
//!   **tool** is anything the host can run as one: a plugin's WebAssembly
//!   gadget, one of the policy's agents, the built-in output viewer. Every
//!   front end runs tools through the [`tool::Tool`] trait, and one call of
//!   any tool through the executor crate's one call path.
//! - [`parser::GadgetCall`] is a call as the model wrote it (parsed, not
//!   validated); [`tool::ToolCall`] is one call handed to a tool (validated
//!   parameters, deadline, abort signal, observer, and the
//!   [`scope::CallScope`] around it); [`call::CallReport`] is
//!   what the tool returns (outcome, cost, logs, duration);
//!   [`call::CallError`] is a call that failed, and [`events::Failure`] the
//!   failure as the model reads it.
//!
//! Parsing a response, in short:
//!
//! ```
//! use gadget_core::parser::{ParseEvent, Parser};
//!
//! let mut parser = Parser::default();
//! let mut events = parser.feed("!!!GADGET_START:Calculator:c1\n!!!ARG:a\n15\n");
//! events.extend(parser.feed("!!!GADGET_END\n"));
//! events.extend(parser.finish());
//! let ParseEvent::Call(call) = &events[0] else { panic!() };
//! assert_eq!(call.name, "Calculator");
//! assert_eq!(call.parameters().unwrap()["a"], 15);
//! ```

pub mod access;
pub mod address;
pub mod approval;
pub mod ask;
pub mod audit;
pub mod call;
pub mod catalog;
pub mod chunked;
pub mod client;
pub mod content;
pub mod effect;
pub mod events;
pub mod fuzz;
pub mod glob;
pub mod ledger;
pub mod limits;
pub mod llm;
pub mod operator_file;
pub mod params;
pub mod parser;
pub mod rate;
pub mod redact;
pub mod render;
pub mod schedule;
pub mod schema;
pub mod scope;
pub mod signal;
pub mod text;
pub mod tool;
pub mod viewer;
