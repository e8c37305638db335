//! `gadget.lock`: what `gadget lock` pinned of each plugin (its source, its
//! component's and its manifest's digests, its image manifest's digest when
//! it came from a registry, who signed it), and the check `--locked` makes
//! at load, before anything is compiled.
//!
//! ```toml
//! # Written by `gadget lock`; `--locked` refuses any plugin that differs.
//! version = 2
//!
//! [[plugin]]
//! name = "web"
//! source = "oci://ghcr.io/acme/web:1.0"
//! sha256 = "…64 hex digits…"            # the component
//! manifest-sha256 = "…64 hex digits…"   # its plugin.toml (absent: a bare component)
//! oci-digest = "sha256:…"               # the image manifest (registry plugins)
//! signed-by = ["acme"]      # the verified signers; [] when none
//! ```
//!
//! The source is recorded for the reader; the digests and the signers are
//! what is enforced, so a plugin directory may move and a registry may be
//! mirrored without breaking the lock, but not one byte of a component or
//! of the manifest that asks for its permissions may change, nor who
//! signed it. (Version 1 pinned the component alone: a swapped
//! `plugin.toml` widened what it asked for under the lock; it is refused,
//! to be written again.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock file's name when none is given.
pub const LOCK_FILE: &str = "gadget.lock";
/// The format this build reads and writes.
pub const LOCK_VERSION: u32 = 2;
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
    /// SHA-256 of its `plugin.toml` as read, hex; `None` for a bare
    /// component (which asks for nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<String>,
    /// The image manifest's digest (`sha256:...`) of a plugin pulled from
    /// a registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci_digest: Option<String>,
    /// The trusted signers whose signatures verified; empty when none did
    /// (unsigned, or no `[trust]` to verify them with).
    #[serde(default)]
    pub signed_by: Vec<String>,
}

/// What a plugin is, as the loader found it, for [`Lockfile::check`].
#[derive(Debug, Clone, Copy)]
pub struct LockSubject<'a> {
    pub name: &'a str,
    /// The component's SHA-256, hex.
    pub sha256: &'a str,
    /// Its `plugin.toml`'s SHA-256, hex (`None`: a bare component).
    pub manifest_sha256: Option<&'a str>,
    /// The image manifest's digest, when it came from a registry.
    pub oci_digest: Option<&'a str>,
    /// The trusted signers whose signatures verified.
    pub signed_by: &'a [String],
}

