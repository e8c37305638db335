//! The engine, its linker and its clock ([`Runtime`]), a component
//! prepared once ([`PluginPre`]), and one call run in a fresh store
//! ([`Runtime::invoke`]): limits set, host interfaces linked with getters
//! over the store's parts, the outcome classified.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store};

use gadget_core::call::{CallError, CallReport, GadgetSpec};
use gadget_core::ledger::{self, CallObserver};
use gadget_core::limits::{Limits, MAX_ERROR_MESSAGE_BYTES};
use gadget_core::signal::AbortSignal;
use gadget_core::tool::HumanInput;

use crate::ask::AskDoor;
use crate::bindings::{self, GADGET_EXPORT, WIT_PACKAGE};
use crate::bindings::{GuestOutcome, wit};
use crate::epoch::{self, EpochClock, EpochMode};
use crate::host_imports::HostDoor;
use crate::limiter::MemoryBudget;
use crate::llm::{self, LlmDoor};
use crate::memory_budget::default_memory_budget;
use crate::outcome::{Failure, Instantiation, Trapped, accept_outcome, classify_trap};
use crate::pool::pooling_config;
use crate::state::{self, CallState};
use crate::{config_log, deadline, files, grants};

/// Wall time allowed for reading a component's specs at load time.
pub const SPECS_TIMEOUT: Duration = Duration::from_secs(10);

/// A compiled, pre-linked component, ready to instantiate once per call,
/// by the contract version it was built against.
#[derive(Clone)]
pub enum PluginPre {
    V0_1_0(bindings::v0_1_0::PluginPre<CallState>),
    V0_2_0(bindings::v0_2_0::PluginPre<CallState>),
    V0_3_0(bindings::v0_3_0::PluginPre<CallState>),
}

impl PluginPre {
    pub fn version(&self) -> bindings::ContractVersion {
        match self {
            PluginPre::V0_1_0(_) => bindings::ContractVersion::V0_1_0,
            PluginPre::V0_2_0(_) => bindings::ContractVersion::V0_2_0,
            PluginPre::V0_3_0(_) => bindings::ContractVersion::V0_3_0,
        }
    }

    async fn specs(&self, store: &mut Store<CallState>) -> wasmtime::Result<Vec<GadgetSpec>> {
        fn all<S: Into<GadgetSpec>>(specs: Vec<S>) -> Vec<GadgetSpec> {
            specs.into_iter().map(Into::into).collect()
        }
        // The same calls on each version's generated types.
        macro_rules! specs_of {
            ($pre:expr) => {{
                let plugin = $pre.instantiate_async(&mut *store).await?;
                Ok(all(plugin
                    .gadget_plugin_gadget()
                    .call_specs(&mut *store)
                    .await?))
            }};
        }
        match self {
            PluginPre::V0_1_0(pre) => specs_of!(pre),
            PluginPre::V0_2_0(pre) => specs_of!(pre),
            PluginPre::V0_3_0(pre) => specs_of!(pre),
        }
    }

    /// Instantiates (an error here is `Instantiation`) and invokes (an
    /// error here is `Trapped`); an older version's outcome is read as the
    /// newest's.
    async fn invoke(
        &self,
        store: &mut Store<CallState>,
        id: &str,
        name: &str,
        params: &str,
    ) -> Result<Result<GuestOutcome, wit::GadgetError>, Failure> {
        // The same calls on each version's generated types.
        macro_rules! invoke_of {
            ($pre:expr) => {{
                let plugin = $pre
                    .instantiate_async(&mut *store)
                    .await
                    .map_err(Instantiation)?;
                let returned = plugin
                    .gadget_plugin_gadget()
                    .call_invoke(&mut *store, id, name, params)
                    .await
                    .map_err(Trapped)?;
                Ok(returned.map(Into::into).map_err(Into::into))
            }};
        }
        match self {
            PluginPre::V0_1_0(pre) => invoke_of!(pre),
            PluginPre::V0_2_0(pre) => invoke_of!(pre),
            PluginPre::V0_3_0(pre) => invoke_of!(pre),
        }
    }
}

