//! A loaded plugin and its gadgets, where it came from, and why one did
//! not load: what the loader makes and the registry holds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gadget_core::limits::Limits;
use gadget_core::tool::ToolCard;

use crate::cache::CacheOutcome;
use crate::grants::CallGrants;
use crate::manifest::{self, Permissions};
use crate::{PluginPre, Runtime};

/// Why one plugin did not load: its path (directory or `.wasm`) and the reason.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct LoadError {
    /// The plugin directory or `.wasm` file.
    pub path: PathBuf,
    pub reason: LoadFailure,
}

impl LoadError {
    /// A plugin named by an `oci://` reference that could not be pulled.
    pub fn pull(reference: &str, error: crate::oci::OciError) -> LoadError {
        LoadError::new(Path::new(reference), LoadFailure::Pull(error))
    }

    pub(crate) fn new(path: &Path, reason: impl Into<LoadFailure>) -> LoadError {
        LoadError {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// What went wrong loading one plugin (or one of its gadgets).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadFailure {
    #[error("no {} in this directory", manifest::MANIFEST_FILE)]
    NoManifest,
    #[error("no such file or directory")]
    NotFound,
    #[error("cannot read plugin directory: {0}")]
    UnreadableDir(#[source] std::io::Error),
    /// A bug: loading it panicked (the other plugins still load).
    #[error("plugin loader task failed: {0}")]
    LoaderFailed(String),
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    /// A bare `.wasm` whose file name makes no plugin name.
    #[error("cannot name a plugin after this file: {0}")]
    BadFileName(String),
    #[error("component {}: {reason}", component.display())]
    UnreadableComponent { component: PathBuf, reason: String },
    #[error(
        "sha256 mismatch for {}: plugin.toml pins {pinned}, the file is {actual}; refusing to load a component that is not the one pinned",
        component.display()
    )]
    DigestMismatch {
        component: PathBuf,
        pinned: String,
        actual: String,
    },
    #[error("{}: {message}", component.display())]
    Compile { component: PathBuf, message: String },
    /// A pulled plugin's component file is not the one its image manifest
    /// names (the store was written to by something else).
    #[error(
        "the component of {reference} is sha256 {actual}, but its image manifest ({digest}) names sha256 {expected}; refusing it (remove the cache entry and pull it again)"
    )]
    NotWhatWasPulled {
        reference: String,
        digest: String,
        expected: String,
        actual: String,
    },
    /// Its `oci://` reference could not be pulled (nor found in the cache).
    #[error("cannot pull it: {0}")]
    Pull(crate::oci::OciError),
    /// It is not what `gadget.lock` pins (`--locked`).
    #[error("{0}")]
    Locked(String),
    /// Its signatures do not satisfy the operator's `[trust]`.
    #[error("{0}")]
    Untrusted(String),
    /// Not a gadget component, or its specs could not be read.
    #[error(transparent)]
    Component(#[from] crate::RuntimeError),
    #[error("the component provides no gadgets (its `specs` list is empty)")]
    NoGadgets,
    #[error(
        "the component declares {count} gadgets, over the limit of {} per component",
        crate::specs::MAX_GADGETS_PER_COMPONENT
    )]
    TooManyGadgets { count: usize },
    #[error(
        "the component's specs hold {bytes} bytes of text, over the limit of {}",
        crate::specs::MAX_SPECS_TOTAL_BYTES
    )]
    SpecsTooLarge { bytes: usize },
    #[error("every gadget of the component was refused: {}", join_refused(.0))]
    EveryGadgetRefused(Vec<RefusedGadget>),
    /// One gadget refused; the rest of its plugin loaded.
    #[error(transparent)]
    GadgetRefused(RefusedGadget),
    #[error("a plugin named '{plugin}' is already loaded from {}", other.display())]
    PluginNameTaken { plugin: String, other: PathBuf },
    /// Two plugins serve one gadget name and the other has the stronger
    /// claim: it serves the name.
    #[error(
        "gadget '{gadget}' of plugin '{plugin}' is not served: plugin '{winner}' serves the name, and it is {winner_standing}, which plugin '{plugin}' is not (give one a prefix with [plugins.{plugin}] prefix = \"...\" to serve both)"
    )]
    NameHeld {
        gadget: String,
        plugin: String,
        winner: String,
        winner_standing: &'static str,
    },
    /// A resource URI, template or prompt name another plugin lists too
    /// (`claims.rs`): this plugin does not serve it.
    #[error(transparent)]
    CatalogClash(Box<CatalogClash>),
    /// Two plugins serve one gadget name: neither does.
    #[error("{}", contested(gadget, first.as_deref(), plugin, claimants))]
    NameContested {
        gadget: String,
        /// The plugin that had the name first, and where it came from
        /// (none when the name was contested already).
        first: Option<Box<(String, PathBuf)>>,
        plugin: String,
        /// Every plugin that claims the name.
        claimants: Vec<String>,
    },
}

