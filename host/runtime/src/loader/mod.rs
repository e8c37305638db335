//! Plugin directories → manifests → compiled, pre-instantiated gadgets.
//!
//! Each `--plugins DIR` holds plugins: a subdirectory with `plugin.toml`
//! and its component, or a bare `.wasm` file (default limits, no
//! permissions). A directory that itself has a `plugin.toml` is one plugin.
//! Loading is concurrent and fault-isolated: every bad plugin yields one
//! [`LoadError`] naming its path and the reason, and the others still load.
//! Gadget names are unique across all plugins, compared case-insensitively
//! (as llmist does): a name two plugins claim is served by neither until
//! the operator's policy gives one a prefix, and a plugin whose name is
//! taken is refused; each error names both sides.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::cache::{CacheOutcome, ComponentCache};
use crate::grants::CallGrants;
pub use crate::manifest::{Manifest, Permissions};
use crate::policy::{GadgetRules, PluginPolicy};
use crate::provenance::Verification;
pub use crate::registry::Registry;
use crate::sensitive::{HostState, HostStateKind};

use crate::policy::Policy;
use crate::{GadgetSpec, PluginPre, Runtime, RuntimeError, cache, manifest};
use gadget_core::limits::{LimitCeilings, Limits, RequestedLimits};

#[cfg(test)]
mod tests;

mod served;
use served::Served;

pub use crate::plugin::{
    Artifact, Identity, LoadError, LoadFailure, LoadReport, LoadedGadget, Plugin, PluginAccess,
    PluginSource, RefusedGadget, Standing,
};
pub use crate::plugin_files::read_plugin_file;

pub use crate::specs::{
    MAX_DESCRIPTION_BYTES, MAX_EXAMPLE_PART_BYTES, MAX_EXAMPLES, MAX_GADGET_NAME_BYTES,
    MAX_GADGETS_PER_COMPONENT, MAX_LABEL_BYTES, MAX_SPECS_TOTAL_BYTES, check_gadget_name,
    check_spec,
};

/// Largest component file read, in bytes: CPython and SpiderMonkey
/// components are under 20 MiB; 256 MiB bounds a hostile or mistaken file.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// Wall time for compiling one component: the largest guests here (CPython,
/// SpiderMonkey) take about 20 s on one core; past this the plugin is
/// reported as failed and the others load on (the compiler thread cannot
/// be stopped, but nothing waits for it).
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(120);

/// Told about slow steps, for progress bars.
pub trait LoadProgress: Send + Sync {
    /// Compilation of a plugin's component started (a cache miss).
    fn compiling(&self, _plugin: &str, _bytes: u64) {}
    /// ... and finished.
    fn compiled(&self, _plugin: &str) {}
}

/// Progress that goes nowhere.
pub struct NoProgress;
impl LoadProgress for NoProgress {}

/// Compiles a component's bytes into precompiled code somewhere other than
/// this process: the CLI runs a child process under a memory limit, so an
/// adversarial component cannot make the compiler take the host's memory.
#[derive(Clone)]
pub struct ExternalCompiler(pub Arc<CompileFn>);

/// Component bytes in, precompiled bytes (or why not) out.
pub type CompileFn = dyn Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync;

impl std::fmt::Debug for ExternalCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExternalCompiler")
    }
}

/// What a plugin's signature is said to be when the policy has no
/// `[trust]` (nothing was verified, so nothing is claimed).
pub const NOT_CHECKED: &str = "not checked";

/// How to load.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub cache: Option<ComponentCache>,
    pub ceilings: LimitCeilings,
    /// Per plugin name, what the operator says of it: a prefix for its
    /// gadget names, and its grants.
    pub plugins: BTreeMap<String, PluginPolicy>,
    /// Which gadgets are served at all.
    pub gadget_rules: GadgetRules,
    /// Where components are compiled; `None`: in this process.
    pub compiler: Option<ExternalCompiler>,
    /// The policy file the grants come from: no grant opens its tree.
    pub policy_file: Option<PathBuf>,
    /// Whose signatures count, and whether one is required; `None`: the
    /// policy asks nothing of signatures.
    pub trust: Option<Arc<crate::provenance::Trust>>,
    /// `--locked`: every plugin must be what this lock pins.
    pub lock: Option<Arc<crate::lockfile::Lockfile>>,
    /// The host's own state (cache, journal, lock file, keys): no file
    /// grant may reach it. [`LoadOptions::from_policy`] fills in what the
    /// policy names; the front end adds what its flags name.
    pub host_state: Vec<HostState>,
}

