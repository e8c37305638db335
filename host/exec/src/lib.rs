//! # gadget-exec
//!
//! Executes a model's response as it streams: parse, schedule, run.
//!
//! The executor runs [`Tool`]s and knows nothing of WebAssembly: this crate
//! depends on `gadget-core`, tokio and the OpenTelemetry API only, so its rules are tested with
//! fake tools (`tests/fake_tools.rs`) and a wasm gadget, the built-in
//! output viewer, a remote tool or a sub-agent all run the same way.
//!
//! [`Executor::run_response`] reads a stream of chunks, feeds them to the
//! [parser](gadget_core::parser), hands each completed call to the
//! [scheduler](gadget_core::schedule) and carries out what it decides: a call
//! starts the moment its block is complete and its dependencies have
//! succeeded, while the model is still writing. Every call ends in exactly
//! one [`ExecEvent::CallFinished`] or [`ExecEvent::CallSkipped`]; errors
//! (parse, unknown gadget, invalid parameters, execution, timeout) are
//! results the model sees, in llmist's wording.
//!
//! Around each call, in llmist's order: the [`Controller`] may skip it with
//! a synthetic result; the operator's approval rules may refuse it or make
//! it wait for a person ([`Executor::with_approvals`]: only that call
//! waits, and it starts when approved); the gadget runs with its timeout (the run's
//! per-gadget setting, else the gadget's own, else the run's default, all
//! capped by the operator); ask-human goes to the [`HumanInput`] handler;
//! oversized results are stored for `GadgetOutputViewer` (the
//! [viewer](gadget_core::viewer), built in); the controller may then recover a
//! failure with a fallback. Progress, updates and logs arrive as events
//! while the call runs.
//!
//! The session (auto ids, finished ids, stored outputs, costs) carries
//! over from one response to the next; [`Executor::history`] is what the
//! model is shown of the last response.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::mpsc;

mod abort;
/// The audit journal file: the [`gadget_core::scope::Recorder`] calls carry.
pub mod audit;
mod builtins;
pub mod call;
pub mod catalog;
mod config;
mod input;
mod layers;
mod live;
mod outcome;
mod runners;
mod start;
mod state;
pub mod telemetry;
pub use abort::AbortHandle;
use builtins::builtins;
pub use builtins::callable_tools;
pub use config::{
    AfterExecution, Answer, BeforeExecution, CallView, Controller, ExecConfig, HumanInput,
    NO_HUMAN_INPUT, NoController, Replies,
};
pub use input::ResponseInput;
use input::{Parsed, collect};
use runners::Runners;
use state::{Ended, Entry, Finished, Live, policy_for};

use gadget_core::approval::Approvals;
use gadget_core::call::{FailureKind, OutcomeKind};
use gadget_core::chunked::ChunkedVec;
use gadget_core::parser::{self, ConfigError, GadgetCall, Parser, ParserBuilder, ParserConfig};
use gadget_core::render::{GadgetDoc, HistoryEntry};
use gadget_core::schedule::{self, Action, CallIx, CallSpec, Scheduler};
use gadget_core::scope::CallScope;
use gadget_core::signal::AbortSignal;
use gadget_core::tool::{Tool, Toolbox, Tools};
use gadget_core::viewer::OutputLimiter;

pub use gadget_core::events::{ExecEvent, Failure, ResponseSummary, WaitReason};
pub use gadget_core::limits::Timeouts;

