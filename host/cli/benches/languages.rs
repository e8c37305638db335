//! Gadgets in each language, through the host: component size, cold
//! compile, warm-cache load, and the latency of a call on a fresh instance
//! (the host's normal path: validate, instantiate, invoke, collect).
//!
//! Run: `cargo bench -p gadget-host --bench languages` after
//! `scripts/setup-tests.sh` (which builds the example plugins). A plugin that is
//! not built is reported and skipped. Extra `DIR GADGET PARAMS` triples on
//! the command line (after `--`) are measured too.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gadget_host::loader::{self, ComponentCache, LoadOptions, NoProgress, PluginSource};
use gadget_host::runtime::{Runtime, RuntimeConfig};
use serde_json::Value;

/// Calls per measurement; the median and p99 are printed.
const CALLS: usize = 300;

fn workspace() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

struct Case {
    lang: String,
    dir: PathBuf,
    gadget: String,
    params: Value,
}

async fn measure(case: &Case) -> Option<String> {
    let source = match PluginSource::from_path(&case.dir) {
        Ok(source) => source,
        Err(e) => return Some(format!("| {} | not built: {e} |", case.lang)),
    };
    let manifest = std::fs::read_to_string(case.dir.join("plugin.toml")).unwrap_or_default();
    let component = manifest
        .lines()
        .find_map(|l| l.strip_prefix("component = "))
        .map(|c| case.dir.join(c.trim_matches('"')));
    let size = component
        .as_ref()
        .and_then(|c| std::fs::metadata(c).ok())
        .map_or(0, |m| m.len());
    if size == 0 {
        return Some(format!(
            "| {} | not built (run scripts/setup-tests.sh) |",
            case.lang
        ));
    }
    let runtime = Arc::new(Runtime::new(&RuntimeConfig::default()).unwrap());
    let cache_dir = tempfile::tempdir().unwrap();
    let options = LoadOptions {
        cache: Some(ComponentCache::open(cache_dir.path()).unwrap()),
        ..LoadOptions::default()
    };
    let load = |options: LoadOptions| {
        let runtime = runtime.clone();
        let source = source.clone();
        async move {
            let started = Instant::now();
            let (registry, errors) =
                loader::load_sources(runtime, vec![source], &options, Arc::new(NoProgress)).await;
            assert!(errors.is_empty(), "{errors:?}");
            (registry, started.elapsed())
        }
    };
    let (_, cold) = load(options.clone()).await;
    let (registry, warm) = load(options).await;
    let mut latencies: Vec<Duration> = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 10 {
        let started = Instant::now();
        let report = registry
            .call(&case.gadget, case.params.clone(), "bench", None)
            .await
            .expect("valid parameters");
        assert!(report.outcome.is_ok(), "{:?}", report.outcome);
        if i >= 10 {
            latencies.push(started.elapsed());
        }
    }
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Some(format!(
        "| {} | {:.1} KiB | {:.0} ms | {:.1} ms | {:.3} ms | {:.3} ms |",
        case.lang,
        size as f64 / 1024.0,
        ms(cold),
        ms(warm),
        ms(latencies[latencies.len() / 2]),
        ms(latencies[latencies.len() * 99 / 100]),
    ))
}

#[tokio::main]
async fn main() {
    let root = workspace();
    let mut cases = vec![
        Case {
            lang: "Rust (examples/hello-gadget)".into(),
            dir: root.join("examples/hello-gadget"),
            gadget: "Greet".into(),
            params: serde_json::json!({"name": "Ada"}),
        },
        Case {
            lang: "C (examples/c-gadget)".into(),
            dir: root.join("examples/c-gadget"),
            gadget: "Caesar".into(),
            params: serde_json::json!({"text": "Hello, World", "shift": 3}),
        },
        Case {
            lang: "Python (examples/python-gadget)".into(),
            dir: root.join("examples/python-gadget"),
            gadget: "WordFrequency".into(),
            params: serde_json::json!({"text": "the cat and the hat"}),
        },
        Case {
            lang: "Go (examples/go-gadget)".into(),
            dir: root.join("examples/go-gadget"),
            gadget: "RomanNumeral".into(),
            params: serde_json::json!({"number": 1994}),
        },
        Case {
            lang: "JavaScript (examples/js-gadget)".into(),
            dir: root.join("examples/js-gadget"),
            gadget: "Slugify".into(),
            params: serde_json::json!({"title": "Hello, World"}),
        },
    ];
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    for triple in args.chunks(3) {
        if let [dir, gadget, params] = triple {
            cases.push(Case {
                lang: dir.clone(),
                dir: PathBuf::from(dir),
                gadget: gadget.clone(),
                params: serde_json::from_str(params).expect("PARAMS is JSON"),
            });
        }
    }
    println!(
        "| language | component | cold compile + load | warm-cache load | fresh-instance call, median | p99 |"
    );
    println!("|---|---|---|---|---|---|");
    for case in &cases {
        if let Some(line) = measure(case).await {
            println!("{line}");
        }
    }
}
