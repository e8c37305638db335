//! OpenTelemetry spans and metrics for what the host runs, following the
//! GenAI semantic conventions: an `execute_tool {name}` span for each call
//! (on the one call path, so every front end gets it), `invoke_agent` and
//! `chat {model}` spans for the agent loop, and a child span for each door
//! a call used (an HTTP request, a completion).
//!
//! This crate speaks only the OpenTelemetry API. The binary installs the
//! SDK and its exporter, then calls [`enable`]; until then [`active`] is
//! `None` and no span, attribute or metric is ever built: tracing off
//! costs one atomic load per call.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use opentelemetry::metrics::{Counter, Histogram};
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue, global};

use gadget_core::call::{CallReport, Outcome};
use gadget_core::effect::{Door, Effect};
use gadget_core::ledger::{CallEvent, CallObserver};
use gadget_core::tool::Tool;

pub use opentelemetry::Context as TraceContext;

/// The instrumentation scope every span and metric is reported under.
pub const SCOPE: &str = "gadget-host";

/// Spans the SDK's batch processor holds before it drops one (unless
/// `OTEL_BSP_MAX_QUEUE_SIZE` says otherwise). The SDK's 2,048 is 15 ms
/// of a busy host's calls (130,000 a second on two cores): its exporting
/// thread, starved that long by the calls, dropped spans. This is 125 ms
/// of them, at most about 16 MiB of spans waiting.
pub const SPAN_QUEUE_SPANS: usize = 16_384;

static ACTIVE: OnceLock<Telemetry> = OnceLock::new();

/// The tracer and the instruments, made once from the global providers.
pub struct Telemetry {
    tracer: global::BoxedTracer,
    calls: Counter<u64>,
    call_duration: Histogram<f64>,
    cost: Counter<f64>,
    tokens: Histogram<u64>,
    chat_duration: Histogram<f64>,
    refusals: Counter<u64>,
}

/// Turns telemetry on for the process, with the global tracer and meter
/// providers the binary installed. Later calls return the first one.
pub fn enable() -> &'static Telemetry {
    ACTIVE.get_or_init(|| {
        let meter = global::meter(SCOPE);
        Telemetry {
            tracer: global::tracer(SCOPE),
            calls: meter
                .u64_counter("gadget.calls")
                .with_description("Gadget calls ended, by gadget and outcome")
                .build(),
            call_duration: meter
                .f64_histogram("gadget.call.duration")
                .with_unit("s")
                .with_description("How long gadget calls ran")
                .build(),
            cost: meter
                .f64_counter("gadget.cost")
                .with_unit("USD")
                .with_description("Cost gadget calls reported")
                .build(),
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used per completion")
                .build(),
            chat_duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("How long each completion took")
                .build(),
            refusals: meter
                .u64_counter("gadget.refusals")
                .with_description("What the host refused, by door")
                .build(),
        }
    })
}

/// Set while telemetry is paused (see [`pause`]).
static PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The process's telemetry, when [`enable`]d (and not paused).
#[inline]
pub fn active() -> Option<&'static Telemetry> {
    if PAUSED.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    ACTIVE.get()
}

/// Stops making spans and measurements for a while (`true`), or goes on
/// (`false`); the providers and what they hold stay as they are. What
/// tracing costs is measured this way, on and off in turns in one process
/// (`enable` cannot be undone).
pub fn pause(paused: bool) {
    PAUSED.store(paused, std::sync::atomic::Ordering::Relaxed);
}

/// The context a W3C `traceparent` (and `tracestate`) names, read by the
/// global propagator; `None` when it is malformed or tracing is off.
pub fn context_from(trace_parent: &str, trace_state: Option<&str>) -> Option<Context> {
    active()?;
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert("traceparent".to_string(), trace_parent.to_string());
    if let Some(state) = trace_state {
        carrier.insert("tracestate".to_string(), state.to_string());
    }
    let cx = global::get_text_map_propagator(|p| p.extract(&carrier));
    cx.span().span_context().is_valid().then_some(cx)
}

/// The W3C `traceparent` of the span current in `cx` (on every traced
/// call's path: written without a formatter per field).
pub fn trace_parent_of(cx: &Context) -> Option<String> {
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let flags = [sc.trace_flags().to_u8()];
    let mut text = String::with_capacity(55);
    text.push_str("00-");
    text.push_str(&gadget_core::audit::hex(&sc.trace_id().to_bytes()));
    text.push('-');
    text.push_str(&gadget_core::audit::hex(&sc.span_id().to_bytes()));
    text.push('-');
    text.push_str(&gadget_core::audit::hex(&flags));
    Some(text)
}

