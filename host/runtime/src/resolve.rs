//! How a manifest's requests and the operator's grants become a plugin's
//! grants, with a note for each request not met and each grant not applied.
//! Above both the policy and the grants' types (it reads one and makes the
//! other), so neither depends on it.

use std::path::Path;
use std::sync::Arc;

use crate::grants::{
    BrokeredSecret, ConfigGrant, DirGrant, Grants, HttpRequestRule, HttpRules, IpRange, LlmGrant,
    default_guest_path,
};

use crate::grants::{OpenedDir, WriteQuota};
use crate::manifest::{FileMode, Permissions};
use crate::policy::{ConfigSource, PluginPolicy, SecretSpec};
use crate::sensitive::{HostState, HostStateKind};

/// A request not met or a grant not (fully) applied, for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrantNote {
    /// The manifest asks for `request` (`http https://api.example.com`,
    /// `files /data (rw)`); the operator did not grant it. `how` is the
    /// policy line (or flag) that would.
    NotGranted { request: String, how: String },
    /// The operator grants `grant` but the manifest does not ask for
    /// `asked` (the grant itself, or the guest path it would fill).
    NotAsked {
        grant: String,
        asked: Option<String>,
    },
    /// A granted config key reads an environment variable that is not set.
    EnvNotSet { key: String, var: String },
    /// A brokered secret may go to `origin`, which the plugin's HTTP
    /// grants do not reach: it is never sent there.
    SecretUnreachable {
        plugin: String,
        key: String,
        origin: String,
    },
    /// A granted directory that cannot be used: why.
    DirUnusable { host: String, why: DirProblem },
    /// A granted directory that is, holds or lies in the policy's tree or
    /// the user's credential directories, without `sensitive = true`.
    Sensitive {
        plugin: String,
        host: String,
        why: String,
    },
    /// A granted directory that is, holds or lies in the host's own state
    /// (cache, journal, lock file, keys, the policy for writing): refused
    /// whatever the grant says.
    HostState { host: String, why: String },
    /// Two grants for one guest path: the first applies.
    Twice { guest: String },
    /// The plugin came from a registry and `[plugins.NAME]` does not name
    /// that source (`source`) nor a signer: its grants stay with the
    /// source they were written for.
    SourceUnbound {
        plugin: String,
        source: String,
        /// The source the entry names, if it names one.
        wanted: Option<String>,
    },
    /// Manifest and grant differ in mode: the directory is read-only.
    /// `by_operator` when the operator chose ro for an rw request.
    ReadOnly { guest: String, by_operator: bool },
    /// The plugin's grants are bound to `signer`, and this component is
    /// not signed by it (`found`): it loads with no grants.
    Unbound {
        plugin: String,
        signer: String,
        found: String,
    },
}

/// Why a granted directory cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirProblem {
    NotADirectory,
    /// It cannot be resolved (it does not exist, or is unreadable).
    Unresolvable(String),
    /// It cannot be opened and held.
    Unopenable(String),
}

impl GrantNote {
    /// Whether the note is about something the manifest asks for and
    /// does not get: such a plugin is unavailable until it is granted.
    /// (An unusable or refused directory is said by its own note, and its
    /// request, if nothing else met it, by a `NotGranted` one.)
    pub fn is_missing_grant(&self) -> bool {
        matches!(
            self,
            GrantNote::NotGranted { .. } | GrantNote::EnvNotSet { .. }
        )
    }

    /// Whether the operator should hear of it at load: a grant given and
    /// not applied (a mistake in the policy). A request not granted makes
    /// the plugin unavailable instead (`list`, `check`, a call say so); a
    /// mode narrowed to read-only is a choice, not a problem.
    pub fn is_warning(&self) -> bool {
        !self.is_missing_grant() && !matches!(self, GrantNote::ReadOnly { .. })
    }

