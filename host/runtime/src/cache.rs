//! The precompiled-component cache.
//!
//! Compiling a Python or JavaScript component takes seconds; loading its
//! precompiled form takes about a millisecond. Entries are keyed by the
//! component's sha256 and the engine's compatibility hash (wasmtime
//! version, compilation settings, CPU features), so a stale entry is simply
//! never looked up.
//!
//! Loading precompiled code is `unsafe` in wasmtime: it is machine code the
//! host will run. So only files this host wrote are loaded: the directory
//! is created private (0700), entries are written atomically (a private
//! temporary file, then `rename`), and an entry is loaded only if it and its
//! directory belong to the current user and are writable by nobody else.
//! Anything else is a miss, and the component is compiled from its bytes.
//!
//! Beside each entry, the gadget specs read from it (or the timeout that
//! reading them ended in): a component whose `specs` is slow costs that
//! once, not on every command.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::GadgetSpec;

/// What the cache did for one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheOutcome {
    /// Loaded precompiled code.
    Hit,
    /// Compiled, and stored for next time.
    Miss,
    /// Compiled; no cache in use (or it could not be written).
    Off,
}

#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    /// The cache directory: `$GADGET_CACHE_DIR`, else `$XDG_CACHE_HOME/gadget-host`,
    /// else `~/.cache/gadget-host`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("GADGET_CACHE_DIR") {
            return Some(PathBuf::from(dir));
        }
        if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir).join("gadget-host"));
        }
        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache").join("gadget-host"))
    }

    /// Opens (creating, private) the cache directory.
    pub fn open(dir: &Path) -> std::io::Result<ComponentCache> {
        fs::create_dir_all(dir)?;
        let meta = fs::metadata(dir)?;
        if meta.uid() == current_uid() && meta.permissions().mode() & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        }
        Ok(ComponentCache {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry path for a component with this sha256 on this engine.
    pub fn entry_path(&self, engine: &Engine, component_sha256: &str) -> PathBuf {
        let mut hasher = Sha256Hasher(Sha256::new());
        std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
        let engine_hash = hex(&hasher.0.finalize()[..8]);
        self.dir
            .join(format!("{component_sha256}-{engine_hash}.cwasm"))
    }

    /// Loads the precompiled component if a trustworthy entry exists.
    pub fn load(&self, engine: &Engine, component_sha256: &str) -> Option<Component> {
        let path = self.entry_path(engine, component_sha256);
        if !self.trusted(&path) {
            return None;
        }
        // SAFETY: the entry was written by this host (same user, private
        // directory, nobody else can write either), under a key that pins the
        // source bytes and the engine's compatibility; wasmtime checks the
        // header and refuses mismatches with an error.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::debug!(path = %path.display(), "ignoring unusable cache entry: {error}");
                None
            }
        }
    }

    /// The specs-cache entry beside a component's compiled code.
    fn specs_path(&self, engine: &Engine, component_sha256: &str) -> PathBuf {
        self.entry_path(engine, component_sha256)
            // The specs' shape is the same in every contract version so far
            // (0.2.0 reuses 0.1.0's types), so one tag serves both.
            .with_extension("specs-gadget-plugin-0.1.0.json")
    }

    /// The specs read from this component earlier (or the timeout that
    /// reading them ended in), if this host stored them.
    pub fn load_specs(
        &self,
        engine: &Engine,
        component_sha256: &str,
    ) -> Option<Result<Vec<GadgetSpec>, String>> {
        let path = self.specs_path(engine, component_sha256);
        if !self.trusted(&path) {
            return None;
        }
        let bytes = fs::read(&path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Remembers what reading a component's specs gave.
    pub fn store_specs(
        &self,
        engine: &Engine,
        component_sha256: &str,
        specs: &Result<Vec<GadgetSpec>, String>,
    ) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(specs).map_err(std::io::Error::other)?;
        self.write_atomically(&self.specs_path(engine, component_sha256), &bytes)
    }

    /// Stores a compiled component: written privately, then renamed into
    /// place, so a reader never sees half a file.
    pub fn store(
        &self,
        engine: &Engine,
        component_sha256: &str,
        component: &Component,
    ) -> std::io::Result<()> {
        let bytes = component
            .serialize()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.write_atomically(&self.entry_path(engine, component_sha256), &bytes)
    }

    /// A verification remembered under `key` (see
    /// [`crate::provenance::Trust::check`]): the keys that verified.
    pub fn load_verified(&self, key: &str) -> Option<Vec<u8>> {
        let path = self.dir.join(format!("{key}.verified"));
        if !self.trusted(&path) {
            return None;
        }
        fs::read(&path).ok()
    }

    /// Remembers a verification under `key`.
    pub fn store_verified(&self, key: &str, keys: &[u8]) -> std::io::Result<()> {
        self.write_atomically(&self.dir.join(format!("{key}.verified")), keys)
    }

    /// Writes privately, then renames into place.
    fn write_atomically(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = self
            .dir
            .join(format!(".tmp-{}-{}", std::process::id(), unique_suffix()));
        let write = || -> std::io::Result<()> {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            fs::rename(&tmp, path)
        };
        let result = write();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    fn trusted(&self, path: &Path) -> bool {
        let uid = current_uid();
        let private = |p: &Path| {
            fs::symlink_metadata(p)
                .is_ok_and(|m| m.uid() == uid && m.permissions().mode() & 0o022 == 0)
        };
        private(&self.dir) && private(path) && fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
    }
}

/// The sha256 of some bytes, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    nanos ^ (COUNTER.fetch_add(1, Ordering::Relaxed) << 32)
}

fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Feeds `Hash` output into sha256, giving a stable digest of the engine's
/// compatibility hash (std's `DefaultHasher` is not stable across builds).
struct Sha256Hasher(Sha256);

impl std::hash::Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
