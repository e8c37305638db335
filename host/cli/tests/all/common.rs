//! Shared test helpers: building the guest components once per test run,
//! and loading them into a runtime.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use gadget_host::loader::{self, LoadOptions, NoProgress, PluginSource, Registry};
use gadget_host::runtime::{EpochMode, Runtime, RuntimeConfig};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// Builds every guest (plugins, example, fixtures) once, through the same
/// script the README's setup uses, and returns the guest output directory.
pub fn guests() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let status = std::process::Command::new("bash")
            .arg(workspace().join("scripts/build-guests.sh"))
            .status()
            .expect("run scripts/build-guests.sh");
        assert!(status.success(), "building the guest components failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("target"));
        let target = if target.is_absolute() {
            target
        } else {
            workspace().join(target)
        };
        target.join("wasm32-wasip2/guest")
    })
}

pub fn fixture(name: &str) -> PathBuf {
    let path = guests().join(format!("{}.wasm", name.replace('-', "_")));
    assert!(path.is_file(), "missing fixture {}", path.display());
    path
}

pub fn runtime(epoch: EpochMode) -> Arc<Runtime> {
    Arc::new(
        Runtime::new(&RuntimeConfig {
            epoch,
            pooling: false,
            ..RuntimeConfig::default()
        })
        .expect("runtime"),
    )
}

/// Loads the given sources with no cache; panics on any load error.
pub async fn load(runtime: &Arc<Runtime>, sources: Vec<PluginSource>) -> Registry {
    let (registry, errors) = loader::load_sources(
        runtime.clone(),
        sources,
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "load errors: {errors:?}");
    registry
}

/// The misbehaving fixture, loaded as a bare component.
pub async fn misbehave(runtime: &Arc<Runtime>) -> Registry {
    load(
        runtime,
        vec![PluginSource::Wasm(fixture("fixture-misbehave"))],
    )
    .await
}

/// The shipped plugins directory, built.
pub fn shipped_plugins() -> PathBuf {
    guests();
    workspace().join("plugins")
}

/// Path of the release (or debug) `gadget` binary built for these tests.
pub fn gadget_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gadget"))
}