    /// The door a missing grant is for (`files`, `http`, `llm`, `config
    /// KEY`), short enough for a table column.
    pub fn door(&self) -> &str {
        match self {
            GrantNote::NotGranted { request, .. } => {
                request.split_whitespace().next().unwrap_or_default()
            }
            GrantNote::EnvNotSet { .. } => "config",
            GrantNote::SecretUnreachable { .. } => "secrets",
            GrantNote::NotAsked { grant, .. } => grant.as_str(),
            GrantNote::DirUnusable { .. }
            | GrantNote::Sensitive { .. }
            | GrantNote::HostState { .. }
            | GrantNote::Twice { .. }
            | GrantNote::ReadOnly { .. } => "files",
            GrantNote::Unbound { .. } => "signer",
            GrantNote::SourceUnbound { .. } => "source",
        }
    }
}

/// In JSON (`describe --json`), the sentence.
impl serde::Serialize for GrantNote {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for GrantNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantNote::NotGranted { request, how } => {
                write!(f, "asks for {request}, not granted (grant it with {how})")
            }
            GrantNote::NotAsked { grant, asked } => write!(
                f,
                "{grant} is granted, but the manifest does not ask for {}: not applied (the plugin's plugin.toml must ask for it under [permissions]; granting it again changes nothing)",
                asked.as_deref().unwrap_or("it")
            ),
            GrantNote::EnvNotSet { key, var } => write!(
                f,
                "config {key} is granted from ${var}, which is not set: not applied"
            ),
            GrantNote::SecretUnreachable {
                plugin,
                key,
                origin,
            } => write!(
                f,
                "secret {key} may go to {origin}, which the plugin's HTTP grants do not reach: it is never sent there (grant it with [plugins.{plugin}] http = [\"{origin}\"])"
            ),
            GrantNote::DirUnusable { host, why } => match why {
                DirProblem::NotADirectory => write!(
                    f,
                    "files {host} is granted but is not a directory: not applied"
                ),
                DirProblem::Unresolvable(e) => write!(
                    f,
                    "files {host} is granted but cannot be used ({e}): not applied"
                ),
                DirProblem::Unopenable(e) => write!(
                    f,
                    "files {host} is granted but cannot be opened ({e}): not applied"
                ),
            },
            GrantNote::Sensitive { plugin, host, why } => write!(
                f,
                "files {host} is refused: {why}; grant a narrower directory, or say sensitive = true in its [plugins.{plugin}] files entry if this is meant"
            ),
            GrantNote::HostState { host, why } => write!(f, "files {host} is refused: {why}"),
            GrantNote::SourceUnbound {
                plugin,
                source,
                wanted: Some(wanted),
            } => write!(
                f,
                "the grants of [plugins.{plugin}] are for {wanted}, and this plugin comes from {source}: it loads with no grants (change [plugins.{plugin}] source if this source is meant)"
            ),
            GrantNote::SourceUnbound {
                plugin,
                source,
                wanted: None,
            } => write!(
                f,
                "the grants of [plugins.{plugin}] are not applied to {source}: a plugin from a registry gets a name's grants only when [plugins.{plugin}] names its source (source = \"{source}\") or a signer it must be signed by; it loads with no grants"
            ),
            GrantNote::Unbound {
                plugin,
                signer,
                found,
            } => write!(
                f,
                "the grants of [plugins.{plugin}] apply only to a component signed by {signer}, and this one is {found}: it loads with no grants (have it signed by {signer}, or change [plugins.{plugin}] signer)"
            ),
            GrantNote::Twice { guest } => {
                write!(
                    f,
                    "files: {guest} is granted twice; the first grant applies"
                )
            }
            GrantNote::ReadOnly {
                guest,
                by_operator: false,
            } => write!(
                f,
                "files {guest} is granted rw, but the manifest asks for ro: read-only"
            ),
            GrantNote::ReadOnly {
                guest,
                by_operator: true,
            } => write!(
                f,
                "files {guest}: the manifest asks for rw, granted ro: read-only"
            ),
        }
    }
}