/// Why the runtime could not be set up or a component not prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    #[error("could not configure the wasmtime engine: {0}")]
    Engine(String),
    #[error("could not start the epoch ticker thread: {0}")]
    Ticker(#[from] std::io::Error),
    #[error("not a valid component: {0}")]
    Compile(String),
    #[error(
        "built for another world: expected a component exporting `{GADGET_EXPORT}`, `gadget:plugin/gadget@0.2.0` or `gadget:plugin/gadget@0.3.0` (world `plugin` of {WIT_PACKAGE}), but it exports {found}"
    )]
    WrongWorld { found: String },
    #[error(
        "imports `{0}`, which this host does not provide (it provides WASI 0.2 and {WIT_PACKAGE})"
    )]
    UnknownImport(String),
    #[error("could not link: {0}")]
    Link(String),
    #[error("reading its gadget specs failed: {0}")]
    Specs(#[source] CallError),
    #[error("reading its catalog (resources and prompts) failed: {0}")]
    Catalog(#[source] CallError),
}

/// One call to run.
#[derive(Clone)]
pub struct CallRequest {
    /// The gadget's name as served (in messages).
    pub gadget: String,
    /// The name the component knows it by, when it differs (an operator's
    /// prefix); `None` means `gadget`.
    pub component_name: Option<String>,
    pub invocation_id: String,
    /// Validated parameters, JSON text.
    pub params: String,
    pub limits: Limits,
    /// Raising it cancels the call: the abort signal goes up at once and
    /// the grace period starts.
    pub signal: Option<AbortSignal>,
    pub observer: Option<CallObserver>,
    /// What the call may use (files, HTTP, config) and the secrets to
    /// redact; `None`: nothing.
    pub grants: Option<Arc<grants::CallGrants>>,
    /// The W3C `traceparent` put on the call's outgoing HTTP requests (the
    /// caller's span, when tracing is on).
    pub trace_parent: Option<Arc<str>>,
    /// The operator's deny rules on the gadget's URL parameters, which
    /// hold for every request the call makes too.
    pub request_denials: Option<gadget_core::approval::RequestDenials>,
    /// Who answers what the gadget asks (the `ask` import); `None`: no one.
    pub human: Option<Arc<dyn HumanInput>>,
}

impl CallRequest {
    /// The request of a load-time read (specs, catalog): nothing granted,
    /// nobody watching.
    pub(crate) fn at_load(what: &str, limits: Limits) -> CallRequest {
        CallRequest {
            gadget: what.to_string(),
            component_name: None,
            invocation_id: "(load)".into(),
            params: String::new(),
            limits,
            signal: None,
            observer: None,
            grants: None,
            trace_parent: None,
            request_denials: None,
            human: None,
        }
    }
}

/// One entry into guest code: what to do, and the request it runs under.
/// Every entry (a tool call, a catalog request) comes through
/// [`Runtime::run`], the runtime's one door, and the one call path opened
/// the layers around it before it got here.
pub struct GuestRun {
    pub op: GuestOp,
    pub call: CallRequest,
}

/// What an entry asks of the component.
pub enum GuestOp {
    /// The gadget's `invoke` with the request's parameters.
    Invoke,
    /// A request to its catalog (contract 0.3.0).
    Catalog(gadget_core::catalog::CatalogOp),
}

/// What the component answered, in kind.
#[allow(
    clippy::large_enum_variant,
    reason = "moved once per entry; boxing the report would add an allocation to every call"
)]
pub enum GuestAnswer {
    /// A call's whole report (its failures included).
    Invoked(CallReport),
    Read(
        Result<
            Vec<gadget_core::content::ResourceContents>,
            crate::bindings::v0_3_0::exports::gadget::plugin::catalog::ReadError,
        >,
    ),
    Prompt(Result<gadget_core::catalog::PromptResult, String>),
    Complete(Vec<String>),
}

