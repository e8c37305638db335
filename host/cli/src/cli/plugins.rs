//! Where the plugins come from and how they load: `--plugins` directories,
//! components and `oci://` references (pulled into the cache first), the
//! compile cache, and one spinner per component being compiled.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;

use gadget_runtime::Runtime;
use gadget_runtime::loader::{
    self, ComponentCache, LoadError, LoadOptions, LoadProgress, PluginSource,
};
use gadget_runtime::lockfile::Lockfile;
use gadget_runtime::oci::{Fetch, OciError, OciOptions, OciRef, OciStore, Pulled};
use gadget_runtime::policy::Policy;
use gadget_runtime::registry::Registry;
use gadget_runtime::sensitive::{HostState, HostStateKind};

use super::{GlobalArgs, compile, human_bytes, safe};

/// How to load: the policy's ceilings, grants and trust, the compile
/// cache, and under `--locked` the lock every plugin must match.
pub(super) fn load_options(global: &GlobalArgs, policy: &Policy) -> Result<LoadOptions> {
    let cache = if global.no_cache {
        None
    } else {
        match global
            .cache_dir
            .clone()
            .or_else(ComponentCache::default_dir)
        {
            Some(dir) => match ComponentCache::open(&dir) {
                Ok(cache) => Some(cache),
                Err(e) => {
                    tracing::warn!(
                        "not caching compiled components: cannot use {}: {e}",
                        dir.display()
                    );
                    None
                }
            },
            None => None,
        }
    };
    let lock = if global.locked {
        let lock = Lockfile::read(&global.lock_file)?;
        Some(Arc::new(lock))
    } else {
        None
    };
    let mut options = LoadOptions {
        compiler: compile::in_child(policy.compile_memory_bytes()),
        lock,
        ..LoadOptions::from_policy(policy, cache)
    };
    // What the flags name of the host's own state: no grant may reach it.
    // (The OCI store lives in the cache directory even without `--no-cache`'s cache.)
    let state = &mut options.host_state;
    if let Some(dir) = global
        .cache_dir
        .clone()
        .or_else(ComponentCache::default_dir)
    {
        state.push(HostState::new(HostStateKind::Cache, dir));
    }
    if let Some(journal) = &global.audit {
        state.push(HostState::new(HostStateKind::Journal, journal));
    }
    if global.locked {
        state.push(HostState::new(HostStateKind::LockFile, &global.lock_file));
    }
    Ok(options)
}

