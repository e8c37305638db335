//! # gadget-sdk: write gadgets for gadget-host in Rust
//!
//! A gadget is a tool an LLM calls. You describe its parameters with a plain
//! struct, implement one trait, and export it with one macro; the SDK derives
//! the JSON Schema the model sees (descriptions come from your doc comments),
//! checks the parameters' shape, and speaks the `gadget:plugin@0.3.0` WIT
//! contract for you: results in [`Part`]s, [`llm`] completions, questions
//! the running gadget gets answered ([`Context::ask`]), numeric progress, and
//! the resources and prompts a [`Catalog`] serves. Build with
//! `cargo build --target wasm32-wasip2` and the output is a component
//! gadget-host loads.
//!
//! ```no_run
//! use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, json};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! /// What to greet.
//! #[derive(Deserialize, JsonSchema)]
//! struct GreetParams {
//!     /// Who to greet.
//!     name: String,
//!     /// How many exclamation marks to add.
//!     #[serde(default)]
//!     excitement: u8,
//! }
//!
//! struct Greet;
//!
//! impl Gadget for Greet {
//!     type Params = GreetParams;
//!     const NAME: &'static str = "Greet";
//!     const DESCRIPTION: &'static str = "Greets someone by name.";
//!
//!     fn examples() -> Vec<Example> {
//!         vec![Example::new(json!({ "name": "Ada" })).output("Hello, Ada")]
//!     }
//!
//!     fn invoke(params: GreetParams, ctx: &Context) -> Result<Outcome, GadgetError> {
//!         if params.name.is_empty() {
//!             return Err(GadgetError::invalid_arguments("name must not be empty"));
//!         }
//!         ctx.info(format!("greeting {}", params.name));
//!         let bangs = "!".repeat(params.excitement.into());
//!         Ok(format!("Hello, {}{bangs}", params.name).into())
//!     }
//! }
//!
//! gadget_sdk::export_gadgets!(Greet);
//! ```
//!
//! Complete, compiled examples live in `examples/hello-gadget/` (the basics)
//! and `examples/palette/` (parts, asking twice, progress, a catalog) of the
//! repository.

// The generated bindings name this crate by its public path, so the paths
// also resolve inside it.
extern crate self as gadget_sdk;

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use schemars::JsonSchema;
pub use serde_json::{Value, json};

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

/// The generated bindings. Not part of the API: authors use the types of
/// this crate and never name wit-bindgen.
#[doc(hidden)]
pub mod __bindings {
    wit_bindgen::generate!({
        path: "../../wit/gadget@0.3.0",
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "::gadget_sdk::__bindings",
        runtime_path: "::gadget_sdk::__wit_bindgen::rt",
    });
}

use __bindings::gadget::plugin::host;
use __bindings::gadget::plugin::types as wit;

/// One gadget: a tool with a name, a description, typed parameters and an
/// `invoke` function. Implement it on a unit struct and list the struct in
/// [`export_gadgets!`].
pub trait Gadget {
    /// The parameters, as a struct deriving `serde::Deserialize` and
    /// `schemars::JsonSchema`. Doc comments become the descriptions the
    /// model reads; `#[serde(default)]` fields are optional and their default
    /// is shown (derive `serde::Serialize` on a field's type, such as an
    /// enum, so its default can be written into the schema); `Option<T>`
    /// fields are optional; unit-variant enums become `enum` lists.
    /// Use [`NoParams`] for a gadget that takes none.
    type Params: DeserializeOwned + JsonSchema;

    /// The name the model writes after `!!!GADGET_START:` (letters, digits
    /// and `_`; unique across every plugin the host loads).
    const NAME: &'static str;

    /// What the gadget does, written for the model.
    const DESCRIPTION: &'static str;

    /// A human-friendly name for UIs; never shown to the model.
    const LABEL: Option<&'static str> = None;

    /// How long one call may take, in milliseconds (the operator may cap it).
    const TIMEOUT_MS: Option<u32> = None;

    /// Run calls of this gadget alone, never beside another call.
    const EXCLUSIVE: bool = false;

    /// The most calls of this gadget that may run at once.
    const MAX_CONCURRENT: Option<u32> = None;

    /// Example calls shown to the model. The host checks each one's params
    /// against the schema when it loads the plugin.
    fn examples() -> Vec<Example> {
        Vec::new()
    }

    /// Runs one call with parameters the host has already validated.
    fn invoke(params: Self::Params, ctx: &Context) -> Result<Outcome, GadgetError>;
}

pub mod ask;
pub mod catalog;
pub mod content;
pub mod http;

pub use catalog::{Catalog, NoCatalog};
pub use content::{Body, Contents, Link, Part};

