//! OpenTelemetry for the commands that run calls: the SDK's tracer and
//! meter providers, exporting OTLP over HTTP/protobuf when the standard
//! `OTEL_*` variables or the policy's `[telemetry]` name a collector, and
//! nothing at all otherwise (no provider, no thread, no span built).
//!
//! The exporters send through our own reqwest (its blocking client, on
//! the SDK's background threads), so no second HTTP stack is linked.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;

use gadget_runtime::policy::TelemetryPolicy;

/// The longest one export may take: a collector that hangs delays only
/// the background thread, and at exit the run waits at most this long.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest the exit waits for the last export, traces and metrics
/// together (they are flushed side by side): a collector that is up
/// answers in milliseconds, and this keeps the whole exit well under the
/// 10 s the docs promise. One that does not answer by then loses what was
/// still buffered.
const EXIT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of a collector's reply read (it is only checked for status):
/// a hostile or broken collector cannot make the host hold more.
const MAX_REPLY_BYTES: u64 = 64 << 10;

/// The running providers; shut down (flushed) when the command ends.
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

/// Whether a standard variable is set to something.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Starts telemetry when asked for; `None`: off.
pub fn start(policy: &TelemetryPolicy) -> Result<Option<Telemetry>> {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let traces_endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let metrics_endpoint = env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    let base = env("OTEL_EXPORTER_OTLP_ENDPOINT");
    let from_policy = policy.endpoint.as_deref().map(|e| e.trim_end_matches('/'));
    if traces_endpoint.is_none()
        && metrics_endpoint.is_none()
        && base.is_none()
        && from_policy.is_none()
    {
        return Ok(None);
    }
    for variable in [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    ] {
        if let Some(protocol) = env(variable)
            && protocol != "http/protobuf"
        {
            bail!(
                "{variable}={protocol}: gadget-host exports OTLP over HTTP/protobuf only; set it to http/protobuf (collectors take it on port 4318)"
            );
        }
    }
    let exporter_off = |variable: &str| env(variable).is_some_and(|v| v == "none");
    let want_traces = !exporter_off("OTEL_TRACES_EXPORTER");
    let want_metrics = !exporter_off("OTEL_METRICS_EXPORTER") && policy.metrics.unwrap_or(true);
    // The environment wins over the policy: only with no variable naming
    // an endpoint is the policy's used (with the signal's path added).
    let env_names_endpoint = |signal: &Option<String>| signal.is_some() || base.is_some();
    let headers: HashMap<String, String> = policy
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let resource = resource(policy);

    let tracer = if want_traces {
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(Client::default())
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(headers.clone());
        if !env_names_endpoint(&traces_endpoint)
            && let Some(base) = from_policy
        {
            builder = builder.with_endpoint(format!("{base}/v1/traces"));
        }
        let exporter = builder.build().context("the OTLP trace exporter")?;
        let provider = SdkTracerProvider::builder()
            .with_span_processor(batch_processor(exporter))
            .with_resource(resource.clone())
            .build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        Some(provider)
    } else {
        None
    };
    let meter = if want_metrics {
        let mut builder = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(Client::default())
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(headers);
        if !env_names_endpoint(&metrics_endpoint)
            && let Some(base) = from_policy
        {
            builder = builder.with_endpoint(format!("{base}/v1/metrics"));
        }
        let exporter = builder.build().context("the OTLP metric exporter")?;
        let provider = SdkMeterProvider::builder()
            .with_periodic_exporter(exporter)
            .with_resource(resource)
            .build();
        opentelemetry::global::set_meter_provider(provider.clone());
        Some(provider)
    } else {
        None
    };
    if tracer.is_none() && meter.is_none() {
        return Ok(None);
    }
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    gadget_exec::telemetry::enable();
    Ok(Some(Telemetry { tracer, meter }))
}

/// `service.name` and `service.version`; `OTEL_SERVICE_NAME` and
/// `OTEL_RESOURCE_ATTRIBUTES` are read by the SDK's own detectors.
fn resource(policy: &TelemetryPolicy) -> Resource {
    let mut builder = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    if env("OTEL_SERVICE_NAME").is_none() {
        builder = builder.with_service_name(
            policy
                .service_name
                .clone()
                .unwrap_or_else(|| "gadget-host".into()),
        );
    }
    builder.build()
}

impl Telemetry {
    /// Exports what is still buffered and stops the background threads;
    /// an export that fails is a warning (the run itself went as it went).
    pub async fn shutdown(self) {
        let traces = self.tracer.map(|tracer| {
            tokio::task::spawn_blocking(move || {
                tracer
                    .shutdown_with_timeout(EXIT_FLUSH_TIMEOUT)
                    .map_err(|e| format!("traces: {e}"))
            })
        });
        let metrics = self.meter.map(|meter| {
            tokio::task::spawn_blocking(move || {
                meter
                    .shutdown_with_timeout(EXIT_FLUSH_TIMEOUT)
                    .map_err(|e| format!("metrics: {e}"))
            })
        });
        let both = async {
            let mut problems = Vec::new();
            for task in [traces, metrics].into_iter().flatten() {
                match task.await {
                    Ok(Ok(())) => {}
                    Ok(Err(problem)) => problems.push(problem),
                    Err(e) => problems.push(e.to_string()),
                }
            }
            problems
        };
        // One bound for both: a collector that never answers holds the
        // exit this long and no longer (the threads are left to the end
        // of the process).
        match tokio::time::timeout(EXIT_FLUSH_TIMEOUT, both).await {
            Ok(problems) => {
                for problem in problems {
                    tracing::warn!("telemetry export at exit failed: {problem}");
                }
            }
            Err(_) => tracing::warn!(
                "telemetry export at exit: the collector did not answer within {} s; what was buffered is lost",
                EXIT_FLUSH_TIMEOUT.as_secs()
            ),
        }
    }
}

/// The exporters' HTTP client: reqwest's blocking client, made on first
/// use on the SDK's own thread (never on an async runtime's).
#[derive(Debug, Default)]
struct Client(OnceLock<Result<reqwest::blocking::Client, String>>);

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        use std::io::Read as _;
        let client = self
            .0
            .get_or_init(|| {
                reqwest::blocking::Client::builder()
                    .timeout(EXPORT_TIMEOUT)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| e.clone())?;
        let request: reqwest::blocking::Request = request.try_into()?;
        let response = client.execute(request)?;
        let status = response.status();
        let mut body = Vec::new();
        response.take(MAX_REPLY_BYTES).read_to_end(&mut body)?;
        Ok(http::Response::builder()
            .status(status)
            .body(bytes::Bytes::from(body))?)
    }
}

/// The SDK's batch span processor over `exporter`, its queue
/// [`gadget_exec::telemetry::SPAN_QUEUE_SPANS`] deep unless the
/// environment (`OTEL_BSP_MAX_QUEUE_SIZE`) sets it.
fn batch_processor<E>(exporter: E) -> opentelemetry_sdk::trace::BatchSpanProcessor
where
    E: opentelemetry_sdk::trace::SpanExporter + 'static,
{
    use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor};
    let mut config = BatchConfigBuilder::default();
    if std::env::var_os("OTEL_BSP_MAX_QUEUE_SIZE").is_none() {
        config = config.with_max_queue_size(gadget_exec::telemetry::SPAN_QUEUE_SPANS);
    }
    BatchSpanProcessor::builder(exporter)
        .with_batch_config(config.build())
        .build()
}