/// A gadget of a component that was refused (a bad spec, a reserved name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("gadget '{gadget}' refused: {reason}")]
pub struct RefusedGadget {
    /// Its name as shown (cut to the name limit, with `…`).
    pub gadget: String,
    pub reason: String,
}

fn join_refused(refused: &[RefusedGadget]) -> String {
    let parts: Vec<String> = refused.iter().map(|r| r.to_string()).collect();
    parts.join("; ")
}

/// A catalog entry a plugin does not serve because another lists it too.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", catalog_clash(self))]
pub struct CatalogClash {
    /// The entry (`resource URI`, `resource template T`, `prompt 'P'`).
    pub what: String,
    pub plugin: String,
    /// The plugins with the strongest claim to it.
    pub others: Vec<String>,
    /// They have a stronger claim (else an equal one: nobody serves it).
    pub held: bool,
    /// Their claim, described.
    pub standing: &'static str,
}

fn catalog_clash(clash: &CatalogClash) -> String {
    let CatalogClash {
        what,
        plugin,
        others,
        held,
        standing,
    } = clash;
    let others = others
        .iter()
        .map(|o| format!("'{o}'"))
        .collect::<Vec<_>>()
        .join(", ");
    if *held {
        format!(
            "{what} of plugin '{plugin}' is not served: plugin {others} lists it too and is {standing}, which plugin '{plugin}' is not"
        )
    } else {
        format!(
            "{what} of plugin '{plugin}' is not served: plugin {others} lists it too (or one that names the same URIs), each {standing}, and neither may answer for the other; name the one that should serve it in the policy ([plugins.NAME]) or drop it from the other"
        )
    }
}

fn contested(
    gadget: &str,
    first: Option<&(String, PathBuf)>,
    plugin: &str,
    claimants: &[String],
) -> String {
    let rule = crate::policy::DenyRule::Contested {
        plugins: claimants.to_vec(),
    };
    match first {
        Some((first, path)) => format!(
            "gadget '{gadget}' refused in both plugin '{first}' ({}) and plugin '{plugin}': two plugins serve the name (compared case-insensitively) and neither may take it silently; give one a prefix with [plugins.{plugin}] prefix = \"...\" (or [plugins.{first}] prefix) in the policy file",
            path.display(),
        ),
        None => format!("gadget '{gadget}' refused: the name is already {rule}"),
    }
}

/// Where one plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A directory with `plugin.toml`.
    Dir(PathBuf),
    /// A bare component file.
    Wasm(PathBuf),
    /// Pulled from a registry: the `oci://` reference as given, the
    /// cached plugin directory or bare component it was stored as, the
    /// image manifest's digest (`sha256:...`), and the component's digest
    /// that manifest names (hex): the loader refuses a component file that
    /// is not it.
    Oci {
        reference: String,
        local: PathBuf,
        digest: String,
        component_sha256: String,
    },
}

impl PluginSource {
    pub fn path(&self) -> &Path {
        match self {
            PluginSource::Dir(p) | PluginSource::Wasm(p) => p,
            PluginSource::Oci { local, .. } => local,
        }
    }

    /// Where it came from, as the operator named it: a path, or an
    /// `oci://` reference.
    pub fn origin(&self) -> String {
        match self {
            PluginSource::Oci { reference, .. } => reference.clone(),
            other => other.path().display().to_string(),
        }
    }

    /// The image manifest's digest of a plugin pulled from a registry.
    pub fn oci_digest(&self) -> Option<&str> {
        match self {
            PluginSource::Oci { digest, .. } => Some(digest),
            _ => None,
        }
    }

    /// The local form: a pulled plugin is a directory or a bare component
    /// on this machine like any other.
    pub fn local(&self) -> PluginSource {
        match self {
            PluginSource::Oci { local, .. } if local.is_dir() => PluginSource::Dir(local.clone()),
            PluginSource::Oci { local, .. } => PluginSource::Wasm(local.clone()),
            other => other.clone(),
        }
    }

    /// What `PATH` names: a plugin directory or a `.wasm` file.
    pub fn from_path(path: &Path) -> Result<PluginSource, LoadError> {
        if path.is_dir() {
            if path.join(manifest::MANIFEST_FILE).is_file() {
                Ok(PluginSource::Dir(path.to_path_buf()))
            } else {
                Err(LoadError::new(path, LoadFailure::NoManifest))
            }
        } else if path.is_file() {
            Ok(PluginSource::Wasm(path.to_path_buf()))
        } else {
            Err(LoadError::new(path, LoadFailure::NotFound))
        }
    }
}

/// A loaded plugin: who it is, what was loaded, what it may touch, and
/// what the loader has to tell the operator about it.
pub struct Plugin {
    pub identity: Identity,
    /// Its provenance, as the journal, the spans and MCP clients see it.
    pub origin: Arc<gadget_core::tool::Origin>,
    pub artifact: Artifact,
    pub access: PluginAccess,
    pub report: LoadReport,
    /// Its claim to a gadget name another plugin serves too (see
    /// [`Standing`]).
    pub standing: Standing,
    /// The resources and prompts it serves (contract 0.3.0).
    pub catalog: gadget_core::catalog::CatalogSpecs,
    pub(crate) pre: PluginPre,
    /// The runtime whose engine compiled `pre`: calls must use it.
    pub(crate) runtime: Arc<Runtime>,
}

