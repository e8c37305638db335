//! Directories no grant opens by accident: the tree that holds the policy
//! file itself (a gadget that may read or write there reads or rewrites
//! its own rules), and the user's configuration and credential
//! directories (`~/.config`, `~/.ssh`, `~/.aws`, ...). A file grant that is
//! one of them, lies inside one or contains one is refused unless the
//! grant says `sensitive = true`: a sample policy copied somewhere else,
//! or a `host = ".."` that resolves higher than meant, then fails closed.

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
