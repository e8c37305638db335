//! Who built a component: signatures inside it (the WebAssembly
//! tool-conventions custom sections that `wasmsign2` writes and verifies,
//! so they travel with the file through any copy or registry) or beside it
//! in a detached `COMPONENT.sig` file, verified here, in-process, against
//! the operator's named signers. Ed25519 keys, in the files `wasmsign2`
//! reads and writes (raw, PEM or DER).

use std::path::{Path, PathBuf};

use wasmsign2::{KeyPair, Module, PublicKey, PublicKeySet, SecretKey, WSError};

/// A detached signature's file: the component's path with this added.
pub const DETACHED_SUFFIX: &str = ".sig";

/// Why a key or a signature could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what}: not an Ed25519 key in a form wasmsign2 reads (raw, PEM or DER): {source}")]
    Key { what: String, source: WSError },
    #[error("{path}: cannot sign it: {source}")]
    Sign { path: PathBuf, source: WSError },
    #[error(transparent)]
    KeyFile(#[from] gadget_core::operator_file::OperatorFileError),
}

/// The largest key file read: an Ed25519 key in any form is well under
/// a kilobyte; room for a PEM with comments.
const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

/// An operator's signer: a name and a public key.
#[derive(Debug, Clone)]
pub struct Signer {
    pub name: String,
    key: PublicKey,
}

impl Signer {
    /// `key` is a PEM public key written inline, or the path of a key file
    /// (relative to `base`, the policy's directory).
    pub fn new(name: &str, key: &str, base: &Path) -> Result<Signer, ProvenanceError> {
        let key = key.trim();
        let parsed = if key.starts_with("-----BEGIN") {
            PublicKey::from_pem(key).map_err(|source| ProvenanceError::Key {
                what: format!("trust.signers.{name}.key (inline)"),
                source,
            })?
        } else {
            let path = base.join(key);
            let bytes = gadget_core::operator_file::read(&path, MAX_KEY_FILE_BYTES)?;
            PublicKey::from_any(&bytes).map_err(|source| ProvenanceError::Key {
                what: format!("trust.signers.{name}.key ({})", path.display()),
                source,
            })?
        };
        Ok(Signer {
            name: name.to_string(),
            key: parsed,
        })
    }
}

/// What the signatures of a component say, for the operator's signers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Signed by these signers (by name, sorted), and unchanged since.
    Signed { by: Vec<String> },
    /// No signature, inside or beside it.
    Unsigned,
    /// Signatures, but none that any of the signers' keys verifies: made
    /// by another key, or the component was changed after it was signed.
    Unverified,
}

/// Verifies `component` (its bytes; its detached signature, if one was
/// beside it) against `signers`.
pub fn verify(component: &[u8], detached: Option<&[u8]>, signers: &[Signer]) -> Verification {
    let keys = PublicKeySet::new(signers.iter().map(|s| s.key.clone()).collect());
    let embedded = keys.verify(&mut &component[..], None);
    let outcome = match (embedded, detached) {
        (Err(WSError::NoSignatures), Some(detached)) => {
            keys.verify(&mut &component[..], Some(detached))
        }
        (outcome, _) => outcome,
    };
    match outcome {
        Ok(valid) => {
            let mut by: Vec<String> = signers
                .iter()
                .filter(|s| valid.contains(&s.key))
                .map(|s| s.name.clone())
                .collect();
            by.sort();
            by.dedup();
            Verification::Signed { by }
        }
        Err(WSError::NoSignatures) => Verification::Unsigned,
        Err(_) => Verification::Unverified,
    }
}

/// Makes a key pair: the secret key and the public key, each in the raw
/// form `wasmsign2` writes, to the two files (the secret one readable by
/// its owner only). Returns the public key as PEM, to write in a policy.
pub fn keygen(secret: &Path, public: &Path) -> Result<String, ProvenanceError> {
    let pair = KeyPair::generate();
    write_private(secret, &pair.sk.to_bytes())?;
    std::fs::write(public, pair.pk.to_bytes()).map_err(|source| ProvenanceError::Io {
        path: public.to_path_buf(),
        source,
    })?;
    Ok(pair.pk.to_pem())
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), ProvenanceError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |source| ProvenanceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    file.write_all(bytes).map_err(io)
}

