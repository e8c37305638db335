//! Executes a model's response as it streams: parse, schedule, run.
//!
//! [`Executor::run_response`] reads a stream of chunks, feeds them to the
//! [parser](crate::parser), hands each completed call to the
//! [scheduler](crate::schedule) and carries out what it decides: a call
//! starts the moment its block is complete and its dependencies have
//! succeeded, while the model is still writing. Every call ends in exactly
//! one [`ExecEvent::CallFinished`] or [`ExecEvent::CallSkipped`]; errors
//! (parse, unknown gadget, invalid parameters, execution, timeout) are
//! results the model sees, in llmist's wording.
//!
//! The session (auto ids, finished ids, costs) carries over from one
//! response to the next.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinSet;

use crate::parser::{self, ConfigError, EventRef, GadgetCall, ParserBuilder};
use crate::plugins::{CallRejected, Gadget, Registry};
use crate::runtime::{CallError, Outcome};
use crate::schedule::{
    self, Action, CallIx, CallSpec, DependencyPolicy, GadgetHints, ScheduleConfig, Scheduler,
};

/// llmist's error when a gadget asks a person and nobody can answer.
const NO_HUMAN_INPUT: &str = "Human input required but not available (stdin is not interactive)";

/// How responses are executed.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    pub schedule: ScheduleConfig,
    /// What a call whose dependency failed gets, unless its gadget has its own policy.
    pub dependency_policy: DependencyPolicy,
    /// Per gadget (case-insensitive name), overriding `dependency_policy`.
    pub gadget_policies: HashMap<String, DependencyPolicy>,
    pub start_marker: String,
    pub end_marker: String,
    pub arg_marker: String,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            schedule: ScheduleConfig::default(),
            dependency_policy: DependencyPolicy::Skip,
            gadget_policies: HashMap::new(),
            start_marker: parser::DEFAULT_START.into(),
            end_marker: parser::DEFAULT_END.into(),
            arg_marker: parser::DEFAULT_ARG.into(),
        }
    }
}

/// Why a call failed, as a kind and the text the model sees.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// `parse`, `unknown-gadget`, `invalid-parameters`, `duplicate-id`, or
    /// a runtime error kind (`failed`, `timeout`, `crashed`, ...).
    pub kind: String,
    pub message: String,
}

/// What happened, in order. Serialised, one per line, by `gadget run --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecEvent {
    /// Text outside blocks.
    Text {
        content: String,
    },
    /// A block is complete.
    CallParsed {
        id: String,
        gadget: String,
        dependencies: Vec<String>,
        parameters_raw: String,
    },
    CallStarted {
        id: String,
        gadget: String,
    },
    /// A call ended: its result (with the outcome kind: `result`,
    /// `finish`, `ask-human`, `fallback`) or its failure.
    CallFinished {
        id: String,
        gadget: String,
        outcome: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<Failure>,
        cost: f64,
        duration_ms: f64,
    },
    CallSkipped {
        id: String,
        gadget: String,
        reason: String,
        failed_dependency: String,
    },
}

/// Totals of one response.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResponseSummary {
    pub calls: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub skipped: usize,
    pub cost: f64,
    /// A gadget signalled that the task is complete.
    pub finished: bool,
    pub duration_ms: f64,
}

/// One call of the session, as the executor knows it.
#[derive(Debug)]
struct Entry {
    call: GadgetCall,
    gadget: Option<Arc<Gadget>>,
}

/// How a started call ended.
struct Ended {
    call: CallIx,
    outcome: Result<Outcome, Failure>,
    cost: f64,
    duration: Duration,
}

/// Executes the responses of one session.
pub struct Executor {
    registry: Arc<Registry>,
    config: ExecConfig,
    scheduler: Scheduler,
    session: parser::Session,
    entries: Vec<Entry>,
}

impl Executor {
    /// Checks the markers; nothing runs yet.
    pub fn new(registry: Arc<Registry>, config: ExecConfig) -> Result<Executor, ConfigError> {
        let executor = Executor {
            scheduler: Scheduler::new(config.schedule.clone()),
            registry,
            config,
            session: parser::Session::default(),
            entries: Vec::new(),
        };
        executor.parser_builder().build()?;
        Ok(executor)
    }

    fn parser_builder(&self) -> ParserBuilder {
        ParserBuilder::new()
            .start_marker(&self.config.start_marker)
            .end_marker(&self.config.end_marker)
            .arg_marker(&self.config.arg_marker)
    }

