//! OpenTelemetry with the real binary and an OTLP/HTTP collector on
//! 127.0.0.1 that decodes what it gets with the OpenTelemetry protobuf
//! definitions (`opentelemetry-proto`'s generated types): the GenAI spans
//! of `run`, `agent`, `mcp` and `serve`, a door's child span, trace
//! context taken from MCP `_meta` and HTTP headers and sent on a gadget's
//! outgoing request, and the metrics.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message as _;
use serde_json::{Value, json};

use crate::approvals::fed;
use crate::common;
use crate::http_grants::TestServer;
use crate::llm_server::{LlmServer, block, openai_reply};
use crate::serve::Server;

/// One span as the collector decoded it.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
    attributes: HashMap<String, String>,
    /// The status code (0 unset, 1 ok, 2 error) and message.
    status: (i32, String),
    service: String,
}

impl Span {
    fn attr(&self, key: &str) -> &str {
        self.attributes.get(key).map_or("", String::as_str)
    }
}

/// An OTLP/HTTP collector on an ephemeral port: takes `/v1/traces` and
/// `/v1/metrics`, answers 200, and stops when dropped (or after two
/// minutes).
struct Collector {
    port: u16,
    spans: Arc<Mutex<Vec<Span>>>,
    metrics: Arc<Mutex<Vec<String>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::ArrayValue(a)) => a
            .values
            .iter()
            .map(|v| text(&Some(v.clone())))
            .collect::<Vec<_>>()
            .join(","),
        _ => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Collector {
    fn start() -> Collector {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let metrics = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (spans_in, metrics_in, stopping) = (spans.clone(), metrics.clone(), stop.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stopping.load(std::sync::atomic::Ordering::Relaxed)
                && started.elapsed() < Duration::from_secs(120)
            {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (spans, metrics) = (spans_in.clone(), metrics_in.clone());
                std::thread::spawn(move || serve_export(stream, &spans, &metrics));
            }
        });
        Collector {
            port,
            spans,
            metrics,
            stop,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    fn metric_names(&self) -> Vec<String> {
        self.metrics.lock().unwrap().clone()
    }

    /// Waits (at most 20 s) until `done` holds of the spans received.
    fn wait_for(&self, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Serves the requests of one connection (HTTP/1.1, kept alive).
fn serve_export(
    stream: std::net::TcpStream,
    spans: &Mutex<Vec<Span>>,
    metrics: &Mutex<Vec<String>>,
) {
    stream.set_nonblocking(false).unwrap();
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        match path.as_str() {
            "/v1/traces" => {
                let request = ExportTraceServiceRequest::decode(&body[..]).expect("OTLP traces");
                let mut spans = spans.lock().unwrap();
                for resource in request.resource_spans {
                    let service = resource
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|a| a.key == "service.name")
                        .map(|a| text(&a.value))
                        .unwrap_or_default();
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            spans.push(Span {
                                name: span.name,
                                trace_id: hex(&span.trace_id),
                                span_id: hex(&span.span_id),
                                parent: hex(&span.parent_span_id),
                                attributes: span
                                    .attributes
                                    .iter()
                                    .map(|a| (a.key.clone(), text(&a.value)))
                                    .collect(),
                                status: span
                                    .status
                                    .map(|s| (s.code, s.message))
                                    .unwrap_or_default(),
                                service: service.clone(),
                            });
                        }
                    }
                }
            }
            "/v1/metrics" => {
                let request = ExportMetricsServiceRequest::decode(&body[..]).expect("OTLP metrics");
                let mut names = metrics.lock().unwrap();
                for resource in request.resource_metrics {
                    for scope in resource.scope_metrics {
                        names.extend(scope.metrics.into_iter().map(|m| m.name));
                    }
                }
            }
            _ => {}
        }
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
    }
}

/// `gadget` over the shipped plugins, exporting to `collector`.
fn gadget(collector: &Collector) -> Command {
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint());
    command
}

fn find<'a>(spans: &'a [Span], name: &str, call: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.name == name && (call.is_empty() || s.attr("gen_ai.tool.call.id") == call))
        .unwrap_or_else(|| panic!("no span {name} {call} in {spans:#?}"))
}

