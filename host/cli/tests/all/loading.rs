//! Plugin loading: every bad plugin is one clear error naming its path,
//! and the good ones still load.

use std::path::Path;
use std::sync::Arc;

use gadget_host::loader::{
    self, CacheOutcome, ComponentCache, LoadOptions, NoProgress, PluginSource,
};
use gadget_host::runtime::{EpochMode, Outcome};
use serde_json::json;

use crate::common;

/// Writes a plugin directory with the given manifest and component bytes.
fn plugin_dir(root: &Path, dir: &str, manifest: &str, component: &[u8]) {
    let path = root.join(dir);
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("plugin.toml"), manifest).unwrap();
    std::fs::write(path.join("c.wasm"), component).unwrap();
}

fn manifest(name: &str, extra: &str) -> String {
    format!(
        "name = \"{name}\"\nversion = \"1.0.0\"\ndescription = \"test plugin\"\ncomponent = \"c.wasm\"\n{extra}"
    )
}

fn misbehave_bytes() -> Vec<u8> {
    std::fs::read(common::fixture("fixture-misbehave")).unwrap()
}

async fn load_dir(
    root: &Path,
    options: &LoadOptions,
) -> (loader::Registry, Vec<loader::LoadError>) {
    let runtime = common::runtime(EpochMode::Ticker);
    loader::load_dirs(
        runtime,
        &[root.to_path_buf()],
        options,
        Arc::new(NoProgress),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_plugins_each_give_one_error_and_the_good_one_loads() {
    let root = tempfile::tempdir().unwrap();
    let good = misbehave_bytes();
    plugin_dir(root.path(), "good", &manifest("good", ""), &good);
    // A corrupt component.
    plugin_dir(
        root.path(),
        "corrupt",
        &manifest("corrupt", ""),
        b"\0asm\x0d\0\x01\0garbage",
    );
    // A sha256 pin that does not match.
    plugin_dir(
        root.path(),
        "pinned",
        &manifest("pinned", &format!("sha256 = \"{}\"\n", "0".repeat(64))),
        &good,
    );
    // A component built for another world (a WASI command).
    let command = std::fs::read(common::guests().join("fixture-wrong-world.wasm")).unwrap();
    plugin_dir(root.path(), "command", &manifest("command", ""), &command);
    // A manifest with an unknown field.
    plugin_dir(
        root.path(),
        "typo",
        &manifest("typo", "[limits]\nmemory = 5\n"),
        &good,
    );
    // A missing component file.
    std::fs::create_dir_all(root.path().join("missing")).unwrap();
    std::fs::write(
        root.path().join("missing/plugin.toml"),
        manifest("missing", ""),
    )
    .unwrap();

    let (registry, errors) = load_dir(root.path(), &LoadOptions::default()).await;
    assert_eq!(registry.plugins().len(), 1, "only the good plugin loads");
    assert!(registry.get("echo").is_some());
    let reason_for = |dir: &str| {
        let matching: Vec<_> = errors
            .iter()
            .filter(|e| e.path == root.path().join(dir))
            .collect();
        assert_eq!(matching.len(), 1, "{dir}: {errors:#?}");
        matching[0].reason.to_string()
    };
    assert!(
        reason_for("corrupt").contains("not a valid component"),
        "{}",
        reason_for("corrupt")
    );
    let pinned = reason_for("pinned");
    assert!(
        pinned.contains("sha256 mismatch") && pinned.contains(&"0".repeat(64)),
        "{pinned}"
    );
    let command = reason_for("command");
    assert!(
        command.contains("built for another world")
            && command.contains("gadget:plugin/gadget@0.1.0")
            && command.contains("wasi:cli/run"),
        "{command}"
    );
    assert!(
        reason_for("typo").contains("unknown field `memory`"),
        "{}",
        reason_for("typo")
    );
    assert!(
        reason_for("missing").contains("cannot read: No such file"),
        "{}",
        reason_for("missing")
    );
    assert_eq!(errors.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matching_sha256_pin_loads() {
    let root = tempfile::tempdir().unwrap();
    let bytes = misbehave_bytes();
    let sha = gadget_host::runtime::cache::sha256_hex(&bytes);
    plugin_dir(
        root.path(),
        "pinned",
        &manifest("pinned", &format!("sha256 = \"{}\"\n", sha.to_uppercase())),
        &bytes,
    );
    let (registry, errors) = load_dir(root.path(), &LoadOptions::default()).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(registry.plugins()[0].artifact.sha256, sha);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_collisions_are_refused_case_insensitively() {
    let root = tempfile::tempdir().unwrap();
    let bytes = misbehave_bytes();
    plugin_dir(root.path(), "a-first", &manifest("first", ""), &bytes);
    plugin_dir(root.path(), "b-second", &manifest("second", ""), &bytes);
    plugin_dir(root.path(), "c-again", &manifest("first", ""), &bytes);
    let (registry, errors) = load_dir(root.path(), &LoadOptions::default()).await;
    // Neither plugin serves a name both claim: here every gadget, so
    // neither plugin is loaded, and each name is refused once, naming both
    // sides and the way out.
    assert_eq!(registry.gadgets().count(), 0);
    assert!(registry.plugins().is_empty());
    let second: Vec<_> = errors
        .iter()
        .filter(|e| e.path.ends_with("b-second"))
        .collect();
    assert!(!second.is_empty());
    assert_eq!(errors.len(), second.len() + 1, "{errors:#?}");
    assert!(
        second.iter().any(|e| e
            .reason
            .to_string()
            .contains("gadget 'Echo' refused in both plugin 'first'")
            && e.reason.to_string().contains("and plugin 'second'")
            && e.reason.to_string().contains("[plugins.second] prefix")),
        "{second:#?}"
    );
    let again = errors.iter().find(|e| e.path.ends_with("c-again")).unwrap();
    assert!(
        again
            .reason
            .to_string()
            .contains("a plugin named 'first' is already loaded"),
        "{}",
        again.reason
    );
    // A call to the name (in any case) says why nobody serves it.
    assert!(registry.get("ECHO").is_none());
    let why = registry.rejection("ECHO").to_string();
    assert!(
        why.contains("gadget 'Echo' is claimed by plugins 'first' and 'second'"),
        "{why}"
    );

    // Told apart by a prefix, both serve.
    let mut options = LoadOptions::default();
    options.plugins.insert(
        "second".into(),
        gadget_host::runtime::policy::PluginPolicy {
            prefix: Some("two_".into()),
            ..Default::default()
        },
    );
    let (registry, errors) = load_dir(root.path(), &options).await;
    assert!(registry.get("echo").is_some() && registry.get("TWO_echo").is_some());
    assert_eq!(errors.len(), 1, "only c-again: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_wasm_files_are_plugins_with_default_limits() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("Misbehave_Fixture.wasm"),
        misbehave_bytes(),
    )
    .unwrap();
    std::fs::write(root.path().join("notes.txt"), "not a plugin").unwrap();
    let (registry, errors) = load_dir(root.path(), &LoadOptions::default()).await;
    assert!(errors.is_empty(), "{errors:?}");
    let plugin = &registry.plugins()[0];
    assert_eq!(plugin.identity.name, "misbehave-fixture");
    assert_eq!(plugin.access.limits, gadget_host::limits::Limits::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_are_parsed_and_without_a_policy_nothing_is_granted() {
    let root = tempfile::tempdir().unwrap();
    plugin_dir(
        root.path(),
        "wants",
        &manifest(
            "wants",
            "[permissions]\nhttp = [\"api.example.com\"]\nconfig = [\"API_KEY\"]\n",
        ),
        &misbehave_bytes(),
    );
    let (registry, errors) = load_dir(root.path(), &LoadOptions::default()).await;
    assert!(errors.is_empty(), "{errors:?}");
    let plugin = &registry.plugins()[0];
    assert_eq!(
        plugin.access.requested.http,
        vec!["api.example.com".to_string()]
    );
    assert!(plugin.access.grants.grants.is_empty());
    let notes: Vec<String> = plugin
        .report
        .grant_notes
        .iter()
        .map(|n| n.to_string())
        .collect();
    let notes = notes.join("\n");
    assert!(
        notes.contains("asks for http api.example.com, not granted"),
        "{notes}"
    );
    assert!(
        notes.contains("asks for config API_KEY, not granted"),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_limits_are_applied_and_capped() {
    let root = tempfile::tempdir().unwrap();
    plugin_dir(
        root.path(),
        "limited",
        &manifest("limited", "[limits]\nmemory-mib = 8\nresult-kib = 1\n"),
        &misbehave_bytes(),
    );
    let (registry, errors) = load_dir(root.path(), &LoadOptions::default()).await;
    assert!(errors.is_empty(), "{errors:?}");
    let report = registry
        .call("Oversized", json!({ "bytes": 2000 }), "t", None)
        .await
        .unwrap();
    assert_eq!(report.outcome.unwrap_err().kind(), "result-too-large");
    let report = registry
        .call("MemoryBomb", json!({}), "t", None)
        .await
        .unwrap();
    assert_eq!(report.outcome.unwrap_err().kind(), "memory-limit");

    let ceilings = gadget_host::limits::LimitCeilings {
        memory_bytes: 4 << 20,
        ..Default::default()
    };
    let options = LoadOptions {
        ceilings,
        ..LoadOptions::default()
    };
    let (registry, _) = load_dir(root.path(), &options).await;
    let plugin = &registry.plugins()[0];
    assert_eq!(plugin.access.limits.memory_bytes, 4 << 20);
    assert!(
        plugin.report.warnings.iter().any(|w| w.contains("capped")),
        "{:?}",
        plugin.report.warnings
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_is_written_then_hit_and_untrusted_entries_are_ignored() {
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::open(&cache_dir.path().join("cache")).unwrap();
    let options = LoadOptions {
        cache: Some(cache.clone()),
        ..LoadOptions::default()
    };
    let runtime = common::runtime(EpochMode::Ticker);
    let source = PluginSource::Wasm(common::fixture("fixture-misbehave"));
    let load = |options: LoadOptions| {
        let (runtime, source) = (runtime.clone(), source.clone());
        async move {
            loader::load_plugin(&runtime, source, &options, &NoProgress)
                .await
                .unwrap()
                .0
        }
    };
    assert_eq!(
        load(options.clone()).await.artifact.cache,
        CacheOutcome::Miss
    );
    let warm = load(options.clone()).await;
    assert_eq!(warm.artifact.cache, CacheOutcome::Hit);
    // A component loaded from the cache works.
    let registry = common::load(&runtime, vec![source.clone()]).await;
    let report = registry
        .call("Echo", json!({ "text": "cached" }), "t", None)
        .await
        .unwrap();
    assert!(matches!(report.outcome, Ok(Outcome::Result { ref result, .. }) if result == "cached"));

    // An entry others can write is not trusted: it is recompiled instead.
    let entry = cache.entry_path(runtime.engine(), &warm.artifact.sha256);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(
        load(options.clone()).await.artifact.cache,
        CacheOutcome::Miss
    );
    // A corrupt entry is a miss too, never a crash.
    std::fs::write(&entry, b"not precompiled code").unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        load(options.clone()).await.artifact.cache,
        CacheOutcome::Miss
    );
    assert_eq!(load(options).await.artifact.cache, CacheOutcome::Hit);
    let mode = std::fs::metadata(cache.dir()).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "cache directory is private: {mode:o}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_plugin_directory_is_an_error_not_a_crash() {
    let (registry, errors) = load_dir(
        Path::new("/nonexistent/gadget/plugins"),
        &LoadOptions::default(),
    )
    .await;
    assert!(registry.plugins().is_empty());
    assert_eq!(errors.len(), 1);
    assert!(matches!(
        errors[0].reason,
        gadget_runtime::loader::LoadFailure::UnreadableDir(_)
    ));
    assert!(
        errors[0]
            .reason
            .to_string()
            .contains("cannot read plugin directory")
    );
}
