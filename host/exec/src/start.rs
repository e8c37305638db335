//! Starting one call of a response: the tool and its validated
//! parameters (or the refusal, in llmist's words), the controller's say,
//! the operator's rules, and then the one call path, in place for a tool
//! computed in the host and on a runner otherwise.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde_json::Value;

use gadget_core::approval::Admission;
use gadget_core::call::{FailureKind, OutcomeKind};
use gadget_core::events::{ExecEvent, Failure};
use gadget_core::ledger::CallEvent;
use gadget_core::render;
use gadget_core::schedule::CallIx;
use gadget_core::tool::{Tool, ToolCall, Tools as _};

use crate::outcome::{Announced, ended_of};
use crate::state::{Ended, Live};
use crate::{BeforeExecution, Executor, Response, call, layers};

impl Executor {
    /// Starts a call the scheduler let go: `Some` when it ended at once
    /// (it could not start, a controller skipped it, or an instant tool
    /// answered), `None` when it runs.
    pub(crate) fn start(
        &mut self,
        ix: CallIx,
        turn: &mut Response,
        sink: &mut impl FnMut(ExecEvent),
    ) -> Option<Ended> {
        let at_once = |outcome| {
            Some(Ended {
                call: ix,
                outcome,
                details: None,
                images: Vec::new(),
                cost: 0.0,
                duration: Duration::ZERO,
            })
        };
        self.entries[ix].settled = true;
        if self.exclusive_waiting.as_deref() == Some(&self.entries[ix].call.invocation_id) {
            self.exclusive_waiting = None;
        }
        let (tool, params) = match self.prepare(ix) {
            Ok(prepared) => prepared,
            Err(failure) => {
                // Refused at the door (unknown or denied gadget, unusable
                // parameters): the layers keep that it was tried.
                let call = &self.entries[ix].call;
                call::refused(&self.scope, &call.invocation_id, &call.name, &failure);
                return at_once(Err(failure));
            }
        };
        let params = Arc::new(params);
        self.entries[ix].params = Some(params.clone());
        let entry = &self.entries[ix];
        if let BeforeExecution::Skip { result } =
            self.controller.before_execution(&entry.view(&params))
        {
            return at_once(Ok((OutcomeKind::Synthetic, result)));
        }
        let timeout = self
            .config
            .timeouts
            .resolve(tool.name(), tool.own_timeout());
        // A call that waits for approval starts when it is approved (its
        // `CallStarted` comes then, from its live events); one a rule
        // refuses never starts.
        let admission = call::admission(
            &*tool,
            &params,
            self.scope.approvals.as_deref(),
            &self.scope.client,
        );
        if admission == Admission::Run {
            sink(ExecEvent::CallStarted {
                id: entry.call.invocation_id.clone(),
                gadget: entry.call.name.clone(),
                parameters: params.clone(),
                timeout_ms: timeout.map_or(0, |t| t.as_millis() as u64),
            });
        }
        let observer_tx = turn.live_tx.clone();
        // Who answers what the gadget asks, if anyone: the live view is
        // told before the person is asked.
        let scope = match &self.scope.human {
            Some(human) => {
                let mut announced = (*self.scope).clone();
                announced.human = Some(Arc::new(Announced {
                    human: human.clone(),
                    live: turn.live_tx.clone(),
                    ix,
                }));
                Arc::new(announced)
            }
            None => self.scope.clone(),
        };
        let passive = layers::Layers::passive(&scope, &admission);
        let call = ToolCall {
            id: entry.call.invocation_id.clone(),
            params,
            deadline: timeout,
            signal: Some(turn.abort.clone()),
            observer: Some(Arc::new(move |event: &CallEvent| {
                let _ = observer_tx.send((ix, Live::Call(event.clone())));
            })),
            scope,
        };
        // A tool computed in the host answers in place: no task, no wait,
        // when no layer has anything to do around it. Only a question for
        // a person still needs the task (the answer is awaited).
        if tool.is_instant() && passive {
            let mut finished = Box::pin(call::run_admitted(tool, call, admission));
            if let Poll::Ready(finished) = finished
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                return Some(ended_of(ix, finished));
            }
            turn.running
                .spawn(ix, async move { ended_of(ix, finished.await) });
        } else {
            turn.running.spawn(ix, async move {
                ended_of(ix, call::run_admitted(tool, call, admission).await)
            });
        }
        None
    }

    /// The tool and validated parameters of a call about to start, or why
    /// it cannot start (errors in llmist's wording, with the tool's usage).
    fn prepare(&self, ix: CallIx) -> Result<(Arc<dyn Tool>, Value), Failure> {
        let entry = &self.entries[ix];
        let call = &entry.call;
        let Some(tool) = entry.tool.clone() else {
            // Every name as its tool spells it (llmist lower-cases its
            // built-ins here; a model should read the name it must write).
            let mut available = self.tools.names();
            available.extend(self.builtins.names());
            return Err(Failure::new(
                FailureKind::UnknownGadget,
                format!("Error: {}", render::unknown_gadget(&call.name, &available)),
            ));
        };
        let usage = || tool.doc();
        let parse_failure = |error: &str| {
            Failure::new(
                FailureKind::Parse,
                render::parse_error(&call.name, error, Some(&usage()), &self.config.markers),
            )
        };
        if let Some(error) = &call.parse_error {
            return Err(parse_failure(error));
        }
        // The schema parsed once, at load time (no per-call re-parse).
        let schema = tool.schema();
        let params = schema
            .parameters_of(call)
            .map_err(|error| parse_failure(&error.to_string()))?;
        let params = call::prepare(&*tool, Value::Object(params)).map_err(|failure| {
            let text = if call.is_native() {
                render::native_validation_error(&failure.to_string(), &usage())
            } else {
                render::validation_error(&failure.to_string(), &usage(), &self.config.markers)
            };
            Failure::new(FailureKind::InvalidParameters, text)
        })?;
        Ok((tool, params))
    }
}