#[test]
fn run_traces_each_call_its_http_request_and_sends_traceparent() {
    let collector = Collector::start();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.web]\nhttp = [\"{}\"]\n",
            server.url("").trim_end_matches('/')
        ),
    )
    .unwrap();
    let response = block("FetchUrl:ok", &[("url", &server.url("/hello"))])
        + &block("FetchUrl:refused", &[("url", "http://127.0.0.1:9/nowhere")])
        + &block("NoSuchGadget:nope", &[("x", "1")]);
    let out = fed(
        gadget(&collector)
            .arg("--config")
            .arg(&policy)
            .args(["run", "-", "--json"])
            .stderr(Stdio::piped()),
        &response,
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello from the test server"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Flushed at exit: everything is there once the run has ended.
    let spans = collector.spans();
    let ok = find(&spans, "execute_tool FetchUrl", "ok");
    assert_eq!(ok.attr("gen_ai.operation.name"), "execute_tool");
    assert_eq!(ok.attr("gen_ai.tool.name"), "FetchUrl");
    assert_eq!(ok.attr("gadget.plugin"), "web");
    assert_eq!(ok.attr("gadget.digest").len(), 64);
    assert_eq!(ok.attr("gadget.outcome"), "ok");
    assert_eq!(ok.service, "gadget-host");
    assert_eq!(ok.parent, "", "a call of `run` starts its own trace");
    // The request is the call's child span, and the server got the call's
    // trace context.
    let get = spans
        .iter()
        .find(|s| s.name == "GET" && s.parent == ok.span_id)
        .unwrap_or_else(|| panic!("no GET under the call: {spans:#?}"));
    assert_eq!(get.trace_id, ok.trace_id);
    assert_eq!(get.attr("http.response.status_code"), "200");
    assert_eq!(get.attr("url.full"), server.url("/hello"));
    assert_eq!(get.attr("http.response.body.size"), "26");
    assert_eq!(
        server.trace_parents(),
        vec![format!("00-{}-{}-01", ok.trace_id, ok.span_id)]
    );
    // A refused request: an error child span naming the grant.
    let refused = find(&spans, "execute_tool FetchUrl", "refused");
    let denied = spans
        .iter()
        .find(|s| s.parent == refused.span_id)
        .unwrap_or_else(|| panic!("no child of the refused call: {spans:#?}"));
    assert_eq!(denied.status.0, 2, "{denied:?}");
    assert!(
        denied.attr("gadget.refused").contains("not granted"),
        "{denied:?}"
    );
    // An unknown gadget never reaches a span, but is counted.
    assert!(spans.iter().all(|s| !s.name.contains("NoSuchGadget")));
    let metrics = collector.metric_names();
    for name in ["gadget.calls", "gadget.call.duration", "gadget.refusals"] {
        assert!(metrics.iter().any(|m| m == name), "{name} in {metrics:?}");
    }
}

#[test]
fn an_agent_session_is_one_trace_of_chat_and_tool_spans() {
    let collector = Collector::start();
    let add = block(
        "Calculator:sum",
        &[("operation", "add"), ("a", "15"), ("b", "23")],
    );
    let llm = LlmServer::start(vec![
        openai_reply(&[("Let me add.", 0), (&add, 0)], (100, 20)),
        openai_reply(&[("The sum is 38.", 0)], (150, 5)),
    ]);
    let home = tempfile::tempdir().unwrap();
    // Configured by the policy this time, not the environment.
    let policy = home.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[telemetry]\nendpoint = \"{}\"\nservice-name = \"agents-under-test\"\n",
            collector.endpoint()
        ),
    )
    .unwrap();
    let out = gadget(&collector)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env("TEST_LLM_KEY", "sk-test")
        .arg("--config")
        .arg(&policy)
        .args(["agent", "--base-url"])
        .arg(llm.url() + "/v1")
        .args([
            "--api-key-env",
            "TEST_LLM_KEY",
            "--model",
            "openai:gpt-4o-mini",
        ])
        .arg("What is 15 + 23?")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = collector.spans();
    let session = find(&spans, "invoke_agent", "");
    assert_eq!(session.service, "agents-under-test");
    assert_eq!(session.attr("gen_ai.request.model"), "gpt-4o-mini");
    assert_eq!(session.attr("gen_ai.usage.input_tokens"), "250");
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "chat gpt-4o-mini")
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for chat in &chats {
        assert_eq!(chat.parent, session.span_id);
        assert_eq!(chat.attr("gen_ai.provider.name"), "openai");
        assert_eq!(chat.attr("gen_ai.response.finish_reasons"), "stop");
    }
    assert!(
        chats
            .iter()
            .any(|c| c.attr("gen_ai.usage.input_tokens") == "100"
                && c.attr("gen_ai.usage.output_tokens") == "20")
    );
    let tool = find(&spans, "execute_tool Calculator", "sum");
    assert_eq!(tool.parent, session.span_id);
    assert_eq!(tool.trace_id, session.trace_id);
    let metrics = collector.metric_names();
    for name in [
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
    ] {
        assert!(metrics.iter().any(|m| m == name), "{name} in {metrics:?}");
    }
}

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

