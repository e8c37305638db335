//! `gadget.lock`: what `gadget lock` pinned of each plugin (its source, its
//! component's digest, who signed it), and the check `--locked` makes at
//! load, before anything is compiled.
//!
//! ```toml
//! # Written by `gadget lock`; `--locked` refuses any plugin that differs.
//! version = 1
//!
//! [[plugin]]
//! name = "web"
//! source = "oci://ghcr.io/acme/web:1.0"
//! sha256 = "…64 hex digits…"
//! signed-by = ["acme"]      # the verified signers; [] when none
//! ```
//!
//! The source is recorded for the reader; the digest and the signers are
//! what is enforced, so a plugin directory may move and a registry may be
//! mirrored without breaking the lock, but not one byte of a component may
//! change, nor who signed it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock file's name when none is given.
pub const LOCK_FILE: &str = "gadget.lock";
/// The format this build reads and writes.
pub const LOCK_VERSION: u32 = 1;
/// Largest lock file read, in bytes: a plugin's entry is about 200 bytes,
/// so this holds thousands; it bounds what a bad file makes the host parse.
pub const MAX_LOCK_BYTES: u64 = 1 << 20;

/// Why a lock file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{}: {source} (write one with `gadget lock`)", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: over {MAX_LOCK_BYTES} bytes", path.display())]
    TooLarge { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// A whole lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    pub version: u32,
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<LockedPlugin>,
}

/// One plugin as it was locked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LockedPlugin {
    pub name: String,
    pub source: String,
    /// SHA-256 of the component, hex.
    pub sha256: String,
    /// The trusted signers whose signatures verified; empty when none did
    /// (unsigned, or no `[trust]` to verify them with).
    #[serde(default)]
    pub signed_by: Vec<String>,
}

impl Lockfile {
    /// Reads and checks `path`.
    pub fn read(path: &Path) -> Result<Lockfile, LockError> {
        let read = |source| LockError::Read {
            path: path.to_path_buf(),
            source,
        };
        if std::fs::metadata(path).map_err(read)?.len() > MAX_LOCK_BYTES {
            return Err(LockError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        Lockfile::parse(&text).map_err(|message| LockError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses a lock file's text.
    pub fn parse(text: &str) -> Result<Lockfile, String> {
        let lock: Lockfile = toml::from_str(text).map_err(|e| e.message().to_string())?;
        if lock.version != LOCK_VERSION {
            return Err(format!(
                "version {} is not one this gadget reads ({LOCK_VERSION}); write it again with `gadget lock`",
                lock.version
            ));
        }
        let mut names = BTreeSet::new();
        for plugin in &lock.plugins {
            if !names.insert(plugin.name.as_str()) {
                return Err(format!("plugin '{}' is locked twice", plugin.name));
            }
            if plugin.sha256.len() != 64 || !plugin.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "plugin '{}': sha256 must be 64 hex digits",
                    plugin.name
                ));
            }
        }
        Ok(lock)
    }

    /// The file's text, plugins in name order.
    pub fn to_toml(&self) -> String {
        let mut sorted = self.clone();
        sorted.plugins.sort_by(|a, b| a.name.cmp(&b.name));
        let body = toml::to_string(&sorted).unwrap_or_default();
        format!(
            "# Written by `gadget lock`; `gadget --locked` refuses any plugin whose\n# component digest or signers differ. Write it again to accept a change.\n{body}"
        )
    }

    /// `--locked`: the plugin `name`, whose component has `sha256` and
    /// verified as signed by `signed_by`, is exactly what was locked; else
    /// why not, naming both sides.
    pub fn check(&self, name: &str, sha256: &str, signed_by: &[String]) -> Result<(), String> {
        let Some(locked) = self.plugins.iter().find(|p| p.name == name) else {
            return Err(format!(
                "plugin '{name}' (sha256 {sha256}) is not in the lock file (--locked); run `gadget lock` to add it"
            ));
        };
        if !locked.sha256.eq_ignore_ascii_case(sha256) {
            return Err(format!(
                "plugin '{name}' is sha256 {sha256}, but the lock file pins sha256 {} (from {}) (--locked); run `gadget lock` if the new component is meant",
                locked.sha256, locked.source
            ));
        }
        let set = |names: &[String]| names.iter().cloned().collect::<BTreeSet<_>>();
        if set(&locked.signed_by) != set(signed_by) {
            let said = |names: &[String], none: &str| {
                if names.is_empty() {
                    none.to_string()
                } else {
                    format!("signed by {}", names.join(", "))
                }
            };
            return Err(format!(
                "plugin '{name}' is {}, but the lock file pins {} (--locked); run `gadget lock` if that is meant",
                said(signed_by, "not signed by a trusted signer"),
                said(&locked.signed_by, "no trusted signer")
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> Lockfile {
        Lockfile {
            version: LOCK_VERSION,
            plugins: vec![LockedPlugin {
                name: "web".into(),
                source: "oci://127.0.0.1:5000/web:1".into(),
                sha256: "a".repeat(64),
                signed_by: vec!["acme".into()],
            }],
        }
    }

    #[test]
    fn a_lock_round_trips_and_refuses_any_difference_naming_both() {
        let lock = lock();
        assert_eq!(Lockfile::parse(&lock.to_toml()).unwrap(), lock);
        let acme = ["acme".to_string()];
        assert!(lock.check("web", &"a".repeat(64), &acme).is_ok());
        let digest = lock.check("web", &"b".repeat(64), &acme).unwrap_err();
        assert!(
            digest.contains(&"b".repeat(64)) && digest.contains(&"a".repeat(64)),
            "{digest}"
        );
        let signer = lock.check("web", &"a".repeat(64), &[]).unwrap_err();
        assert!(
            signer.contains("is not signed by a trusted signer")
                && signer.contains("pins signed by acme"),
            "{signer}"
        );
        let other = lock
            .check("web", &"a".repeat(64), &["evil".to_string()])
            .unwrap_err();
        assert!(other.contains("signed by evil"), "{other}");
        let missing = lock.check("text", &"c".repeat(64), &[]).unwrap_err();
        assert!(missing.contains("not in the lock file"), "{missing}");
    }

    #[test]
    fn a_bad_lock_file_says_what_is_wrong() {
        for (text, says) in [
            ("version = 2\n", "version 2"),
            ("version = 1\nsurprise = true\n", "unknown field"),
            (
                "version = 1\n[[plugin]]\nname = \"a\"\nsource = \"x\"\nsha256 = \"xyz\"\n",
                "64 hex digits",
            ),
        ] {
            let e = Lockfile::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