/// How the engine is built.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub epoch: EpochMode,
    /// Use wasmtime's pooling allocator: memories, tables and async stacks
    /// are reused instead of mapped and unmapped per call, which is what
    /// makes fresh-instance-per-call cheap under parallel load. It reserves
    /// virtual memory up front; if that fails the engine falls back to
    /// on-demand allocation with a warning.
    pub pooling: bool,
    /// Linear memory of all calls running at once, bytes (the policy's
    /// `host-memory-mib`); `None`: [`default_memory_budget`].
    pub memory_budget: Option<u64>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            epoch: EpochMode::Ticker,
            pooling: true,
            memory_budget: None,
        }
    }
}

/// The engine, its linker and its clock. Cheap to share behind an `Arc`.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    ticker: epoch::EpochTicker,
    pub(crate) budget: Arc<MemoryBudget>,
    /// Where granted `llm` completions go.
    pub(crate) llm_backend: std::sync::OnceLock<Arc<dyn llm::LlmBackend>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("epoch", &self.ticker.clock().mode())
            .finish()
    }
}

impl Runtime {
    /// Sets where the `llm` import's completions go (once; later calls
    /// are ignored and return false). Without it, granted completions fail
    /// with "no LLM provider configured".
    pub fn set_llm_backend(&self, backend: Arc<dyn llm::LlmBackend>) -> bool {
        self.llm_backend.set(backend).is_ok()
    }

