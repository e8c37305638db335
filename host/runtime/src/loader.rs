//! Plugin directories → manifests → compiled, pre-instantiated gadgets.
//!
//! Each `--plugins DIR` holds plugins: a subdirectory with `plugin.toml`
//! and its component, or a bare `.wasm` file (default limits, no
//! permissions). A directory that itself has a `plugin.toml` is one plugin.
//! Loading is concurrent and fault-isolated: every bad plugin yields one
//! [`LoadError`] naming its path and the reason, and the others still load.
//! Gadget names are unique across all plugins, compared case-insensitively
//! (as llmist does); a plugin whose gadget name or plugin name is taken is
//! refused, and the error names the plugin that has it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use crate::cache::{CacheOutcome, ComponentCache};
pub use crate::manifest::{Manifest, Permissions};
pub use crate::registry::Registry;

use crate::{GadgetSpec, PluginPre, Runtime, cache, manifest};
use gadget_core::limits::{LimitCeilings, Limits, OwnTimeout, RequestedLimits};
use gadget_core::params::ParamSchema;

/// Largest component file read, in bytes: CPython and SpiderMonkey
/// components are under 20 MiB; 256 MiB bounds a hostile or mistaken file.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// Gadget names: what the model writes after `!!!GADGET_START:`, so no `:`
/// or whitespace; 64 bytes at most, the longest tool name OpenAI accepts.
pub const MAX_GADGET_NAME_BYTES: usize = 64;

/// Why one plugin did not load: its path (directory or `.wasm`) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct LoadError {
    /// The plugin directory or `.wasm` file.
    pub path: PathBuf,
    pub reason: String,
}