#[test]
fn mcp_calls_continue_the_clients_trace_from_meta_and_from_http_headers() {
    let collector = Collector::start();
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");

    // stdio: `_meta.traceparent` (SEP-414).
    let mut child = gadget(&collector)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let send = |stdin: &mut std::process::ChildStdin, message: Value| {
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut answer = |id: u64| loop {
        let line = lines.next().expect("an answer").unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            return message;
        }
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    answer(0);
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "Calculator", "arguments": {"operation": "add", "a": 1, "b": 2},
        "_meta": {"traceparent": traceparent}}}),
    );
    let called = answer(1);
    assert_eq!(called["result"]["content"][0]["text"], "3", "{called}");
    // The end of stdin ends the session; the exit flushes the spans.
    drop(stdin);
    let _ = child.wait();
    let spans = collector.wait_for(|s| s.iter().any(|s| s.name == "execute_tool Calculator"));
    let span = find(&spans, "execute_tool Calculator", "");
    assert_eq!(
        (span.trace_id.as_str(), span.parent.as_str()),
        (CALLER_TRACE, CALLER_SPAN)
    );

    // serve: the request's `traceparent` header (a gateway's), the
    // batch exported while the server runs.
    let other_span = "b7ad6b7169203331";
    let header = format!("00-{CALLER_TRACE}-{other_span}-01");
    let endpoint = collector.endpoint();
    let server = Server::start_with(
        &[],
        "s3cret",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Calculator","arguments":{"operation":"add","a":2,"b":2}}}"#;
    let (status, _, body) = server.request(
        "POST",
        "/mcp",
        &[
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("traceparent", &header),
        ],
        call,
    );
    assert_eq!(status, 200, "{body}");
    let spans = collector.wait_for(|s| s.iter().any(|s| s.parent == other_span));
    let served = spans
        .iter()
        .find(|s| s.parent == other_span)
        .unwrap_or_else(|| panic!("no span under the header's: {spans:#?}"));
    assert_eq!(served.name, "execute_tool Calculator");
    assert_eq!(served.trace_id, CALLER_TRACE);
}

#[test]
fn an_unsupported_otlp_protocol_is_refused_with_what_to_set() {
    let collector = Collector::start();
    let out = gadget(&collector)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .args([
            "call",
            "Calculator",
            "--params",
            r#"{"operation":"add","a":1,"b":2}"#,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc") && said.contains("http/protobuf"),
        "{said}"
    );
}

/// A collector that accepts connections and never answers: the command
/// still exits within the 10 s the docs promise (it waited ~15 s before).
#[test]
fn a_collector_that_never_answers_holds_the_exit_less_than_ten_seconds() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    // Accepts and holds every connection, reading nothing, for the test's
    // length (bounded: the thread ends with the process).
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(64) {
            held.push(stream);
        }
    });
    let started = std::time::Instant::now();
    let out = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .args([
            "call",
            "Calculator",
            "--params",
            r#"{"operation":"add","a":1,"b":2}"#,
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < std::time::Duration::from_secs(10),
        "the exit waited {took:?} for a collector that never answers"
    );
}
