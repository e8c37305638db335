//! `gadget serve` under load, beside the runtime under it (a benchmark,
//! not a timed test). Every request is a `tools/call` of protocol
//! 2026-07-28 (per-request `_meta`, the `Mcp-Method` / `Mcp-Name`
//! headers), sent by a small keep-alive HTTP/1.1 client written here so
//! that the client takes as little of the two cores as wrk would.
//!
//! 1. The runtime alone: Calculator calls in parallel on every core, in
//!    this process, no HTTP (the figure the served path is held to).
//! 2. The same calls through `gadget serve` on CLIENTS connections:
//!    calls per second and their share of (1), p50 and p99.
//! 3. One connection: p50 latency of one call.
//! 4. CALLS calls on CLIENTS connections, one in ten to a gadget that
//!    times out (Sleep, under a 100 ms ceiling): every response must be
//!    the one its request asked for (none lost, none mixed up); the
//!    server's resident memory at the start and the end.
//!
//! Run: `cargo bench -p gadget-host --bench mcp` (needs the guests built);
//! `GADGET_BENCH_GADGET=path/to/gadget` serves with another build;
//! `GADGET_BENCH_SERVE_ARGS="--state redis://..."` adds arguments to
//! `gadget serve` and `GADGET_BENCH_POLICY` lines to its policy (a rate
//! limit, say), to measure what they cost.

/// The `gadget` binary's allocator, so (1) is measured as the binary runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const CALLS: usize = 20_000;
const CLIENTS: usize = 32;
/// Calls of the throughput runs (2) and of the runtime alone (1).
const RATE_CALLS: usize = 40_000;
/// Calls of the one-connection latency run (3).
const SERIAL_CALLS: usize = 5_000;
/// In the mixed run (4), every TIMEOUT_EVERY-th call goes to the gadget
/// that times out.
const TIMEOUT_EVERY: usize = 10;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn plugins() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plugins"))
}

/// (1): RATE_CALLS Calculator calls on 4 tasks per core, in this process.
async fn runtime_rate() -> f64 {
    use gadget_runtime::loader::{self, LoadOptions, NoProgress};
    let runtime = Arc::new(
        gadget_runtime::Runtime::new(&gadget_runtime::RuntimeConfig::default()).expect("runtime"),
    );
    let (registry, errors) = loader::load_dirs(
        runtime,
        &[plugins()],
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "build the guests first: {errors:?}");
    let registry = Arc::new(registry);
    let tasks = std::thread::available_parallelism().map_or(2, |n| n.get()) * 4;
    let mut rates = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for t in 0..tasks {
            let registry = registry.clone();
            set.spawn(async move {
                for i in 0..RATE_CALLS / tasks {
                    let params = json!({"operation": "add", "a": t * RATE_CALLS + i, "b": 1});
                    let report = registry
                        .call("Calculator", params, &format!("c{t}_{i}"), None)
                        .await
                        .unwrap();
                    assert!(report.outcome.is_ok());
                }
            });
        }
        set.join_all().await;
        rates.push((RATE_CALLS / tasks * tasks) as f64 / started.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    rates[1]
}

/// One request's bytes: a 2026-07-28 `tools/call` of Calculator (`a` = i)
/// or, when `times_out`, of Sleep.
fn request(port: u16, i: usize, times_out: bool) -> Vec<u8> {
    let (name, arguments) = if times_out {
        ("Sleep", json!({"ms": 1000}))
    } else {
        ("Calculator", json!({"operation": "add", "a": i, "b": 1}))
    };
    let body = json!({
        "jsonrpc": "2.0", "id": i, "method": "tools/call",
        "params": {
            "name": name, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {name}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A keep-alive connection that sends a request and reads its response.
struct Connection {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    async fn open(port: u16) -> Connection {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.set_nodelay(true).unwrap();
        Connection {
            stream,
            buffer: Vec::with_capacity(4096),
        }
    }

    /// The response's status and body (`Content-Length` framed), or `None`
    /// when the connection failed or the response is not framed so.
    async fn call(&mut self, request: &[u8]) -> Option<(u16, String)> {
        self.stream.write_all(request).await.ok()?;
        self.buffer.clear();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.buffer[..end]).ok()?;
                let status = head.get(9..12)?.parse().ok()?;
                let length: usize = head.lines().find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })?;
                while self.buffer.len() < end + 4 + length {
                    let n = self.stream.read(&mut chunk).await.ok()?;
                    if n == 0 {
                        return None;
                    }
                    self.buffer.extend_from_slice(&chunk[..n]);
                }
                let body = &self.buffer[end + 4..end + 4 + length];
                return Some((status, String::from_utf8_lossy(body).into_owned()));
            }
            let n = self.stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether `body` answers call `i` as it should: Calculator's `i + 1`, or
/// the timeout of Sleep.
fn answers(body: &str, i: usize, times_out: bool) -> bool {
    let Ok(answer) = serde_json::from_str::<serde_json::Value>(body) else {
        return false;
    };
    if answer["id"] != json!(i) {
        return false;
    }
    let result = &answer["result"];
    let content = result["content"][0]["text"].as_str().unwrap_or_default();
    if times_out {
        result["isError"] == true && content.contains("exceeded timeout")
    } else {
        result["isError"] == false && content == (i + 1).to_string()
    }
}

/// `calls` calls on `clients` connections; the sorted latencies and how
/// many responses were wrong or lost.
async fn load(
    port: u16,
    calls: usize,
    clients: usize,
    timeout_every: Option<usize>,
) -> (Duration, Vec<Duration>, usize) {
    let next = Arc::new(AtomicUsize::new(1));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut connection = Connection::open(port).await;
            let (mut latencies, mut wrong) = (Vec::new(), 0);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i > calls {
                    break;
                }
                let times_out = timeout_every.is_some_and(|every| i.is_multiple_of(every));
                let request = request(port, i, times_out);
                let began = Instant::now();
                match connection.call(&request).await {
                    Some((200, body)) if answers(&body, i, times_out) => {}
                    Some(_) => wrong += 1,
                    None => {
                        wrong += 1;
                        connection = Connection::open(port).await;
                    }
                }
                latencies.push(began.elapsed());
            }
            (latencies, wrong)
        }));
    }
    let (mut latencies, mut wrong) = (Vec::new(), 0);
    for task in tasks {
        let (l, w) = task.await.unwrap();
        latencies.extend(l);
        wrong += w;
    }
    let took = started.elapsed();
    latencies.sort();
    (took, latencies, wrong)
}