impl LoadError {
    pub(crate) fn new(path: &Path, reason: impl Into<String>) -> LoadError {
        LoadError {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// Where one plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A directory with `plugin.toml`.
    Dir(PathBuf),
    /// A bare component file.
    Wasm(PathBuf),
}

impl PluginSource {
    pub fn path(&self) -> &Path {
        match self {
            PluginSource::Dir(p) | PluginSource::Wasm(p) => p,
        }
    }

    /// What `PATH` names: a plugin directory or a `.wasm` file.
    pub fn from_path(path: &Path) -> Result<PluginSource, LoadError> {
        if path.is_dir() {
            if path.join(manifest::MANIFEST_FILE).is_file() {
                Ok(PluginSource::Dir(path.to_path_buf()))
            } else {
                Err(LoadError::new(
                    path,
                    format!("no {} in this directory", manifest::MANIFEST_FILE),
                ))
            }
        } else if path.is_file() {
            Ok(PluginSource::Wasm(path.to_path_buf()))
        } else {
            Err(LoadError::new(path, "no such file or directory"))
        }
    }
}

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

/// How to load.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub cache: Option<ComponentCache>,
    pub ceilings: LimitCeilings,
}

/// A loaded plugin.
pub struct Plugin {
    pub name: String,
    pub version: String,
    pub description: String,
    pub source: PluginSource,
    pub component_path: PathBuf,
    pub sha256: String,
    pub component_bytes: u64,
    /// What the plugin gets (its requests clamped to the ceilings).
    pub limits: Limits,
    /// What it asked for and was not granted (all of it, for now).
    pub requested_permissions: Permissions,
    /// Notes for the operator: capped limits, permissions not granted.
    pub warnings: Vec<String>,
    pub cache: CacheOutcome,
    pub load_time: Duration,
    pub(crate) pre: PluginPre,
    /// The runtime whose engine compiled `pre`: calls must use it.
    pub(crate) runtime: Arc<Runtime>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("source", &self.source)
            .field("sha256", &self.sha256)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// A gadget as read from its component, checked, with its limits.
#[derive(Debug)]
pub struct LoadedGadget {
    pub spec: GadgetSpec,
    pub schema: ParamSchema,
    /// The plugin's limits with the gadget's own timeout (capped) applied.
    pub limits: Limits,
    /// Its timeout, and whether the gadget or its manifest chose it.
    pub own_timeout: OwnTimeout,
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
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                errors.push(LoadError::new(
                    dir,
                    format!("cannot read plugin directory: {e}"),
                ));
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
                format!("plugin loader task failed: {e}"),
            )),
        }
    }
    // Collisions are decided in discovery order, not completion order, so
    // the same directories always give the same registry.
    loaded.sort_by_key(|(index, _)| *index);
    let mut registry = Registry::default();
    for (_, result) in loaded {
        match result {
            Ok((plugin, gadgets)) => {
                for warning in &plugin.warnings {
                    tracing::warn!(plugin = %plugin.name, "{warning}");
                }
                if let Err(e) = registry.insert(plugin, gadgets) {
                    errors.push(e);
                }
            }
            Err(e) => errors.push(e),
        }
    }
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
    let path = source.path().to_path_buf();
    let fail = |reason: String| LoadError::new(&path, reason);
    let manifest = match &source {
        PluginSource::Dir(dir) => Manifest::from_dir(dir).map_err(|e| fail(e.to_string()))?,
        PluginSource::Wasm(file) => bare_manifest(file).map_err(fail)?,
    };
    let component_path = match &source {
        PluginSource::Dir(dir) => dir.join(&manifest.component),
        PluginSource::Wasm(file) => file.clone(),
    };
    let size = std::fs::metadata(&component_path)
        .map_err(|e| {
            fail(format!(
                "cannot read component {}: {e}",
                component_path.display()
            ))
        })?
        .len();
    if size > MAX_COMPONENT_BYTES {
        return Err(fail(format!(
            "component {} is {size} bytes, over the {MAX_COMPONENT_BYTES}-byte limit",
            component_path.display()
        )));
    }
    let bytes = std::fs::read(&component_path).map_err(|e| {
        fail(format!(
            "cannot read component {}: {e}",
            component_path.display()
        ))
    })?;
    let sha256 = cache::sha256_hex(&bytes);
    if let Some(pinned) = &manifest.sha256
        && !pinned.eq_ignore_ascii_case(&sha256)
    {
        return Err(fail(format!(
            "sha256 mismatch for {}: plugin.toml pins {pinned}, the file is {sha256}; refusing to load a component that is not the one pinned",
            component_path.display()
        )));
    }

    let (component, cache_outcome) =
        compile_cached(runtime, &manifest.name, &bytes, &sha256, options, progress)
            .await
            .map_err(|e| fail(format!("{}: {e}", component_path.display())))?;
    let pre = runtime
        .prepare(&component)
        .map_err(|e| fail(e.to_string()))?;

    let (limits, mut warnings) = options.ceilings.grant(&manifest.limits);
    if !manifest.permissions.is_empty() {
        warnings.push(format!(
            "asks for permissions that are not granted (this host grants none yet): {}",
            manifest.permissions.describe()
        ));
    }
    let specs = runtime
        .read_specs(&pre, &limits)
        .await
        .map_err(|e| fail(e.to_string()))?;
    if specs.is_empty() {
        return Err(fail(
            "the component provides no gadgets (its `specs` list is empty)".into(),
        ));
    }
    let mut gadgets: Vec<LoadedGadget> = Vec::new();
    for spec in specs {
        let schema = check_spec(&spec)
            .map_err(|reason| fail(format!("gadget '{}': {reason}", spec.name)))?;
        if let Some(other) = gadgets
            .iter()
            .find(|g| g.spec.name.eq_ignore_ascii_case(&spec.name))
        {
            return Err(fail(format!(
                "the component declares gadget '{}' twice (also as '{}')",
                spec.name, other.spec.name
            )));
        }
        let own_timeout =
            options
                .ceilings
                .own_timeout(&limits, manifest.limits.timeout_ms, spec.timeout_ms);
        let gadget_limits = Limits {
            timeout: own_timeout.duration().unwrap_or(limits.timeout),
            ..limits.clone()
        };
        gadgets.push(LoadedGadget {
            own_timeout,
            spec,
            schema,
            limits: gadget_limits,
        });
    }
    let plugin = Plugin {
        name: manifest.name,
        version: manifest.version,
        description: manifest.description,
        source,
        component_path,
        sha256,
        component_bytes: size,
        limits,
        requested_permissions: manifest.permissions,
        warnings,
        cache: cache_outcome,
        load_time: started.elapsed(),
        pre,
        runtime: runtime.clone(),
    };
    Ok((Arc::new(plugin), gadgets))
}