/// What every span and measurement of one tool's calls says of the tool,
/// made once per tool and thread: its values are shared, not copied.
struct ToolAttributes {
    /// The component it was made for (a reload may change the component
    /// behind a name).
    digest: String,
    span_name: String,
    tool_name: Arc<str>,
    attributes: Vec<KeyValue>,
}

/// The most tools whose attributes one thread keeps (a reload can bring
/// new ones; past this the cache starts again).
const TOOL_ATTRIBUTES_CACHED: usize = 256;

thread_local! {
    static TOOL_ATTRIBUTES: std::cell::RefCell<HashMap<String, std::rc::Rc<ToolAttributes>>> =
        std::cell::RefCell::new(HashMap::new());
}

fn tool_attributes(tool: &dyn Tool) -> std::rc::Rc<ToolAttributes> {
    let name = tool.name();
    let origin = tool.origin();
    let digest = origin.as_ref().map_or("", |o| o.digest.as_str());
    TOOL_ATTRIBUTES.with_borrow_mut(|cache| {
        if let Some(cached) = cache.get(name)
            && cached.digest == digest
        {
            return cached.clone();
        }
        let tool_name: Arc<str> = Arc::from(name);
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool_name.clone()),
            KeyValue::new("gen_ai.tool.type", "function"),
        ];
        if let Some(origin) = &origin {
            attributes.extend(origin_attributes(origin));
        }
        let made = std::rc::Rc::new(ToolAttributes {
            digest: digest.to_string(),
            span_name: format!("execute_tool {name}"),
            tool_name,
            attributes,
        });
        if cache.len() >= TOOL_ATTRIBUTES_CACHED {
            cache.clear();
        }
        cache.insert(name.to_string(), made.clone());
        made
    })
}

/// A plugin's provenance as span attributes.
fn origin_attributes(origin: &gadget_core::scope::Origin) -> [KeyValue; 4] {
    let shared = |text: &str| Arc::<str>::from(text);
    [
        KeyValue::new("gadget.plugin", shared(&origin.plugin)),
        KeyValue::new("gadget.digest", shared(&origin.digest)),
        KeyValue::new("gadget.source", shared(&origin.source)),
        KeyValue::new("gadget.signature", shared(&origin.signature)),
    ]
}

/// What a catalog request's span is named and labelled by.
#[derive(Clone, Copy)]
pub(crate) struct CatalogRequest<'a> {
    pub id: &'a str,
    pub kind: gadget_core::scope::EntryKind,
    /// `resource:URI`, `prompt:NAME`, ...
    pub name: &'a str,
    pub origin: Option<&'a gadget_core::scope::Origin>,
}

/// The span of one call, with the call's observer wrapped to report its
/// doors as child spans.
pub struct ToolSpan {
    cx: Context,
    tool_name: Arc<str>,
}

/// An `invoke_agent` or `chat` span: the context its children start in.
pub struct LlmSpan {
    cx: Context,
    model: String,
    started: std::time::Instant,
}

impl Telemetry {
    /// Starts `execute_tool {name}` for call `call_id` of `tool`, under
    /// `parent` (else a new trace).
    /// `client`: who called, as authenticated (the span's `enduser.id`).
    pub fn tool_span(
        &self,
        parent: Option<&Context>,
        tool: &dyn Tool,
        call_id: &str,
        client: Option<&str>,
    ) -> ToolSpan {
        let cached = tool_attributes(tool);
        let mut attributes = Vec::with_capacity(cached.attributes.len() + 2);
        attributes.extend_from_slice(&cached.attributes);
        attributes.push(KeyValue::new("gen_ai.tool.call.id", call_id.to_string()));
        if let Some(client) = client {
            attributes.push(KeyValue::new("enduser.id", client.to_string()));
        }
        let name = cached.span_name.clone();
        self.start_tool_span(parent, name, attributes, cached.tool_name.clone())
    }

    /// A span of an entry into plugin code, under `parent` (else a new
    /// trace), labelled `tool_name` in the metrics.
    fn start_tool_span(
        &self,
        parent: Option<&Context>,
        span_name: String,
        attributes: Vec<KeyValue>,
        tool_name: Arc<str>,
    ) -> ToolSpan {
        let builder = self
            .tracer
            .span_builder(span_name)
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        let root = Context::new();
        let span = builder.start_with_context(&self.tracer, parent.unwrap_or(&root));
        ToolSpan {
            cx: parent.unwrap_or(&root).with_span(span),
            tool_name,
        }
    }