/// Executes the responses of one session.
pub struct Executor {
    tools: Arc<dyn Tools>,
    /// Tools of the executor's own (the output viewer), found after
    /// `tools`.
    builtins: Toolbox,
    config: ExecConfig,
    controller: Arc<dyn Controller>,
    /// What surrounds every call of the session: approvals, the journal,
    /// the trace, the person who answers.
    scope: Arc<CallScope>,
    scheduler: Scheduler,
    /// The markers, checked and prepared once: each response's parser
    /// shares them.
    parser_config: Arc<ParserConfig>,
    session: parser::Session,
    entries: ChunkedVec<Entry>,
    limiter: Option<Arc<Mutex<OutputLimiter>>>,
    history: ChunkedVec<HistoryEntry>,
    /// Calls just parsed that may be held back by an exclusive gadget.
    /// With whether each is of an exclusive gadget (its hints, already
    /// computed when it was added).
    maybe_waiting: Vec<(CallIx, bool)>,
    /// The id of an exclusive call reported waiting and not yet started.
    exclusive_waiting: Option<String>,
    /// Bytes of results and parameters in `history`.
    history_bytes: usize,
    session_cost: f64,
    abort: AbortHandle,
}

/// What one response's run holds while it goes on: the runners of its
/// calls, the channel their live events come back on, their abort signal,
/// and the figures of the summary so far.
struct Response {
    running: Runners,
    live_tx: mpsc::UnboundedSender<(CallIx, Live)>,
    live_rx: mpsc::UnboundedReceiver<(CallIx, Live)>,
    abort: AbortSignal,
    summary: ResponseSummary,
}

/// What one response's history (the results the model is sent next) may
/// hold, in bytes of result and parameter text: far more than any model's
/// context window, so only a runaway response reaches it; past it, later
/// results are replaced by a note.
pub const MAX_HISTORY_BYTES: usize = 16 << 20;

impl Executor {
    /// Checks the markers; nothing runs yet. `tools` are what responses
    /// may call (a plugin registry, a [`Toolbox`], ...).
    pub fn new(tools: Arc<dyn Tools>, config: ExecConfig) -> Result<Executor, ConfigError> {
        let limiter = config
            .output_limit
            .map(|limit| Arc::new(Mutex::new(OutputLimiter::new(limit))));
        let parser_config = ParserBuilder::new()
            .start_marker(&config.markers.start)
            .end_marker(&config.markers.end)
            .arg_marker(&config.markers.arg)
            .text_deltas(config.text_deltas)
            .config()?;
        Ok(Executor {
            parser_config,
            scheduler: Scheduler::new(config.schedule.clone()),
            builtins: builtins(limiter.as_ref()),
            limiter,
            tools,
            config,
            controller: Arc::new(NoController),
            scope: CallScope::none(),
            session: parser::Session::default(),
            entries: ChunkedVec::new(),
            history: ChunkedVec::new(),
            maybe_waiting: Vec::new(),
            exclusive_waiting: None,
            history_bytes: 0,
            session_cost: 0.0,
            abort: AbortHandle::default(),
        })
    }

    /// Steers calls: skip before, recover after, dependency decisions,
    /// stop-on-error decisions.
    pub fn with_controller(mut self, controller: Arc<dyn Controller>) -> Executor {
        self.controller = controller;
        self
    }

    /// Answers ask-human outcomes; without one they fail with llmist's
    /// "not available" text.
    pub fn with_human_input(mut self, human: Arc<dyn HumanInput>) -> Executor {
        Arc::make_mut(&mut self.scope).human = Some(human);
        self
    }

    /// Checks each call against the operator's approval rules, and asks
    /// `approvals`' approver when a call must wait (only that call waits).
    pub fn with_approvals(mut self, approvals: Arc<Approvals>) -> Executor {
        Arc::make_mut(&mut self.scope).approvals = Some(approvals);
        self
    }

    /// Holds every call to the operator's rate limits.
    pub fn with_rates(mut self, rates: Option<Arc<gadget_core::rate::RateLimits>>) -> Executor {
        Arc::make_mut(&mut self.scope).rates = rates;
        self
    }

    /// Records every call that reaches a tool, and what it did, in the
    /// audit journal.
    pub fn with_journal(mut self, journal: Arc<audit::Journal>) -> Executor {
        Arc::make_mut(&mut self.scope).recorder = Some(journal.recorder());
        self
    }