/// Signs the component at `path` with the secret key in `key`: the
/// signature is added to those it has (several signers may sign one
/// component). Returns the signed component and the signature alone (for
/// a detached `.sig` file).
pub fn sign(path: &Path, key: &Path) -> Result<(Vec<u8>, Vec<u8>), ProvenanceError> {
    let key_bytes = gadget_core::operator_file::read(key, MAX_KEY_FILE_BYTES)?;
    let secret = SecretKey::from_any(&key_bytes).map_err(|source| ProvenanceError::Key {
        what: key.display().to_string(),
        source,
    })?;
    let failed = |source| ProvenanceError::Sign {
        path: path.to_path_buf(),
        source,
    };
    let module = Module::deserialize_from_file(path).map_err(failed)?;
    let (signed, signature) = secret
        .sign_multi(module, None, false, false)
        .map_err(failed)?;
    let mut bytes = Vec::new();
    signed.serialize(&mut bytes).map_err(failed)?;
    Ok((bytes, signature))
}

/// The most a detached signature file may hold: a signature is about a
/// hundred bytes per signer.
pub const MAX_DETACHED_SIGNATURE_BYTES: u64 = 64 << 10;

/// The operator's `[trust]`, ready to check components against.
#[derive(Debug, Clone)]
pub struct Trust {
    require: crate::policy::Require,
    signers: Vec<Signer>,
    /// A signer's key could not be read: every plugin is refused with
    /// this, rather than loaded unchecked.
    broken: Option<String>,
}

impl Trust {
    /// The policy's `[trust]` (key files relative to `base`); `None` when it
    /// asks for nothing (no signer, nothing required): no component is read
    /// twice for nothing.
    pub fn from_policy(policy: &crate::policy::Policy, base: &Path) -> Option<Trust> {
        let trust = &policy.trust;
        let required = trust.require == crate::policy::Require::Signed
            || policy
                .plugins
                .values()
                .any(|p| p.require == Some(crate::policy::Require::Signed) || p.signer.is_some());
        if trust.signers.is_empty() && !required {
            return None;
        }
        let mut signers = Vec::new();
        let mut broken = None;
        for (name, spec) in &trust.signers {
            match Signer::new(name, &spec.key, base) {
                Ok(signer) => signers.push(signer),
                Err(e) => {
                    broken.get_or_insert(e.to_string());
                }
            }
        }
        for (plugin, settings) in &policy.plugins {
            if let Some(signer) = &settings.signer
                && !trust.signers.contains_key(signer)
            {
                broken.get_or_insert(format!(
                    "plugins.{plugin}.signer = \"{signer}\": there is no [trust.signers.{signer}]"
                ));
            }
        }
        Some(Trust {
            require: trust.require,
            signers,
            broken,
        })
    }