    /// Starts the span of a catalog request (`resources/read URI`,
    /// `prompts/get NAME`, `completion/complete REF`), as MCP's semantic
    /// conventions name a server's request spans, with its plugin's
    /// provenance.
    pub(crate) fn catalog_span(
        &self,
        parent: Option<&Context>,
        catalog: CatalogRequest<'_>,
        client: Option<&str>,
    ) -> ToolSpan {
        use gadget_core::scope::EntryKind;
        let method = match catalog.kind {
            EntryKind::ResourceRead => "resources/read",
            EntryKind::Prompt => "prompts/get",
            EntryKind::Completion | EntryKind::Call => "completion/complete",
        };
        let target = catalog
            .name
            .split_once(':')
            .map_or(catalog.name, |(_, t)| t);
        // The metrics' label: the method, never the URI (whose values are
        // the client's to choose, so unbounded).
        let name: Arc<str> = Arc::from(method);
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", method),
            KeyValue::new("gadget.request.id", catalog.id.to_string()),
            KeyValue::new("gadget.catalog.target", target.to_string()),
        ];
        if let Some(origin) = catalog.origin {
            attributes.extend(origin_attributes(origin));
        }
        if let Some(client) = client {
            attributes.push(KeyValue::new("enduser.id", client.to_string()));
        }
        self.start_tool_span(parent, format!("{method} {target}"), attributes, name)
    }

    /// Starts `invoke_agent` for a session with `model` of `provider`.
    pub fn agent_span(&self, parent: Option<&Context>, provider: &str, model: &str) -> LlmSpan {
        let root = Context::new();
        let name = "invoke_agent".to_string();
        let kind = SpanKind::Internal;
        self.llm_span(
            parent.unwrap_or(&root),
            name,
            kind,
            provider,
            model,
            Vec::new(),
        )
    }

    /// Starts `chat {model}` for one request under `parent` (the agent's).
    pub fn chat_span(
        &self,
        parent: &Context,
        provider: &str,
        model: &str,
        max_tokens: u32,
    ) -> LlmSpan {
        let max_tokens = KeyValue::new("gen_ai.request.max_tokens", i64::from(max_tokens));
        let name = format!("chat {model}");
        self.llm_span(
            parent,
            name,
            SpanKind::Client,
            provider,
            model,
            vec![max_tokens],
        )
    }

    /// A GenAI span named `name` (its operation: the name's first word)
    /// under `parent`.
    fn llm_span(
        &self,
        parent: &Context,
        name: String,
        kind: SpanKind,
        provider: &str,
        model: &str,
        more: Vec<KeyValue>,
    ) -> LlmSpan {
        let operation = name.split(' ').next().unwrap_or_default().to_string();
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", operation),
            KeyValue::new("gen_ai.provider.name", provider.to_string()),
            KeyValue::new("gen_ai.request.model", model.to_string()),
        ];
        attributes.extend(more);
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, parent);
        LlmSpan {
            cx: parent.with_span(span),
            model: model.to_string(),
            started: std::time::Instant::now(),
        }
    }

    /// Counts a refusal at `door` (`call`, `http`, `llm`, `approval`).
    pub fn refused(&self, door: Door) {
        self.refusals
            .add(1, &[KeyValue::new("gadget.door", door.as_str())]);
    }

    fn usage(&self, model: &str, operation: &'static str, input: u64, output: u64) {
        for (kind, tokens) in [("input", input), ("output", output)] {
            self.tokens.record(
                tokens,
                &[
                    KeyValue::new("gen_ai.operation.name", operation),
                    KeyValue::new("gen_ai.request.model", model.to_string()),
                    KeyValue::new("gen_ai.token.type", kind),
                ],
            );
        }
    }
}

impl ToolSpan {
    /// The span's context: the parent of what the call runs inside.
    pub fn context(&self) -> &Context {
        &self.cx
    }

    /// `observer`, with this span shown each event first.
    pub fn observe(&self, observer: Option<CallObserver>) -> CallObserver {
        let cx = self.cx.clone();
        std::sync::Arc::new(move |event: &CallEvent| {
            on_event(&cx, event);
            if let Some(observer) = &observer {
                observer(event);
            }
        })
    }