    /// Runs every call in `scope` (a sub-agent's: its parent call's).
    pub fn with_scope(mut self, scope: Arc<CallScope>) -> Executor {
        self.scope = scope;
        self
    }

    /// Makes the spans of the next responses' calls children of `parent`
    /// (an agent's session); `None`: each call starts its own trace.
    pub fn set_trace_parent(&mut self, parent: Option<telemetry::TraceContext>) {
        let trace = parent
            .as_ref()
            .and_then(telemetry::trace_parent_of)
            .map(gadget_core::scope::TraceParent::new);
        if self.scope.trace != trace {
            Arc::make_mut(&mut self.scope).trace = trace;
        }
    }

    /// Raises the abort signal in the calls that are running (for Ctrl-C).
    pub fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    /// What the model is shown of the last response: its finished calls,
    /// in completion order (render with [`render::history`]).
    pub fn history(&self) -> &ChunkedVec<HistoryEntry> {
        &self.history
    }

    /// The documentation of every tool a response can call, the built-in
    /// viewer included when output limiting is on: for
    /// [`render::prompt`].
    pub fn gadget_docs(&self) -> Vec<GadgetDoc> {
        let mut tools = self.tools.all();
        tools.extend(self.builtins.all());
        gadget_core::tool::docs(&tools)
    }