impl Lockfile {
    /// Reads and checks `path`.
    pub fn read(path: &Path) -> Result<Lockfile, LockError> {
        use gadget_core::operator_file::{self, OperatorFileError};
        let text = operator_file::read_text(path, MAX_LOCK_BYTES).map_err(|e| match e {
            OperatorFileError::Io { source, .. } => LockError::Read {
                path: path.to_path_buf(),
                source,
            },
            OperatorFileError::TooLarge { .. } => LockError::TooLarge {
                path: path.to_path_buf(),
            },
            other => LockError::Invalid {
                path: path.to_path_buf(),
                message: other.to_string(),
            },
        })?;
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
            let hex64 = |d: &str| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit());
            if !hex64(&plugin.sha256) {
                return Err(format!(
                    "plugin '{}': sha256 must be 64 hex digits",
                    plugin.name
                ));
            }
            if plugin.manifest_sha256.as_deref().is_some_and(|d| !hex64(d)) {
                return Err(format!(
                    "plugin '{}': manifest-sha256 must be 64 hex digits",
                    plugin.name
                ));
            }
            if plugin
                .oci_digest
                .as_deref()
                .is_some_and(|d| !d.strip_prefix("sha256:").is_some_and(hex64))
            {
                return Err(format!(
                    "plugin '{}': oci-digest must be sha256: and 64 hex digits",
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
            "# Written by `gadget lock`; `gadget --locked` refuses any plugin whose\n# component, manifest or image digest or signers differ. Write it again to accept a change.\n{body}"
        )
    }

    /// `--locked`: the plugin is exactly what was locked (component,
    /// manifest, image manifest when both came from a registry, signers);
    /// else why not, naming both sides.
    pub fn check(&self, found: &LockSubject<'_>) -> Result<(), String> {
        let LockSubject {
            name,
            sha256,
            signed_by,
            ..
        } = *found;
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
        let none = "none (a bare component)";
        if !locked
            .manifest_sha256
            .as_deref()
            .map(str::to_ascii_lowercase)
            .eq(&found.manifest_sha256.map(str::to_ascii_lowercase))
        {
            return Err(format!(
                "plugin '{name}': its plugin.toml is sha256 {}, but the lock file pins {} (from {}) (--locked): what it asks for may have changed; run `gadget lock` if the new manifest is meant",
                found.manifest_sha256.unwrap_or(none),
                locked.manifest_sha256.as_deref().unwrap_or(none),
                locked.source
            ));
        }
        if let (Some(pinned), Some(actual)) = (&locked.oci_digest, found.oci_digest)
            && !pinned.eq_ignore_ascii_case(actual)
        {
            return Err(format!(
                "plugin '{name}' was pulled as image manifest {actual}, but the lock file pins {pinned} (from {}) (--locked); run `gadget lock` if the new image is meant",
                locked.source
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
                manifest_sha256: Some("d".repeat(64)),
                oci_digest: Some(format!("sha256:{}", "e".repeat(64))),
                signed_by: vec!["acme".into()],
            }],
        }
    }

    #[test]
    fn a_lock_round_trips_and_refuses_any_difference_naming_both() {
        let lock = lock();
        assert_eq!(Lockfile::parse(&lock.to_toml()).unwrap(), lock);
        let acme = ["acme".to_string()];
        let (a, b, d, f) = (
            "a".repeat(64),
            "b".repeat(64),
            "d".repeat(64),
            "f".repeat(64),
        );
        let oci = format!("sha256:{}", "e".repeat(64));
        let moved = format!("sha256:{f}");
        let web = |sha256: &str, manifest: Option<&str>, image: Option<&str>, by: &[String]| {
            lock.check(&LockSubject {
                name: "web",
                sha256,
                manifest_sha256: manifest,
                oci_digest: image,
                signed_by: by,
            })
        };
        assert!(web(&a, Some(&d), Some(&oci), &acme).is_ok());
        // Moved to a directory (or mirrored): the source is not enforced.
        assert!(web(&a, Some(&d), None, &acme).is_ok());
        // A swapped plugin.toml, or none at all.
        let manifest = web(&a, Some(&f), Some(&oci), &acme).unwrap_err();
        assert!(
            manifest.contains("plugin.toml") && manifest.contains(&f) && manifest.contains(&d),
            "{manifest}"
        );
        let bare = web(&a, None, Some(&oci), &acme).unwrap_err();
        assert!(bare.contains("a bare component"), "{bare}");
        // A tag moved to another image manifest of the same component.
        let image = web(&a, Some(&d), Some(&moved), &acme).unwrap_err();
        assert!(image.contains(&moved) && image.contains(&oci), "{image}");
        let check = |sha256: &str, by: &[String]| web(sha256, Some(&d), Some(&oci), by);
        let digest = check(&b, &acme).unwrap_err();
        assert!(
            digest.contains(&"b".repeat(64)) && digest.contains(&"a".repeat(64)),
            "{digest}"
        );
        let signer = check(&a, &[]).unwrap_err();
        assert!(
            signer.contains("is not signed by a trusted signer")
                && signer.contains("pins signed by acme"),
            "{signer}"
        );
        let other = check(&a, &["evil".to_string()]).unwrap_err();
        assert!(other.contains("signed by evil"), "{other}");
        let missing = lock
            .check(&LockSubject {
                name: "text",
                sha256: &a,
                manifest_sha256: None,
                oci_digest: None,
                signed_by: &[],
            })
            .unwrap_err();
        assert!(missing.contains("not in the lock file"), "{missing}");
    }

    #[test]
    fn a_bad_lock_file_says_what_is_wrong() {
        for (text, says) in [
            ("version = 3\n", "version 3"),
            ("version = 1\n", "version 1"),
            ("version = 2\nsurprise = true\n", "unknown field"),
            (
                "version = 2\n[[plugin]]\nname = \"a\"\nsource = \"x\"\nsha256 = \"xyz\"\n",
                "64 hex digits",
            ),
        ] {
            let e = Lockfile::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
