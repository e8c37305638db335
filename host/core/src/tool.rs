//! The one thing the executor runs: a [`Tool`].
//!
//! A tool describes itself once, in a [`ToolCard`] (the [`GadgetSpec`] the
//! prompt renders, the [`ParamSchema`] its parameters are validated
//! against, its own deadline and the group its exclusive calls keep to),
//! and runs one call:
//! validated parameters in, a [`CallReport`] out, with the abort signal and
//! an observer for live events. WebAssembly gadgets are tools (in
//! `gadget-runtime`), and so is the built-in `GadgetOutputViewer`
//! ([`crate::viewer::OutputViewer`]); remote MCP tools and sub-agents are
//! further implementations. Nothing above this trait knows which kind it
//! runs.
//!
//! [`Tools`] is a set of tools looked up by name, case-insensitively as
//! llmist does; [`Toolbox`] is the plain in-memory one.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::access::{Access, Declared};
use crate::call::{CallReport, GadgetSpec};
pub use crate::glob::{glob_matches, glob_matches_chars};
use crate::ledger::CallObserver;
use crate::limits::OwnTimeout;
use crate::params::{ParamSchema, ValidationFailure};
use crate::render::{ExampleDoc, GadgetDoc};
use crate::schedule::GadgetHints;
use crate::scope::CallScope;
pub use crate::scope::{Answer, HumanInput, Origin, Replies};
use crate::signal::AbortSignal;

/// A boxed future, so the trait stays object-safe without an async runtime.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One call for a tool to run.
#[derive(Clone)]
pub struct ToolCall {
    /// The call's id (the model's, or one the front end gave it).
    pub id: String,
    /// The parameters, already validated against the tool's schema (with
    /// its defaults filled in). Shared with the executor's record of the
    /// call and its `CallStarted` event rather than copied for each.
    pub params: Arc<Value>,
    /// The deadline, resolved by [`crate::limits::Timeouts`]; `None` for a
    /// tool that declared none (it runs in the host and returns at once).
    pub deadline: Option<Duration>,
    /// The abort signal from outside: raising it cancels the call.
    pub signal: Option<AbortSignal>,
    /// Sees the call's logs, progress, updates and costs as they happen.
    pub observer: Option<CallObserver>,
    /// What surrounds the call: approvals, the recorder, the trace, the
    /// person to ask. A tool that runs calls of its own (a sub-agent)
    /// runs them in it.
    pub scope: Arc<CallScope>,
}

impl ToolCall {
    pub fn new(id: impl Into<String>, params: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            params: Arc::new(params),
            deadline: None,
            signal: None,
            observer: None,
            scope: CallScope::none(),
        }
    }
}

/// What a tool is, made once when it is loaded and handed over whole:
/// every implementation keeps one and the executor, the prompt and the
/// front ends read it through [`Tool::card`].
#[derive(Debug)]
pub struct ToolCard {
    /// What the tool declares: name, description, schema text, examples,
    /// timeout and concurrency hints.
    pub spec: GadgetSpec,
    /// The parameters schema, compiled once.
    pub schema: ParamSchema,
    /// Its own deadline, for [`crate::limits::Timeouts::resolve`].
    pub own_timeout: OwnTimeout,
    /// The calls this tool's `exclusive` calls run alone among (see
    /// [`GadgetHints::group`]); `None`: the whole run.
    pub group: Option<Arc<str>>,
}

impl ToolCard {
    /// A card in no exclusive group.
    pub fn new(spec: GadgetSpec, schema: ParamSchema, own_timeout: OwnTimeout) -> ToolCard {
        ToolCard {
            spec,
            schema,
            own_timeout,
            group: None,
        }
    }
}

/// Something the executor can run.
pub trait Tool: Send + Sync {
    /// What the tool is: spec, schema, own deadline, group.
    fn card(&self) -> &ToolCard;

    /// Runs one call. Never fails as a whole: every failure is a
    /// [`crate::call::CallError`] in the report.
    fn run(&self, call: ToolCall) -> BoxFuture<'_, CallReport>;

    /// Whether [`Tool::run`] always returns a future that is ready at
    /// once (a tool computed in the host, like the output viewer): the
    /// executor then takes the report in place instead of spawning a task.
    fn is_instant(&self) -> bool {
        false
    }

    /// The name the model writes.
    fn name(&self) -> &str {
        &self.card().spec.name
    }

    /// The card's spec.
    fn spec(&self) -> &GadgetSpec {
        &self.card().spec
    }

    /// The card's compiled schema.
    fn schema(&self) -> &ParamSchema {
        &self.card().schema
    }

    /// The card's own deadline.
    fn own_timeout(&self) -> OwnTimeout {
        self.card().own_timeout
    }

    /// What the tool may touch (files, HTTP origins, config keys, models):
    /// nothing, unless it says otherwise.
    fn access(&self) -> Access {
        Access::default()
    }

    /// Where the tool comes from, for the audit journal: its plugin and
    /// the SHA-256 of its component; `None` for a tool of the host's own.
    fn origin(&self) -> Option<std::sync::Arc<Origin>> {
        None
    }

    /// What the tool's author declares about its effects.
    fn declared(&self) -> Declared {
        Declared::default()
    }