/// What a file grant may not open: the policy file's tree (unless the
/// grant says `sensitive = true`, and then only to read it) and the host's
/// own state (never).
#[derive(Debug, Clone, Copy, Default)]
pub struct Protected<'a> {
    /// The policy file the grants come from.
    pub policy_file: Option<&'a Path>,
    /// The cache, the journal, the lock file, the signers' keys.
    pub host_state: &'a [HostState],
}

/// What the manifest asks for AND the operator grants, and a note for each
/// request not met and each grant not applied. `env` reads the host's
/// environment (for `env = "VAR"` values).
pub fn resolve(
    plugin: &str,
    requested: &Permissions,
    policy: Option<&PluginPolicy>,
    protected: &Protected<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Grants, Vec<GrantNote>) {
    let empty = PluginPolicy::default();
    let policy = policy.unwrap_or(&empty);
    let mut grants = Grants::default();
    let mut notes = Vec::new();

    http(plugin, requested, policy, &mut grants, &mut notes);
    config(plugin, requested, policy, env, &mut grants, &mut notes);
    llm(plugin, requested, policy, &mut grants, &mut notes);
    files(
        plugin,
        requested,
        policy,
        protected,
        env,
        &mut grants,
        &mut notes,
    );
    (grants, notes)
}

/// HTTP: each operator origin applies when some request covers it.
fn http(
    plugin: &str,
    requested: &Permissions,
    policy: &PluginPolicy,
    grants: &mut Grants,
    notes: &mut Vec<GrantNote>,
) {
    let requests: Vec<(String, HttpRequestRule)> = requested
        .http
        .iter()
        .filter_map(|r| Some((r.clone(), HttpRequestRule::parse(r).ok()?)))
        .collect();
    let mut met = vec![false; requests.len()];
    for grant in &policy.http {
        let Ok(rule) = grant.rule() else {
            continue; // checked when the policy was read
        };
        let text = &rule.text;
        let covering: Vec<usize> = (0..requests.len())
            .filter(|&i| requests[i].1.covers(&rule))
            .collect();
        if covering.is_empty() {
            notes.push(GrantNote::NotAsked {
                grant: format!("http {text}"),
                asked: None,
            });
            continue;
        }
        for i in covering {
            met[i] = true;
        }
        grants.http.origins.push(rule);
    }
    for ((text, _), met) in requests.iter().zip(met) {
        if !met {
            let how = if text == "*" {
                format!("[plugins.{plugin}] http = [\"https://HOST\"]")
            } else {
                format!(
                    "[plugins.{plugin}] http = [\"https://{}\"]",
                    text.trim_start_matches("https://")
                )
            };
            notes.push(GrantNote::NotGranted {
                request: format!("http {text}"),
                how,
            });
        }
    }
    if !grants.http.origins.is_empty() {
        grants.http.addresses = policy
            .allow_addresses
            .iter()
            .filter_map(|a| IpRange::parse(a).ok())
            .collect();
    }
}

/// Config: by key.
fn config(
    plugin: &str,
    requested: &Permissions,
    policy: &PluginPolicy,
    env: &dyn Fn(&str) -> Option<String>,
    grants: &mut Grants,
    notes: &mut Vec<GrantNote>,
) {
    for key in &requested.config {
        if let Some(spec) = policy.secrets.get(key) {
            brokered(plugin, key, spec, env, grants, notes);
            continue;
        }
        match policy.config.get(key) {
            None => notes.push(GrantNote::NotGranted {
                request: format!("config {key}"),
                how: format!("[plugins.{plugin}] config = {{ {key} = {{ env = \"VAR\" }} }}"),
            }),
            Some(ConfigSource { env: Some(var), .. }) => match env(var) {
                Some(value) => grants.config.push(ConfigGrant {
                    key: key.clone(),
                    value,
                    secret: true,
                }),
                None => notes.push(GrantNote::EnvNotSet {
                    key: key.clone(),
                    var: var.clone(),
                }),
            },
            Some(ConfigSource {
                value: Some(value), ..
            }) => grants.config.push(ConfigGrant {
                key: key.clone(),
                value: value.clone(),
                secret: false,
            }),
            Some(_) => {} // checked when the policy was read
        }
    }
    let config = policy.config.keys().map(|k| ("config", k));
    for (door, key) in config.chain(policy.secrets.keys().map(|k| ("secret", k))) {
        if !requested.config.contains(key) {
            notes.push(GrantNote::NotAsked {
                grant: format!("{door} {key}"),
                asked: None,
            });
        }
    }
}

