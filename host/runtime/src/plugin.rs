//! A loaded plugin and its gadgets, where it came from, and why one did
//! not load: what the loader makes and the registry holds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gadget_core::limits::{Limits, OwnTimeout};
use gadget_core::params::ParamSchema;

use crate::cache::CacheOutcome;
use crate::grants::CallGrants;
use crate::manifest::{self, Permissions};
use crate::{GadgetSpec, PluginPre, Runtime};

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
    /// What its manifest asks for.
    pub requested_permissions: Permissions,
    /// What its manifest says its gadgets do (for MCP clients).
    pub annotations: crate::manifest::Annotations,
    /// What its calls get: the requests AND the operator's grants.
    pub grants: Arc<CallGrants>,
    /// Requests not granted and grants not applied, one line each.
    pub grant_notes: Vec<String>,
    /// Notes for the operator: capped limits, long exclusive holds.
    pub warnings: Vec<String>,
    /// Gadgets the operator's `[gadgets]` rules do not serve: name, rule.
    pub denied: Vec<(String, String)>,
    /// Gadgets of this component that were refused (a bad spec, a reserved
    /// name), each with the reason; the others loaded.
    pub refused: Vec<String>,
    /// The operator's prefix for its gadget names (policy file).
    pub prefix: Option<String>,
    pub cache: CacheOutcome,
    pub load_time: Duration,
    pub(crate) pre: PluginPre,
    /// The runtime whose engine compiled `pre`: calls must use it.
    pub(crate) runtime: Arc<Runtime>,
}

impl Plugin {
    /// The contract version its component was built against.
    pub fn contract_version(&self) -> crate::bindings::ContractVersion {
        self.pre.version()
    }
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
    /// Its spec, named as it is served (with the operator's prefix).
    pub spec: GadgetSpec,
    /// The name the component knows it by (without the prefix).
    pub component_name: String,
    pub schema: ParamSchema,
    /// The plugin's limits with the gadget's own timeout (capped) applied.
    pub limits: Limits,
    /// Its timeout, and whether the gadget or its manifest chose it.
    pub own_timeout: OwnTimeout,
    /// The calls its exclusive calls run alone among (its plugin's, unless
    /// the operator lets the plugin hold the whole run).
    pub exclusive_group: Option<Arc<str>>,
}
