//! Memory stays flat over a long session: ten responses of 1,000 calls
//! each, one call in ten hostile (memory bombs, floods, 20 MB JSON, panics,
//! oversized results), run by the executor on the pooling allocator as
//! `gadget run` does. The process's resident memory after the last
//! response must be near what it was after the first.
//!
//! Its own test binary, so no other test's memory is in the reading.

#[allow(dead_code, reason = "this test uses a few of the shared helpers")]
#[path = "all/common.rs"]
mod common;

use std::sync::Arc;

/// The allocator the `gadget` binary uses (src/main.rs): what memory stays
/// flat with is the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use gadget_host::executor::{ExecConfig, ExecEvent, Executor};
use gadget_host::loader::PluginSource;
use gadget_host::runtime::{Runtime, RuntimeConfig};

/// Responses in the session, and calls in each.
const RESPONSES: usize = 10;
const CALLS_PER_RESPONSE: usize = 1_000;

/// How much the resident memory after the last response may exceed the
/// reading after the first: a quarter, plus slack for allocator noise.
const GROWTH_PERCENT: u64 = 25;
const SLACK_MIB: u64 = 24;

fn resident_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

fn response(index: usize) -> String {
    const HOSTILE: [(&str, &str); 8] = [
        ("MemoryBomb", ""),
        ("LogFlood", ""),
        ("StdioFlood", ""),
        ("Panic", ""),
        ("Oversized", "!!!ARG:bytes\n100000\n"),
        ("JsonBombs", ""),
        ("CostFlood", ""),
        ("HugeError", ""),
    ];
    let mut text = String::new();
    for n in 0..CALLS_PER_RESPONSE {
        let id = index * CALLS_PER_RESPONSE + n;
        if n % 10 == 5 {
            let (name, args) = HOSTILE[(id / 10) % HOSTILE.len()];
            text.push_str(&format!(
                "!!!GADGET_START:{name}:c{id}\n{args}!!!GADGET_END\n"
            ));
        } else {
            text.push_str(&format!(
                "!!!GADGET_START:Echo:c{id}\n!!!ARG:text\ncall {id} {}\n!!!GADGET_END\n",
                "x".repeat(200)
            ));
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resident_memory_stays_flat_over_ten_thousand_calls_with_hostile_ones() {
    // As the binary sets it (src/main.rs).
    // SAFETY: sets one of mimalloc's options.
    unsafe {
        // mi_option_purge_delay (mimalloc.h), 10 ms.
        libmimalloc_sys::mi_option_set(15, 10);
    }
    let runtime = Arc::new(Runtime::new(&RuntimeConfig::default()).unwrap());
    let registry = common::load(
        &runtime,
        vec![PluginSource::Wasm(common::fixture("fixture-misbehave"))],
    )
    .await;
    let mut executor = Executor::new(Arc::new(registry), ExecConfig::default()).unwrap();
    let mut readings = Vec::new();
    for index in 0..RESPONSES {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let text = response(index);
        let feed = tokio::spawn(async move {
            for chunk in text.as_bytes().chunks(4096) {
                let chunk = String::from_utf8(chunk.to_vec()).unwrap();
                if tx.send(chunk).await.is_err() {
                    break;
                }
            }
        });
        let mut ended = 0;
        executor
            .run_response(rx, |event| {
                if matches!(
                    event,
                    ExecEvent::CallFinished { .. } | ExecEvent::CallSkipped { .. }
                ) {
                    ended += 1;
                }
            })
            .await;
        feed.await.unwrap();
        assert_eq!(ended, CALLS_PER_RESPONSE, "every call ends exactly once");
        readings.push(resident_mib());
    }
    let (first, last) = (readings[0], *readings.last().unwrap());
    eprintln!("resident MiB after each response: {readings:?}");
    assert!(
        last <= first + first * GROWTH_PERCENT / 100 + SLACK_MIB,
        "resident memory grew from {first} MiB to {last} MiB: {readings:?}"
    );
}