/// A configuration value the operator granted this plugin (its manifest
/// asks for the key under `[permissions] config`; the operator's policy
/// gives the value). `None` when it was not granted. The host passes
/// granted values as environment variables of the instance, so
/// `std::env::var` reads them too; nothing else of the host's environment
/// is there. Values the operator marks as secrets are redacted from
/// everything the gadget sends back (results, logs, errors...).
pub fn config(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// The parameters of a gadget that takes none.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub struct NoParams {}

/// An example call, shown to the model in the gadget's instructions.
#[derive(Debug, Clone)]
pub struct Example {
    params: Value,
    output: Option<String>,
    comment: Option<String>,
}

impl Example {
    /// An example with these parameters (a JSON object, usually from [`json!`]).
    pub fn new(params: Value) -> Self {
        Example {
            params,
            output: None,
            comment: None,
        }
    }

    /// What the gadget returns for these parameters.
    pub fn output(mut self, output: impl Into<String>) -> Self {
        self.output = Some(output.into());
        self
    }

    /// A short note on what the example shows.
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }
}

/// How a call ended, when it did not fail. Strings convert into
/// [`Outcome::Result`], so `Ok(text.into())` is the common case.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A result for the model.
    Result(Output),
    /// The task is complete: the agent loop ends after this response.
    Finish(Output),
    /// A question for a person; their answer becomes the call's result.
    /// (Contract 0.3.0 asks through [`Context::ask`], which returns the
    /// answer to the running gadget; this keeps 0.2.0's shape on top of it.)
    AskHuman(String),
}

/// What the model (or the MCP client) sees, plus what only people and UIs see.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Output {
    /// The parts, in order (usually one text).
    pub content: Vec<Part>,
    /// The same result as JSON, for clients that read structured output
    /// (MCP's `structuredContent`).
    pub structured: Option<Value>,
    /// Cost of this call in US dollars, added to what was reported.
    pub cost: Option<f64>,
    /// Structured details for people and UIs, never shown to the model.
    pub details: Option<Value>,
}

impl Outcome {
    /// A plain text result.
    pub fn result(text: impl Into<String>) -> Self {
        Outcome::parts(vec![Part::Text(text.into())])
    }

    /// A result of several parts (text, images, sounds, resources, links).
    pub fn parts(content: Vec<Part>) -> Self {
        Outcome::Result(Output {
            content,
            ..Output::default()
        })
    }

    /// Task complete, with a final message.
    pub fn finish(message: impl Into<String>) -> Self {
        Outcome::Finish(Output {
            content: vec![Part::Text(message.into())],
            ..Output::default()
        })
    }

    /// Ask a person a question; the answer becomes the result.
    pub fn ask_human(question: impl Into<String>) -> Self {
        Outcome::AskHuman(question.into())
    }

    /// Adds a part after the others (ignored for [`Outcome::AskHuman`]).
    pub fn with_part(mut self, part: impl Into<Part>) -> Self {
        if let Outcome::Result(out) | Outcome::Finish(out) = &mut self {
            out.content.push(part.into());
        }
        self
    }

    /// Attaches the result as JSON, for clients that read structured
    /// output (ignored for [`Outcome::AskHuman`]).
    pub fn with_structured(mut self, value: impl Serialize) -> Self {
        if let Outcome::Result(out) | Outcome::Finish(out) = &mut self {
            out.structured = serde_json::to_value(value).ok();
        }
        self
    }

    /// Adds a cost in US dollars (ignored for [`Outcome::AskHuman`]).
    pub fn with_cost(mut self, usd: f64) -> Self {
        if let Outcome::Result(out) | Outcome::Finish(out) = &mut self {
            out.cost = Some(out.cost.unwrap_or(0.0) + usd);
        }
        self
    }

    /// Attaches details for people and UIs (ignored for [`Outcome::AskHuman`]).
    pub fn with_details(mut self, details: impl Serialize) -> Self {
        if let Outcome::Result(out) | Outcome::Finish(out) = &mut self {
            out.details = serde_json::to_value(details).ok();
        }
        self
    }
}

impl From<String> for Outcome {
    fn from(text: String) -> Self {
        Outcome::result(text)
    }
}

impl From<&str> for Outcome {
    fn from(text: &str) -> Self {
        Outcome::result(text)
    }
}

impl From<Part> for Outcome {
    fn from(part: Part) -> Self {
        Outcome::parts(vec![part])
    }
}

/// A failure the model sees and can correct. Any `std::error::Error`
/// converts into [`GadgetError::Failed`], so `?` works on I/O and JSON errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GadgetError {
    /// The parameters are well-formed but unusable; say what to change.
    InvalidArguments(String),
    /// The gadget tried and failed.
    Failed(String),
    /// The gadget stopped because [`Context::cancelled`] returned true.
    Cancelled,
}