    /// The scheduler's view: the concurrency hints, and the lower-cased
    /// name its `max_concurrent` counts by (empty when it has no limit).
    fn hints(&self) -> GadgetHints {
        let spec = self.spec();
        let max_concurrent = spec.max_concurrent.unwrap_or(0);
        GadgetHints {
            // Only a limit counts by the key (no copy per call otherwise).
            key: if max_concurrent > 0 {
                spec.name.to_lowercase()
            } else {
                String::new()
            },
            exclusive: spec.exclusive,
            max_concurrent,
            group: self.card().group.clone(),
        }
    }

    /// The tool as the prompt and error texts describe it.
    fn doc(&self) -> GadgetDoc {
        doc_of(self.spec(), self.schema())
    }
}

/// The one validator of a call's parameters, whoever asks (the executor,
/// MCP, `gadget call`, the registry): `params` checked against `tool`'s
/// compiled schema, its defaults filled in.
pub fn prepare(tool: &dyn Tool, params: Value) -> Result<Value, ValidationFailure> {
    tool.schema().validate(tool.name(), params)
}

/// The prompt's view of a spec and its compiled schema.
pub fn doc_of(spec: &GadgetSpec, schema: &ParamSchema) -> GadgetDoc {
    GadgetDoc {
        name: spec.name.clone(),
        description: spec.description.clone(),
        schema: schema.schema().cloned(),
        examples: spec
            .examples
            .iter()
            .map(|e| ExampleDoc {
                comment: e.comment.clone(),
                // Checked to be a JSON object when the tool was loaded.
                params: serde_json::from_str(&e.params).unwrap_or(Value::Null),
                output: e.output.clone(),
            })
            .collect(),
    }
}

/// A set of tools, looked up by name.
pub trait Tools: Send + Sync {
    /// Finds a tool, case-insensitively.
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>>;

    /// Every tool, in name order.
    fn all(&self) -> Vec<Arc<dyn Tool>>;

    /// The names a model may write, for "not found" errors.
    fn names(&self) -> Vec<String> {
        self.all().iter().map(|t| t.name().to_string()).collect()
    }

    /// Why `name` is not served: by default, that nothing has the name
    /// (a set with rules of its own, like the operator's denials, says so).
    fn refusal(&self, name: &str) -> String {
        crate::render::unknown_gadget(name, &self.names())
    }

    /// The resources and prompts served beside these tools (the plugins'
    /// catalogs), in load order; by default none.
    fn catalogs(&self) -> Vec<Arc<dyn crate::catalog::Catalog>> {
        Vec::new()
    }
}

/// Two sets of tools as one: `first` wins a name both have, and says why
/// a name neither has is not served.
pub struct Layered {
    pub first: Arc<dyn Tools>,
    pub then: Arc<dyn Tools>,
}

impl Tools for Layered {
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.first.find(name).or_else(|| self.then.find(name))
    }

    /// Every tool as `find` would give it: one of `then` whose name
    /// `first` also has (a plugin loaded by a later reload, say) is not
    /// listed, since calls to the name reach `first`'s.
    fn all(&self) -> Vec<Arc<dyn Tool>> {
        let mut all = self.first.all();
        all.extend(
            self.then
                .all()
                .into_iter()
                .filter(|tool| self.first.find(tool.name()).is_none()),
        );
        all
    }

    fn refusal(&self, name: &str) -> String {
        self.first.refusal(name)
    }

    fn catalogs(&self) -> Vec<Arc<dyn crate::catalog::Catalog>> {
        let mut catalogs = self.first.catalogs();
        catalogs.extend(self.then.catalogs());
        catalogs
    }
}

/// Tools held in memory, by lower-cased name.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl Toolbox {
    pub fn new() -> Toolbox {
        Toolbox::default()
    }

    /// Adds a tool; `Err` gives it back when its name (compared
    /// case-insensitively) is taken.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) -> Result<(), Arc<dyn Tool>> {
        let key = tool.name().to_lowercase();
        if self.tools.contains_key(&key) {
            return Err(tool);
        }
        self.tools.insert(key, tool);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl Tools for Toolbox {
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(&name.to_lowercase()).cloned()
    }

    fn all(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.values().cloned().collect()
    }
}

/// The documentation of a set of tools, for [`crate::render::prompt`].
pub fn docs<'a>(tools: impl IntoIterator<Item = &'a Arc<dyn Tool>>) -> Vec<GadgetDoc> {
    tools.into_iter().map(|t| t.doc()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::viewer::{OutputLimiter, OutputViewer};
    use std::sync::Mutex;

    fn viewer_box() -> Arc<dyn Tools> {
        let limiter = Arc::new(Mutex::new(OutputLimiter::new(100)));
        let mut tools = Toolbox::new();
        let _ = tools.insert(Arc::new(OutputViewer::new(limiter)));
        Arc::new(tools)
    }

    #[test]
    fn layered_tools_list_a_name_once_as_find_resolves_it() {
        let first = viewer_box();
        let layered = Layered {
            first: first.clone(),
            then: viewer_box(),
        };
        let all = layered.all();
        assert_eq!(all.len(), 1, "a name both sets have is listed once");
        let found = layered.find(crate::viewer::VIEWER_NAME).unwrap();
        assert!(Arc::ptr_eq(&all[0], &found));
        assert!(Arc::ptr_eq(
            &found,
            &first.find(crate::viewer::VIEWER_NAME).unwrap()
        ));
    }
}
