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
//!
//! Nothing read back is trusted for what it claims: every record (compiled
//! code, specs, a remembered signature check) is sealed with an HMAC-SHA256
//! over its file name and its bytes, keyed by a random secret kept in the
//! directory (`key`, 0600) that no file grant may reach
//! (`crate::sensitive::HostState`). A record written by anything but this
//! host, or renamed to another component's entry, fails its seal and is a
//! miss: a planted `.verified` file cannot make an unsigned component
//! "signed", and a renamed `.cwasm` cannot run under another digest.

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

#[derive(Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    /// The secret the records are sealed with.
    key: std::sync::Arc<[u8; KEY_BYTES]>,
}

impl std::fmt::Debug for ComponentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The cache's secret, in bytes: an HMAC-SHA256 key of the hash's size.
const KEY_BYTES: usize = 32;
/// The secret's file in the cache directory.
const KEY_FILE: &str = "key";
/// A seal: HMAC-SHA256's output, after the record's bytes.
const SEAL_BYTES: usize = 32;
/// Said first in every seal, so no other use of the key can make one.
const SEAL_DOMAIN: &[u8] = b"gadget-host cache record v1\0";

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

    /// Opens (creating, private) the cache directory and its secret.
    pub fn open(dir: &Path) -> std::io::Result<ComponentCache> {
        fs::create_dir_all(dir)?;
        let meta = fs::metadata(dir)?;
        if meta.uid() == current_uid() && meta.permissions().mode() & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        }
        let key = std::sync::Arc::new(secret(dir)?);
        Ok(ComponentCache {
            dir: dir.to_path_buf(),
            key,
        })
    }

    /// The seal of a record named `name` holding `bytes`.
    /// (`None` only if HMAC refused the key, which it does for no size:
    /// then nothing is sealed and nothing unseals.)
    fn seal(&self, name: &Path, bytes: &[u8]) -> Option<[u8; SEAL_BYTES]> {
        use hmac::{Hmac, Mac};
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key[..]).ok()?;
        mac.update(SEAL_DOMAIN);
        let name = name.file_name().unwrap_or_default().as_encoded_bytes();
        mac.update(&(name.len() as u64).to_le_bytes());
        mac.update(name);
        mac.update(bytes);
        Some(mac.finalize().into_bytes().into())
    }

    /// A record's bytes, if this host sealed them under this name.
    fn unseal<'a>(&self, name: &Path, sealed: &'a [u8]) -> Option<&'a [u8]> {
        use subtle::ConstantTimeEq as _;
        let (bytes, seal) = sealed.split_at_checked(sealed.len().checked_sub(SEAL_BYTES)?)?;
        bool::from(self.seal(name, bytes)?.ct_eq(seal)).then_some(bytes)
    }

    /// Reads a trusted record and checks its seal.
    fn read_sealed(&self, path: &Path) -> Option<Vec<u8>> {
        if !self.trusted(path) {
            return None;
        }
        let mut sealed = fs::read(path).ok()?;
        let len = self.unseal(path, &sealed)?.len();
        sealed.truncate(len);
        Some(sealed)
    }

    /// Writes a record with its seal.
    fn write_sealed(&self, path: &Path, mut bytes: Vec<u8>) -> std::io::Result<()> {
        let seal = self
            .seal(path, &bytes)
            .ok_or_else(|| std::io::Error::other("the cache's key cannot seal a record"))?;
        bytes.extend_from_slice(&seal);
        self.write_atomically(path, &bytes)
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
        let Some(bytes) = self.read_sealed(&path) else {
            tracing::debug!(path = %path.display(), "no cache entry sealed by this host");
            return None;
        };
        // SAFETY: the entry carries this host's seal over its name (which
        // pins the source bytes' digest and the engine's compatibility) and
        // its bytes, with a secret no gadget can read: it is code this host
        // compiled from exactly that component. wasmtime checks the header
        // and refuses mismatches with an error.
        match unsafe { Component::deserialize(engine, &bytes) } {
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
        let bytes = self.read_sealed(&path)?;
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
        self.write_sealed(&self.specs_path(engine, component_sha256), bytes)
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
        self.write_sealed(&self.entry_path(engine, component_sha256), bytes)
    }

    /// A verification remembered under `key` (see
    /// [`crate::provenance::Trust::check`]): the keys that verified.
    pub fn load_verified(&self, key: &str) -> Option<Vec<u8>> {
        self.read_sealed(&self.dir.join(format!("{key}.verified")))
    }

    /// Remembers a verification under `key`.
    pub fn store_verified(&self, key: &str, keys: &[u8]) -> std::io::Result<()> {
        self.write_sealed(&self.dir.join(format!("{key}.verified")), keys.to_vec())
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

/// The cache's secret: read from `dir/key`, or made (random, written
/// privately and only if no other process made it first).
fn secret(dir: &Path) -> std::io::Result<[u8; KEY_BYTES]> {
    private_secret(&dir.join(KEY_FILE))
}

/// A secret of the host's in a private file at `path` (in a directory of
/// the host's own state): read, or made (random, written privately and
/// only if no other process made it first).
pub(crate) fn private_secret(path: &Path) -> std::io::Result<[u8; KEY_BYTES]> {
    match read_private_secret(path)? {
        Some(key) => Ok(key),
        None => make_private_secret(path),
    }
}

/// The secret in the private file at `path`, if there is one of the
/// right size; an error when the file is not private to this user.
pub(crate) fn read_private_secret(path: &Path) -> std::io::Result<Option<[u8; KEY_BYTES]>> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !meta.is_file() || meta.uid() != current_uid() || meta.permissions().mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a private file of this user's; remove it to make a new one",
            path.display()
        )));
    }
    let bytes = fs::read(path)?;
    Ok(bytes.try_into().ok())
}