impl GadgetError {
    /// The parameters are unusable, for this reason.
    pub fn invalid_arguments(message: impl fmt::Display) -> Self {
        GadgetError::InvalidArguments(message.to_string())
    }

    /// The gadget failed, for this reason.
    pub fn failed(message: impl fmt::Display) -> Self {
        GadgetError::Failed(message.to_string())
    }
}

impl fmt::Display for GadgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GadgetError::InvalidArguments(m) => write!(f, "invalid arguments: {m}"),
            GadgetError::Failed(m) => f.write_str(m),
            GadgetError::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl<E: std::error::Error> From<E> for GadgetError {
    fn from(error: E) -> Self {
        GadgetError::Failed(error.to_string())
    }
}

/// Severity of a log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// What a gadget can ask of the host during a call: logging, costs,
/// progress, partial updates and the abort signal.
#[derive(Debug)]
pub struct Context {
    invocation_id: String,
    /// In a unit test ([`testing`]): where the calls to the host go
    /// instead (there is no host to import from).
    test: Option<std::sync::Arc<std::sync::Mutex<testing::Recorded>>>,
}

impl Context {
    /// The invocation id of this call (the model's, or `gadget_N`).
    pub fn invocation_id(&self) -> &str {
        &self.invocation_id
    }

    /// Time left before the call's deadline.
    pub fn time_left(&self) -> Duration {
        if let Some(test) = &self.test {
            return testing::lock(test).time_left;
        }
        Duration::from_millis(host::call_info().time_left_ms)
    }

    /// True once the deadline has passed or the run was cancelled. Long
    /// work should check it and return [`GadgetError::Cancelled`].
    pub fn cancelled(&self) -> bool {
        if let Some(test) = &self.test {
            return testing::lock(test).cancelled;
        }
        host::cancelled()
    }