/// A bare `.wasm` plugin: named after its file, default limits, nothing granted.
fn bare_manifest(file: &Path) -> Result<Manifest, String> {
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let name = manifest::normalize_plugin_name(stem)
        .map_err(|e| format!("cannot name a plugin after this file: {e}"))?;
    Ok(Manifest {
        name,
        version: "0.0.0".into(),
        description: format!("bare component {}", file.display()),
        component: PathBuf::from(file.file_name().unwrap_or_default()),
        sha256: None,
        limits: RequestedLimits::default(),
        permissions: Permissions::default(),
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
    let result =
        tokio::task::spawn_blocking(move || wasmtime::component::Component::new(&engine, &owned))
            .await;
    progress.compiled(name);
    let component = match result {
        Ok(Ok(component)) => component,
        Ok(Err(e)) => return Err(format!("not a valid component: {e:#}")),
        Err(e) => return Err(format!("compilation task failed: {e}")),
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

/// Checks one spec: its name, its schema, and every example's params.
pub fn check_spec(spec: &GadgetSpec) -> Result<ParamSchema, String> {
    check_gadget_name(&spec.name)?;
    if spec.description.trim().is_empty() {
        return Err("description is empty; the model needs it to know what the gadget does".into());
    }
    let schema = ParamSchema::compile(&spec.parameters_schema).map_err(|e| e.to_string())?;
    for (index, example) in spec.examples.iter().enumerate() {
        let params: Value = serde_json::from_str(&example.params)
            .map_err(|e| format!("example {}: params are not valid JSON: {e}", index + 1))?;
        schema
            .validate(&spec.name, params)
            .map_err(|failure| format!("example {}: {failure}", index + 1))?;
    }
    if spec.max_concurrent == Some(0) {
        return Err("max-concurrent is 0, so the gadget could never run".into());
    }
    Ok(schema)
}

/// Letters, digits and `_`, starting with a letter, at most 64 bytes.
pub fn check_gadget_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_GADGET_NAME_BYTES
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "name '{name}' must be 1 to {MAX_GADGET_NAME_BYTES} ASCII letters, digits or '_', starting with a letter"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Example;

    fn spec(schema: &str, examples: &[&str]) -> GadgetSpec {
        GadgetSpec {
            name: "Tool".into(),
            label: None,
            description: "Does things.".into(),
            parameters_schema: schema.into(),
            examples: examples
                .iter()
                .map(|p| Example {
                    params: p.to_string(),
                    output: None,
                    comment: None,
                })
                .collect(),
            timeout_ms: None,
            exclusive: false,
            max_concurrent: None,
        }
    }

    const SCHEMA: &str =
        r#"{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}"#;

    #[test]
    fn gadget_names_are_checked() {
        assert!(check_gadget_name("Calculator_2").is_ok());
        for bad in [
            "",
            "2fast",
            "has space",
            "a:b",
            "dash-ed",
            &"x".repeat(MAX_GADGET_NAME_BYTES + 1),
        ] {
            assert!(check_gadget_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn specs_with_bad_examples_or_hints_are_refused() {
        assert!(check_spec(&spec(SCHEMA, &[r#"{"n":1}"#])).is_ok());
        let bad_example = check_spec(&spec(SCHEMA, &[r#"{"n":1}"#, r#"{"n":"x"}"#])).unwrap_err();
        assert!(
            bad_example.starts_with("example 2: Invalid parameters for 'Tool':"),
            "{bad_example}"
        );
        assert!(
            check_spec(&spec(SCHEMA, &["{"]))
                .unwrap_err()
                .contains("not valid JSON")
        );
        let mut zero = spec(SCHEMA, &[]);
        zero.max_concurrent = Some(0);
        assert!(
            check_spec(&zero)
                .unwrap_err()
                .contains("max-concurrent is 0")
        );
        let mut blank = spec(SCHEMA, &[]);
        blank.description = "  ".into();
        assert!(
            check_spec(&blank)
                .unwrap_err()
                .contains("description is empty")
        );
    }

    #[tokio::test]
    async fn an_oversized_component_file_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.wasm");
        // Sparse: takes no disk space, but its size is over the limit.
        std::fs::File::create(&path)
            .unwrap()
            .set_len(MAX_COMPONENT_BYTES + 1)
            .unwrap();
        let runtime = Arc::new(Runtime::new(&crate::RuntimeConfig::default()).unwrap());
        let error = load_plugin(
            &runtime,
            PluginSource::Wasm(path),
            &LoadOptions::default(),
            &NoProgress,
        )
        .await
        .unwrap_err();
        assert!(
            error.reason.contains("over the 268435456-byte limit"),
            "{error}"
        );
    }
}