/// How strong a plugin's claim to a gadget name is, when two plugins
/// serve one: the stronger serves it, and between equals neither does (a
/// plugin that merely sorts first, or arrives last, takes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// Neither signed by a trusted signer nor named by the policy.
    Unvouched,
    /// Named by the policy (`[plugins.NAME]`), its grants applied.
    Named,
    /// Signed by a signer the policy trusts.
    Signed,
}

impl Standing {
    pub fn describe(self) -> &'static str {
        match self {
            Standing::Unvouched => "neither signed by a trusted signer nor named by the policy",
            Standing::Named => "named by the policy",
            Standing::Signed => "signed by a trusted signer",
        }
    }
}

/// Who a plugin is: its manifest's name, version and description, and the
/// operator's prefix for its gadget names.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub version: String,
    pub description: String,
    /// The operator's prefix for its gadget names (policy file).
    pub prefix: Option<String>,
}

/// What was loaded: where from, the component's digest and size, and how
/// it was compiled.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub source: PluginSource,
    pub component_path: PathBuf,
    pub sha256: String,
    /// Its `plugin.toml`'s SHA-256 as read (`None`: a bare component).
    pub manifest_sha256: Option<String>,
    /// What its signatures say, when the policy has a `[trust]`.
    pub provenance: Option<crate::provenance::Verification>,
    pub component_bytes: u64,
    pub cache: CacheOutcome,
    pub load_time: Duration,
}

/// What the plugin's calls may touch and use.
#[derive(Debug)]
pub struct PluginAccess {
    /// What the plugin gets (its requests clamped to the ceilings).
    pub limits: Limits,
    /// What its manifest asks for.
    pub requested: Permissions,
    /// What its manifest says its gadgets do (for MCP clients).
    pub annotations: crate::manifest::Annotations,
    /// Which of its gadgets may run as MCP tasks.
    pub tasks: crate::manifest::Tasks,
    /// What its calls get: the requests AND the operator's grants.
    pub grants: Arc<CallGrants>,
}

/// What the loader has to tell the operator about a plugin that loaded.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Requests not granted and grants not applied.
    pub grant_notes: Vec<crate::resolve::GrantNote>,
    /// Notes for the operator: capped limits, long exclusive holds, nested
    /// directory grants.
    pub warnings: Vec<String>,
    /// Gadgets the operator's `[gadgets]` rules do not serve, and the rule.
    pub denied: Vec<(String, crate::policy::DenyRule)>,
    /// Gadgets of this component that were refused (a bad spec, a reserved
    /// name), each with the reason; the others loaded.
    pub refused: Vec<RefusedGadget>,
}

impl Plugin {
    /// Its manifest's name (what `[plugins.NAME]` and `--grant` name).
    pub fn name(&self) -> &str {
        &self.identity.name
    }

    /// The directory or `.wasm` file it was loaded from.
    pub fn source(&self) -> &PluginSource {
        &self.artifact.source
    }

    /// What its calls get: the requests AND the operator's grants.
    pub fn grants(&self) -> &Arc<CallGrants> {
        &self.access.grants
    }

    /// What its manifest asks for and does not get.
    pub fn missing_grants(&self) -> impl Iterator<Item = &crate::resolve::GrantNote> {
        self.report
            .grant_notes
            .iter()
            .filter(|note| note.is_missing_grant())
    }

    /// Whether its gadgets are offered (prompt, MCP `tools/list`) and
    /// callable: it asks for nothing, or the operator granted it some of
    /// what it asks for. A plugin granted none of it (a shipped `files`
    /// with no directory) could only fail; a call to one of its gadgets
    /// says what to grant. One granted part of its requests is the
    /// operator's choice: it is served, and `check` lists the rest.
    pub fn is_available(&self) -> bool {
        self.access.requested.is_empty() || !self.access.grants.grants.is_empty()
    }

    /// The contract version its component was built against.
    pub fn contract_version(&self) -> crate::bindings::ContractVersion {
        self.pre.version()
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("identity", &self.identity)
            .field("artifact", &self.artifact)
            .field("limits", &self.access.limits)
            .finish_non_exhaustive()
    }
}

/// A gadget as read from its component, checked, with its limits.
#[derive(Debug)]
pub struct LoadedGadget {
    /// Its spec, named as it is served (with the operator's prefix); its
    /// schema; its timeout, and whether the gadget or its manifest chose
    /// it; the calls its exclusive calls run alone among (its plugin's,
    /// unless the operator lets the plugin hold the whole run).
    pub card: ToolCard,
    /// The name the component knows it by (without the prefix).
    pub component_name: String,
    /// The plugin's limits with the gadget's own timeout (capped) applied.
    pub limits: Limits,
}
