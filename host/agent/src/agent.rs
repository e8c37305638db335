//! The loop, as llmist's agent runs it: the system prompt documents the
//! gadgets; each response streams into the executor, so calls start while
//! the model is still writing; the next request carries llmist's history
//! (each finished call re-rendered as a block, then `Result (id): ...`, in
//! completion order; the model's prose around calls is dropped, as llmist
//! drops it); a response without calls is the answer; a *finish* ends the
//! loop after its response. Ids, stored outputs and costs carry over
//! because one executor serves the whole session.
//!
//! Everything observable goes to one observer as [`AgentEvent`]s, from
//! the task that produces it: the loop, the stream reader (text as it
//! arrives) and the executor (call events).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use gadget_core::call::OutcomeKind;
use gadget_core::parser::GadgetCall;
use gadget_core::render::{self, Markers};
use gadget_exec::telemetry::{self, LlmSpan, Telemetry, TraceContext};
use gadget_exec::{ExecEvent, Executor, ResponseInput, ResponseSummary};

pub use crate::events::{AgentEvent, AgentOutcome, IterationRecord, StopReason};
use crate::native::ToolFormat;
pub use crate::retry::RetryPolicy;
pub use crate::steering::{MAX_STEERING_MESSAGE_BYTES, MAX_STEERING_MESSAGES, SteerHandle};

use crate::models::ModelInfo;
use crate::provider::{
    ChatMessage, ChatRequest, Provider, ProviderError, ResponseStream, StreamItem, Usage,
};
use crate::recovery::{AfterLlmError, LlmErrorController};

/// Requests one session makes unless told otherwise (llmist's default).
pub const DEFAULT_MAX_ITERATIONS: usize = 10;

/// Tokens one answer may have unless told otherwise: room for many calls,
/// and Anthropic's API requires a cap.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Chunks of text buffered between the stream reader and the executor.
const STREAM_CHANNEL_CHUNKS: usize = 64;

/// What the loop is told.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The model name the provider knows.
    pub model: String,
    pub max_iterations: usize,
    /// USD over tokens and gadgets; no request starts that would go over.
    pub max_cost: Option<f64>,
    pub max_tokens: u32,
    /// The operator's text, sent before the gadget instructions.
    pub system: Option<String>,
    /// Prices and context window, when the model table knows the model.
    pub model_info: Option<ModelInfo>,
    pub retry: RetryPolicy,
    /// The block format in the text, or the provider's native tools.
    pub tool_format: crate::native::ToolFormat,
}

/// Stops a running session from elsewhere (Ctrl-C): the stream is
/// dropped, the abort signal is raised in running calls, and no further
/// request is sent.
#[derive(Clone)]
pub struct StopHandle {
    stop: Arc<watch::Sender<bool>>,
    abort: gadget_exec::AbortHandle,
}

impl StopHandle {
    pub fn stop(&self) {
        self.stop.send_replace(true);
        self.abort.abort();
    }
}

/// Receives every event.
pub type Observer = Arc<dyn Fn(&AgentEvent) + Send + Sync>;

/// An agent session: one provider, one executor, one conversation.
pub struct Agent {
    provider: Arc<dyn Provider>,
    executor: Executor,
    config: AgentConfig,
    markers: Markers,
    system: Vec<String>,
    /// The tools offered natively (empty in the block format).
    tools: Vec<crate::provider::ToolDefinition>,
    messages: Vec<ChatMessage>,
    /// Messages already reported in a request event.
    reported: usize,
    observer: Observer,
    stop: Arc<watch::Sender<bool>>,
    /// The span the session's `invoke_agent` span is a child of.
    trace_parent: Option<TraceContext>,
    /// What follows a request that failed after its retries; none: the
    /// session ends with the error.
    on_llm_error: Option<Arc<dyn LlmErrorController>>,
    /// A person's messages, for the next request.
    steering: SteerHandle,
}

impl Agent {
    /// The system prompt is built here, from the executor's tools (so it
    /// documents exactly what a response can call) and `markers`.
    pub fn new(
        provider: Arc<dyn Provider>,
        executor: Executor,
        markers: Markers,
        config: AgentConfig,
        observer: Observer,
    ) -> Agent {
        let mut system = Vec::new();
        if let Some(text) = &config.system {
            system.push(text.clone());
        }
        // Native tools are described by their definitions, not a prompt.
        let tools = match config.tool_format {
            ToolFormat::Block => {
                system.push(render::prompt(&executor.gadget_docs(), &markers));
                Vec::new()
            }
            ToolFormat::Native => crate::native::definitions(&executor.gadget_docs()),
        };
        Agent {
            provider,
            executor,
            config,
            markers,
            system,
            tools,
            messages: Vec::new(),
            reported: 0,
            observer,
            stop: Arc::new(watch::channel(false).0),
            trace_parent: None,
            on_llm_error: None,
            steering: SteerHandle::default(),
        }
    }