    /// Ends the span with the call's outcome, and counts the call.
    pub fn finish(self, telemetry: &Telemetry, report: &CallReport) {
        let outcome = match &report.outcome {
            Ok(Outcome::Result { .. }) => "ok",
            Ok(Outcome::Finish { .. }) => "finish",
            Ok(Outcome::AskHuman { .. }) => "ask-human",
            Err(error) => error.kind().as_str(),
        };
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("gadget.outcome", outcome));
        if report.cost > 0.0 {
            span.set_attribute(KeyValue::new("gadget.cost", report.cost));
        }
        if let Err(error) = &report.outcome {
            span.set_attribute(KeyValue::new("error.type", outcome));
            span.set_status(Status::error(error.to_string()));
            if matches!(error, gadget_core::call::CallError::NotApproved { .. }) {
                telemetry.refused(Door::Approval);
            }
        }
        span.end();
        let attributes = [
            KeyValue::new("gen_ai.tool.name", self.tool_name.clone()),
            KeyValue::new("gadget.outcome", outcome),
        ];
        telemetry.calls.add(1, &attributes);
        telemetry
            .call_duration
            .record(report.duration.as_secs_f64(), &attributes);
        if report.cost > 0.0 {
            telemetry.cost.add(
                report.cost,
                &[KeyValue::new("gen_ai.tool.name", self.tool_name.clone())],
            );
        }
    }
}

impl LlmSpan {
    pub fn context(&self) -> &Context {
        &self.cx
    }

    /// Ends a `chat` span with what the provider reported.
    pub fn finish_chat(
        self,
        telemetry: &Telemetry,
        input_tokens: u64,
        output_tokens: u64,
        finish_reasons: &[String],
        error: Option<String>,
    ) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(
            "gen_ai.usage.input_tokens",
            input_tokens as i64,
        ));
        span.set_attribute(KeyValue::new(
            "gen_ai.usage.output_tokens",
            output_tokens as i64,
        ));
        if !finish_reasons.is_empty() {
            let reasons: Vec<opentelemetry::StringValue> =
                finish_reasons.iter().map(|r| r.clone().into()).collect();
            span.set_attribute(KeyValue::new(
                "gen_ai.response.finish_reasons",
                opentelemetry::Value::Array(reasons.into()),
            ));
        }
        if let Some(error) = &error {
            span.set_attribute(KeyValue::new("error.type", "provider"));
            span.set_status(Status::error(error.clone()));
        }
        span.end();
        telemetry.usage(&self.model, "chat", input_tokens, output_tokens);
        telemetry.chat_duration.record(
            self.started.elapsed().as_secs_f64(),
            &[
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.request.model", self.model.clone()),
            ],
        );
    }

    /// Ends an `invoke_agent` span: totals, and why the session stopped.
    pub fn finish_agent(
        self,
        input_tokens: u64,
        output_tokens: u64,
        stop: &str,
        error: Option<String>,
    ) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(
            "gen_ai.usage.input_tokens",
            input_tokens as i64,
        ));
        span.set_attribute(KeyValue::new(
            "gen_ai.usage.output_tokens",
            output_tokens as i64,
        ));
        span.set_attribute(KeyValue::new("gadget.agent.stop", stop.to_string()));
        if let Some(error) = error {
            span.set_status(Status::error(error));
        }
        span.end();
    }
}

/// One event of a traced call: doors become child spans (timed back from
/// their duration), costs and approvals events on the call's span.
fn on_event(cx: &Context, event: &CallEvent) {
    let Some(telemetry) = active() else {
        return;
    };
    match event {
        CallEvent::Effect(effect) => effect_span(telemetry, cx, effect),
        CallEvent::Cost(amount) => cx
            .span()
            .add_event("gadget.cost", vec![KeyValue::new("gadget.cost", *amount)]),
        CallEvent::Approval(gadget_core::approval::ApprovalEvent::Decided {
            approved, by, ..
        }) => cx.span().add_event(
            "gadget.approval",
            vec![
                KeyValue::new("gadget.approval.approved", *approved),
                KeyValue::new("gadget.approval.by", by.as_str()),
            ],
        ),
        _ => {}
    }
}

