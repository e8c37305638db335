//! Gadgets written in other languages, built by `gadget build` and run
//! through the host: describe, a valid call, an invalid one, logs, cost,
//! cancellation on timeout. And `gadget new` + `build` + `check` + `call`
//! for each language.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gadget_host::limits::Limits;
use gadget_host::loader::{PluginSource, Registry};
use gadget_host::runtime::{CallError, CallRequest, EpochMode, LogLevel, Outcome};
use serde_json::json;

use crate::cli::{gadget, stderr, stdout};
use crate::common;

/// `gadget build DIR`, once per directory per test run.
pub(crate) fn built(dir: &Path) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<Vec<PathBuf>>> = OnceLock::new();
    let done = BUILT.get_or_init(Default::default);
    let mut done = done.lock().unwrap();
    if !done.iter().any(|d| d == dir) {
        let out = Command::new(common::gadget_bin())
            .arg("build")
            .arg(dir)
            .output()
            .expect("run gadget build");
        assert!(
            out.status.success(),
            "gadget build {} failed:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        done.push(dir.to_path_buf());
    }
    dir.to_path_buf()
}

async fn load_example(name: &str) -> (Arc<gadget_host::runtime::Runtime>, Registry) {
    let dir = built(&common::workspace().join("examples").join(name));
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::load(&runtime, vec![PluginSource::from_path(&dir).unwrap()]).await;
    (runtime, registry)
}

