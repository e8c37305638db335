//! Hostile plugins, specs, schemas and outputs, one class per test, as an
//! attacker would write them: each is refused or contained with a message
//! that names the limit, quickly, and the rest of the host carries on.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use gadget_host::loader::{LoadOptions, NoProgress, PluginSource, load_sources};
use gadget_host::runtime::{CallError, EpochMode, Runtime, RuntimeConfig};

use crate::cli::{gadget, stderr, stdout};
use crate::common;
use crate::languages::built;

fn fixture_dir(name: &str) -> PathBuf {
    built(&common::workspace().join("tests/fixtures").join(name))
}

fn names(list_json: &str) -> Vec<(String, String)> {
    let items: Vec<Value> = serde_json::from_str(list_json).expect("list --json");
    items
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap().to_string(),
                g["plugin"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn hostile_specs_are_refused_one_by_one_and_the_rest_of_the_plugin_loads() {
    let hostile = fixture_dir("hostile-specs");
    let out = gadget(
        &["--plugins", hostile.to_str().unwrap(), "list", "--json"],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let loaded = names(&stdout(&out));
    let has = |name: &str| loaded.iter().any(|(n, _)| n == name);
    assert!(has("Fine") && has("DefaultBomb"), "{loaded:?}");
    for refused in [
        "HugeDescription",
        "HugeLabel",
        "ManyExamples",
        "ExponentialSchema",
        "DeepSchema",
        "RefLoop",
    ] {
        assert!(!has(refused), "{refused} loaded: {loaded:?}");
    }
    // The built-in viewer is not a plugin's to serve, and a name two
    // plugins claim (the shipped Calculator's) is served by neither.
    assert!(
        !loaded
            .iter()
            .any(|(n, _)| n == "GadgetOutputViewer" || n == "Calculator"),
        "{loaded:?}"
    );
    let err = stderr(&out);
    for reason in [
        "'GadgetOutputViewer' is the name of a tool built into the host",
        "gadget 'HugeDescription' refused: description is 120000 bytes, over the limit of 8192",
        "is 100 bytes, over the limit of 64",
        "label is 6000 bytes, over the limit of 128",
        "20 examples, over the limit of 16",
        "gadget 'ExponentialSchema' refused: parameters schema is refused: validating one value at",
        "over the limit of 1000",
        "nested 82 levels deep, over the limit of 64",
        "$ref cycle through /$defs/a",
        "gadget 'Calculator' refused in both plugin 'calculator'",
        "and plugin 'hostile-specs'",
        "[plugins.hostile-specs] prefix",
    ] {
        assert!(err.contains(reason), "missing {reason:?} in:\n{err}");
    }

    // `check` says the same, gadget by gadget, and fails.
    let out = gadget(&["check", hostile.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("✓ gadget Fine"), "{text}");
    assert!(text.contains("✗ gadget 'RefLoop' refused"), "{text}");
    assert!(
        text.contains("FAIL (8 gadget(s) refused; the others load)"),
        "{text}"
    );
}

#[test]
fn the_operator_resolves_a_collision_with_a_prefix_and_calls_reach_the_component() {
    let hostile = fixture_dir("hostile-specs");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[plugins.hostile-specs]\nprefix = \"hs_\"\n").unwrap();
    let base = [
        "--config",
        config.to_str().unwrap(),
        "--plugins",
        hostile.to_str().unwrap(),
    ];
    let out = gadget(&[&base[..], &["list", "--json"]].concat(), None);
    let loaded = names(&stdout(&out));
    assert!(
        loaded.contains(&("hs_Calculator".into(), "hostile-specs".into()))
            && loaded.contains(&("Calculator".into(), "calculator".into())),
        "{loaded:?}"
    );
    assert!(
        !stderr(&out).contains("refused in both"),
        "{}",
        stderr(&out)
    );
    let out = gadget(
        &[&base[..], &["call", "hs_Fine", "--params", "{}"]].concat(),
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "ok");
}

#[test]
fn a_component_declaring_ten_thousand_gadgets_is_refused_quickly() {
    let flood = fixture_dir("spec-flood");
    let started = Instant::now();
    let out = gadget(&["check", flood.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("declares 10000 gadgets, over the limit of 256 per component"),
        "{}",
        stdout(&out)
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn defaults_cannot_expand_a_call_without_bound() {
    let hostile = fixture_dir("hostile-specs");
    let items = vec![json!({}); 1000];
    let params = json!({ "items": items }).to_string();
    let out = gadget(
        &[
            "--plugins",
            hostile.to_str().unwrap(),
            "call",
            "DefaultBomb",
            "--params",
            &params,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("filling in default values would add more than 1048576 bytes"),
        "{}",
        stderr(&out)
    );
}

/// A plugin directory whose `plugin.toml` names `component`.
fn plugin(root: &Path, name: &str, component: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"test\"\ncomponent = \"{component}\"\n"
        ),
    )
    .unwrap();
    dir
}

#[test]
fn plugin_files_must_be_small_regular_files_inside_the_plugin() {
    let root = tempfile::tempdir().unwrap();
    let plugins = root.path().join("plugins");
    let outside = root.path().join("outside.wasm");
    std::fs::copy(common::fixture("fixture-misbehave"), &outside).unwrap();

    let good = plugin(&plugins, "good", "good.wasm");
    std::fs::copy(common::fixture("fixture-misbehave"), good.join("good.wasm")).unwrap();
    let link = plugin(&plugins, "link-out", "c.wasm");
    std::os::unix::fs::symlink(&outside, link.join("c.wasm")).unwrap();
    let zero = plugin(&plugins, "dev-zero", "c.wasm");
    std::os::unix::fs::symlink("/dev/zero", zero.join("c.wasm")).unwrap();
    let fifo = plugin(&plugins, "fifo", "c.wasm");
    let fifo_path = std::ffi::CString::new(fifo.join("c.wasm").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(fifo_path.as_ptr(), 0o600) }, 0);
    plugin(&plugins, "dot-dot", "../outside.wasm");
    plugin(&plugins, "absolute", outside.to_str().unwrap());
    let manifest_fifo = plugins.join("manifest-link");
    std::fs::create_dir_all(&manifest_fifo).unwrap();
    std::os::unix::fs::symlink(
        root.path().join("elsewhere.toml"),
        manifest_fifo.join("plugin.toml"),
    )
    .unwrap();
    std::fs::write(
        root.path().join("elsewhere.toml"),
        "name = \"manifest-link\"\nversion = \"0.1.0\"\ndescription = \"x\"\ncomponent = \"c.wasm\"\n",
    )
    .unwrap();

    let started = Instant::now();
    let out = std::process::Command::new(common::gadget_bin())
        .args(["--no-cache", "--plugins"])
        .arg(&plugins)
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the load stalled"
    );
    assert!(out.status.success());
    let loaded = names(&String::from_utf8_lossy(&out.stdout));
    assert!(
        loaded.iter().any(|(n, p)| n == "Echo" && p == "good"),
        "{loaded:?}"
    );
    assert!(loaded.iter().all(|(_, p)| p == "good"), "{loaded:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    for (plugin, reason) in [
        ("link-out", "outside the plugin directory"),
        (
            "dot-dot",
            "must be a relative path inside the plugin directory",
        ),
        (
            "absolute",
            "must be a relative path inside the plugin directory",
        ),
        ("dev-zero", "outside the plugin directory"),
        ("fifo", "is not a regular file"),
        ("manifest-link", "outside the plugin directory"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(plugin) && l.contains(reason)),
            "{plugin}: {reason:?} missing in:\n{err}"
        );
    }
}

#[test]
fn a_device_inside_the_plugin_is_refused_before_it_is_read() {
    // /dev is the "plugin directory": the device is inside it, so only the
    // file-type check stands between the host and reading forever.
    let runtime = common::runtime(EpochMode::Ticker);
    let error = tokio::runtime::Runtime::new().unwrap().block_on(async {
        gadget_host::loader::load_plugin(
            &runtime,
            PluginSource::Wasm(PathBuf::from("/dev/zero")),
            &LoadOptions::default(),
            &NoProgress,
        )
        .await
        .unwrap_err()
    });
    assert!(
        error.reason.to_string().contains("is not a regular file"),
        "{error}"
    );
}

#[test]
fn the_policy_file_is_strict_and_its_ceilings_cap_manifests_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[limits]\nmax-memry-mib = 64\n").unwrap();
    let out = gadget(&["--config", config.to_str().unwrap(), "list"], None);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("unknown field `max-memry-mib`") && err.contains("(line 2: "),
        "{err}"
    );

    let plugins = dir.path().join("plugins");
    let greedy = plugin(&plugins, "greedy", "c.wasm");
    std::fs::copy(common::fixture("fixture-misbehave"), greedy.join("c.wasm")).unwrap();
    let manifest = greedy.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text + "\n[limits]\nmemory-mib = 4096\ntimeout-ms = 3600000\n",
    )
    .unwrap();
    std::fs::write(&config, "[limits]\nmax-memory-mib = 512\n").unwrap();
    let out = gadget(
        &[
            "--config",
            config.to_str().unwrap(),
            "--plugins",
            plugins.to_str().unwrap(),
            "describe",
            "Echo",
            "--json",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "asks for memory (bytes) of 4294967296, capped at the operator's ceiling of 536870912"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "asks for timeout (ms) of 3600000, capped at the operator's ceiling of 120000"
        ),
        "{err}"
    );
    let described: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        described["limits"]["memory_bytes"],
        512 << 20,
        "{described}"
    );
}