    pub fn new(config: &RuntimeConfig) -> Result<Runtime, RuntimeError> {
        let base = || {
            let mut wasm = Config::new();
            wasm.wasm_component_model(true).epoch_interruption(true);
            wasm
        };
        let engine = if config.pooling {
            let mut wasm = base();
            let pool = pooling_config();
            wasm.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
            match Engine::new(&wasm) {
                Ok(engine) => engine,
                Err(e) => {
                    tracing::warn!(
                        "pooling allocator unavailable ({e}); allocating per call instead"
                    );
                    Engine::new(&base()).map_err(|e| RuntimeError::Engine(e.to_string()))?
                }
            }
        } else {
            Engine::new(&base()).map_err(|e| RuntimeError::Engine(e.to_string()))?
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| RuntimeError::Link(e.to_string()))?;
        files::add_guards_to_linker(&mut linker, state::files_view)
            .map_err(|e| RuntimeError::Link(e.to_string()))?;
        files::add_logged_to_linker(&mut linker, state::files_view)
            .map_err(|e| RuntimeError::Link(e.to_string()))?;
        config_log::add_to_linker(&mut linker, state::config_reads)
            .map_err(|e| RuntimeError::Link(e.to_string()))?;
        // wasi:http is linked for every component; what a request may
        // reach is the plugin's grants' decision, request by request.
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(|e| RuntimeError::Link(e.to_string()))?;
        bindings::v0_1_0::Plugin::add_to_linker::<_, HostDoor>(&mut linker, state::guest_call)
            .map_err(|e| RuntimeError::Link(e.to_string()))?;
        // 0.2.0's types are 0.1.0's (already linked under their own name by
        // the world above); its host and llm interfaces are its own.
        bindings::v0_2_0::gadget::plugin::host::add_to_linker::<_, HostDoor>(
            &mut linker,
            state::guest_call,
        )
        .map_err(|e| RuntimeError::Link(e.to_string()))?;
        bindings::v0_2_0::gadget::plugin::llm::add_to_linker::<_, LlmDoor>(
            &mut linker,
            state::llm_call,
        )
        .map_err(|e| RuntimeError::Link(e.to_string()))?;
        // 0.3.0's types, host and llm interfaces are generated anew (its
        // types differ); the host and llm behave as 0.2.0's.
        bindings::v0_3_0::gadget::plugin::host::add_to_linker::<_, HostDoor>(
            &mut linker,
            state::guest_call,
        )
        .map_err(|e| RuntimeError::Link(e.to_string()))?;
        bindings::v0_3_0::gadget::plugin::llm::add_to_linker::<_, LlmDoor>(
            &mut linker,
            state::llm_call,
        )
        .map_err(|e| RuntimeError::Link(e.to_string()))?;
        bindings::v0_3_0::gadget::plugin::ask::add_to_linker::<_, AskDoor>(
            &mut linker,
            state::ask_call,
        )
        .map_err(|e| RuntimeError::Link(e.to_string()))?;
        let ticker = epoch::EpochTicker::start(&engine, config.epoch)?;
        let budget = Arc::new(MemoryBudget {
            limit: config.memory_budget.unwrap_or_else(default_memory_budget),
            used: Default::default(),
            freed: tokio::sync::Notify::new(),
        });
        Ok(Runtime {
            engine,
            linker,
            ticker,
            budget,
            llm_backend: std::sync::OnceLock::new(),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine's clock (to advance it by hand in [`EpochMode::Manual`]).
    pub fn clock(&self) -> &EpochClock {
        self.ticker.clock()
    }

    /// Compiles a component from its bytes (Cranelift; slow for big guests,
    /// which is why `plugins::cache` exists).
    pub fn compile(&self, bytes: &[u8]) -> Result<Component, RuntimeError> {
        Component::new(&self.engine, bytes).map_err(|e| RuntimeError::Compile(format!("{e:#}")))
    }

    /// Compiles a component into precompiled code that
    /// `Component::deserialize` on an engine like this one accepts (what a
    /// compiling child process hands back).
    pub fn precompile(&self, bytes: &[u8]) -> Result<Vec<u8>, RuntimeError> {
        self.engine
            .precompile_component(bytes)
            .map_err(|e| RuntimeError::Compile(format!("{e:#}")))
    }

    /// Checks the component's world and links it, once. The contract
    /// version is read from what it exports.
    pub fn prepare(&self, component: &Component) -> Result<PluginPre, RuntimeError> {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let version = if exports.iter().any(|e| e == bindings::GADGET_EXPORT_V0_3_0) {
            bindings::ContractVersion::V0_3_0
        } else if exports.iter().any(|e| e == bindings::GADGET_EXPORT_V0_2_0) {
            bindings::ContractVersion::V0_2_0
        } else if exports.iter().any(|e| e == GADGET_EXPORT) {
            bindings::ContractVersion::V0_1_0
        } else {
            let found = if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(RuntimeError::WrongWorld { found });
        };
        for (name, _) in ty.imports(&self.engine) {
            if !bindings::ALLOWED_IMPORT_PREFIXES
                .iter()
                .any(|prefix| name.starts_with(prefix))
            {
                return Err(RuntimeError::UnknownImport(name.to_string()));
            }
        }
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
        Ok(match version {
            bindings::ContractVersion::V0_1_0 => PluginPre::V0_1_0(
                bindings::v0_1_0::PluginPre::new(pre)
                    .map_err(|e| RuntimeError::Link(format!("{e:#}")))?,
            ),
            bindings::ContractVersion::V0_2_0 => PluginPre::V0_2_0(
                bindings::v0_2_0::PluginPre::new(pre)
                    .map_err(|e| RuntimeError::Link(format!("{e:#}")))?,
            ),
            bindings::ContractVersion::V0_3_0 => PluginPre::V0_3_0(
                bindings::v0_3_0::PluginPre::new(pre)
                    .map_err(|e| RuntimeError::Link(format!("{e:#}")))?,
            ),
        })
    }

    /// Reads the component's gadget specs from a fresh instance.
    pub async fn read_specs(
        &self,
        pre: &PluginPre,
        limits: &Limits,
    ) -> Result<Vec<GadgetSpec>, RuntimeError> {
        let limits = Limits {
            timeout: SPECS_TIMEOUT,
            ..limits.clone()
        };
        let mut store = self
            .new_store(&CallRequest::at_load("(specs)", limits.clone()))
            .map_err(|reason| {
                RuntimeError::Specs(CallError::Instantiate {
                    gadget: "(specs)".into(),
                    reason,
                })
            })?;
        let run = pre.specs(&mut store);
        let result = self.with_outer_timeout(&limits, run, None).await;
        match result {
            Some(Ok(specs)) => Ok(specs),
            Some(Err(error)) => Err(RuntimeError::Specs(classify_trap(
                error, &mut store, &limits,
            ))),
            None => Err(RuntimeError::Specs(CallError::Timeout {
                gadget: "(specs)".into(),
                timeout_ms: limits.timeout.as_millis() as u64,
            })),
        }
    }

    /// The one door into guest code: runs `run` in a fresh instance of
    /// `pre`. A call never fails as a whole (its report holds its
    /// failure); a catalog request fails with the call error it met.
    pub async fn run(&self, pre: &PluginPre, run: GuestRun) -> Result<GuestAnswer, CallError> {
        match run.op {
            GuestOp::Invoke => Ok(GuestAnswer::Invoked(self.invoke(pre, run.call).await)),
            GuestOp::Catalog(op) => self.catalog_op(pre, run.call, op).await,
        }
    }

    /// Runs one call in a fresh instance and reports everything it did.
    /// Never panics and never fails as a whole: every failure is a
    /// [`CallError`] in the report, with whatever was logged and costed.
    async fn invoke(&self, pre: &PluginPre, request: CallRequest) -> CallReport {
        // Admission: wait for room in the host's memory budget. The wait
        // is the host's, not the gadget's: the deadline is armed after it.
        self.budget.room_to_start().await;
        let started = Instant::now();
        let limits = &request.limits;
        let grants = request.grants.as_deref();
        let mut store = match self.new_store(&request) {
            Ok(store) => store,
            Err(reason) => {
                return CallReport::of(
                    Err(CallError::Instantiate {
                        gadget: request.gadget.clone(),
                        reason,
                    }),
                    started.elapsed(),
                );
            }
        };
        let pauses = store.data().time.pauses.clone();
        let name = request.component_name.as_ref().unwrap_or(&request.gadget);
        let (id, params) = (&request.invocation_id, &request.params);
        let run = pre.invoke(&mut store, id, name, params);
        let result = self.with_outer_timeout(limits, run, Some(&pauses)).await;
        let mut returned_cost = 0.0;
        let outcome = match result {
            None => Err(CallError::Timeout {
                gadget: request.gadget.clone(),
                timeout_ms: limits.timeout.as_millis() as u64,
            }),
            Some(Err(Instantiation(_))) if store.data().limiter.budget_refused => {
                Err(self.budget_error(&request.gadget))
            }
            Some(Err(Instantiation(error))) => Err(CallError::Instantiate {
                gadget: request.gadget.clone(),
                reason: format!("{error:#}"),
            }),
            Some(Err(Trapped(_)))
                if store.data().limiter.budget_refused && !store.data().time.timed_out =>
            {
                Err(self.budget_error(&request.gadget))
            }
            Some(Err(Trapped(_))) if store.data().awaiting.is_some() => {
                Err(CallError::AwaitingAnswers {
                    gadget: request.gadget.clone(),
                    keys: store.data_mut().awaiting.take().unwrap_or_default(),
                })
            }
            Some(Err(Trapped(error))) => Err(classify_trap(error, &mut store, limits)),
            Some(Ok(Err(error))) => Err(gadget_error(error, store.data(), &request)),
            Some(Ok(Ok(outcome))) => {
                let state = store.data_mut();
                accept_outcome(outcome, &request.gadget, limits, state, &mut returned_cost)
            }
        };
        // What the doors refused or saw fail: the log gets every line, and
        // a failure's message the refusals' reasons (before redaction, as
        // the reasons hold what the gadget wrote).
        let notes = store.data().http.notes.take();
        let outcome = outcome.map_err(|error| match error {
            CallError::Failed { message } => CallError::Failed {
                message: crate::notes::with_refusals(message, &notes),
            },
            other => other,
        });
        // Secrets are replaced in what the gadget wrote before anything
        // else sees it (logs, progress and updates already were, as they
        // came).
        let outcome = match grants {
            Some(grants) if !grants.redactor.is_empty() => outcome
                .map(|o| grants.redact_outcome(o))
                .map_err(|e| grants.redact_error(e)),
            _ => outcome,
        };
        let mut state = store.into_data();
        let at = state.elapsed_ms();
        // What the doors refused or saw fail, one line each (a stream the
        // guest left open may note after the outcome was taken).
        for note in notes.into_iter().chain(state.http.notes.take()) {
            state.ledger.host_warning(note.log, at);
        }
        state.ledger.close(at);
        let redact_output = |captured: gadget_core::call::Captured| match grants {
            Some(grants) if !grants.redactor.is_empty() => gadget_core::call::Captured {
                bytes: grants
                    .redactor
                    .captured(captured.bytes, captured.dropped > 0),
                dropped: captured.dropped,
            },
            _ => captured,
        };
        CallReport {
            outcome,
            cost: ledger::add_costs(state.ledger.reported_cost, returned_cost),
            logs: state.ledger.logs,
            progress: state.ledger.progress,
            updates: state.ledger.updates,
            dropped_log_entries: state.ledger.dropped_entries,
            stdout: redact_output(state.stdout.take()),
            stderr: redact_output(state.stderr.take()),
            duration: started.elapsed(),
        }
    }

    /// Waits for room in the host's memory budget to start an instance.
    pub(crate) async fn budget_room(&self) {
        self.budget.room_to_start().await;
    }

    fn budget_error(&self, gadget: &str) -> CallError {
        CallError::MemoryBudget {
            gadget: gadget.to_string(),
            budget_bytes: self.budget.limit,
        }
    }

    /// The host-wide memory budget, in bytes.
    pub fn memory_budget(&self) -> u64 {
        self.budget.limit
    }

    /// Bounds time spent where epochs cannot reach (inside host imports):
    /// `None` when the outer timeout fired. Off in manual epoch mode.
    pub(crate) async fn with_outer_timeout<T>(
        &self,
        limits: &Limits,
        run: impl Future<Output = T>,
        pauses: Option<&deadline::Pauses>,
    ) -> Option<T> {
        match self.clock().mode() {
            EpochMode::Manual => Some(run.await),
            EpochMode::Ticker => {
                let outer =
                    limits.timeout + limits.grace + gadget_core::limits::OUTER_TIMEOUT_SLACK;
                let started = tokio::time::Instant::now();
                tokio::pin!(run);
                // Time spent waiting for answers is not the gadget's: the
                // timer moves by it (a wait in progress keeps moving it).
                loop {
                    let paused = pauses.map_or(Duration::ZERO, deadline::Pauses::paused);
                    let until = started + outer + paused;
                    match tokio::time::timeout_at(until, &mut run).await {
                        Ok(done) => return Some(done),
                        Err(_) => {
                            let now_paused =
                                pauses.map_or(Duration::ZERO, deadline::Pauses::paused);
                            if now_paused == paused {
                                return None;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The error a gadget returned, as the call's failure: its message
/// bounded (and redacted by the ledger); stopping on the abort signal the
/// deadline raised is a timeout, as the model should be told, and only a
/// cancellation from outside is reported as one. A failure returned once
/// the deadline has passed is the deadline's doing too (a fetch cut at
/// the deadline, a loop that saw the signal and gave up with an error):
/// a timeout, so dependents, the journal and the spans get the cause.
fn gadget_error(error: wit::GadgetError, state: &CallState, request: &CallRequest) -> CallError {
    let timed_out = !state.time.externally_cancelled() && state.time.deadline_passed();
    match error {
        wit::GadgetError::InvalidArguments(message) => CallError::InvalidArguments {
            message: state.ledger.bounded(message, MAX_ERROR_MESSAGE_BYTES),
        },
        wit::GadgetError::Failed(_) if timed_out => CallError::Timeout {
            gadget: request.gadget.clone(),
            timeout_ms: request.limits.timeout.as_millis() as u64,
        },
        wit::GadgetError::Failed(message) => CallError::Failed {
            message: state.ledger.bounded(message, MAX_ERROR_MESSAGE_BYTES),
        },
        wit::GadgetError::Cancelled => {
            let external = state.time.externally_cancelled();
            if !external && state.time.deadline_passed() {
                CallError::Timeout {
                    gadget: request.gadget.clone(),
                    timeout_ms: request.limits.timeout.as_millis() as u64,
                }
            } else {
                CallError::Cancelled {
                    gadget: request.gadget.clone(),
                }
            }
        }
    }
}