impl LoadOptions {
    /// What the operator's policy says about loading.
    pub fn from_policy(policy: &Policy, cache: Option<ComponentCache>) -> LoadOptions {
        let cache_dir = cache.as_ref().map(|c| c.dir().to_path_buf());
        LoadOptions {
            cache,
            ceilings: policy.ceilings(),
            plugins: policy.plugins.clone(),
            gadget_rules: policy.gadgets.clone(),
            compiler: None,
            policy_file: policy.file.clone(),
            trust: {
                let base = policy
                    .file
                    .as_deref()
                    .and_then(Path::parent)
                    .unwrap_or(Path::new("."));
                crate::provenance::Trust::from_policy(policy, base).map(Arc::new)
            },
            lock: None,
            host_state: LoadOptions::policy_state(policy, cache_dir),
        }
    }

    /// The host state the policy names: its signers' key files and its
    /// journal, and the cache directory in use.
    fn policy_state(policy: &Policy, cache_dir: Option<PathBuf>) -> Vec<HostState> {
        let base = policy
            .file
            .as_deref()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        let mut state: Vec<HostState> = cache_dir
            .into_iter()
            .map(|dir| HostState::new(HostStateKind::Cache, dir))
            .collect();
        state.extend(
            policy
                .trust
                .signers
                .values()
                .filter(|s| !s.key.trim().starts_with("-----BEGIN"))
                .map(|s| HostState::new(HostStateKind::TrustKey, base.join(s.key.trim()))),
        );
        state.extend(
            policy
                .audit
                .file
                .iter()
                .map(|f| HostState::new(HostStateKind::Journal, f)),
        );
        state.extend(
            crate::policy::state_dir().map(|dir| HostState::new(HostStateKind::State, dir)),
        );
        state
    }
}

/// Finds the plugins in each directory, in a stable order.
pub fn discover(dirs: &[PathBuf]) -> (Vec<PluginSource>, Vec<LoadError>) {
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    for dir in dirs {
        if dir.join(manifest::MANIFEST_FILE).is_file() {
            sources.push(PluginSource::Dir(dir.clone()));
            continue;
        }
        // A component named itself (whatever its file name says: the
        // loader tells a file that is not one).
        if dir.is_file() {
            sources.push(PluginSource::Wasm(dir.clone()));
            continue;
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                errors.push(LoadError::new(dir, LoadFailure::UnreadableDir(e)));
                continue;
            }
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            if path.is_dir() {
                if path.join(manifest::MANIFEST_FILE).is_file() {
                    sources.push(PluginSource::Dir(path));
                } else {
                    tracing::debug!(path = %path.display(), "skipping directory without plugin.toml");
                }
            } else if path.extension().is_some_and(|e| e == "wasm") {
                sources.push(PluginSource::Wasm(path));
            }
        }
    }
    (sources, errors)
}

/// Loads every plugin in `dirs` concurrently. Returns the registry of those
/// that loaded and one error per plugin that did not.
pub async fn load_dirs(
    runtime: Arc<Runtime>,
    dirs: &[PathBuf],
    options: &LoadOptions,
    progress: Arc<dyn LoadProgress>,
) -> (Registry, Vec<LoadError>) {
    let (sources, mut errors) = discover(dirs);
    let (registry, load_errors) = load_sources(runtime, sources, options, progress).await;
    errors.extend(load_errors);
    (registry, errors)
}

