//! Agent loop benchmarks against a scripted OpenAI-compatible server on
//! 127.0.0.1 (server-sent events, chunked), printed with their baselines
//! measured in the same run.
//!
//! 1. The loop's own cost per iteration: a session of iterations that
//!    each make one Calculator call, beside the same work done by hand
//!    with no loop (the same request and stream read with reqwest
//!    directly, then the same response text through an executor). The
//!    difference is what the loop adds: building the request (system
//!    prompt and history), parsing the stream, rendering the history,
//!    events.
//! 2. Block to call: the server sends a block's last bytes, then pauses;
//!    the time from that write to the call starting in the executor.
//! 3. The same for a native tool call (`--tool-format native`): the event
//!    that closes its arguments JSON, then a pause; the time from that
//!    write to the call starting.
//! 4. A whole native iteration whose call (Sleep 200 ms) is complete
//!    300 ms before the message ends, beside what waiting for the
//!    message's end would take (the stream's time plus the call's, both
//!    measured in the same run).
//!
//! Run: `cargo bench -p gadget-host --bench agent` (needs the guests built).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gadget_host::agent::native::ToolFormat;
use gadget_host::agent::openai::OpenAi;
use gadget_host::agent::{Agent, AgentConfig, AgentEvent, RetryPolicy};
use gadget_host::executor::{ExecConfig, ExecEvent, Executor};
use gadget_host::loader::{self, LoadOptions, NoProgress, Registry};
use gadget_host::render::Markers;
use gadget_host::runtime::{Runtime, RuntimeConfig};
use serde_json::json;

const ITERATIONS: usize = 50;
const LATENCY_SAMPLES: usize = 30;

async fn registry() -> Arc<Registry> {
    let plugins = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plugins"));
    let runtime = Arc::new(Runtime::new(&RuntimeConfig::default()).expect("runtime"));
    let (registry, errors) = loader::load_dirs(
        runtime,
        &[plugins],
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "build the guests first: {errors:?}");
    Arc::new(registry)
}

fn block(i: usize) -> String {
    format!(
        "\n!!!GADGET_START:Calculator:c{i}\n!!!ARG:operation\nadd\n!!!ARG:a\n{i}\n!!!ARG:b\n1\n!!!GADGET_END\n"
    )
}

/// The SSE body of a response: `text` in 24-byte pieces, then usage and
/// `[DONE]`.
fn sse(text: &str) -> Vec<String> {
    let mut events: Vec<String> = text
        .as_bytes()
        .chunks(24)
        .map(|piece| {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": String::from_utf8_lossy(piece)}}]});
            format!("data: {chunk}\n\n")
        })
        .collect();
    events.push(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20}}\n\ndata: [DONE]\n\n".into(),
    );
    events
}

/// Answers every request with `next(request number)`'s events, each
/// written after its pause; records when each event was written.
fn serve(
    next: impl Fn(usize) -> Vec<(Duration, String)> + Send + 'static,
    written: Arc<Mutex<Vec<(usize, Instant)>>>,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { break };
            stream.set_nodelay(true).unwrap();
            read_request(&mut stream);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            );
            for (i, (pause, event)) in next(n).into_iter().enumerate() {
                std::thread::sleep(pause);
                let _ = stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes());
                written.lock().unwrap().push((i, Instant::now()));
            }
            let _ = stream.write_all(b"0\r\n\r\n");
        }
    });
    port
}

fn read_request(stream: &mut TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
}