    /// Why the operator's `[trust]` is unusable, if it is.
    pub fn problem(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// What the signatures of plugin `name`'s component (`bytes`, at
    /// `path`, digest `sha256`) say, or why it may not load. `require`:
    /// the plugin's own `[plugins.NAME] require`, if any.
    pub fn check(
        &self,
        name: &str,
        path: &Path,
        bytes: &[u8],
        sha256: &str,
        require: Option<crate::policy::Require>,
        cache: Option<&crate::cache::ComponentCache>,
    ) -> Result<Verification, String> {
        let short = &sha256[..sha256.len().min(12)];
        if let Some(problem) = &self.broken {
            return Err(format!(
                "plugin {name} (sha256 {short}) not loaded: [trust] cannot be used: {problem}"
            ));
        }
        let detached = detached_signature(path)?;
        let verification = self.verified(bytes, sha256, detached.as_deref(), cache);
        let require = require.unwrap_or(self.require);
        match &verification {
            Verification::Unverified if !self.signers.is_empty() => Err(format!(
                "plugin {name} (sha256 {short}) refused: it carries a signature that no key in [trust.signers] verifies (it was changed after it was signed, or signed by another key); trust its signer's key in [trust.signers], or have it signed again"
            )),
            Verification::Unsigned | Verification::Unverified
                if require == crate::policy::Require::Signed =>
            {
                Err(format!(
                    "plugin {name} (sha256 {short}) refused: it is not signed by a key in [trust.signers], and signatures are required; sign it (gadget sign --key KEY {}) with a key the policy trusts, or set [plugins.{name}] require = \"any\"",
                    path.display()
                ))
            }
            _ => Ok(verification),
        }
    }
}

impl Trust {
    /// [`verify`], remembered in the component cache: a component this
    /// host verified with these very keys (and this detached signature)
    /// is not hashed again at the next start. The entry's name binds the
    /// digest, every signer's key and the detached signature, and holds
    /// the keys that verified; the cache is private to its user.
    fn verified(
        &self,
        bytes: &[u8],
        sha256: &str,
        detached: Option<&[u8]>,
        cache: Option<&crate::cache::ComponentCache>,
    ) -> Verification {
        let Some(cache) = cache else {
            return verify(bytes, detached, &self.signers);
        };
        let entry = self.entry_name(sha256, detached);
        if let Some(remembered) = cache.load_verified(&entry) {
            let mut by: Vec<String> = self
                .signers
                .iter()
                .filter(|s| {
                    let hex = crate::cache::sha256_hex(&s.key.to_bytes());
                    remembered
                        .split(|b| *b == b'\n')
                        .any(|line| line == hex.as_bytes())
                })
                .map(|s| s.name.clone())
                .collect();
            if !by.is_empty() {
                by.sort();
                return Verification::Signed { by };
            }
        }
        let verification = verify(bytes, detached, &self.signers);
        if let Verification::Signed { by } = &verification {
            let lines: Vec<String> = self
                .signers
                .iter()
                .filter(|s| by.contains(&s.name))
                .map(|s| crate::cache::sha256_hex(&s.key.to_bytes()))
                .collect();
            if let Err(e) = cache.store_verified(&entry, lines.join("\n").as_bytes()) {
                tracing::debug!("not remembering a verification: {e}");
            }
        }
        verification
    }
}

impl Trust {
    /// The name a verification of this component (its digest, detached
    /// signature and these signers' keys) is remembered under. Anyone can
    /// work it out: what makes a record count is the cache's seal.
    fn entry_name(&self, sha256: &str, detached: Option<&[u8]>) -> String {
        use sha2::{Digest as _, Sha256};
        let mut keys: Vec<Vec<u8>> = self.signers.iter().map(|s| s.key.to_bytes()).collect();
        keys.sort();
        let mut hasher = Sha256::new();
        hasher.update(b"gadget-host verified v1\0");
        hasher.update(sha256.as_bytes());
        for key in &keys {
            hasher.update((key.len() as u64).to_le_bytes());
            hasher.update(key);
        }
        hasher.update(detached.map_or(&b"-"[..], |d| d));
        crate::cache::sha256_hex(&hasher.finalize())
    }
}

/// The detached signature beside `component`, if there is one.
fn detached_signature(component: &Path) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read as _;
    let path = PathBuf::from(format!("{}{DETACHED_SUFFIX}", component.display()));
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut bytes = Vec::new();
    file.take(MAX_DETACHED_SIGNATURE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_DETACHED_SIGNATURE_BYTES {
        return Err(format!(
            "{}: over {MAX_DETACHED_SIGNATURE_BYTES} bytes, more than any signature",
            path.display()
        ));
    }
    Ok(Some(bytes))
}

impl Verification {
    /// For people and JSON: `signed by acme`, `unsigned`, `signed, unverified`.
    pub fn describe(&self) -> String {
        match self {
            Verification::Signed { by } => format!("signed by {}", by.join(", ")),
            Verification::Unsigned => "unsigned".into(),
            Verification::Unverified => "signed, not verified (no trusted signer's key)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: its header.
    const COMPONENT: &[u8] = &[0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    #[test]
    fn signed_unsigned_tampered_and_another_key_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.wasm");
        // A component with a custom section to change later.
        let mut component = COMPONENT.to_vec();
        component.extend_from_slice(&[0x00, 0x05, 0x01, b'x', b'a', b'b', b'c']);
        std::fs::write(&path, &component).unwrap();
        let (secret, public) = (dir.path().join("k.sec"), dir.path().join("k.pub"));
        let pem = keygen(&secret, &public).unwrap();
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"), "{pem}");
        let acme = Signer::new("acme", "k.pub", dir.path()).unwrap();
        let inline = Signer::new("inline", &pem, dir.path()).unwrap();

        assert_eq!(
            verify(&component, None, std::slice::from_ref(&acme)),
            Verification::Unsigned
        );
        let (signed, detached) = sign(&path, &secret).unwrap();
        // Signed, by a key no one here trusts yet.
        assert_eq!(verify(&signed, None, &[]), Verification::Unverified);
        assert_eq!(
            verify(&signed, None, &[acme.clone(), inline.clone()]),
            Verification::Signed {
                by: vec!["acme".into(), "inline".into()]
            }
        );
        // Detached, beside the unsigned component.
        assert_eq!(
            verify(&component, Some(&detached), std::slice::from_ref(&acme)),
            Verification::Signed {
                by: vec!["acme".into()]
            }
        );
        // One byte of content changed.
        let mut tampered = signed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert_eq!(
            verify(&tampered, None, std::slice::from_ref(&acme)),
            Verification::Unverified
        );
        // Another key.
        let other = dir.path().join("other");
        keygen(&dir.path().join("other.sec"), &other).unwrap();
        let stranger = Signer::new("stranger", "other", dir.path()).unwrap();
        assert_eq!(verify(&signed, None, &[stranger]), Verification::Unverified);
        // The secret key is its owner's alone, and never overwritten.
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0);
        assert!(keygen(&secret, &public).is_err());
    }

    /// The attack of a gadget that can write the cache: the record of a
    /// signed component's verification, copied (or written) under an
    /// unsigned component's entry name, must not make it "signed".
    #[test]
    fn a_remembered_verification_cannot_be_planted_for_another_component() {
        let dir = tempfile::tempdir().unwrap();
        let unsigned_path = dir.path().join("c.wasm");
        let mut unsigned = COMPONENT.to_vec();
        unsigned.extend_from_slice(&[0x00, 0x05, 0x01, b'x', b'a', b'b', b'c']);
        std::fs::write(&unsigned_path, &unsigned).unwrap();
        let (secret, public) = (dir.path().join("k.sec"), dir.path().join("k.pub"));
        keygen(&secret, &public).unwrap();
        let (signed, _) = sign(&unsigned_path, &secret).unwrap();
        let signed_path = dir.path().join("signed.wasm");
        std::fs::write(&signed_path, &signed).unwrap();
        let trust = Trust {
            require: crate::policy::Require::Any,
            signers: vec![Signer::new("acme", "k.pub", dir.path()).unwrap()],
            broken: None,
        };
        let cache = crate::cache::ComponentCache::open(&dir.path().join("cache")).unwrap();
        let check = |path: &Path, bytes: &[u8]| {
            let sha = crate::cache::sha256_hex(bytes);
            trust
                .check("p", path, bytes, &sha, None, Some(&cache))
                .unwrap()
        };
        let acme = Verification::Signed {
            by: vec!["acme".into()],
        };
        assert_eq!(check(&signed_path, &signed), acme);
        // Remembered: the second check reads the record.
        assert_eq!(check(&signed_path, &signed), acme);
        let record = |bytes: &[u8]| {
            cache.dir().join(format!(
                "{}.verified",
                trust.entry_name(&crate::cache::sha256_hex(bytes), None)
            ))
        };
        assert!(record(&signed).is_file());
        // Copied to the unsigned component's name.
        std::fs::copy(record(&signed), record(&unsigned)).unwrap();
        assert_eq!(check(&unsigned_path, &unsigned), Verification::Unsigned);
        // Written whole, as the record's plain contents would be.
        let key_hash = crate::cache::sha256_hex(&trust.signers[0].key.to_bytes());
        std::fs::write(record(&unsigned), key_hash.as_bytes()).unwrap();
        assert_eq!(check(&unsigned_path, &unsigned), Verification::Unsigned);
    }

    #[test]
    fn a_detached_signature_past_its_bound_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let component = dir.path().join("c.wasm");
        std::fs::write(&component, COMPONENT).unwrap();
        assert_eq!(detached_signature(&component).unwrap(), None);
        let beside = dir.path().join("c.wasm.sig");
        std::fs::write(
            &beside,
            vec![0u8; MAX_DETACHED_SIGNATURE_BYTES as usize + 1],
        )
        .unwrap();
        let refused = detached_signature(&component).unwrap_err();
        assert!(refused.contains("more than any signature"), "{refused}");
        std::fs::write(&beside, [1u8, 2, 3]).unwrap();
        assert_eq!(detached_signature(&component).unwrap(), Some(vec![1, 2, 3]));
    }
}