    /// Runs one response: reads `chunks` until it ends (or the scheduler
    /// says to stop reading), and returns when every call has ended.
    pub async fn run_response(
        &mut self,
        mut chunks: tokio::sync::mpsc::Receiver<String>,
        mut sink: impl FnMut(ExecEvent),
    ) -> ResponseSummary {
        let started = Instant::now();
        let mut parser = self
            .parser_builder()
            .build()
            .expect("markers were checked in Executor::new")
            .with_session(self.session.clone());
        let mut running: JoinSet<Ended> = JoinSet::new();
        let mut summary = ResponseSummary::default();
        let mut reading = true;
        let first = self.entries.len();
        loop {
            let mut actions = Vec::new();
            tokio::select! {
                chunk = chunks.recv(), if reading => {
                    let mut parsed = Vec::new();
                    match &chunk {
                        Some(chunk) => parser.feed_events(chunk, |event| collect(event, &mut parsed)),
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
                    if chunk.is_none() || self.scheduler.stop_reading() {
                        reading = false;
                        let policy = &mut policy_for(&self.config, &self.entries);
                        actions.extend(self.scheduler.end_of_stream(policy));
                    }
                }
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    let ended = match joined {
                        Ok(ended) => ended,
                        // The task panicked or was aborted: not a gadget's doing.
                        Err(error) => std::panic::resume_unwind(error.into_panic()),
                    };
                    actions.extend(self.ended(ended, &mut summary, &mut sink));
                }
                else => break,
            }
            self.carry_out(actions, &mut running, &mut summary, &mut sink);
        }
        self.session = parser.session().clone();
        self.scheduler.next_response();
        summary.calls = self.entries.len() - first;
        summary.duration_ms = started.elapsed().as_secs_f64() * 1e3;
        summary
    }

    /// A parsed call: reported, then scheduled.
    fn add(&mut self, call: GadgetCall, sink: &mut impl FnMut(ExecEvent)) -> Vec<Action> {
        sink(ExecEvent::CallParsed {
            id: call.invocation_id.clone(),
            gadget: call.name.clone(),
            dependencies: call.dependencies.clone(),
            parameters_raw: call.parameters_raw.clone(),
        });
        let gadget = self.registry.get(&call.name).cloned();
        let spec = CallSpec {
            invocation_id: call.invocation_id.clone(),
            dependencies: call.dependencies.clone(),
            gadget: gadget.as_ref().map(|g| GadgetHints {
                key: g.spec.name.to_lowercase(),
                exclusive: g.spec.exclusive,
                max_concurrent: g.spec.max_concurrent.unwrap_or(0),
            }),
        };
        self.entries.push(Entry { call, gadget });
        let policy = &mut policy_for(&self.config, &self.entries);
        let (ix, actions) = self.scheduler.add(spec, policy);
        debug_assert_eq!(ix, self.entries.len() - 1);
        actions
    }

    /// A started call ended: reported, and the scheduler moves on.
    fn ended(
        &mut self,
        ended: Ended,
        summary: &mut ResponseSummary,
        sink: &mut impl FnMut(ExecEvent),
    ) -> Vec<Action> {
        let entry = &self.entries[ended.call];
        let (id, gadget) = (entry.call.invocation_id.clone(), entry.call.name.clone());
        summary.cost += ended.cost;
        let outcome = match ended.outcome {
            Ok(Outcome::Result { result, .. }) => Ok(("result", result)),
            Ok(Outcome::Finish { result, .. }) => {
                summary.finished = true;
                Ok(("finish", result))
            }
            // No human-input handler yet: llmist's text for a non-interactive run.
            Ok(Outcome::AskHuman { .. }) => Err(Failure {
                kind: "human-input".into(),
                message: NO_HUMAN_INPUT.into(),
            }),
            Err(failure) => Err(failure),
        };
        let settled = match &outcome {
            Ok(_) => {
                summary.succeeded += 1;
                Ok(())
            }
            Err(failure) => {
                summary.failed += 1;
                Err(failure.message.clone())
            }
        };
        sink(finished_event(
            &id,
            &gadget,
            outcome,
            ended.cost,
            ended.duration,
        ));
        let policy = &mut policy_for(&self.config, &self.entries);
        self.scheduler.finished(ended.call, settled, true, policy)
    }