#[test]
fn terminal_escapes_from_a_gadget_are_shown_not_obeyed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        common::fixture("fixture-misbehave"),
        dir.path().join("misbehave.wasm"),
    )
    .unwrap();
    let response = "!!!GADGET_START:Escapes:e1\n!!!GADGET_END\n";
    let out = gadget(
        &["--plugins", dir.path().to_str().unwrap(), "run", "-"],
        Some(response),
    );
    let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
    let text = String::from_utf8_lossy(&all);
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{text:?}"
    );
    assert!(text.contains("\\x1b]0;pwned\\x07"), "{text}");
    assert!(text.contains("\\u{202e}"), "{text}");
    // The fake success line is indented under the real one.
    assert!(
        !text.lines().any(|l| l.starts_with("✓ Calculator")),
        "{text}"
    );
    let out = gadget(
        &["--plugins", dir.path().to_str().unwrap(), "call", "Escapes"],
        None,
    );
    let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
    assert!(!all.contains(&0x1b), "{:?}", String::from_utf8_lossy(&all));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_memory_budget_refuses_growth_other_calls_would_need() {
    let runtime = std::sync::Arc::new(
        Runtime::new(&RuntimeConfig {
            memory_budget: Some(64 << 20),
            ..RuntimeConfig::default()
        })
        .unwrap(),
    );
    let registry = common::misbehave(&runtime).await;
    let report = registry
        .call("MemoryBomb", json!({}), "b1", None)
        .await
        .unwrap();
    let error = report.outcome.unwrap_err();
    assert!(
        matches!(error, CallError::MemoryBudget { budget_bytes, .. } if budget_bytes == 64 << 20),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("the host's budget of 64 MiB for all running calls is in use"),
        "{error}"
    );
    // The bomb's memory went back to the budget: the next call runs.
    let report = registry
        .call("Echo", json!({ "text": "after" }), "e1", None)
        .await
        .unwrap();
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
}

