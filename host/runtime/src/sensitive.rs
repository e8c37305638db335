//! Directories no grant opens by accident: one that holds the policy file
//! (its directory or one above it: a gadget that may read or write there
//! reads or rewrites its own rules; a directory below it that does not
//! hold it may be granted), and the user's configuration and credential
//! directories (`~/.config`, `~/.ssh`, `~/.aws`, ...), which a grant may
//! not be, lie inside or contain. Either is refused unless the grant says
//! `sensitive = true`: a sample policy copied somewhere else, or a
//! `host = ".."` that resolves higher than meant, then fails closed.
//!
//! And the host's own state ([`HostState`]: the compile cache and OCI
//! store, the audit journal, the lock file, the signers' keys, the MCP
//! servers' OAuth tokens, and the policy file for writing): a grant that is, holds or lies in one of them
//! is refused whatever it says, since a gadget that could write there
//! could forge what the host trusts (a signature, a lock, a history).

use std::path::{Path, PathBuf};

/// Under the home directory, where tools keep credentials and settings
/// (a file here counts as much as a directory: a grant containing it
/// exposes it).
pub const SENSITIVE_HOME_ENTRIES: &[&str] = &[
    ".config",
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share/keyrings",
    ".password-store",
    ".terraform.d",
    ".vault-token",
];

/// What a piece of the host's own state is, and how the operator moves it
/// out of a grant's way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostStateKind {
    /// The compile cache (and the OCI store inside it).
    Cache,
    /// The audit journal.
    Journal,
    /// The lock file `--locked` checks (or `gadget lock` writes).
    LockFile,
    /// A `[trust.signers]` key file.
    TrustKey,
    /// The policy file, for a grant that could write it.
    PolicyFile,
    /// The host's state directory: the upstream MCP servers' OAuth tokens
    /// and the journal's key.
    State,
}

impl HostStateKind {
    /// What it is, for a refusal.
    pub fn what(self) -> &'static str {
        match self {
            HostStateKind::Cache => "the component cache",
            HostStateKind::Journal => "the audit journal",
            HostStateKind::LockFile => "the lock file",
            HostStateKind::TrustKey => "a [trust.signers] key",
            HostStateKind::PolicyFile => "the policy file",
            HostStateKind::State => "the host's state (OAuth tokens, the journal's key)",
        }
    }

    /// How to move it elsewhere, for a refusal.
    pub fn how_to_move(self) -> &'static str {
        match self {
            HostStateKind::Cache => "--cache-dir DIR or GADGET_CACHE_DIR",
            HostStateKind::Journal => "[audit] file = \"...\" or --audit FILE",
            HostStateKind::LockFile => "--lock-file FILE or GADGET_LOCK_FILE",
            HostStateKind::TrustKey => "[trust.signers.NAME] key = \"...\"",
            HostStateKind::PolicyFile => "--config FILE, or mode = \"ro\" with sensitive = true",
            HostStateKind::State => "GADGET_STATE_DIR",
        }
    }
}

/// One piece of the host's own state, at a path (a directory or a file;
/// it need not exist yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostState {
    pub kind: HostStateKind,
    pub path: PathBuf,
}

impl HostState {
    pub fn new(kind: HostStateKind, path: impl Into<PathBuf>) -> HostState {
        HostState {
            kind,
            path: path.into(),
        }
    }

    /// The path as a grant is compared (canonical): the nearest existing
    /// ancestor resolved, the rest appended (a journal not yet written is
    /// still where it will be).
    fn canonical(&self) -> PathBuf {
        let absolute = if self.path.is_absolute() {
            self.path.clone()
        } else {
            std::env::current_dir().unwrap_or_default().join(&self.path)
        };
        let mut rest = Vec::new();
        let mut at = absolute.as_path();
        loop {
            if let Ok(found) = at.canonicalize() {
                return rest.iter().rev().fold(found, |p, c| p.join(c));
            }
            match (at.parent(), at.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    at = parent;
                }
                _ => return absolute,
            }
        }
    }
}

/// Why granting `dir` (canonical) would put the host's own state in a
/// gadget's reach, or `None`: which state, where, and how to move it.
pub fn host_state_reason<'a>(
    dir: &Path,
    state: impl IntoIterator<Item = &'a HostState>,
) -> Option<String> {
    for place in state {
        let canonical = place.canonical();
        for path in [&canonical, &place.path] {
            let relation = if path.starts_with(dir) {
                "contains"
            } else if dir.starts_with(path) {
                "lies inside"
            } else {
                continue;
            };
            return Some(format!(
                "it {relation} {} ({}), which no grant may reach: a gadget that can write there forges what the host trusts; grant another directory, or move it with {}",
                place.kind.what(),
                canonical.display(),
                place.kind.how_to_move()
            ));
        }
    }
    None
}

/// Why granting `dir` (canonical) would expose something it should not,
/// or `None`. `policy_file` is the policy the grant comes from; `env`
/// reads `HOME` and `XDG_CONFIG_HOME`.
pub fn sensitive_reason(
    dir: &Path,
    policy_file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    if let Some(policy) = policy_file {
        let policy = policy
            .canonicalize()
            .unwrap_or_else(|_| policy.to_path_buf());
        if policy.starts_with(dir) {
            return Some(format!(
                "it holds the policy file itself ({})",
                policy.display()
            ));
        }
    }
    let mut places: Vec<PathBuf> = Vec::new();
    if let Some(home) = env("HOME").filter(|h| !h.is_empty()) {
        let home = PathBuf::from(home);
        places.extend(SENSITIVE_HOME_ENTRIES.iter().map(|entry| home.join(entry)));
    }
    if let Some(config) = env("XDG_CONFIG_HOME").filter(|c| !c.is_empty()) {
        places.push(PathBuf::from(config));
    }
    for place in places {
        // Compared as the grant is (canonical), and as written, so a
        // symlinked home is caught either way.
        let canonical = place.canonicalize().unwrap_or_else(|_| place.clone());
        for place in [&canonical, &place] {
            if dir.starts_with(place) {
                return Some(format!(
                    "it lies inside {}, where the user's credentials or settings live",
                    place.display()
                ));
            }
            if place.starts_with(dir) {
                return Some(format!(
                    "it contains {}, where the user's credentials or settings live",
                    place.display()
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(home: &Path) -> impl Fn(&str) -> Option<String> + '_ {
        move |var| (var == "HOME").then(|| home.display().to_string())
    }

    #[test]
    fn credential_directories_and_the_policy_tree_are_caught_the_rest_is_not() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join(".config/gadget-host")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join("projects/site")).unwrap();
        let policy = home.join(".config/gadget-host/config.toml");
        std::fs::write(&policy, "").unwrap();
        let env = env_with(&home);
        // The home directory contains them all.
        let why = sensitive_reason(&home, None, &env).unwrap();
        assert!(why.contains("contains"), "{why}");
        // Inside one.
        let why = sensitive_reason(&home.join(".config"), None, &env).unwrap();
        assert!(why.contains(".config"), "{why}");
        assert!(sensitive_reason(&home.join(".ssh"), None, &env).is_some());
        // The policy's own tree, named for what it is.
        let why = sensitive_reason(&home.join(".config/gadget-host"), Some(&policy), &env).unwrap();
        assert!(why.contains("policy file itself"), "{why}");
        // An ordinary project directory is fine.
        assert_eq!(
            sensitive_reason(&home.join("projects/site"), Some(&policy), &env),
            None
        );
        // The root contains everything.
        assert!(sensitive_reason(Path::new("/"), Some(&policy), &env).is_some());
    }
}