/// A brokered secret for a config key the manifest asks for: the gadget
/// sees its placeholder. An origin it may go to that the plugin's HTTP
/// grants do not reach is said (it could never be sent there).
fn brokered(
    plugin: &str,
    key: &str,
    spec: &SecretSpec,
    env: &dyn Fn(&str) -> Option<String>,
    grants: &mut Grants,
    notes: &mut Vec<GrantNote>,
) {
    let Some(value) = env(&spec.env).filter(|v| !v.is_empty()) else {
        notes.push(GrantNote::EnvNotSet {
            key: key.to_string(),
            var: spec.env.clone(),
        });
        return;
    };
    // Checked when the policy was read; were it not, the secret is not
    // granted rather than bound more loosely than written.
    let (origins, header) = match spec.compiled() {
        Ok(compiled) => compiled,
        Err(why) => {
            notes.push(GrantNote::NotGranted {
                request: format!("config {key}"),
                how: format!("a valid [plugins.{plugin}.secrets.{key}]: {why}"),
            });
            return;
        }
    };
    for origin in &origins {
        if !grants.http.origins.iter().any(|g| origin.within(g)) {
            notes.push(GrantNote::SecretUnreachable {
                plugin: plugin.to_string(),
                key: key.to_string(),
                origin: origin.text.clone(),
            });
        }
    }
    let secret = BrokeredSecret::new(
        key,
        value,
        HttpRules {
            origins,
            addresses: Vec::new(),
        },
        header,
        spec.format.as_deref(),
    );
    grants.config.push(ConfigGrant {
        key: key.to_string(),
        value: secret.placeholder.clone(),
        secret: false,
    });
    grants.brokered.push(secret);
}

/// LLM: the manifest asks, the operator names the models and budget.
fn llm(
    plugin: &str,
    requested: &Permissions,
    policy: &PluginPolicy,
    grants: &mut Grants,
    notes: &mut Vec<GrantNote>,
) {
    match (&policy.llm, requested.llm) {
        (Some(llm), true) => {
            grants.llm = Some(LlmGrant::new(
                llm.models.clone(),
                llm.max_usd_per_call,
                llm.max_usd_per_run,
            ))
        }
        (Some(_), false) => notes.push(GrantNote::NotAsked {
            grant: "llm".into(),
            asked: None,
        }),
        (None, true) => notes.push(GrantNote::NotGranted {
            request: "llm".into(),
            how: format!(
                "[plugins.{plugin}] llm = {{ models = [\"openai:gpt-4o-mini\"], max-usd-per-call = 0.05 }} or --grant {plugin}:llm=openai:gpt-4o-mini"
            ),
        }),
        (None, false) => {}
    }
}