    /// Decides what follows a request that failed after its retries
    /// (fallback models, a given response); without one the session ends
    /// with the error.
    pub fn set_llm_error_controller(&mut self, controller: Arc<dyn LlmErrorController>) {
        self.on_llm_error = Some(controller);
    }

    /// A handle a person's messages go through (see [`SteerHandle`]).
    pub fn steer_handle(&self) -> SteerHandle {
        self.steering.clone()
    }

    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            stop: self.stop.clone(),
            abort: self.executor.abort_handle(),
        }
    }

    /// Makes the session's `invoke_agent` span a child of `parent` (a
    /// sub-agent's call); read only when tracing is on.
    pub fn set_trace_parent(&mut self, parent: Option<TraceContext>) {
        self.trace_parent = parent;
    }

    /// The system prompt's parts.
    pub fn system(&self) -> &[String] {
        &self.system
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// Runs `task` until an answer, a finish, a cap, a failure or a stop.
    pub async fn run(&mut self, task: &str) -> AgentOutcome {
        let Some(telemetry) = telemetry::active() else {
            return self.turns(task, None).await;
        };
        let session = telemetry.agent_span(
            self.trace_parent.as_ref(),
            self.provider.name(),
            &self.config.model,
        );
        self.executor
            .set_trace_parent(Some(session.context().clone()));
        let outcome = Box::pin(self.turns(task, Some((telemetry, session.context())))).await;
        let stop = serde_json::to_value(outcome.stop)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        session.finish_agent(
            outcome.input_tokens,
            outcome.output_tokens,
            &stop,
            outcome.error.as_ref().map(ToString::to_string),
        );
        outcome
    }

    /// The session's turns; `traced`: the telemetry and the session's span
    /// each request's `chat` span is a child of.
    async fn turns(
        &mut self,
        task: &str,
        traced: Option<(&'static Telemetry, &TraceContext)>,
    ) -> AgentOutcome {
        self.messages.push(ChatMessage::user(task));
        let mut outcome = AgentOutcome {
            stop: StopReason::MaxIterations,
            answer: None,
            iterations: Vec::new(),
            input_tokens: 0,
            output_tokens: 0,
            llm_cost: Some(0.0),
            gadget_cost: 0.0,
            total_cost: 0.0,
            error: None,
        };
        for iteration in 1..=self.config.max_iterations {
            if self.stopped() {
                outcome.stop = StopReason::Interrupted;
                break;
            }
            for text in self.steering.take() {
                (self.observer)(&AgentEvent::Steered {
                    iteration,
                    text: text.clone(),
                });
                self.messages.push(ChatMessage::user(text));
            }
            let (request, estimated) = match self.next_request(&outcome) {
                Ok(next) => next,
                Err((stop, error)) => {
                    outcome.stop = stop;
                    outcome.error = error;
                    break;
                }
            };
            (self.observer)(&AgentEvent::Request {
                iteration,
                provider: self.provider.name().to_string(),
                model: self.config.model.clone(),
                system: (iteration == 1).then(|| self.system.clone()),
                messages: self.messages[self.reported..].to_vec(),
                estimated_input_tokens: estimated,
            });
            self.reported = self.messages.len();
            let chat = traced.map(|(telemetry, session)| Chat {
                telemetry,
                span: telemetry.chat_span(
                    session,
                    self.provider.name(),
                    &self.config.model,
                    self.config.max_tokens,
                ),
            });
            let mut priced = None;
            let sent = match self.send(iteration, &request).await {
                Err(error) if self.on_llm_error.is_some() => {
                    let mut stop = self.stop.subscribe();
                    tokio::select! {
                        recovered = self.recover(iteration, &request, error) => {
                            recovered.map(|(stream, at)| {
                                priced = at;
                                Some(stream)
                            })
                        }
                        Ok(_) = stop.wait_for(|s| *s) => Ok(None),
                    }
                }
                sent => sent,
            };
            let stream = match sent {
                Ok(Some(stream)) => stream,
                Ok(None) => {
                    if let Some(chat) = chat {
                        chat.end(&Read::default(), Some("stopped".into()));
                    }
                    outcome.stop = StopReason::Interrupted;
                    break;
                }
                Err(error) => {
                    if let Some(chat) = chat {
                        chat.end(&Read::default(), Some(error.to_string()));
                    }
                    outcome.stop = StopReason::Failed;
                    outcome.error = Some(error);
                    break;
                }
            };
            let mut step = self.respond(iteration, stream, chat).await;
            step.priced = priced.unwrap_or(self.config.model_info);
            self.tally(&mut outcome, iteration, &mut step, estimated);
            let had_results = self.remember(&mut step);
            if let Some(stop) = self.stop_after(&mut outcome, step, had_results) {
                outcome.stop = stop;
                break;
            }
        }
        outcome
    }

    /// The next request, and its estimated input tokens; `Err`: the
    /// session stops before sending it (too large, or over the cost cap).
    #[allow(clippy::type_complexity, reason = "a private pair of outcomes")]
    fn next_request(
        &self,
        outcome: &AgentOutcome,
    ) -> Result<(ChatRequest, u64), (StopReason, Option<ProviderError>)> {
        let mut messages = self.messages.clone();
        crate::images::keep_latest(messages.iter_mut().map(|m| &mut m.images));
        let request = ChatRequest {
            model: self.config.model.clone(),
            system: self.system.clone(),
            messages,
            max_tokens: self.config.max_tokens,
            temperature: None,
            tools: self.tools.clone(),
        };
        let bytes = request_bytes(&request);
        if bytes > MAX_REQUEST_BYTES {
            return Err((
                StopReason::Failed,
                Some(ProviderError::RequestTooLarge {
                    provider: self.provider.name().to_string(),
                    bytes,
                    limit: MAX_REQUEST_BYTES,
                }),
            ));
        }
        let estimated = crate::provider::estimate_tokens(&request);
        if let Some(max) = self.config.max_cost {
            let next = self
                .config
                .model_info
                .map(|info| info.input_per_mtok * estimated as f64 / 1e6)
                .unwrap_or(0.0);
            if outcome.total_cost >= max || outcome.total_cost + next > max {
                return Err((StopReason::MaxCost, None));
            }
        }
        Ok((request, estimated))
    }

    /// Counts one response's tokens and costs into `outcome`, and tells
    /// the observer.
    fn tally(&self, outcome: &mut AgentOutcome, iteration: usize, step: &mut Step, estimated: u64) {
        // A response cut off (Ctrl-C, a broken stream, the executor
        // stopping on an error) before the provider reported its usage
        // still cost its tokens: counted from what was sent and received,
        // so --max-cost and the totals never under-count.
        if (step.interrupted || step.cut || step.error.is_some())
            && step.usage.input_tokens == 0
            && step.usage.output_tokens == 0
        {
            step.usage.input_tokens = estimated;
            step.usage.output_tokens = gadget_core::llm::estimate_tokens(step.text.len());
        }
        let llm_cost = step.priced.map(|info| info.cost(step.usage));
        (self.observer)(&AgentEvent::Response {
            iteration,
            text: step.text.clone(),
            usage: step.usage,
            cost: llm_cost,
        });
        let record = IterationRecord {
            iteration,
            input_tokens: step.usage.input_tokens,
            output_tokens: step.usage.output_tokens,
            llm_cost,
            gadget_cost: step.summary.cost,
            calls: step.summary.calls,
            succeeded: step.summary.succeeded,
            failed: step.summary.failed,
            skipped: step.summary.skipped,
            duration_ms: step.duration.as_secs_f64() * 1e3,
        };
        // Saturating: the usage is what a server says.
        outcome.input_tokens = outcome.input_tokens.saturating_add(record.input_tokens);
        outcome.output_tokens = outcome.output_tokens.saturating_add(record.output_tokens);
        outcome.llm_cost = match (outcome.llm_cost, llm_cost) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        outcome.gadget_cost = step.summary.session_cost;
        outcome.total_cost = outcome.llm_cost.unwrap_or(0.0) + outcome.gadget_cost;
        (self.observer)(&AgentEvent::IterationEnd(record.clone()));
        outcome.iterations.push(record);
    }

    /// What the model is shown next: llmist's history of the calls that
    /// ended (in completion order); a response whose calls all were
    /// skipped counts as one without calls, as in llmist. Native calls:
    /// the model's message with its calls, then one result each, in the
    /// provider's own form. Whether there were results.
    fn remember(&mut self, step: &mut Step) -> bool {
        if self.config.tool_format == ToolFormat::Native {
            let had = !step.calls.is_empty();
            if had {
                let calls = std::mem::take(&mut step.calls);
                self.messages.extend(crate::native::turn_messages(
                    &step.text,
                    calls,
                    self.executor.history(),
                ));
            }
            return had;
        }
        let entries: Vec<_> = self.executor.history().into_iter().collect();
        let history = render::history(entries.iter().copied(), &self.markers);
        let had = !history.is_empty();
        // Two messages a call: its block, then its result (with the
        // result's images, for a model that takes them).
        for (message, entry) in history.into_iter().zip(entries.iter().flat_map(|e| [e, e])) {
            self.messages.push(if message.role == "assistant" {
                ChatMessage::assistant(message.content)
            } else {
                ChatMessage::user(message.content)
                    .with_images(crate::images::for_the_model(&entry.images))
            });
        }
        had
    }

    /// Why the session stops after this response, if it does.
    fn stop_after(
        &mut self,
        outcome: &mut AgentOutcome,
        step: Step,
        had_results: bool,
    ) -> Option<StopReason> {
        if let Some(error) = step.error {
            outcome.error = Some(error);
            return Some(StopReason::Failed);
        }
        if step.interrupted || self.stopped() {
            return Some(StopReason::Interrupted);
        }
        if step.summary.finished {
            outcome.answer = step.finish_result;
            return Some(StopReason::Finished);
        }
        if !had_results {
            self.messages
                .push(ChatMessage::assistant(step.text.clone()));
            // A person spoke while the model answered: it reads them.
            if self.steering.waiting() {
                return None;
            }
            outcome.answer = Some(step.text);
            return Some(StopReason::Answered);
        }
        None
    }

    /// A request that failed after its retries, handled by the error
    /// controller: the response that started instead, and the prices it
    /// is counted at when they are not the session model's.
    async fn recover(
        &self,
        iteration: usize,
        request: &ChatRequest,
        error: ProviderError,
    ) -> Result<(ResponseStream, Option<Option<ModelInfo>>), ProviderError> {
        let Some(controller) = &self.on_llm_error else {
            return Err(error);
        };
        let tell = |error: &ProviderError, action: &AfterLlmError| {
            let (action, model) = match action {
                AfterLlmError::Rethrow => ("rethrow", None),
                AfterLlmError::Recover { .. } => ("recover", None),
                AfterLlmError::Fallback(f) => (
                    "fallback",
                    Some(format!("{}:{}", f.provider.name(), f.model)),
                ),
            };
            (self.observer)(&AgentEvent::LlmError {
                iteration,
                error: error.to_string(),
                action,
                model,
            });
        };
        let on_retry = |attempt, delay, error: &ProviderError| {
            (self.observer)(&AgentEvent::Retry {
                iteration,
                attempt,
                delay,
                error: error.to_string(),
            })
        };
        crate::recovery::recover(
            &**controller,
            &self.config.retry,
            request,
            error,
            tell,
            on_retry,
        )
        .await
    }

    /// Sends `request`, retrying what is worth retrying. `None` when
    /// stopped while waiting.
    async fn send(
        &self,
        iteration: usize,
        request: &ChatRequest,
    ) -> Result<Option<ResponseStream>, ProviderError> {
        let mut stop = self.stop.subscribe();
        let sent = self
            .config
            .retry
            .send(&*self.provider, request, |attempt, delay, error| {
                (self.observer)(&AgentEvent::Retry {
                    iteration,
                    attempt,
                    delay,
                    error: error.to_string(),
                })
            });
        tokio::select! {
            sent = sent => sent.map(Some),
            Ok(_) = stop.wait_for(|s| *s) => Ok(None),
        }
    }

    /// Streams one response into the executor and waits for its calls.
    async fn respond(
        &mut self,
        iteration: usize,
        mut stream: ResponseStream,
        chat: Option<Chat>,
    ) -> Step {
        let started = std::time::Instant::now();
        let (tx, rx) = mpsc::channel::<ResponseInput>(STREAM_CHANNEL_CHUNKS);
        let native = self.config.tool_format == ToolFormat::Native;
        let observer = self.observer.clone();
        let mut stop = self.stop.subscribe();
        let reader = tokio::spawn(async move {
            let mut read = Read::default();
            loop {
                let item = tokio::select! {
                    item = stream.next() => item,
                    Ok(_) = stop.wait_for(|s| *s) => {
                        read.interrupted = true;
                        break;
                    }
                };
                match item {
                    Some(Ok(StreamItem::Text(text))) => {
                        observer(&AgentEvent::Text {
                            iteration,
                            content: text.clone(),
                        });
                        read.text.push_str(&text);
                        // Natively, text is only text: no block in it runs.
                        // The executor stopped reading (a call cap):
                        // nothing more of this response is needed.
                        if !native && tx.send(ResponseInput::Text(text)).await.is_err() {
                            read.cut = true;
                            break;
                        }
                    }
                    // Runs the moment its arguments are complete.
                    Some(Ok(StreamItem::ToolCall(mut call))) if native => {
                        if call.id.is_empty() {
                            call.id = format!("call_{iteration}_{}", read.calls.len() + 1);
                        }
                        let params = match &call.arguments {
                            Value::Object(map) => map.clone(),
                            _ => Default::default(),
                        };
                        let input = GadgetCall::native(call.name.clone(), call.id.clone(), params);
                        read.calls.push(call);
                        if tx.send(ResponseInput::Call(input)).await.is_err() {
                            read.cut = true;
                            break;
                        }
                    }
                    Some(Ok(StreamItem::Usage(usage))) => read.usage.merge(usage),
                    // No tools are offered in the block format: a native
                    // call nobody asked for runs nothing.
                    Some(Ok(StreamItem::ToolCall(call))) => {
                        tracing::debug!(tool = %call.name, "ignored a native tool call: no tools were offered");
                    }
                    Some(Ok(StreamItem::Finish(reason))) => {
                        if read.finish_reasons.len() < MAX_FINISH_REASONS {
                            read.finish_reasons.push(reason);
                        }
                    }
                    Some(Err(error)) => {
                        read.error = Some(error);
                        break;
                    }
                    None => break,
                }
            }
            // The completion ends with its stream, while its calls may
            // still run.
            if let Some(chat) = chat {
                chat.end_with(&read);
            }
            read
        });
        let observer = self.observer.clone();
        let finish_result: Arc<Mutex<Option<String>>> = Arc::default();
        let finish = finish_result.clone();
        let summary = self
            .executor
            .run_response(rx, |event| {
                if let ExecEvent::CallFinished {
                    outcome: OutcomeKind::Finish,
                    result: Some(result),
                    ..
                } = &event
                {
                    *finish.lock().unwrap_or_else(|p| p.into_inner()) = Some(result.clone());
                }
                observer(&AgentEvent::Exec(event));
            })
            .await;
        let read = reader.await.unwrap_or_else(|e| Read {
            error: Some(ProviderError::StreamBroken {
                provider: self.provider.name().to_string(),
                cause: format!("the stream reader stopped: {e}"),
            }),
            ..Read::default()
        });
        let finish_result = finish_result
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        Step {
            text: read.text,
            calls: read.calls,
            usage: read.usage,
            error: read.error,
            interrupted: read.interrupted,
            cut: read.cut,
            summary,
            finish_result,
            duration: started.elapsed(),
            priced: self.config.model_info,
        }
    }
}

/// What the stream reader saw.
#[derive(Default)]
struct Read {
    text: String,
    /// The native tool calls, in the order they were made.
    calls: Vec<crate::tool_calls::NativeCall>,
    usage: Usage,
    finish_reasons: Vec<String>,
    error: Option<ProviderError>,
    interrupted: bool,
    /// The executor stopped reading (--stop-on-error, a call cap), so the
    /// rest of the response, its usage report included, was not read.
    cut: bool,
}

/// The most finish reasons kept of one response (one per choice).
const MAX_FINISH_REASONS: usize = 8;

/// One request's `chat` span, ended when its stream ends.
struct Chat {
    telemetry: &'static Telemetry,
    span: LlmSpan,
}

impl Chat {
    /// Ends the span with the stream's error, or "stopped" when it was
    /// interrupted.
    fn end_with(self, read: &Read) {
        let error = read
            .error
            .as_ref()
            .map(ToString::to_string)
            .or_else(|| read.interrupted.then(|| "stopped".to_string()));
        self.end(read, error);
    }

    fn end(self, read: &Read, error: Option<String>) {
        self.span.finish_chat(
            self.telemetry,
            read.usage.input_tokens,
            read.usage.output_tokens,
            &read.finish_reasons,
            error,
        );
    }
}

/// One response, streamed and executed.
struct Step {
    text: String,
    /// The native tool calls the model made.
    calls: Vec<crate::tool_calls::NativeCall>,
    usage: Usage,
    error: Option<ProviderError>,
    interrupted: bool,
    /// Read only in part (see [`Read::cut`]).
    cut: bool,
    summary: ResponseSummary,
    finish_result: Option<String>,
    duration: Duration,
    /// The prices the response is counted at (a fallback model's, when
    /// one answered).
    priced: Option<ModelInfo>,
}

/// The most a request's conversation may carry, bytes of text. The largest
/// context windows (a million tokens) hold about 4 MiB; past this, a
/// model that floods its history with calls (each one two messages, even
/// when dropped) would make every next request bigger than the last, so
/// the session stops with an error instead of sending it.
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

pub use crate::provider::{estimate_tokens, request_bytes};