/// Loads the given plugins concurrently (see [`load_dirs`]).
pub async fn load_sources(
    runtime: Arc<Runtime>,
    sources: Vec<PluginSource>,
    options: &LoadOptions,
    progress: Arc<dyn LoadProgress>,
) -> (Registry, Vec<LoadError>) {
    let mut tasks = tokio::task::JoinSet::new();
    for (index, source) in sources.into_iter().enumerate() {
        let runtime = runtime.clone();
        let options = options.clone();
        let progress = progress.clone();
        tasks.spawn(async move {
            (
                index,
                load_plugin(&runtime, source, &options, progress.as_ref()).await,
            )
        });
    }
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, result)) => loaded.push((index, result)),
            // A panic while loading one plugin is a bug, but it must not
            // take the other plugins down with it.
            Err(e) => errors.push(LoadError::new(
                Path::new("(loader)"),
                LoadFailure::LoaderFailed(e.to_string()),
            )),
        }
    }
    // Collisions are decided in discovery order, not completion order, so
    // the same directories always give the same registry.
    loaded.sort_by_key(|(index, _)| *index);
    let nested = {
        let plugins: Vec<(&str, &[crate::grants::DirGrant])> = loaded
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|(p, _)| (p.identity.name.as_str(), &p.access.grants.grants.files[..]))
            .collect();
        crate::files::nested_grant_notes(&plugins)
    };
    for (which, note) in nested {
        // Each plugin is still this loader's alone (its Arc not shared yet).
        if let Some(plugin) = loaded
            .iter_mut()
            .filter_map(|(_, r)| r.as_mut().ok())
            .nth(which)
            .and_then(|(plugin, _)| Arc::get_mut(plugin))
        {
            plugin.report.warnings.push(note);
        }
    }
    let mut registry = Registry::default();
    for (_, result) in loaded {
        match result {
            Ok((plugin, gadgets)) => {
                for warning in &plugin.report.warnings {
                    tracing::warn!(plugin = %plugin.identity.name, "{warning}");
                }
                let path = plugin.artifact.source.path().to_path_buf();
                errors.extend(plugin.report.refused.iter().map(|refused| {
                    LoadError::new(&path, LoadFailure::GadgetRefused(refused.clone()))
                }));
                errors.extend(registry.insert(plugin, gadgets));
            }
            Err(e) => errors.push(e),
        }
    }
    errors.extend(registry.resolve_catalog_claims());
    // Whole plugins that did not load (a refused gadget or a contested
    // name leaves the rest of its plugin loaded).
    registry.set_failed_plugins(
        errors
            .iter()
            .filter(|e| {
                !matches!(
                    e.reason,
                    LoadFailure::GadgetRefused(_)
                        | LoadFailure::NameContested { .. }
                        | LoadFailure::NameHeld { .. }
                        | LoadFailure::CatalogClash(_)
                )
            })
            .count(),
    );
    (registry, errors)
}