/// Files: each operator directory applies when the manifest asks for its
/// guest path (or for `*`); the mode is the narrower of the two.
fn files(
    plugin: &str,
    requested: &Permissions,
    policy: &PluginPolicy,
    protected: &Protected<'_>,
    env: &dyn Fn(&str) -> Option<String>,
    grants: &mut Grants,
    notes: &mut Vec<GrantNote>,
) {
    let mut files_met = vec![false; requested.files.len()];
    for grant in &policy.files {
        let guest = grant
            .guest
            .clone()
            .unwrap_or_else(|| default_guest_path(&grant.host));
        let request = requested
            .files
            .iter()
            .position(|r| r.path() == guest)
            .or_else(|| requested.files.iter().position(|r| r.path() == "*"));
        let Some(index) = request else {
            notes.push(GrantNote::NotAsked {
                grant: format!("files {} → {guest}", grant.host.display()),
                asked: Some(guest),
            });
            continue;
        };
        if grants.files.iter().any(|f| f.guest == guest) {
            notes.push(GrantNote::Twice { guest });
            continue;
        }
        let wanted = requested.files[index].mode();
        let mode = wanted.min(grant.mode);
        let host = match usable_dir(plugin, grant, mode, protected, env) {
            Ok(host) => host,
            Err(note) => {
                notes.push(note);
                continue;
            }
        };
        if grant.mode == FileMode::ReadWrite && wanted == FileMode::ReadOnly {
            notes.push(GrantNote::ReadOnly {
                guest: guest.clone(),
                by_operator: false,
            });
        }
        if grant.mode == FileMode::ReadOnly && wanted == FileMode::ReadWrite {
            notes.push(GrantNote::ReadOnly {
                guest: guest.clone(),
                by_operator: true,
            });
        }
        let opened = match OpenedDir::open(&host) {
            Ok(opened) => Arc::new(opened),
            Err(e) => {
                notes.push(GrantNote::DirUnusable {
                    host: grant.host.display().to_string(),
                    why: DirProblem::Unopenable(e.to_string()),
                });
                continue;
            }
        };
        files_met[index] = true;
        let defaults = WriteQuota::default();
        let quota = WriteQuota {
            bytes: grant
                .write_quota_mib
                .map_or(defaults.bytes, |mib| mib.saturating_mul(1 << 20)),
            entries: grant.max_entries.unwrap_or(defaults.entries),
        };
        grants.files.push(DirGrant {
            host,
            guest,
            mode,
            opened,
            quota,
        });
    }
    for (request, met) in requested.files.iter().zip(files_met) {
        if !met {
            let guest = if request.path() == "*" {
                "/PATH".to_string()
            } else {
                request.path().to_string()
            };
            notes.push(GrantNote::NotGranted {
                request: format!("files {} ({})", request.path(), request.mode()),
                how: format!(
                    "[plugins.{plugin}] files = [{{ host = \"DIR\", guest = \"{guest}\" }}] or --grant {plugin}:files=DIR:{guest}"
                ),
            });
        }
    }
}

/// The granted directory, resolved, when a grant of it in `mode` may be
/// given: it exists and is a directory, it holds none of the host's own
/// state (whatever the grant says: the policy file only for a grant that
/// could write it; reading it is the `sensitive` choice), and it is not a
/// sensitive directory unless the grant says `sensitive = true`.
fn usable_dir(
    plugin: &str,
    grant: &crate::policy::FileGrant,
    mode: FileMode,
    protected: &Protected<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<std::path::PathBuf, GrantNote> {
    let Protected {
        policy_file,
        host_state,
    } = *protected;
    let unusable = |why| GrantNote::DirUnusable {
        host: grant.host.display().to_string(),
        why,
    };
    let host = match grant.host.canonicalize() {
        Ok(host) if host.is_dir() => host,
        Ok(_) => return Err(unusable(DirProblem::NotADirectory)),
        Err(e) => return Err(unusable(DirProblem::Unresolvable(e.to_string()))),
    };
    let policy_state = policy_file
        .filter(|_| mode == FileMode::ReadWrite)
        .map(|p| HostState::new(HostStateKind::PolicyFile, p));
    if let Some(why) =
        crate::sensitive::host_state_reason(&host, host_state.iter().chain(&policy_state))
    {
        return Err(GrantNote::HostState {
            host: host.display().to_string(),
            why,
        });
    }
    if !grant.sensitive
        && let Some(why) = crate::sensitive::sensitive_reason(&host, policy_file, env)
    {
        return Err(GrantNote::Sensitive {
            plugin: plugin.to_string(),
            host: host.display().to_string(),
            why,
        });
    }
    Ok(host)
}