fn at(latencies: &[Duration], q: f64) -> f64 {
    latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let runtime = runtime_rate().await;

    let dir = std::env::temp_dir().join(format!("gadget-mcp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.toml");
    let extra_policy = std::env::var("GADGET_BENCH_POLICY").unwrap_or_default();
    std::fs::write(
        &policy,
        format!("[limits]\nmax-timeout-ms = 100\n{extra_policy}\n"),
    )
    .unwrap();
    let extra_args = std::env::var("GADGET_BENCH_SERVE_ARGS").unwrap_or_default();
    let port = 18_000 + (std::process::id() % 2_000) as u16;
    // GADGET_BENCH_GADGET=path/to/gadget measures another build's server
    // (an earlier commit's, say) against the same runtime figure.
    let gadget = std::env::var_os("GADGET_BENCH_GADGET")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_gadget").into());
    let mut server = Command::new(gadget)
        .arg("--plugins")
        .arg(plugins())
        .arg("--config")
        .arg(&policy)
        .env("XDG_CACHE_HOME", &dir)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--max-concurrent-calls",
            "256",
        ])
        .args(extra_args.split_whitespace())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gadget serve");
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Warm up: the first call of each gadget instantiates from the cache.
    let (_, _, wrong) = load(port, 2_000, CLIENTS, Some(TIMEOUT_EVERY)).await;
    assert_eq!(wrong, 0, "the warm-up's responses must be right");
    let rss_start = rss_kib(server.id());

    let (took, rate_latencies, rate_wrong) = load(port, RATE_CALLS, CLIENTS, None).await;
    let served = RATE_CALLS as f64 / took.as_secs_f64();
    let (_, serial, serial_wrong) = load(port, SERIAL_CALLS, 1, None).await;
    let (took, latencies, wrong) = load(port, CALLS, CLIENTS, Some(TIMEOUT_EVERY)).await;
    let rss_end = rss_kib(server.id());
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);

    println!("gadget serve, tools/call of protocol 2026-07-28 over HTTP/1.1 keep-alive");
    println!("  the runtime alone (Calculator, in process, parallel)  {runtime:>8.0} calls/s");
    println!(
        "  served, {CLIENTS} connections (Calculator)               {served:>8.0} calls/s = {:.0}% of the runtime's, p50 {:.2} ms, p99 {:.2} ms",
        served / runtime * 100.0,
        at(&rate_latencies, 0.50),
        at(&rate_latencies, 0.99),
    );
    println!(
        "  served, one connection                                p50 {:.3} ms, p99 {:.3} ms",
        at(&serial, 0.50),
        at(&serial, 0.99)
    );
    println!(
        "  mixed: {CALLS} calls, {CLIENTS} connections, 1 in {TIMEOUT_EVERY} timing out (100 ms): {:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms",
        CALLS as f64 / took.as_secs_f64(),
        at(&latencies, 0.50),
        at(&latencies, 0.99)
    );
    let lost = wrong + rate_wrong + serial_wrong;
    println!("  wrong or lost, all runs                               {lost:>8}");
    println!(
        "  server RSS                                            {:>5} MiB at start, {} MiB at the end",
        rss_start / 1024,
        rss_end / 1024
    );
    assert_eq!(lost, 0, "every response must be its request's");
}