/// Cancellation on timeout: the guest's `WorkUntilCancelled` loop sees the
/// abort signal the deadline raises, says so in a warning and stops; the
/// call reports the timeout, within the grace period.
async fn stops_on_the_deadline_signal(registry: &Registry, timeout_ms: u64) {
    let gadget = registry.get("WorkUntilCancelled").unwrap();
    let request = CallRequest {
        gadget: gadget.card.spec.name.clone(),
        component_name: None,
        invocation_id: "spin".into(),
        params: "{}".into(),
        limits: Limits {
            timeout: Duration::from_millis(timeout_ms),
            ..gadget.limits.clone()
        },
        signal: None,
        observer: None,
        grants: None,
        trace_parent: None,
        request_denials: None,
        human: None,
    };
    let report = gadget.invoke_request(request).await;
    assert_eq!(
        report.outcome,
        Err(CallError::Timeout {
            gadget: "WorkUntilCancelled".into(),
            timeout_ms
        })
    );
    assert!(
        report
            .logs
            .iter()
            .any(|l| l.message == "stopping on the abort signal" && l.level == LogLevel::Warn),
        "the gadget saw the signal and stopped itself: {:?}",
        report.logs
    );
    assert!(
        report.duration < Duration::from_millis(timeout_ms + 50 + 200),
        "stopped within the grace period: {:?}",
        report.duration
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_gadget_runs_through_the_host() {
    let (_runtime, registry) = load_example("python-gadget").await;
    // Describe: the specs the Python SDK built from the decorator.
    let words = registry.get("WordFrequency").expect("WordFrequency loaded");
    assert_eq!(words.card.spec.label.as_deref(), Some("Word frequency"));
    assert_eq!(words.card.spec.examples.len(), 1);
    let schema = words.card.schema.schema().unwrap();
    assert_eq!(schema["properties"]["top"]["default"], 3);
    assert_eq!(words.limits.timeout, Duration::from_millis(5000));

    // A valid call: the default filled in by the host, logs with fields,
    // a reported cost, details.
    let report = registry
        .call(
            "WordFrequency",
            json!({"text": "the cat and the hat and the bat"}),
            "w1",
            None,
        )
        .await
        .unwrap();
    match &report.outcome {
        Ok(Outcome::Result {
            result, details, ..
        }) => {
            assert_eq!(result, "8 words\nthe: 3\nand: 2\ncat: 1");
            assert_eq!(details.as_ref().unwrap()["words"], 8);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(report.cost, 0.001);
    assert_eq!(report.logs[0].level, LogLevel::Info);
    assert_eq!(report.logs[0].message, "counting words");
    assert_eq!(report.logs[0].fields, json!({"words": 8}));

    // Invalid parameters never reach Python; unusable ones are its error.
    assert!(
        registry
            .call("WordFrequency", json!({"text": 5}), "w2", None)
            .await
            .is_err()
    );
    let report = registry
        .call("WordFrequency", json!({"text": "   "}), "w3", None)
        .await
        .unwrap();
    assert_eq!(
        report.outcome,
        Err(CallError::InvalidArguments {
            message: "text has no words: give it some text".into()
        })
    );

    stops_on_the_deadline_signal(&registry, 300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_gadget_runs_through_the_host() {
    let (_runtime, registry) = load_example("c-gadget").await;
    let caesar = registry.get("Caesar").expect("Caesar loaded");
    assert_eq!(caesar.card.spec.label.as_deref(), Some("Caesar cipher"));
    assert_eq!(caesar.card.spec.examples.len(), 2);
    assert_eq!(
        caesar.card.spec.examples[1].comment.as_deref(),
        Some("ROT13 by default")
    );

    // A valid call: the default shift (13) filled in by the host, escapes
    // decoded, a log with fields, a reported cost, details.
    let report = registry
        .call(
            "Caesar",
            json!({"text": "Uryyb, \"Jbeyq\" \u{e9}\n"}),
            "c1",
            None,
        )
        .await
        .unwrap();
    match &report.outcome {
        Ok(Outcome::Result {
            result, details, ..
        }) => {
            assert_eq!(result, "Hello, \"World\" \u{e9}\n");
            assert_eq!(details.as_ref().unwrap()["letters"], 10);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(report.cost, 0.0005);
    assert_eq!(report.logs[0].message, "shifted");
    assert_eq!(report.logs[0].fields, json!({"letters": 10}));

    // Out of the schema's range: refused by the host before C runs.
    assert!(
        registry
            .call("Caesar", json!({"text": "x", "shift": 40}), "c2", None)
            .await
            .is_err()
    );

    stops_on_the_deadline_signal(&registry, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_gadget_runs_through_the_host() {
    let (_runtime, registry) = load_example("js-gadget").await;
    let slugify = registry.get("Slugify").expect("Slugify loaded");
    assert_eq!(slugify.card.spec.label.as_deref(), Some("URL slug"));
    assert_eq!(
        slugify.card.spec.examples[1].comment.as_deref(),
        Some("Accents are dropped")
    );

    // The default separator filled in by the host, Unicode handled by
    // QuickJS, a log with fields, a reported cost, details.
    let report = registry
        .call(
            "Slugify",
            json!({"title": "Crème brûlée: 10 recipes!"}),
            "j1",
            None,
        )
        .await
        .unwrap();
    match &report.outcome {
        Ok(Outcome::Result {
            result, details, ..
        }) => {
            assert_eq!(result, "creme-brulee-10-recipes");
            assert_eq!(details.as_ref().unwrap()["words"], 4);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(report.cost, 0.0002);
    assert_eq!(report.logs[0].fields, json!({"words": 4}));

    // Refused by the schema before JavaScript runs; refused by the gadget.
    assert!(
        registry
            .call(
                "Slugify",
                json!({"title": "x", "separator": "+"}),
                "j2",
                None
            )
            .await
            .is_err()
    );
    let report = registry
        .call("Slugify", json!({"title": "!!!"}), "j3", None)
        .await
        .unwrap();
    assert_eq!(
        report.outcome,
        Err(CallError::InvalidArguments {
            message: "title has no letters or digits to make a slug of".into()
        })
    );

    stops_on_the_deadline_signal(&registry, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_gadget_runs_through_the_host() {
    let (_runtime, registry) = load_example("go-gadget").await;
    let roman = registry.get("RomanNumeral").expect("RomanNumeral loaded");
    assert_eq!(roman.card.spec.label.as_deref(), Some("Roman numeral"));
    assert_eq!(
        roman.card.spec.examples[1].comment.as_deref(),
        Some("Subtractive notation")
    );
    let report = registry
        .call("RomanNumeral", json!({"number": 1994}), "g1", None)
        .await
        .unwrap();
    match &report.outcome {
        Ok(Outcome::Result {
            result, details, ..
        }) => {
            assert_eq!(result, "MCMXCIV");
            assert_eq!(details.as_ref().unwrap()["symbols"], 7);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(report.cost, 0.0003);
    assert_eq!(report.logs[0].fields, json!({"symbols": 7}));
    assert!(
        registry
            .call("RomanNumeral", json!({"number": 0}), "g2", None)
            .await
            .is_err(),
        "the schema's minimum is enforced by the host"
    );

    stops_on_the_deadline_signal(&registry, 200).await;
}

/// `gadget new NAME --lang L`, then `gadget build`, `gadget check` and
/// `gadget call`, as the README says.
fn new_build_check_call(lang: &str) {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("word-count");
    let out = gadget(
        &[
            "new",
            "word-count",
            "--lang",
            lang,
            "--dir",
            plugin.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = gadget(&["build", plugin.to_str().unwrap()], None);
    assert!(out.status.success(), "build: {}", stderr(&out));
    let out = gadget(&["check", plugin.to_str().unwrap()], None);
    assert!(
        out.status.success(),
        "check: {}{}",
        stdout(&out),
        stderr(&out)
    );
    // A Rust template's unit test runs natively, without the host.
    if lang == "rust" {
        let out = Command::new("cargo")
            .args(["test", "--quiet"])
            .current_dir(&plugin)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cargo test: {}{}",
            stdout(&out),
            stderr(&out)
        );
    }
    // The template's example and its tests.toml case pass as created.
    let out = gadget(&["test", plugin.to_str().unwrap()], None);
    assert!(
        out.status.success()
            && stdout(&out).ends_with(if lang == "python" || lang == "js" {
                // The template's unit tests (test_app.py, app.test.js) too.
                "3 passed, 0 failed\n"
            } else {
                "2 passed, 0 failed\n"
            }),
        "test: {}{}",
        stdout(&out),
        stderr(&out)
    );
    // A JavaScript unit test runs the code as written, without a build:
    // a changed result fails it, with node's own report.
    if lang == "js" {
        let app = plugin.join("app.js");
        let source = std::fs::read_to_string(&app).unwrap();
        std::fs::write(&app, source.replace("`${words} words`", "`${words} word`")).unwrap();
        let out = gadget(&["test", plugin.to_str().unwrap()], None);
        let report = stdout(&out);
        assert!(!out.status.success(), "{report}");
        assert!(
            report.contains("✗") && report.contains("'3 word'"),
            "{report}"
        );
        std::fs::write(&app, source).unwrap();
    }
    let out = Command::new(common::gadget_bin())
        .args(["--no-cache", "--plugins"])
        .arg(&plugin)
        .args([
            "call",
            "WordCount",
            "--params",
            r#"{"text": "one two three"}"#,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "call: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3 words\n");
    // A directory that exists is refused, not overwritten.
    let again = gadget(
        &[
            "new",
            "word-count",
            "--lang",
            lang,
            "--dir",
            plugin.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn new_and_build_a_python_gadget() {
    new_build_check_call("python");
}

/// The edit-build-call loop: a syntax error is reported before the long
/// componentize step, with the file and line; a good build leaves the
/// component compiled in the cache, so the first call does not compile.
#[test]
fn python_builds_fail_fast_on_syntax_and_leave_the_cache_warm() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let plugin = dir.path().join("word-count");
    let new = gadget(
        &[
            "new",
            "word-count",
            "--lang",
            "python",
            "--dir",
            plugin.to_str().unwrap(),
        ],
        None,
    );
    assert!(new.status.success(), "{}", stderr(&new));
    let app = plugin.join("app.py");
    let good = std::fs::read_to_string(&app).unwrap();
    std::fs::write(
        &app,
        good.replace(
            "words = params[\"text\"].split()",
            "words = params[\"text\"].split(",
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let broken = Command::new(common::gadget_bin())
        .arg("--cache-dir")
        .arg(&cache)
        .args(["build", plugin.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!broken.status.success());
    let err = stderr(&broken);
    assert!(err.contains("app.py:"), "{err}");
    assert!(err.contains("nothing was built"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    std::fs::write(&app, good).unwrap();
    let built = Command::new(common::gadget_bin())
        .arg("--cache-dir")
        .arg(&cache)
        .args(["build", plugin.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    assert!(
        stderr(&built).contains("compiled into the cache"),
        "{}",
        stderr(&built)
    );
    let check = Command::new(common::gadget_bin())
        .arg("--cache-dir")
        .arg(&cache)
        .args(["check", plugin.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        stdout(&check).contains("loaded from the cache"),
        "{}",
        stdout(&check)
    );
}

#[test]
fn new_and_build_a_javascript_gadget() {
    new_build_check_call("js");
}

#[test]
fn new_and_build_a_go_gadget() {
    new_build_check_call("go");
}

#[test]
fn new_and_build_a_c_gadget() {
    new_build_check_call("c");
}

#[test]
fn new_and_build_a_rust_gadget() {
    new_build_check_call("rust");
}

#[test]
fn build_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("plugin.toml"),
        "name = \"x\"\nversion = \"0.1.0\"\ndescription = \"x\"\ncomponent = \"x.wasm\"\n",
    )
    .unwrap();
    let out = gadget(&["build", dir.path().to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot tell the language"),
        "{}",
        stderr(&out)
    );
}