fn config() -> AgentConfig {
    AgentConfig {
        model: "bench".into(),
        max_iterations: ITERATIONS + 1,
        max_cost: None,
        max_tokens: 1024,
        system: None,
        model_info: None,
        retry: RetryPolicy::default(),
        tool_format: Default::default(),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// From the server writing its first event (a call complete in it) to the
/// call starting in the agent's executor, µs, [`LATENCY_SAMPLES`] times.
async fn call_latencies(
    registry: &Arc<Registry>,
    base: &str,
    written: &Arc<Mutex<Vec<(usize, Instant)>>>,
    tool_format: ToolFormat,
) -> Vec<f64> {
    let mut latencies = Vec::new();
    for _ in 0..LATENCY_SAMPLES {
        written.lock().unwrap().clear();
        let started_at: Arc<Mutex<Option<Instant>>> = Arc::default();
        let seen = started_at.clone();
        let observer = Arc::new(move |event: &AgentEvent| {
            if let AgentEvent::Exec(ExecEvent::CallStarted { .. }) = event {
                seen.lock().unwrap().get_or_insert(Instant::now());
            }
        });
        let executor = Executor::new(registry.clone(), ExecConfig::default()).unwrap();
        let provider = Arc::new(OpenAi::new(base, Some("k".into())));
        let mut config = config();
        config.max_iterations = 1;
        config.tool_format = tool_format;
        let mut agent = Agent::new(provider, executor, Markers::default(), config, observer);
        agent.run("latency").await;
        let sent = written
            .lock()
            .unwrap()
            .iter()
            .find(|(i, _)| *i == 0)
            .map(|(_, at)| *at)
            .unwrap();
        let started = started_at.lock().unwrap().expect("the call started");
        latencies.push(started.duration_since(sent).as_secs_f64() * 1e6);
    }
    latencies
}

#[tokio::main]
async fn main() {
    let registry = registry().await;
    println!("agent loop benchmarks ({ITERATIONS} iterations, one Calculator call each)\n");

    // 1. The loop, iteration by iteration.
    let written = Arc::new(Mutex::new(Vec::new()));
    let port = serve(
        |n| {
            let text = if n < ITERATIONS {
                block(n)
            } else {
                "done".to_string()
            };
            sse(&text)
                .into_iter()
                .map(|e| (Duration::ZERO, e))
                .collect()
        },
        written.clone(),
    );
    let base = format!("http://127.0.0.1:{port}/v1");
    let executor = Executor::new(registry.clone(), ExecConfig::default()).unwrap();
    let provider = Arc::new(OpenAi::new(&base, Some("k".into())));
    let mut agent = Agent::new(
        provider,
        executor,
        Markers::default(),
        config(),
        Arc::new(|_: &AgentEvent| {}),
    );
    let started = Instant::now();
    let outcome = agent.run("bench").await;
    let agent_total = started.elapsed();
    assert_eq!(
        outcome.iterations.len(),
        ITERATIONS + 1,
        "{:?}",
        outcome.error
    );
    let per_iteration_agent = agent_total.as_secs_f64() * 1e6 / (ITERATIONS + 1) as f64;

    // The same work without the loop: reqwest reads the same streams, and
    // an executor runs the same texts.
    let port = serve(
        |n| {
            let text = if n < ITERATIONS {
                block(n)
            } else {
                "done".to_string()
            };
            sse(&text)
                .into_iter()
                .map(|e| (Duration::ZERO, e))
                .collect()
        },
        Arc::default(),
    );
    let client = reqwest::Client::new();
    let mut executor = Executor::new(registry.clone(), ExecConfig::default()).unwrap();
    let started = Instant::now();
    for n in 0..=ITERATIONS {
        let body = client
            .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
            .body(r#"{"model":"bench","messages":[]}"#)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert!(!body.is_empty());
        let text = if n < ITERATIONS {
            block(n)
        } else {
            "done".to_string()
        };
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tx.send(text).await.unwrap();
        drop(tx);
        executor.run_response(rx, |_| {}).await;
    }
    let per_iteration_bare = started.elapsed().as_secs_f64() * 1e6 / (ITERATIONS + 1) as f64;
    println!("1. per iteration (request, stream, one call, history)");
    println!("   agent loop           {per_iteration_agent:>9.0} µs");
    println!("   reqwest + executor   {per_iteration_bare:>9.0} µs   (baseline, no loop)");
    println!(
        "   loop's own cost      {:>9.0} µs   ({:.2}x)\n",
        per_iteration_agent - per_iteration_bare,
        per_iteration_agent / per_iteration_bare
    );

    // 2. From a block's last byte on the wire to its call starting.
    let written = Arc::new(Mutex::new(Vec::new()));
    let port = serve(
        |_| {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": block(0)}}]});
            vec![
                (Duration::ZERO, format!("data: {chunk}\n\n")),
                (Duration::from_millis(50), "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n".into()),
            ]
        },
        written.clone(),
    );
    let base = format!("http://127.0.0.1:{port}/v1");
    let latencies = call_latencies(&registry, &base, &written, ToolFormat::Block).await;
    println!("2. block's last byte written -> call started ({LATENCY_SAMPLES} samples)");
    println!(
        "   median {:.0} µs, max {:.0} µs\n",
        median(latencies.clone()),
        latencies.iter().cloned().fold(0.0, f64::max)
    );

    // 3. From the event that closes a native call's arguments to its start.
    let call = |id: &str, name: &str, arguments: &str| {
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}}]});
        format!("data: {chunk}\n\n")
    };
    let end = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    let written = Arc::new(Mutex::new(Vec::new()));
    let closing = call("n1", "Calculator", r#"{"operation":"add","a":1,"b":2}"#);
    let port = serve(
        move |_| {
            vec![
                (Duration::ZERO, closing.clone()),
                (Duration::from_millis(50), end.to_string()),
            ]
        },
        written.clone(),
    );
    let base = format!("http://127.0.0.1:{port}/v1");
    let native_latencies = call_latencies(&registry, &base, &written, ToolFormat::Native).await;
    println!("3. native call's closing event written -> call started ({LATENCY_SAMPLES} samples)");
    println!(
        "   median {:.0} µs, max {:.0} µs   (block format, same run: median {:.0} µs)\n",
        median(native_latencies.clone()),
        native_latencies.iter().cloned().fold(0.0, f64::max),
        median(latencies)
    );

    // 4. A whole iteration: Sleep 200 ms, complete 300 ms before the end.
    const SLEEP_MS: u64 = 200;
    const STILL_WRITING_MS: u64 = 300;
    let sleep = call("s1", "Sleep", &format!(r#"{{"ms":{SLEEP_MS}}}"#));
    let port = serve(
        move |_| {
            vec![
                (Duration::ZERO, sleep.clone()),
                (Duration::from_millis(STILL_WRITING_MS), end.to_string()),
            ]
        },
        Arc::default(),
    );
    let base = format!("http://127.0.0.1:{port}/v1");
    let mut iterations = Vec::new();
    let mut waited = Vec::new();
    for _ in 0..5 {
        let durations: Arc<Mutex<Vec<f64>>> = Arc::default();
        let seen = durations.clone();
        let observer = Arc::new(move |event: &AgentEvent| {
            if let AgentEvent::Exec(ExecEvent::CallFinished { duration_ms, .. }) = event {
                seen.lock().unwrap().push(*duration_ms);
            }
        });
        let executor = Executor::new(registry.clone(), ExecConfig::default()).unwrap();
        let provider = Arc::new(OpenAi::new(&base, Some("k".into())));
        let mut config = config();
        config.max_iterations = 1;
        config.tool_format = ToolFormat::Native;
        let mut agent = Agent::new(provider, executor, Markers::default(), config, observer);
        let started = Instant::now();
        let outcome = agent.run("sleep").await;
        iterations.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(outcome.iterations.len(), 1);
        // Waiting for the message's end: the stream, then the call.
        let call_ms = durations
            .lock()
            .unwrap()
            .first()
            .copied()
            .expect("the call ran");
        let stream_started = Instant::now();
        let body = reqwest::Client::new()
            .post(format!("{base}/chat/completions"))
            .body(r#"{"model":"bench","messages":[]}"#)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert!(!body.is_empty());
        waited.push(stream_started.elapsed().as_secs_f64() * 1e3 + call_ms);
    }
    println!(
        "4. a native iteration, Sleep {SLEEP_MS} ms complete {STILL_WRITING_MS} ms before the message ends (5 runs)"
    );
    println!("   calls start mid-stream   {:>7.1} ms", median(iterations));
    println!(
        "   waiting for the end      {:>7.1} ms   (the stream, then the call; same run)",
        median(waited)
    );
}