/// Loads one plugin: manifest, bytes and pin, compile (or cache), world
/// check, specs, schemas and examples.
pub async fn load_plugin(
    runtime: &Arc<Runtime>,
    source: PluginSource,
    options: &LoadOptions,
    progress: &dyn LoadProgress,
) -> Result<(Arc<Plugin>, Vec<LoadedGadget>), LoadError> {
    let started = Instant::now();
    // Errors name the plugin as the operator did (a path, or its oci:// reference).
    let shown = PathBuf::from(source.origin());
    let fail = |reason: LoadFailure| LoadError::new(&shown, reason);
    let read = read_artifact(&source).map_err(fail)?;
    // Before anything is compiled: an untrusted component costs nothing.
    let provenance = vouch(&read, &source, options).map_err(fail)?;
    let Read {
        manifest,
        manifest_sha256,
        component_path,
        bytes,
        sha256,
    } = read;
    let size = bytes.len() as u64;
    let (component, cache_outcome) =
        compile_cached(runtime, &manifest.name, &bytes, &sha256, options, progress)
            .await
            .map_err(|message| {
                fail(LoadFailure::Compile {
                    component: component_path.clone(),
                    message,
                })
            })?;
    let pre = runtime.prepare(&component).map_err(|e| fail(e.into()))?;
    let (limits, mut warnings) = options.ceilings.grant(&manifest.limits);
    let (grants, grant_notes, standing) = grants_of(&manifest, &source, &provenance, options);
    let grants = Arc::new(CallGrants::new(&manifest.name, grants));
    let specs = read_specs_cached(runtime, &pre, &limits, &sha256, options)
        .await
        .map_err(|e| fail(e.into()))?;
    let catalog = runtime
        .read_catalog(&pre, &limits)
        .await
        .map_err(|e| fail(e.into()))?;
    let settings = options.plugins.get(&manifest.name);
    let prefix = settings.and_then(|p| p.prefix.clone());
    let run_exclusive = settings.is_some_and(|p| p.run_exclusive);
    let served = Served {
        manifest: &manifest,
        limits: &limits,
        prefix: prefix.as_deref(),
        run_exclusive,
        gadget_rules: &options.gadget_rules,
        ceilings: &options.ceilings,
    };
    let (gadgets, refused, denied) = served.gadgets(specs, &mut warnings).map_err(fail)?;
    let origin = Arc::new(gadget_core::tool::Origin {
        plugin: manifest.name.clone(),
        digest: sha256.clone(),
        source: source.origin(),
        signature: provenance
            .as_ref()
            .map_or_else(|| NOT_CHECKED.to_string(), Verification::describe),
    });
    let plugin = Plugin {
        origin,
        identity: Identity {
            name: manifest.name,
            version: manifest.version,
            description: manifest.description,
            prefix,
        },
        artifact: Artifact {
            source,
            component_path,
            sha256,
            manifest_sha256,
            provenance,
            component_bytes: size,
            cache: cache_outcome,
            load_time: started.elapsed(),
        },
        access: PluginAccess {
            limits,
            requested: manifest.permissions,
            annotations: manifest.annotations,
            tasks: manifest.tasks,
            grants,
        },
        report: LoadReport {
            grant_notes,
            warnings,
            denied,
            refused,
        },
        standing,
        catalog,
        pre,
        runtime: runtime.clone(),
    };
    Ok((Arc::new(plugin), gadgets))
}

/// A plugin as read from its source: its manifest, its component's bytes
/// and their digests, each checked against what pins it.
struct Read {
    manifest: Manifest,
    manifest_sha256: Option<String>,
    component_path: PathBuf,
    bytes: Vec<u8>,
    sha256: String,
}

/// Reads the manifest and the component (bounded), and checks the
/// component against what the registry sent and what the manifest pins.
fn read_artifact(source: &PluginSource) -> Result<Read, LoadFailure> {
    let local = source.local();
    let (manifest, manifest_sha256) = match &local {
        PluginSource::Dir(dir) => {
            let (manifest, digest) = Manifest::from_dir_with_digest(dir)?;
            (manifest, Some(digest))
        }
        _ => (bare_manifest(local.path())?, None),
    };
    let (root, component_path) = match &local {
        PluginSource::Dir(dir) => (dir.clone(), dir.join(&manifest.component)),
        PluginSource::Wasm(file) | PluginSource::Oci { local: file, .. } => (
            file.parent().unwrap_or(Path::new(".")).to_path_buf(),
            file.clone(),
        ),
    };
    let bytes =
        read_plugin_file(&root, &component_path, MAX_COMPONENT_BYTES).map_err(|reason| {
            LoadFailure::UnreadableComponent {
                component: component_path.clone(),
                reason,
            }
        })?;
    let sha256 = cache::sha256_hex(&bytes);
    if let PluginSource::Oci {
        reference,
        digest,
        component_sha256,
        ..
    } = source
        && !component_sha256.eq_ignore_ascii_case(&sha256)
    {
        return Err(LoadFailure::NotWhatWasPulled {
            reference: reference.clone(),
            digest: digest.clone(),
            expected: component_sha256.clone(),
            actual: sha256,
        });
    }
    if let Some(pinned) = &manifest.sha256
        && !pinned.eq_ignore_ascii_case(&sha256)
    {
        return Err(LoadFailure::DigestMismatch {
            component: component_path,
            pinned: pinned.clone(),
            actual: sha256,
        });
    }
    Ok(Read {
        manifest,
        manifest_sha256,
        component_path,
        bytes,
        sha256,
    })
}

