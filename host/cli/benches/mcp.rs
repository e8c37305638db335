//! A bounded load test of `gadget serve` (a benchmark, not a timed test):
//! CLIENTS concurrent HTTP clients on 127.0.0.1 make CALLS `tools/call`s,
//! one in ten to a gadget that times out (Sleep, under a 100 ms ceiling),
//! the rest to Calculator with arguments unique to the call. Prints calls
//! per second, p50 and p99 latency, the server's resident memory at the
//! start and the end, and checks that every response is the one its
//! request asked for (none lost, none mixed up).
//!
//! Run: `cargo bench -p gadget-host --bench mcp` (needs the guests built).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CALLS: usize = 20_000;
const CLIENTS: usize = 32;
/// Every TIMEOUT_EVERY-th call goes to the gadget that times out.
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

#[tokio::main]
async fn main() {
    let dir = std::env::temp_dir().join(format!("gadget-mcp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "[limits]\nmax-timeout-ms = 100\n").unwrap();
    let plugins = concat!(env!("CARGO_MANIFEST_DIR"), "/../../plugins");
    let port = 18_000 + (std::process::id() % 2_000) as u16;
    let mut server = Command::new(env!("CARGO_BIN_EXE_gadget"))
        .args(["--plugins", plugins, "--config"])
        .arg(&policy)
        .env("XDG_CACHE_HOME", &dir)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--max-concurrent-calls",
            "256",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gadget serve");
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let health = format!("http://127.0.0.1:{port}/healthz");
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.get(&health).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Warm up: the first call of each gadget instantiates from the cache.
    for _ in 0..50 {
        call(&client, &url, 0).await;
    }
    let rss_start = rss_kib(server.id());

    let next = Arc::new(AtomicUsize::new(1));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (client, url, next) = (client.clone(), url.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut wrong = 0;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i > CALLS {
                    break;
                }
                let began = Instant::now();
                if !call(&client, &url, i).await {
                    wrong += 1;
                }
                latencies.push(began.elapsed());
            }
            (latencies, wrong)
        }));
    }
    let mut latencies = Vec::new();
    let mut wrong = 0;
    for task in tasks {
        let (l, w) = task.await.unwrap();
        latencies.extend(l);
        wrong += w;
    }
    let took = started.elapsed();
    let rss_end = rss_kib(server.id());
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);

    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "gadget serve under load: {CALLS} tools/call, {CLIENTS} concurrent clients, 1 in {TIMEOUT_EVERY} timing out (100 ms)"
    );
    println!(
        "  calls per second   {:>10.0}",
        CALLS as f64 / took.as_secs_f64()
    );
    println!(
        "  latency p50        {:>10.2} ms",
        at(0.50).as_secs_f64() * 1e3
    );
    println!(
        "  latency p99        {:>10.2} ms",
        at(0.99).as_secs_f64() * 1e3
    );
    println!("  wrong or lost      {wrong:>10}");
    println!(
        "  server RSS         {:>7} MiB at start, {} MiB at the end",
        rss_start / 1024,
        rss_end / 1024
    );
    assert_eq!(wrong, 0, "every response must be its request's");
}

/// One call; true when its response is the one this call asked for.
async fn call(client: &reqwest::Client, url: &str, i: usize) -> bool {
    let times_out = i.is_multiple_of(TIMEOUT_EVERY) && i > 0;
    let params = if times_out {
        json!({"name": "Sleep", "arguments": {"ms": 1000}})
    } else {
        json!({"name": "Calculator", "arguments": {"operation": "add", "a": i, "b": 1}})
    };
    let body = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params});
    let Ok(response) = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .await
    else {
        return false;
    };
    let Ok(text) = response.text().await else {
        return false;
    };
    // JSON, or one SSE `data:` line when the server streamed.
    let json_text = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(&text);
    let Ok(answer) = serde_json::from_str::<Value>(json_text) else {
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
