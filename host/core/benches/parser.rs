//! Parser throughput, beside llmist 18.4.0 measured in the same run.
//!
//! Inputs come from `bench/gen.py` (deterministic; the same bytes on any
//! machine): the 20 MB `mixed` stream fed whole, in 64-byte and in 7-byte
//! chunks, and the 2 MB pathological `textonly` and `bigvalue` streams in
//! 64-byte chunks. Every event is consumed, as a host would.
//!
//! Goals (issue 3): at least 1 GB/s whole, 500 MB/s in 64-byte chunks, at
//! least 10x llmist at every chunk size, each 2 MB input under 10 ms.
//!
//! llmist is run with `node parse.mjs --bench` from the oracle directory
//! named by `$LLMIST_ORACLE` (a checkout of the shared conformance oracle
//! with its `npm install` done). Without it the llmist column is skipped.
//!
//! Run: `cargo bench -p gadget-core --bench parser` (builds the parser's crate
//! only, no wasmtime).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use gadget_core::parser::{EventRef, ParseEvent, Parser};

struct Case {
    name: &'static str,
    generator: &'static [&'static str],
    chunk: Option<usize>,
    owned: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "mixed-20MB/whole",
        generator: &["mixed", "--mb", "20", "--seed", "1"],
        chunk: None,
        owned: false,
    },
    Case {
        name: "mixed-20MB/chunk-64",
        generator: &["mixed", "--mb", "20", "--seed", "1"],
        chunk: Some(64),
        owned: false,
    },
    Case {
        name: "mixed-20MB/chunk-7",
        generator: &["mixed", "--mb", "20", "--seed", "1"],
        chunk: Some(7),
        owned: false,
    },
    Case {
        name: "mixed-20MB/whole, owned events",
        generator: &["mixed", "--mb", "20", "--seed", "1"],
        chunk: None,
        owned: true,
    },
    Case {
        name: "textonly-2MB/chunk-64",
        generator: &["textonly", "--mb", "2"],
        chunk: Some(64),
        owned: false,
    },
    Case {
        name: "bigvalue-2MB/chunk-64",
        generator: &["bigvalue", "--mb", "2"],
        chunk: Some(64),
        owned: false,
    },
];

fn generate(args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/gen.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("python3 runs bench/gen.py");
    assert!(out.status.success(), "gen.py {args:?} failed");
    String::from_utf8(out.stdout).expect("gen.py writes UTF-8")
}

/// Splits `text` into pieces of about `size` bytes, each ending on a character boundary.
fn chunks(text: &str, size: usize) -> Vec<&str> {
    let mut pieces = Vec::with_capacity(text.len() / size + 1);
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(&text[at..end]);
        at = end;
    }
    pieces
}

/// Parses every piece and looks at every event as it is lent (the
/// allocation-free path a host reads calls through); returns (events, calls).
fn parse_all(pieces: &[&str]) -> (usize, usize) {
    let mut parser = Parser::new();
    let (mut events, mut calls) = (0, 0);
    let mut consume = |event: EventRef<'_>| {
        events += 1;
        if let EventRef::Call(call) = event {
            calls += 1;
            black_box(call.header.name);
            black_box(call.arguments().len());
        }
        black_box(event);
    };
    for piece in pieces {
        parser.feed_events(piece, &mut consume);
    }
    parser.finish_events(&mut consume);
    (events, calls)
}

/// The same with owned events (a `GadgetCall` per block).
fn parse_all_owned(pieces: &[&str]) -> (usize, usize) {
    let mut parser = Parser::new();
    let (mut events, mut calls) = (0, 0);
    let mut consume = |event: ParseEvent| {
        events += 1;
        if matches!(event, ParseEvent::Call(_)) {
            calls += 1;
        }
        black_box(event);
    };
    for piece in pieces {
        parser.feed_with(piece, &mut consume);
    }
    parser.finish_with(&mut consume);
    (events, calls)
}

/// llmist's time for one case, from the oracle's own `--bench` timing line.
fn llmist_ms(oracle: &Path, input: &str, chunk: Option<usize>) -> Option<f64> {
    // Warm runs for llmist too (its JIT needs them), and its best one:
    // the comparison never flatters us. The quadratic inputs take tens of
    // seconds a run, so they run once.
    let repeat = if input.len() > 10_000_000 { 5 } else { 1 };
    let mut command = Command::new("node");
    command
        .current_dir(oracle)
        .arg("parse.mjs")
        .arg("--bench")
        .args(["--repeat", &repeat.to_string()]);
    if let Some(chunk) = chunk {
        command.args(["--chunk", &chunk.to_string()]);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let owned = input.to_string();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(owned.as_bytes());
    });
    let out = child.wait_with_output().ok()?;
    let _ = writer.join();
    let lines = String::from_utf8_lossy(&out.stderr);
    lines
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok()?["ms"].as_f64())
        .min_by(f64::total_cmp)
}

fn main() {
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    let oracle = std::env::var_os("LLMIST_ORACLE").map(PathBuf::from);
    let mut rows = Vec::new();
    let mut inputs: Vec<(&[&str], String)> = Vec::new();
    for case in CASES {
        if !inputs.iter().any(|(g, _)| *g == case.generator) {
            inputs.push((case.generator, generate(case.generator)));
        }
        let text = &inputs.iter().find(|(g, _)| *g == case.generator).unwrap().1;
        let pieces = match case.chunk {
            Some(size) => chunks(text, size),
            None => vec![text.as_str()],
        };
        let mut group = criterion.benchmark_group("parser");
        group.throughput(Throughput::Bytes(text.len() as u64));
        let run = if case.owned {
            parse_all_owned
        } else {
            parse_all
        };
        group.bench_function(case.name, |b| b.iter(|| run(&pieces)));
        group.finish();

        // Our figure for the table: the median of 15 timed runs.
        let mut times: Vec<Duration> = (0..15)
            .map(|_| {
                let started = Instant::now();
                black_box(run(&pieces));
                started.elapsed()
            })
            .collect();
        times.sort();
        let ours_ms = times[times.len() / 2].as_secs_f64() * 1e3;
        let llmist = oracle
            .as_deref()
            .and_then(|o| llmist_ms(o, text, case.chunk));
        rows.push((case.name, text.len(), ours_ms, llmist));
    }

    println!("\n| input, feed | gadget-host | llmist 18.4.0 | speed-up |");
    println!("|---|---|---|---|");
    for (name, bytes, ours, llmist) in rows {
        let mbps = |ms: f64| bytes as f64 / 1e6 / (ms / 1e3);
        let theirs = match llmist {
            Some(ms) => format!("{ms:.1} ms ({:.0} MB/s)", mbps(ms)),
            None => "not run (set LLMIST_ORACLE)".into(),
        };
        let ratio = llmist.map_or("-".into(), |ms| format!("{:.0}x", ms / ours));
        println!(
            "| {name} | {ours:.2} ms ({:.0} MB/s) | {theirs} | {ratio} |",
            mbps(ours)
        );
    }
}