    /// The tool a call names: the caller's, else the executor's own.
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.find(name).or_else(|| self.builtins.find(name))
    }

    /// Runs one response: reads `chunks` until it ends (or the scheduler
    /// says to stop reading), and returns when every call has ended. A
    /// chunk is text of the block format, or a call complete already (a
    /// provider's native tool call).
    pub async fn run_response<I: Into<ResponseInput>>(
        &mut self,
        mut chunks: mpsc::Receiver<I>,
        mut sink: impl FnMut(ExecEvent),
    ) -> ResponseSummary {
        let started = Instant::now();
        let mut parser =
            Parser::with_config(self.parser_config.clone()).with_session(self.session.clone());
        let (live_tx, live_rx) = mpsc::unbounded_channel::<(CallIx, Live)>();
        let mut turn = Response {
            running: Runners::start(),
            live_tx,
            live_rx,
            abort: self.abort.renew(),
            summary: ResponseSummary::default(),
        };
        let mut reading = true;
        let mut interrupted = false;
        let stop = self.abort.woken();
        let first = self.entries.len();
        self.history.clear();
        self.history_bytes = 0;
        self.exclusive_waiting = None;
        loop {
            let mut actions = Vec::new();
            tokio::select! {
                // Live events first, so a call's progress is never reported
                // after the call itself. Only running calls send them.
                biased;
                Some((ix, live)) = turn.live_rx.recv(), if !turn.running.is_empty() => {
                    self.live(ix, live, &mut sink);
                }
                // Stopped from outside: no more reading, nothing more starts.
                _ = stop.notified(), if !interrupted && (reading || !turn.running.is_empty()) => {
                    if turn.abort.is_raised() {
                        interrupted = true;
                        reading = false;
                        actions.extend(self.scheduler.interrupt());
                    }
                }
                chunk = chunks.recv(), if reading => {
                    let mut parsed = Vec::new();
                    let ended = chunk.is_none();
                    match chunk.map(Into::into) {
                        Some(ResponseInput::Text(chunk)) => {
                            parser.feed_events(&chunk, |event| collect(event, &mut parsed));
                        }
                        // Complete already: scheduled as a parsed block is.
                        Some(ResponseInput::Call(call)) => parsed.push(Parsed::Call(call)),
                        None => parser.finish_events(|event| collect(event, &mut parsed)),
                    }
                    for item in parsed {
                        match item {
                            Parsed::Text(content) => sink(ExecEvent::Text { content }),
                            Parsed::Call(call) => actions.extend(self.add(call, &mut sink)),
                        }
                        if self.scheduler.stop_reading() {
                            break;
                        }
                    }
                    if ended || self.scheduler.stop_reading() {
                        reading = false;
                        let policy = &mut policy_for(&self.config, &*self.controller, &self.entries);
                        actions.extend(self.scheduler.end_of_stream(policy));
                    }
                    // Calls that ended while this chunk was parsed are
                    // settled now, not after the whole response has been
                    // read: a model (or a file) that writes faster than the
                    // calls run would otherwise leave the runners idle,
                    // their successors waiting for the last chunk.
                    self.settle_ended(None, &mut turn, &mut actions, &mut sink);
                }
                Some(first) = turn.running.next(), if !turn.running.is_empty() => {
                    // Every call that has ended by now, not just the first:
                    // one wake-up of this task settles them all and starts
                    // their successors together.
                    self.settle_ended(Some(first), &mut turn, &mut actions, &mut sink);
                }
                else => break,
            }
            self.carry_out(actions, &mut turn, &mut sink);
            // The calls started in this turn go out together.
            turn.running.flush();
            self.report_waits(&mut sink);
        }
        let mut summary = turn.summary;
        self.session = parser.session().clone();
        self.scheduler.next_response();
        // Calls that never ran (skipped) still hold their bodies.
        for entry in self.entries.iter_mut_from(first) {
            entry.call.forget_body();
            entry.params = None;
        }
        self.session_cost = gadget_core::ledger::add_costs(self.session_cost, summary.cost);
        summary.session_cost = self.session_cost;
        summary.calls = self.entries.len() - first;
        summary.duration_ms = started.elapsed().as_secs_f64() * 1e3;
        summary
    }

    /// Settles `first` (a call just taken back) and every call that has
    /// ended by now (no wait): first whatever they reported before they
    /// ended, then each end, in order.
    fn settle_ended(
        &mut self,
        first: Option<Ended>,
        turn: &mut Response,
        actions: &mut Vec<Action>,
        sink: &mut impl FnMut(ExecEvent),
    ) {
        let mut ended: Vec<Ended> = first.into_iter().collect();
        while let Some(more) = turn.running.try_next() {
            ended.push(more);
        }
        if ended.is_empty() {
            return;
        }
        while let Ok((ix, live)) = turn.live_rx.try_recv() {
            self.live(ix, live, sink);
        }
        for ended in ended {
            actions.extend(self.ended(ended, &mut turn.summary, sink));
        }
    }

    /// A parsed call: reported, then scheduled.
    fn add(&mut self, call: GadgetCall, sink: &mut impl FnMut(ExecEvent)) -> Vec<Action> {
        sink(ExecEvent::CallParsed {
            id: call.invocation_id.clone(),
            gadget: call.name.clone(),
            dependencies: call.dependencies.clone(),
            parameters_raw: call.parameters_raw.clone(),
            parse_error: call.parse_error.clone(),
        });
        let tool = self.find(&call.name);
        let spec = CallSpec {
            invocation_id: call.invocation_id.clone(),
            dependencies: call.dependencies.clone(),
            gadget: tool.as_ref().map(|t| t.hints()),
        };
        self.entries.push(Entry {
            call,
            tool,
            params: None,
            settled: false,
        });
        let waits_on_nothing = spec.dependencies.is_empty();
        let exclusive = spec.gadget.as_ref().is_some_and(|g| g.exclusive);
        let policy = &mut policy_for(&self.config, &*self.controller, &self.entries);
        let (ix, actions) = self.scheduler.add(spec, policy);
        debug_assert_eq!(ix, self.entries.len() - 1);
        if waits_on_nothing {
            self.maybe_waiting.push((ix, exclusive));
        }
        actions
    }

    /// Says which of the calls just parsed could run but are held back by
    /// an `exclusive` gadget (the one wait a person could not guess from
    /// the response); their `CallStarted` ends the wait.
    fn report_waits(&mut self, sink: &mut impl FnMut(ExecEvent)) {
        for (ix, exclusive) in std::mem::take(&mut self.maybe_waiting) {
            let entry = &self.entries[ix];
            if entry.settled {
                continue;
            }
            if !self.scheduler.is_ready(ix) {
                continue; // it started, or waits for a dependency
            }
            let running = self.scheduler.running();
            let group = self.scheduler.group_state(ix);
            let reason = if self.scheduler.exclusive_running() {
                WaitReason::ExclusiveRunning
            } else if let Some((group, held, in_group)) = group {
                if held {
                    WaitReason::PluginHeld {
                        plugin: group.to_string(),
                    }
                } else if exclusive && in_group > 0 {
                    WaitReason::PluginExclusiveWaits {
                        plugin: group.to_string(),
                        running: in_group,
                    }
                } else {
                    continue;
                }
            } else if exclusive && running > 0 {
                WaitReason::ExclusiveWaits { running }
            } else if let Some(first) = &self.exclusive_waiting {
                WaitReason::BehindExclusive {
                    first: first.clone(),
                }
            } else {
                continue;
            };
            if exclusive && group.is_none() && self.exclusive_waiting.is_none() {
                self.exclusive_waiting = Some(entry.call.invocation_id.clone());
            }
            sink(ExecEvent::CallWaiting {
                id: entry.call.invocation_id.clone(),
                gadget: entry.call.name.clone(),
                reason,
            });
        }
    }

    /// A call ended (ran, or could not start): output limiting, the
    /// controller's last word, the report, and the scheduler moves on.
    fn ended(
        &mut self,
        ended: Ended,
        summary: &mut ResponseSummary,
        sink: &mut impl FnMut(ExecEvent),
    ) -> Vec<Action> {
        let Ended {
            call: ix,
            outcome,
            details,
            images,
            cost,
            duration,
        } = ended;
        // Results and error texts alike are limited (llmist's interceptor).
        let mut stored_output = None;
        let outcome = match &self.limiter {
            None => outcome,
            Some(limiter) => {
                let name = &self.entries[ix].call.name;
                let mut limiter = limiter.lock().unwrap_or_else(|p| p.into_inner());
                match outcome {
                    Ok((kind, text)) => {
                        let (text, stored) = limiter.limit(name, text);
                        stored_output = stored;
                        Ok((kind, text))
                    }
                    Err(mut failure) => {
                        let (text, stored) = limiter.limit(name, failure.message);
                        failure.message = text;
                        stored_output = stored;
                        Err(failure)
                    }
                }
            }
        };
        let entry = &self.entries[ix];
        let null = Value::Null;
        let view = entry.view(entry.params.as_deref().unwrap_or(&null));
        // The controller reads the text as the model will (no copy of it).
        let (kind, text) = match outcome {
            Ok((kind, text)) => (Some(kind), Ok(text)),
            Err(failure) => (None, Err(failure)),
        };
        let outcome = match (self.controller.after_execution(&view, &text), text) {
            (AfterExecution::Recover { result }, Err(_)) => Ok((OutcomeKind::Recovered, result)),
            (_, text) => text.map(|text| (kind.unwrap_or(OutcomeKind::Result), text)),
        };
        summary.cost = gadget_core::ledger::add_costs(summary.cost, cost);
        let (settled, halt) = match &outcome {
            Ok((kind, _)) => {
                summary.succeeded += 1;
                summary.finished |= *kind == OutcomeKind::Finish;
                (Ok(()), false)
            }
            Err(failure) => {
                summary.failed += 1;
                let halt = self.controller.stop_on(&view, failure);
                (Err(failure.message.clone()), halt)
            }
        };
        let finished = Finished {
            stored_output,
            details,
            images,
            cost,
            duration,
        };
        self.record(ix, outcome, finished, sink);
        let policy = &mut policy_for(&self.config, &*self.controller, &self.entries);
        let actions = self.scheduler.finished(ix, settled, halt, policy);
        if self.scheduler.stop_reading() {
            // Stop-on-error: calls already running get the abort signal
            // too, not only those not yet started.
            self.abort.current().raise();
        }
        actions
    }

    /// Reports a finished call and adds it to the history.
    fn record(
        &mut self,
        ix: CallIx,
        outcome: Result<(OutcomeKind, String), Failure>,
        finished: Finished,
        sink: &mut impl FnMut(ExecEvent),
    ) {
        let Finished {
            stored_output,
            details,
            images,
            cost,
            duration,
        } = finished;
        let text = match &outcome {
            Ok((_, text)) => text.clone(),
            Err(failure) => failure.message.clone(),
        };
        // The call has ended: its parameters move to the history, normally
        // their one holder left (a sink may still keep its `CallStarted`).
        let parameters = match self.entries[ix].params.take() {
            Some(params) => Arc::unwrap_or_clone(params),
            None => self.entries[ix].known_parameters(),
        };
        let entry = &self.entries[ix];
        // The history is what the model is sent next: bounded, whatever
        // the response did (each result is already output-limited).
        // Sized by the block's raw text, not by serialising the value.
        let image_bytes: usize = images.iter().map(|m| m.data.len()).sum();
        let size = text.len() + entry.call.parameters_raw.len() + image_bytes;
        let (parameters, text, images) = if self.history_bytes + size > MAX_HISTORY_BYTES {
            (
                Value::Object(Default::default()),
                format!(
                    "[result not kept: this response's history is over {MAX_HISTORY_BYTES} bytes]"
                ),
                Vec::new(),
            )
        } else {
            self.history_bytes += size;
            (parameters, text, images)
        };
        self.history.push(HistoryEntry {
            id: entry.call.invocation_id.clone(),
            gadget: entry.call.name.clone(),
            parameters,
            result: text,
            failed: outcome.is_err(),
            images,
        });
        let (outcome, result, error) = match outcome {
            Ok((kind, text)) => (kind, Some(text), None),
            Err(failure) => (OutcomeKind::Error, None, Some(failure)),
        };
        sink(ExecEvent::CallFinished {
            id: entry.call.invocation_id.clone(),
            gadget: entry.call.name.clone(),
            outcome,
            result,
            error,
            details,
            stored_output,
            cost,
            duration_ms: duration.as_secs_f64() * 1e3,
        });
        // The call has ended: what the session keeps of it is its id, name
        // and outcome (the scheduler's) and its history entry; its body
        // and parameters would make a long response's memory grow.
        let entry = &mut self.entries[ix];
        entry.call.forget_body();
        entry.params = None;
    }

    /// Carries out the scheduler's actions, and those they lead to.
    fn carry_out(
        &mut self,
        mut actions: Vec<Action>,
        turn: &mut Response,
        sink: &mut impl FnMut(ExecEvent),
    ) {
        while !actions.is_empty() {
            let mut next = Vec::new();
            for action in actions {
                match action {
                    Action::Start(ix) => {
                        if let Some(ended) = self.start(ix, turn, sink) {
                            next.extend(self.ended(ended, &mut turn.summary, sink));
                        }
                    }
                    Action::Skip(ix, reason) => {
                        turn.summary.skipped += 1;
                        self.entries[ix].settled = true;
                        let entry = &self.entries[ix];
                        sink(ExecEvent::CallSkipped {
                            id: entry.call.invocation_id.clone(),
                            gadget: entry.call.name.clone(),
                            reason,
                        });
                    }
                    Action::Fallback(ix, text) => {
                        turn.summary.succeeded += 1;
                        let outcome = Ok((OutcomeKind::Fallback, text));
                        self.record(ix, outcome, Finished::nothing(), sink);
                    }
                    Action::DuplicateId(ix) => {
                        turn.summary.failed += 1;
                        let message = format!(
                            "Error: {}",
                            schedule::duplicate_id_error(&self.entries[ix].call.invocation_id)
                        );
                        let failure = Failure::new(FailureKind::DuplicateId, message);
                        self.record(ix, Err(failure), Finished::nothing(), sink);
                    }
                }
            }
            actions = next;
        }
    }
}