    /// `Err(GadgetError::Cancelled)` once [`Context::cancelled`] is true,
    /// so a loop can say `ctx.check_cancelled()?;`.
    pub fn check_cancelled(&self) -> Result<(), GadgetError> {
        if self.cancelled() {
            Err(GadgetError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Writes a log entry for people (never shown to the model).
    pub fn log(&self, level: Level, message: impl AsRef<str>) {
        if let Some(test) = &self.test {
            return testing::lock(test).log(level, message.as_ref(), None);
        }
        host::log(to_wit_level(level), message.as_ref(), "");
    }

    /// Writes a log entry with structured fields (any value that serializes
    /// to a JSON object).
    pub fn log_with(&self, level: Level, message: impl AsRef<str>, fields: impl Serialize) {
        if let Some(test) = &self.test {
            let fields = serde_json::to_value(&fields).ok();
            return testing::lock(test).log(level, message.as_ref(), fields);
        }
        let fields = serde_json::to_string(&fields).unwrap_or_default();
        host::log(to_wit_level(level), message.as_ref(), &fields);
    }

    /// A debug-level log entry.
    pub fn debug(&self, message: impl AsRef<str>) {
        self.log(Level::Debug, message);
    }

    /// An info-level log entry.
    pub fn info(&self, message: impl AsRef<str>) {
        self.log(Level::Info, message);
    }

    /// A warning.
    pub fn warn(&self, message: impl AsRef<str>) {
        self.log(Level::Warn, message);
    }

    /// An error-level log entry (the call can still succeed).
    pub fn error(&self, message: impl AsRef<str>) {
        self.log(Level::Error, message);
    }

    /// Reports a cost in US dollars; kept even if the call later fails.
    pub fn report_cost(&self, usd: f64) {
        if let Some(test) = &self.test {
            testing::lock(test).cost += usd;
            return;
        }
        host::report_cost(usd);
    }

    /// A short status line for people.
    pub fn progress(&self, message: impl AsRef<str>) {
        if let Some(test) = &self.test {
            return testing::lock(test)
                .progress
                .push(message.as_ref().to_string());
        }
        host::progress(message.as_ref());
    }

    /// Progress as numbers: `done` so far, of `total` when known, with an
    /// optional status line (an MCP client sees a progress notification).
    /// Each report must be more than the last; the host drops one that is not.
    pub fn report_progress(&self, done: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(test) = &self.test {
            let line = match (total, message) {
                (Some(total), Some(m)) => format!("{done}/{total}: {m}"),
                (Some(total), None) => format!("{done}/{total}"),
                (None, Some(m)) => format!("{done}: {m}"),
                (None, None) => format!("{done}"),
            };
            return testing::lock(test).progress.push(line);
        }
        host::report_progress(done, total, message);
    }

    /// Asks one or more questions at once and waits for every answer (see
    /// [`ask`]). Ask before acting: over stateless HTTP the gadget runs
    /// again from the start when the answers come.
    pub fn ask(
        &self,
        questions: impl IntoIterator<Item = ask::Question>,
    ) -> Result<ask::Answers, ask::AskError> {
        if let Some(test) = &self.test {
            return testing::lock(test).ask(questions.into_iter().collect());
        }
        ask::ask(questions.into_iter().collect())
    }

    /// Asks one question in words; `None` when the person declined or
    /// dismissed it.
    pub fn ask_text(&self, question: impl Into<String>) -> Result<Option<String>, ask::AskError> {
        let answers = self.ask([ask::Question::text("answer", question)])?;
        Ok(answers.text("answer").map(str::to_string))
    }

    /// The kinds of question this call can have answered, so a gadget can
    /// ask only what will be answered, or do without.
    pub fn answerable(&self) -> ask::Kinds {
        if let Some(test) = &self.test {
            let text = !testing::lock(test).answers.is_empty();
            return ask::Kinds {
                text,
                form: text,
                sample: false,
                roots: false,
            };
        }
        ask::answerable()
    }

    /// A partial result for live display, never shown to the model.
    pub fn update(&self, partial: impl AsRef<str>) {
        if let Some(test) = &self.test {
            return testing::lock(test)
                .updates
                .push(partial.as_ref().to_string());
        }
        host::update(partial.as_ref(), None);
    }

    /// A partial result with structured details.
    pub fn update_with(&self, partial: impl AsRef<str>, details: impl Serialize) {
        if let Some(test) = &self.test {
            return testing::lock(test)
                .updates
                .push(partial.as_ref().to_string());
        }
        let details = serde_json::to_string(&details).ok();
        host::update(partial.as_ref(), details.as_deref());
    }

    /// One completion from the host's LLM (see [`llm`]); its cost is added
    /// to this call's cost by the host.
    pub fn complete(&self, request: llm::Request) -> Result<llm::Completion, llm::LlmError> {
        if self.test.is_some() {
            return Err(llm::LlmError::Denied(
                "a unit test has no LLM: test what the gadget does with a completion through `gadget test` and a granted model".into(),
            ));
        }
        llm::complete(request)
    }
}

pub mod llm;
pub mod testing;

fn to_wit_level(level: Level) -> wit::Level {
    match level {
        Level::Trace => wit::Level::Trace,
        Level::Debug => wit::Level::Debug,
        Level::Info => wit::Level::Info,
        Level::Warn => wit::Level::Warn,
        Level::Error => wit::Level::Error,
    }
}

/// The JSON Schema of a parameters type, as the host and the model see it:
/// draft 2020-12 with every subschema inlined (no `$ref`), so renderers and
/// validators need no resolver.
pub fn parameters_schema<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        // The `$schema` keyword and the Rust type's name are noise to a model.
        object.remove("$schema");
        object.remove("title");
    }
    schema
}

/// Glue between [`export_gadgets!`] and the bindings. Not part of the API.
#[doc(hidden)]
#[path = "glue.rs"]
pub mod __private;

/// Exports gadgets as this crate's component. List every [`Gadget`] type the
/// component provides, and the [`Catalog`] of resources and prompts it
/// serves, if any; call it once, at the crate root.
///
/// ```ignore
/// gadget_sdk::export_gadgets!(Calculator, Converter);
/// gadget_sdk::export_gadgets!(Search; catalog = Notes);
/// ```
#[macro_export]
macro_rules! export_gadgets {
    ($($gadget:ty),+ $(,)?) => {
        $crate::export_gadgets!($($gadget),+ ; catalog = $crate::NoCatalog);
    };
    ($($gadget:ty),+ ; catalog = $catalog:ty) => {
        #[doc(hidden)]
        pub struct __GadgetComponent;

        impl $crate::__private::Guest for __GadgetComponent {
            fn specs() -> ::std::vec::Vec<$crate::__private::GadgetSpec> {
                ::std::vec![$($crate::__private::spec::<$gadget>()),+]
            }

            fn invoke(
                invocation_id: ::std::string::String,
                name: ::std::string::String,
                params: ::std::string::String,
            ) -> ::std::result::Result<$crate::__private::WitOutcome, $crate::__private::WitError> {
                $(
                    if name.eq_ignore_ascii_case(<$gadget as $crate::Gadget>::NAME) {
                        return $crate::__private::invoke::<$gadget>(invocation_id, &params);
                    }
                )+
                ::std::result::Result::Err($crate::__private::unknown(&name))
            }
        }

        $crate::__private::catalog_glue!(__GadgetComponent, $catalog);

        $crate::__bindings::__export_plugin!(__GadgetComponent with_types_in $crate::__bindings);
    };
}