/// What the policy's trust section and the lock say of a plugin read:
/// its signatures (when the policy asks), and that the lock pins it.
fn vouch(
    read: &Read,
    source: &PluginSource,
    options: &LoadOptions,
) -> Result<Option<Verification>, LoadFailure> {
    let name = &read.manifest.name;
    let provenance = match &options.trust {
        None => None,
        Some(trust) => {
            let require = options.plugins.get(name).and_then(|p| p.require);
            let checked = trust.check(
                name,
                &read.component_path,
                &read.bytes,
                &read.sha256,
                require,
                options.cache.as_ref(),
            );
            Some(checked.map_err(LoadFailure::Untrusted)?)
        }
    };
    if let Some(lock) = &options.lock {
        let signed_by = match &provenance {
            Some(Verification::Signed { by }) => &by[..],
            _ => &[],
        };
        lock.check(&crate::lockfile::LockSubject {
            name,
            sha256: &read.sha256,
            manifest_sha256: read.manifest_sha256.as_deref(),
            oci_digest: source.oci_digest(),
            signed_by,
        })
        .map_err(LoadFailure::Locked)?;
    }
    Ok(provenance)
}

/// The plugin's grants: what its manifest asks AND the policy grants,
/// when the policy's entry holds for it (grants bound to a signer follow
/// the signer, and to a source the source), with the notes on what it
/// was not granted, and its standing for contested names.
fn grants_of(
    manifest: &Manifest,
    source: &PluginSource,
    provenance: &Option<Verification>,
    options: &LoadOptions,
) -> (
    crate::grants::Grants,
    Vec<crate::resolve::GrantNote>,
    Standing,
) {
    let settings = options.plugins.get(&manifest.name);
    let unbound = settings.and_then(|s| {
        let signer = s.signer.as_ref()?;
        match provenance {
            Some(Verification::Signed { by }) if by.contains(signer) => None,
            found => Some(crate::resolve::GrantNote::Unbound {
                plugin: manifest.name.clone(),
                signer: signer.clone(),
                found: found.as_ref().map_or("unchecked".into(), |f| f.describe()),
            }),
        }
    });
    // Grants are for a source as much as for a name: a registry plugin's
    // only when the entry names its source or a signer, and an entry that
    // names a source only for a plugin from it.
    let elsewhere = settings.and_then(|s| {
        let from_named_source = match source {
            PluginSource::Oci { reference, .. } => {
                s.names_source(reference) || (s.source.is_none() && s.signer.is_some())
            }
            _ => s.source.is_none(),
        };
        (!from_named_source && s.grants_anything()).then(|| {
            crate::resolve::GrantNote::SourceUnbound {
                plugin: manifest.name.clone(),
                source: source.origin(),
                wanted: s.source.clone(),
            }
        })
    });
    let ungranted = unbound
        .as_ref()
        .or(elsewhere.as_ref())
        .and(settings)
        .map(|s| s.ungranted());
    let (grants, mut grant_notes) = crate::resolve::resolve(
        &manifest.name,
        &manifest.permissions,
        ungranted.as_ref().or(settings),
        &crate::resolve::Protected {
            policy_file: options.policy_file.as_deref(),
            host_state: &options.host_state,
        },
        &|var| std::env::var(var).ok(),
    );
    let standing = match (provenance, &ungranted, settings) {
        (Some(Verification::Signed { by }), _, _) if !by.is_empty() => Standing::Signed,
        (_, None, Some(_)) => Standing::Named,
        _ => Standing::Unvouched,
    };
    grant_notes.extend(unbound);
    grant_notes.extend(elsewhere);
    (grants, grant_notes, standing)
}