fn effect_span(telemetry: &Telemetry, parent: &Context, effect: &Effect) {
    let now = SystemTime::now();
    let (name, attributes, duration, refused, error) = match effect {
        Effect::Http {
            method,
            origin,
            path,
            status,
            bytes_out,
            bytes_in,
            duration_ms,
            refused,
            error,
        } => {
            let mut attributes = vec![
                KeyValue::new("http.request.method", method.clone()),
                KeyValue::new("url.full", format!("{origin}{path}")),
                KeyValue::new("server.address", host_of(origin).to_string()),
                KeyValue::new("http.request.body.size", *bytes_out as i64),
                KeyValue::new("http.response.body.size", *bytes_in as i64),
            ];
            if let Some(status) = status {
                attributes.push(KeyValue::new(
                    "http.response.status_code",
                    i64::from(*status),
                ));
            }
            // The runtime measured it, but a span never panics the host.
            let duration = Duration::try_from_secs_f64(duration_ms / 1e3).unwrap_or_default();
            (method.clone(), attributes, duration, refused, error)
        }
        Effect::Llm {
            model,
            input_tokens,
            output_tokens,
            cost,
            refused,
            error,
        } => {
            telemetry.usage(model, "chat", *input_tokens, *output_tokens);
            let attributes = vec![
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.request.model", model.clone()),
                KeyValue::new("gen_ai.usage.input_tokens", *input_tokens as i64),
                KeyValue::new("gen_ai.usage.output_tokens", *output_tokens as i64),
                KeyValue::new("gadget.cost", *cost),
            ];
            (
                format!("chat {model}"),
                attributes,
                Duration::ZERO,
                refused,
                error,
            )
        }
        Effect::File { .. } | Effect::Config { .. } | Effect::Omitted { .. } => {
            return effect_event(telemetry, parent, effect);
        }
    };
    let start = now.checked_sub(duration).unwrap_or(now);
    let mut span = telemetry
        .tracer
        .span_builder(name)
        .with_kind(SpanKind::Client)
        .with_start_time(start)
        .with_attributes(attributes)
        .start_with_context(&telemetry.tracer, parent);
    if let Some(refusal) = refused {
        telemetry.refused(effect.door());
        span.set_attribute(KeyValue::new("gadget.refused", refusal.clone()));
        span.set_status(Status::error(format!("refused: {refusal}")));
    } else if let Some(error) = error {
        span.set_attribute(KeyValue::new("error.type", "error"));
        span.set_status(Status::error(error.clone()));
    }
    span.end_with_timestamp(now);
}

/// File operations and config reads are many and quick: events on the
/// call's span, not spans of their own.
fn effect_event(telemetry: &Telemetry, parent: &Context, effect: &Effect) {
    match effect {
        Effect::File {
            op,
            path,
            bytes,
            to,
            refused,
            error,
            ..
        } => {
            let mut attributes = vec![
                KeyValue::new("gadget.file.op", op.as_str()),
                KeyValue::new("gadget.file.path", path.clone()),
            ];
            if let Some(bytes) = bytes {
                attributes.push(KeyValue::new("gadget.file.bytes", *bytes as i64));
            }
            if let Some(to) = to {
                attributes.push(KeyValue::new("gadget.file.to", to.clone()));
            }
            if let Some(refusal) = refused {
                telemetry.refused(Door::File);
                attributes.push(KeyValue::new("gadget.refused", refusal.clone()));
            }
            if let Some(error) = error {
                attributes.push(KeyValue::new("error.type", error.clone()));
            }
            parent.span().add_event("gadget.file", attributes);
        }
        Effect::Config { keys } => parent.span().add_event(
            "gadget.config",
            vec![KeyValue::new("gadget.config.keys", keys.join(","))],
        ),
        Effect::Omitted { of, count } => parent.span().add_event(
            "gadget.omitted",
            vec![
                KeyValue::new("gadget.door", of.as_str()),
                KeyValue::new("gadget.omitted.count", *count as i64),
            ],
        ),
        Effect::Http { .. } | Effect::Llm { .. } => {}
    }
}

/// `host` of `scheme://host:port`.
fn host_of(origin: &str) -> &str {
    let rest = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    match rest.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_origin_drops_scheme_and_port() {
        assert_eq!(host_of("http://127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_of("https://[::1]:443"), "[::1]");
        assert_eq!(host_of("https://example.org"), "example.org");
    }

    #[test]
    fn off_by_default_reads_no_trace_context() {
        // No binary enabled telemetry in this test process.
        assert!(active().is_none());
        assert!(
            context_from(
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                None
            )
            .is_none()
        );
    }
}