#[test]
fn stop_on_error_cancels_the_calls_already_running() {
    let response = "!!!GADGET_START:Sleep:long\n!!!ARG:ms\n2500\n!!!GADGET_END\n\
        !!!GADGET_START:Calculator:bad\n!!!ARG:operation\ndivide\n!!!ARG:a\n1\n!!!ARG:b\n0\n!!!GADGET_END\n";
    let out = gadget(&["run", "--json", "--stop-on-error", "-"], Some(response));
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let finished = |id: &str| {
        events
            .iter()
            .find(|e| e["type"] == "call_finished" && e["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} did not finish: {events:?}"))
    };
    assert_eq!(finished("bad")["error"]["kind"], "invalid-arguments");
    let long = finished("long");
    assert_eq!(long["error"]["kind"], "cancelled", "{events:?}");
    // Cancelled at once, not after its 2.5 s sleep (the process's own
    // start-up, which compiles the plugins, is not part of this).
    assert!(long["duration_ms"].as_f64().unwrap() < 1500.0, "{long}");
}

#[test]
fn details_reach_the_run_events() {
    let response = "!!!GADGET_START:Calculator:c1\n!!!ARG:operation\nadd\n!!!ARG:a\n2\n!!!ARG:b\n3\n!!!GADGET_END\n";
    let out = gadget(&["run", "--json", "-"], Some(response));
    let finished: Value = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "call_finished")
        .unwrap();
    assert_eq!(finished["details"], json!({ "value": 5.0 }), "{finished}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_are_read_once_and_then_come_from_the_cache() {
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = gadget_host::loader::ComponentCache::open(cache_dir.path()).unwrap();
    let options = LoadOptions {
        cache: Some(cache),
        ..LoadOptions::default()
    };
    let runtime = common::runtime(EpochMode::Ticker);
    let source = || vec![PluginSource::Wasm(common::fixture("fixture-misbehave"))];
    let load = |options: LoadOptions| {
        let runtime = runtime.clone();
        async move { load_sources(runtime, source(), &options, std::sync::Arc::new(NoProgress)).await }
    };
    let (registry, errors) = load(options.clone()).await;
    assert!(errors.is_empty(), "{errors:?}");
    let description = registry.get("Echo").unwrap().card.spec.description.clone();
    let entry = std::fs::read_dir(cache_dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains(".specs-"))
        .expect("a specs entry beside the compiled code");
    // Remembered: the next load reads the entry and writes nothing (a
    // specs read again would be stored again, as a new file).
    use std::os::unix::fs::MetadataExt as _;
    let inode = std::fs::metadata(&entry).unwrap().ino();
    let (registry, _) = load(options.clone()).await;
    assert_eq!(
        registry.get("Echo").unwrap().card.spec.description,
        description
    );
    assert_eq!(std::fs::metadata(&entry).unwrap().ino(), inode);
    // Rewritten by anything but the host: not believed, read again from
    // the component (and stored anew).
    let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
    assert!(text.contains(&description));
    std::fs::write(&entry, text.replace(&description, "Forged.")).unwrap();
    let (registry, _) = load(options).await;
    assert_eq!(
        registry.get("Echo").unwrap().card.spec.description,
        description
    );
}