/// The plugin directories: `--plugins`, else `$GADGET_PLUGINS` (separated
/// by `:`), else the first of these that exists, found at run time (no
/// path of the build is remembered): the checkout the binary runs from
/// (`CHECKOUT/plugins`), the installed layout beside the binary
/// (`BIN/../share/gadget-host/plugins`), the user's
/// (`$XDG_DATA_HOME/gadget-host/plugins`, else
/// `~/.local/share/gadget-host/plugins`); else `./plugins`.
pub(super) fn plugin_dirs(global: &GlobalArgs) -> Vec<PathBuf> {
    if !global.plugins.is_empty() {
        return global.plugins.clone();
    }
    if let Some(dirs) = std::env::var_os("GADGET_PLUGINS").filter(|d| !d.is_empty()) {
        return std::env::split_paths(&dirs).collect();
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.canonicalize().ok())
        .and_then(|exe| Some(exe.parent()?.join("../share/gadget-host/plugins")));
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .map(|data| data.join("gadget-host/plugins"));
    let candidates = [
        super::toolchains::checkout().map(|c| c.join("plugins")),
        beside,
        data,
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(|dir| dir.canonicalize().ok().filter(|d| d.is_dir()))
        .map_or_else(|| vec![PathBuf::from("plugins")], |dir| vec![dir])
}

/// The plugins `--plugins` names, in order: each directory's plugins and
/// components, and each `oci://` reference pulled (or found in the cache).
pub(super) async fn sources(global: &GlobalArgs) -> (Vec<PluginSource>, Vec<LoadError>) {
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    for entry in plugin_dirs(global) {
        let text = entry.to_string_lossy().into_owned();
        if !OciRef::is_oci(&text) {
            let (found, failed) = loader::discover(std::slice::from_ref(&entry));
            sources.extend(found);
            errors.extend(failed);
            continue;
        }
        match pull(global, &text).await {
            Ok(pulled) => sources.push(PluginSource::Oci {
                reference: text,
                local: pulled.local,
                digest: pulled.digest,
                component_sha256: pulled.component_sha256,
            }),
            Err(e) => errors.push(LoadError::pull(&text, e)),
        }
    }
    (sources, errors)
}

/// Pulls `reference` into the cache (or finds it there); a tag whose
/// registry cannot be reached falls back to what it last named, with a
/// warning.
pub(super) async fn pull(global: &GlobalArgs, reference: &str) -> Result<Pulled, OciError> {
    let parsed = OciRef::parse(reference)?;
    let pulled = oci_store(global)?
        .pull(&parsed, &oci_options(global))
        .await?;
    if let Fetch::CachedOffline { reason } = &pulled.fetch
        && !global.quiet
    {
        eprintln!(
            "warning: {}: the registry cannot be reached ({}); using {}, pulled earlier",
            safe::safe(reference),
            safe::safe(reason),
            pulled.digest
        );
    }
    Ok(pulled)
}

/// Pulled plugins live beside the compiled ones (`--cache-dir`).
pub(super) fn oci_store(global: &GlobalArgs) -> Result<OciStore, OciError> {
    let dir = global
        .cache_dir
        .clone()
        .or_else(ComponentCache::default_dir)
        .ok_or_else(|| OciError::Io {
            path: PathBuf::from("$HOME"),
            source: std::io::Error::other(
                "no cache directory for pulled plugins: set --cache-dir or GADGET_CACHE_DIR",
            ),
        })?;
    OciStore::open(&dir)
}

pub(super) fn oci_options(global: &GlobalArgs) -> OciOptions {
    OciOptions {
        insecure: global.insecure_registries.clone(),
    }
}

/// Loads the plugins; reports each load error. `None` when none loaded
/// and some failed, or under `--strict` when any failed.
pub(super) async fn load(
    runtime: &Arc<Runtime>,
    global: &GlobalArgs,
    options: &LoadOptions,
) -> Result<Option<Registry>> {
    let (sources, mut errors) = sources(global).await;
    let progress = Arc::new(CompileBars::new());
    let (registry, load_errors) =
        loader::load_sources(runtime.clone(), sources, options, progress.clone()).await;
    errors.extend(load_errors);
    progress.finish();
    for error in &errors {
        eprintln!(
            "{}: {}",
            if global.strict { "error" } else { "warning" },
            safe::safe(&error.to_string())
        );
    }
    // A grant given and not applied is a mistake in the policy: one line
    // each. A request not granted is not (a shipped plugin that merely
    // lacks a grant): `list`, `check` and a call to its gadgets say it.
    for plugin in registry.plugins().iter().filter(|_| !global.quiet) {
        for note in plugin.report.grant_notes.iter().filter(|n| n.is_warning()) {
            eprintln!(
                "warning: plugin '{}': {}",
                plugin.identity.name,
                safe::safe(&note.to_string())
            );
        }
    }
    // A locked plugin that is not there at all is not a difference the
    // loader sees: said here.
    if let Some(lock) = &options.lock {
        for locked in &lock.plugins {
            if registry
                .plugins()
                .iter()
                .all(|p| p.identity.name != locked.name)
                && !global.quiet
            {
                eprintln!(
                    "warning: plugin '{}' is in {} but did not load (from {})",
                    locked.name,
                    global.lock_file.display(),
                    safe::safe(&locked.source)
                );
            }
        }
    }
    // Plugins were asked for and none loaded: every call would fail as
    // unknown, so this is the command's failure, not a warning.
    if !errors.is_empty() && registry.plugins().is_empty() {
        eprintln!(
            "error: no plugin loaded ({} failed, the reasons above)",
            errors.len()
        );
        return Ok(None);
    }
    if global.strict && !errors.is_empty() {
        eprintln!(
            "error: {} plugin(s) failed to load (--strict)",
            errors.len()
        );
        return Ok(None);
    }
    // A locked deployment that carries on without a refused plugin does so
    // by choice: say how to make it stop instead.
    if global.locked && !errors.is_empty() && !global.quiet {
        eprintln!(
            "note: the rest runs without the {} plugin(s) above; add --strict to stop instead (a locked deployment usually wants that)",
            errors.len()
        );
    }
    Ok(Some(registry))
}

/// One spinner per component being compiled, only on a terminal.
pub(super) struct CompileBars {
    multi: Option<indicatif::MultiProgress>,
    bars: Mutex<Vec<(String, indicatif::ProgressBar)>>,
}

impl CompileBars {
    pub(super) fn new() -> CompileBars {
        let multi = std::io::stderr()
            .is_terminal()
            .then(indicatif::MultiProgress::new);
        CompileBars {
            multi,
            bars: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn finish(&self) {
        for (_, bar) in self
            .bars
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            bar.finish_and_clear();
        }
    }
}

impl LoadProgress for CompileBars {
    fn compiling(&self, plugin: &str, bytes: u64) {
        let Some(multi) = &self.multi else { return };
        let bar = multi.add(indicatif::ProgressBar::new_spinner());
        bar.set_message(format!(
            "compiling {plugin} ({}) — cached for next time",
            human_bytes(bytes)
        ));
        bar.enable_steady_tick(Duration::from_millis(100));
        self.bars
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((plugin.to_string(), bar));
    }

    fn compiled(&self, plugin: &str) {
        let mut bars = self.bars.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(index) = bars.iter().position(|(name, _)| name == plugin) {
            bars.remove(index).1.finish_and_clear();
        }
    }
}