    /// Carries out the scheduler's actions, and those they lead to.
    fn carry_out(
        &mut self,
        mut actions: Vec<Action>,
        running: &mut JoinSet<Ended>,
        summary: &mut ResponseSummary,
        sink: &mut impl FnMut(ExecEvent),
    ) {
        while !actions.is_empty() {
            let mut next = Vec::new();
            for action in actions {
                match action {
                    Action::Start(ix) => match self.prepare(ix) {
                        Ok((gadget, params)) => {
                            let entry = &self.entries[ix];
                            sink(ExecEvent::CallStarted {
                                id: entry.call.invocation_id.clone(),
                                gadget: entry.call.name.clone(),
                            });
                            let id = entry.call.invocation_id.clone();
                            running.spawn(async move {
                                let report = gadget.invoke(params, &id, None).await;
                                Ended {
                                    call: ix,
                                    outcome: report.outcome.map_err(runtime_failure),
                                    cost: report.cost,
                                    duration: report.duration,
                                }
                            });
                        }
                        Err(failure) => {
                            let ended = Ended {
                                call: ix,
                                outcome: Err(failure),
                                cost: 0.0,
                                duration: Duration::ZERO,
                            };
                            next.extend(self.ended(ended, summary, sink));
                        }
                    },
                    Action::Skip(ix, reason) => {
                        summary.skipped += 1;
                        let entry = &self.entries[ix];
                        sink(ExecEvent::CallSkipped {
                            id: entry.call.invocation_id.clone(),
                            gadget: entry.call.name.clone(),
                            reason: reason.to_string(),
                            failed_dependency: reason.failed_dependency().to_string(),
                        });
                    }
                    Action::Fallback(ix, text) => {
                        summary.succeeded += 1;
                        let entry = &self.entries[ix];
                        sink(finished_event(
                            &entry.call.invocation_id,
                            &entry.call.name,
                            Ok(("fallback", text)),
                            0.0,
                            Duration::ZERO,
                        ));
                    }
                    Action::DuplicateId(ix) => {
                        summary.failed += 1;
                        let entry = &self.entries[ix];
                        let message = schedule::duplicate_id_error(&entry.call.invocation_id);
                        sink(finished_event(
                            &entry.call.invocation_id,
                            &entry.call.name,
                            Err(Failure {
                                kind: "duplicate-id".into(),
                                message,
                            }),
                            0.0,
                            Duration::ZERO,
                        ));
                    }
                }
            }
            actions = next;
        }
    }

    /// The gadget and validated parameters of a call about to start, or
    /// why it cannot start (errors in llmist's wording).
    fn prepare(&self, ix: CallIx) -> Result<(Arc<Gadget>, String), Failure> {
        let Entry { call, gadget } = &self.entries[ix];
        if let Some(error) = &call.parse_error {
            return Err(Failure {
                kind: "parse".into(),
                message: format!(
                    "Error: Failed to parse parameters for '{}':\n  {error}",
                    call.name
                ),
            });
        }
        let Some(gadget) = gadget else {
            let rejected = CallRejected::UnknownGadget {
                name: call.name.clone(),
                available: self.registry.names(),
            };
            return Err(Failure {
                kind: "unknown-gadget".into(),
                message: format!("Error: {rejected}"),
            });
        };
        // The schema parsed once, at load time (no per-call re-parse).
        let params = call
            .parameters_with_schema(gadget.schema.schema().unwrap_or(&Value::Null))
            .map_err(|error| Failure {
                kind: "parse".into(),
                message: format!(
                    "Error: Failed to parse parameters for '{}':\n  {error}",
                    call.name
                ),
            })?;
        let params = gadget
            .schema
            .validate(&gadget.spec.name, Value::Object(params))
            .map_err(|failure| Failure {
                kind: "invalid-parameters".into(),
                message: format!("Error: {failure}"),
            })?;
        Ok((gadget.clone(), params.to_string()))
    }
}

/// The parser's events, owned, for the executor to handle after the feed.
enum Parsed {
    Text(String),
    Call(GadgetCall),
}

fn collect(event: EventRef<'_>, into: &mut Vec<Parsed>) {
    match event {
        EventRef::Text(text) => into.push(Parsed::Text(text.to_string())),
        EventRef::Call(call) => into.push(Parsed::Call(call.to_owned())),
        EventRef::ArgumentDelta(_) => {}
    }
}

/// The dependency policy of each call: its gadget's, else the run's.
fn policy_for<'a>(
    config: &'a ExecConfig,
    entries: &'a [Entry],
) -> impl FnMut(CallIx, &str, &str) -> DependencyPolicy + 'a {
    move |call, _, _| {
        let name = entries[call].call.name.to_lowercase();
        config
            .gadget_policies
            .get(&name)
            .unwrap_or(&config.dependency_policy)
            .clone()
    }
}

fn runtime_failure(error: CallError) -> Failure {
    Failure {
        kind: error.kind().into(),
        message: error.to_string(),
    }
}

fn finished_event(
    id: &str,
    gadget: &str,
    outcome: Result<(&str, String), Failure>,
    cost: f64,
    duration: Duration,
) -> ExecEvent {
    let (outcome, result, error) = match outcome {
        Ok((kind, text)) => (kind.to_string(), Some(text), None),
        Err(failure) => ("error".to_string(), None, Some(failure)),
    };
    ExecEvent::CallFinished {
        id: id.into(),
        gadget: gadget.into(),
        outcome,
        result,
        error,
        cost,
        duration_ms: duration.as_secs_f64() * 1e3,
    }
}