/// Reads a component's specs, through the cache when there is one: a
/// component whose `specs` is slow (or never returns) costs that once,
/// not on every command. Successes and timeouts are kept; other failures
/// are quick to repeat and may depend on the limits, so they are not.
async fn read_specs_cached(
    runtime: &Runtime,
    pre: &PluginPre,
    limits: &Limits,
    sha256: &str,
    options: &LoadOptions,
) -> Result<Vec<GadgetSpec>, RuntimeError> {
    let cache = options.cache.as_ref();
    if let Some(cached) = cache.and_then(|c| c.load_specs(runtime.engine(), sha256)) {
        return cached.map_err(|message| {
            RuntimeError::Specs(gadget_core::call::CallError::Failed { message })
        });
    }
    let result = runtime.read_specs(pre, limits).await;
    if let Some(cache) = cache {
        let entry = match &result {
            Ok(specs) => Some(Ok(specs.clone())),
            Err(RuntimeError::Specs(error @ gadget_core::call::CallError::Timeout { .. })) => {
                Some(Err(format!(
                    "{error} (remembered from an earlier load; change the component to try again)"
                )))
            }
            Err(_) => None,
        };
        if let Some(entry) = entry
            && let Err(e) = cache.store_specs(runtime.engine(), sha256, &entry)
        {
            tracing::warn!(dir = %cache.dir().display(), "could not write the specs cache: {e}");
        }
    }
    result
}

/// A bare `.wasm` plugin: named after its file, default limits, nothing granted.
fn bare_manifest(file: &Path) -> Result<Manifest, LoadFailure> {
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let name = manifest::normalize_plugin_name(stem)
        .map_err(|e| LoadFailure::BadFileName(e.to_string()))?;
    Ok(Manifest {
        name,
        version: "0.0.0".into(),
        description: format!("bare component {}", file.display()),
        component: PathBuf::from(file.file_name().unwrap_or_default()),
        sha256: None,
        limits: RequestedLimits::default(),
        permissions: Permissions::default(),
        annotations: Default::default(),
        tasks: Default::default(),
    })
}

async fn compile_cached(
    runtime: &Runtime,
    name: &str,
    bytes: &[u8],
    sha256: &str,
    options: &LoadOptions,
    progress: &dyn LoadProgress,
) -> Result<(wasmtime::component::Component, CacheOutcome), String> {
    if let Some(cache) = &options.cache
        && let Some(component) = cache.load(runtime.engine(), sha256)
    {
        return Ok((component, CacheOutcome::Hit));
    }
    progress.compiling(name, bytes.len() as u64);
    // Compilation is CPU-bound for up to seconds: keep it off the async
    // workers so loading other plugins (and cache hits) go on meanwhile.
    let engine = runtime.engine().clone();
    let owned = bytes.to_vec();
    let external = options.compiler.clone();
    let compiling = tokio::task::spawn_blocking(move || match external {
        None => wasmtime::component::Component::new(&engine, &owned)
            .map_err(|e| format!("not a valid component: {e:#}")),
        Some(ExternalCompiler(compile)) => {
            let artifact = compile(&owned)?;
            // SAFETY: the artifact is this host's own output: the child
            // process is this binary, started by this process, given these
            // bytes; wasmtime checks its header and the engine's
            // compatibility and refuses a mismatch with an error.
            unsafe { wasmtime::component::Component::deserialize(&engine, &artifact) }
                .map_err(|e| format!("the compiled component could not be loaded: {e:#}"))
        }
    });
    let result = tokio::time::timeout(COMPILE_TIMEOUT, compiling).await;
    progress.compiled(name);
    let component = match result {
        Ok(Ok(Ok(component))) => component,
        Ok(Ok(Err(reason))) => return Err(reason),
        Ok(Err(e)) => return Err(format!("compilation task failed: {e}")),
        Err(_) => {
            return Err(format!(
                "compiling took longer than {} s; refusing it",
                COMPILE_TIMEOUT.as_secs()
            ));
        }
    };
    let outcome = match &options.cache {
        Some(cache) => match cache.store(runtime.engine(), sha256, &component) {
            Ok(()) => CacheOutcome::Miss,
            Err(e) => {
                tracing::warn!(dir = %cache.dir().display(), "could not write the component cache: {e}");
                CacheOutcome::Off
            }
        },
        None => CacheOutcome::Off,
    };
    Ok((component, outcome))
}