#[test]
fn compilation_runs_in_a_child_process_under_a_memory_budget() {
    // CPython's component needs a few hundred MiB to compile: under a 64
    // MiB budget the compiling child runs out and the plugin is refused,
    // while the host itself carries on and lists the others.
    let python = built(&common::workspace().join("examples/python-gadget"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[limits]\ncompile-memory-mib = 64\n").unwrap();
    let out = gadget(
        &[
            "--config",
            config.to_str().unwrap(),
            "--plugins",
            python.to_str().unwrap(),
            "list",
            "--json",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("compiling needed more than its memory budget of 64 MiB"),
        "{}",
        stderr(&out)
    );
    let loaded = names(&stdout(&out));
    assert!(loaded.iter().any(|(n, _)| n == "Calculator"), "{loaded:?}");
    assert!(
        !loaded.iter().any(|(n, _)| n == "WordFrequency"),
        "{loaded:?}"
    );
    // With the default budget the same component compiles (in a child too).
    let out = gadget(
        &["--plugins", python.to_str().unwrap(), "list", "--json"],
        None,
    );
    assert!(
        names(&stdout(&out))
            .iter()
            .any(|(n, _)| n == "WordFrequency")
    );
}

/// A plugin that declares its gadget `exclusive` holds only its own calls:
/// the shipped Calculator, written after it in the same response, finishes
/// while it holds. Only the operator's policy lets a plugin hold the run.
#[test]
fn a_plugins_exclusive_gadget_holds_only_its_own_calls() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("response.txt");
    std::fs::write(
        &file,
        "!!!GADGET_START:Hold:h\n!!!ARG:ms\n1500\n!!!GADGET_END\n\
         !!!GADGET_START:Calculator:c\n!!!ARG:operation\nadd\n!!!ARG:a\n1\n!!!ARG:b\n2\n!!!GADGET_END\n",
    )
    .unwrap();
    let finish_order = |policy: Option<&str>| -> Vec<String> {
        let out = crate::capabilities::run(policy, &[], &["run", "--json", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["type"] == "call_finished")
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(finish_order(None), ["c", "h"], "the plugin held the run");
    let held = finish_order(Some("[plugins.probe]\nrun-exclusive = true\n"));
    assert_eq!(held, ["h", "c"], "the operator lets it hold the run");
}