fn make_private_secret(path: &Path) -> std::io::Result<[u8; KEY_BYTES]> {
    use std::io::Read as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let read = read_private_secret;
    let mut key = [0u8; KEY_BYTES];
    fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    let tmp = dir.join(format!(".key-{}-{}", std::process::id(), unique_suffix()));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(&key)?;
    file.sync_all()?;
    // A hard link fails if another process placed its key first: then
    // that one is the key (and a key of the wrong size is replaced).
    let placed = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match placed {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match read(path)? {
            Some(key) => Ok(key),
            None => {
                fs::write(path, key)?;
                Ok(key)
            }
        },
        Err(e) => Err(e),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a gadget with write access to the cache would do: write a
    /// record by hand, or copy one to another name. Neither is read back.
    #[test]
    fn a_record_is_trusted_only_under_this_hosts_seal_and_its_own_name() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::open(&dir.path().join("cache")).unwrap();
        cache.store_verified("signed", b"acme-key-hash").unwrap();
        assert_eq!(
            cache.load_verified("signed").as_deref(),
            Some(&b"acme-key-hash"[..])
        );
        // Planted: the very bytes a record holds, without a seal, or with
        // a made-up one.
        let planted = cache.dir().join("unsigned.verified");
        fs::write(&planted, b"acme-key-hash").unwrap();
        fs::set_permissions(&planted, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(cache.load_verified("unsigned"), None);
        let mut forged = b"acme-key-hash".to_vec();
        forged.extend_from_slice(&[0u8; SEAL_BYTES]);
        fs::write(&planted, &forged).unwrap();
        assert_eq!(cache.load_verified("unsigned"), None);
        // Copied from a real record to another component's name.
        fs::copy(cache.dir().join("signed.verified"), &planted).unwrap();
        assert_eq!(cache.load_verified("unsigned"), None);
        // One byte changed in a real record.
        let real = cache.dir().join("signed.verified");
        let mut bytes = fs::read(&real).unwrap();
        bytes[0] ^= 1;
        fs::write(&real, &bytes).unwrap();
        assert_eq!(cache.load_verified("signed"), None);
        // The secret is private, and the same for the next process.
        let key = cache.dir().join(KEY_FILE);
        let mode = fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        cache.store_verified("again", b"x").unwrap();
        let reopened = ComponentCache::open(cache.dir()).unwrap();
        assert_eq!(reopened.load_verified("again").as_deref(), Some(&b"x"[..]));
        // A key file others could read is refused, not used.
        fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
        let error = ComponentCache::open(cache.dir()).unwrap_err().to_string();
        assert!(error.contains("not a private file"), "{error}");
    }

    #[test]
    fn compiled_code_is_loaded_only_under_the_digest_it_was_stored_for() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::open(dir.path()).unwrap();
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).unwrap();
        // The smallest component: its header.
        let component =
            Component::new(&engine, [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]).unwrap();
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        cache.store(&engine, &a, &component).unwrap();
        assert!(cache.load(&engine, &a).is_some());
        // Renamed to another component's entry: a miss, never a hit.
        fs::rename(cache.entry_path(&engine, &a), cache.entry_path(&engine, &b)).unwrap();
        assert!(cache.load(&engine, &b).is_none());
        assert!(cache.load(&engine, &a).is_none());
    }
}
