//! The pull side: what a registry sends, checked, bounded and cached by
//! digest; what a tag last named, for when the registry cannot be reached.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use oci_client::Client;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde::{Deserialize, Serialize};

use super::{
    CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, MAX_IMAGE_MANIFEST_BYTES, OciError, OciOptions, OciRef,
    PLUGIN_MANIFEST_ANNOTATION, credentials, is_sha256_digest, registry_error,
};
use crate::cache::sha256_hex;
use crate::loader::MAX_COMPONENT_BYTES;
use crate::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest};

/// A plugin on this machine that came from a registry.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The reference as given.
    pub reference: String,
    /// The image manifest's digest (`sha256:...`).
    pub digest: String,
    /// A plugin directory (with `plugin.toml`) or a bare `.wasm` file.
    pub local: PathBuf,
    /// The component's sha256 (hex), as the loader will see it.
    pub component_sha256: String,
    pub component_bytes: u64,
    /// The artifact carried a `plugin.toml`.
    pub with_manifest: bool,
    pub fetch: Fetch,
}

/// Where a pulled plugin's bytes came from this time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    Downloaded,
    /// Already cached under the manifest's digest.
    Cached,
    /// The registry could not be reached; the digest the tag last named.
    CachedOffline {
        reason: String,
    },
}

/// What a cache entry says of itself (`entry.json`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Entry {
    digest: String,
    /// The file or directory the loader is given, relative to the entry.
    local: String,
    component_sha256: String,
    component_bytes: u64,
    with_manifest: bool,
}

const ENTRY_FILE: &str = "entry.json";
/// The image manifest as the registry sent it, kept in the entry so that
/// every use checks the entry against the digest it is filed under.
const IMAGE_MANIFEST_FILE: &str = "manifest.json";

/// What a layer's declared size reserves up front, in bytes (the rest as
/// bytes arrive): a hostile manifest declaring 256 MiB costs nothing until
/// it sends them.
const INITIAL_LAYER_CAPACITY: usize = 1 << 20;

/// Pulled artifacts, by manifest digest: `DIR/sha256/HEX/`, and what each
/// tag last named: `DIR/tags/HASH`.
#[derive(Debug, Clone)]
pub struct OciStore {
    root: PathBuf,
}

impl OciStore {
    /// The store under the compile cache's directory.
    pub fn open(cache_dir: &Path) -> Result<OciStore, OciError> {
        let root = cache_dir.join("oci");
        for dir in [root.join("sha256"), root.join("tags")] {
            std::fs::create_dir_all(&dir).map_err(|source| OciError::Io { path: dir, source })?;
        }
        Ok(OciStore { root })
    }

    fn entry_dir(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.root.join("sha256").join(hex)
    }

    fn tag_file(&self, reference: &OciRef) -> PathBuf {
        let whole = format!(
            "{}/{}:{}",
            reference.registry(),
            reference.reference.repository(),
            reference.reference.tag().unwrap_or("latest")
        );
        self.root.join("tags").join(sha256_hex(whole.as_bytes()))
    }

    /// What the cache holds for `reference`: by its digest, else by what its
    /// tag last named.
    pub fn cached(&self, reference: &OciRef) -> Option<Pulled> {
        let digest = match reference.digest() {
            Some(digest) => digest.to_string(),
            None => {
                let text = std::fs::read_to_string(self.tag_file(reference)).ok()?;
                let digest = text.trim().to_string();
                is_sha256_digest(&digest).then_some(digest)?
            }
        };
        self.entry(reference, &digest, Fetch::Cached)
    }

    /// The entry filed under `digest`, checked against it: the image
    /// manifest kept in it must hash to `digest`, the `plugin.toml` must be
    /// the one it carries, and the component's digest is the one its layer
    /// names (the loader refuses a component file that is not). Nothing the
    /// entry says of itself is taken on its word: a file written into the
    /// store by anything else is a miss, and is pulled again.
    fn entry(&self, reference: &OciRef, digest: &str, fetch: Fetch) -> Option<Pulled> {
        let dir = self.entry_dir(digest);
        let text = read_bounded(&dir.join(ENTRY_FILE), MAX_IMAGE_MANIFEST_BYTES as u64)?;
        let entry: Entry = serde_json::from_slice(&text).ok()?;
        if entry.digest != digest || !is_plain_file_name(&entry.local) {
            return None;
        }
        let manifest_bytes = read_bounded(
            &dir.join(IMAGE_MANIFEST_FILE),
            MAX_IMAGE_MANIFEST_BYTES as u64,
        )?;
        if format!("sha256:{}", sha256_hex(&manifest_bytes)) != digest {
            tracing::warn!(entry = %dir.display(), "a cached OCI entry does not match its digest: pulling it again");
            return None;
        }
        let manifest: OciImageManifest = serde_json::from_slice(&manifest_bytes).ok()?;
        let layer = match &manifest.layers[..] {
            [layer] if layer.media_type == LAYER_MEDIA_TYPE => layer,
            _ => return None,
        };
        let component_sha256 = layer.digest.strip_prefix("sha256:")?.to_string();
        let carried = manifest
            .annotations
            .as_ref()
            .and_then(|a| a.get(PLUGIN_MANIFEST_ANNOTATION));
        let local = dir.join(&entry.local);
        match carried {
            Some(text) => {
                let kept = read_bounded(&local.join(MANIFEST_FILE), MAX_MANIFEST_BYTES)?;
                if kept != text.as_bytes() {
                    tracing::warn!(entry = %dir.display(), "a cached OCI entry's plugin.toml is not the one its manifest carries: pulling it again");
                    return None;
                }
            }
            None if local.is_dir() => return None,
            None => {}
        }
        Some(Pulled {
            reference: reference.to_string(),
            digest: entry.digest,
            local,
            component_sha256,
            component_bytes: entry.component_bytes,
            with_manifest: carried.is_some(),
            fetch,
        })
    }

    /// The plugin `reference` names, from the cache when its digest is
    /// known there, else from the registry. A tag is asked of the registry
    /// each time (tags move); when the registry cannot be reached, the
    /// digest the tag last named is used and [`Fetch::CachedOffline`] says so.
    pub async fn pull(&self, reference: &OciRef, options: &OciOptions) -> Result<Pulled, OciError> {
        if let Some(digest) = reference.digest()
            && let Some(pulled) = self.entry(reference, digest, Fetch::Cached)
        {
            return Ok(pulled);
        }
        let client = options.client(reference);
        let auth = credentials(reference)?;
        let fetched = match super::fetch::manifest(reference, options, &auth).await {
            Ok(fetched) => fetched,
            Err(super::fetch::FetchFailure::Unreachable(message)) => {
                return match self.cached(reference) {
                    Some(pulled) => Ok(Pulled {
                        fetch: Fetch::CachedOffline { reason: message },
                        ..pulled
                    }),
                    None => Err(OciError::Unreachable {
                        reference: reference.to_string(),
                        message,
                    }),
                };
            }
            Err(super::fetch::FetchFailure::Refused(e)) => return Err(e),
        };
        let bytes = fetched.bytes;
        // The digest is computed here, not taken from a header.
        let digest = format!("sha256:{}", sha256_hex(&bytes));
        if let Some(expected) = reference.digest()
            && expected != digest
        {
            return Err(OciError::DigestMismatch {
                reference: reference.to_string(),
                expected: expected.to_string(),
                actual: digest,
            });
        }
        let pulled = match self.entry(reference, &digest, Fetch::Cached) {
            Some(pulled) => pulled,
            None => {
                // The blob pull authenticates with what the manifest's fetch
                // found may be sent (never the credentials to another host).
                client
                    .auth(
                        &reference.reference,
                        &fetched.auth,
                        oci_client::RegistryOperation::Pull,
                    )
                    .await
                    .map_err(|e| registry_error(reference, &e))?;
                self.download(reference, &client, &digest, &bytes).await?;
                self.entry(reference, &digest, Fetch::Downloaded)
                    .ok_or_else(|| OciError::Io {
                        path: self.entry_dir(&digest),
                        source: std::io::Error::other("the entry just written cannot be read"),
                    })?
            }
        };
        if reference.digest().is_none() {
            let tag_file = self.tag_file(reference);
            write_atomically(&tag_file, digest.as_bytes())?;
        }
        Ok(pulled)
    }

    async fn download(
        &self,
        reference: &OciRef,
        client: &Client,
        digest: &str,
        manifest_bytes: &[u8],
    ) -> Result<(), OciError> {
        let not_component = |reason: String| OciError::NotAComponent {
            reference: reference.to_string(),
            reason,
        };
        let manifest: OciImageManifest = serde_json::from_slice(manifest_bytes)
            .map_err(|e| not_component(format!("its manifest is not an image manifest: {e}")))?;
        if manifest.config.media_type != CONFIG_MEDIA_TYPE {
            return Err(not_component(format!(
                "its config is {}",
                manifest.config.media_type
            )));
        }
        let layer = match &manifest.layers[..] {
            [layer] if layer.media_type == LAYER_MEDIA_TYPE => layer,
            [layer] => return Err(not_component(format!("its layer is {}", layer.media_type))),
            layers => return Err(not_component(format!("it has {} layers", layers.len()))),
        };
        if layer.size < 0 || layer.size as u64 > MAX_COMPONENT_BYTES {
            return Err(OciError::TooLarge {
                reference: reference.to_string(),
                what: "component",
                bytes: layer.size.max(0) as u64,
                limit: MAX_COMPONENT_BYTES,
            });
        }
        let plugin_toml = manifest
            .annotations
            .as_ref()
            .and_then(|a| a.get(PLUGIN_MANIFEST_ANNOTATION));
        let plugin = plugin_toml
            .map(|text| checked_plugin_manifest(reference, text))
            .transpose()?;
        let component = self.fetch_layer(reference, client, layer).await?;

        let final_dir = self.entry_dir(digest);
        let staging = self.root.join("sha256").join(format!(
            ".partial-{}-{}",
            std::process::id(),
            &sha256_hex(digest.as_bytes())[..12]
        ));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OciError::Io { path, source }
        };
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).map_err(io(&staging))?;
        let (local, with_manifest) = match (&plugin, plugin_toml) {
            (Some(manifest), Some(text)) => {
                let plugin_dir = staging.join("plugin");
                std::fs::create_dir(&plugin_dir).map_err(io(&plugin_dir))?;
                std::fs::write(plugin_dir.join(MANIFEST_FILE), text).map_err(io(&plugin_dir))?;
                std::fs::write(plugin_dir.join(&manifest.component), &component)
                    .map_err(io(&plugin_dir))?;
                ("plugin".to_string(), true)
            }
            _ => {
                let name = reference.bare_file_name();
                std::fs::write(staging.join(&name), &component).map_err(io(&staging))?;
                (name, false)
            }
        };
        let entry = Entry {
            digest: digest.to_string(),
            local,
            component_sha256: sha256_hex(&component),
            component_bytes: component.len() as u64,
            with_manifest,
        };
        let json = serde_json::to_vec_pretty(&entry).map_err(|e| OciError::Io {
            path: staging.clone(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(staging.join(ENTRY_FILE), json).map_err(io(&staging))?;
        std::fs::write(staging.join(IMAGE_MANIFEST_FILE), manifest_bytes).map_err(io(&staging))?;
        // Content-addressed: if another process got there first, its entry
        // holds the same bytes. An entry there that fails its check (made
        // by an older build, or written by something else) is replaced.
        if self.entry(reference, digest, Fetch::Cached).is_none() {
            let _ = std::fs::remove_dir_all(&final_dir);
        }
        if std::fs::rename(&staging, &final_dir).is_err() {
            let _ = std::fs::remove_dir_all(&staging);
            if !final_dir.join(ENTRY_FILE).is_file() {
                return Err(OciError::Io {
                    path: final_dir,
                    source: std::io::Error::other("cannot move the pulled plugin into the cache"),
                });
            }
        }
        Ok(())
    }

    async fn fetch_layer(
        &self,
        reference: &OciRef,
        client: &Client,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, OciError> {
        let declared = layer.size.max(0) as usize;
        let mut sink = BoundedSink {
            // A registry's word is not memory: the buffer grows with what
            // actually arrives.
            bytes: Vec::with_capacity(declared.min(INITIAL_LAYER_CAPACITY)),
            limit: declared,
        };
        client
            .pull_blob(&reference.reference, layer, &mut sink)
            .await
            .map_err(|e| registry_error(reference, &e))?;
        let actual = format!("sha256:{}", sha256_hex(&sink.bytes));
        if actual != layer.digest {
            return Err(OciError::DigestMismatch {
                reference: reference.to_string(),
                expected: layer.digest.clone(),
                actual,
            });
        }
        Ok(sink.bytes)
    }
}

/// A pulled `plugin.toml`: parsed and checked as the loader will, its
/// component a plain file name (it is written inside the cache entry).
fn checked_plugin_manifest(reference: &OciRef, text: &str) -> Result<Manifest, OciError> {
    let bad = |reason: String| OciError::PluginManifest {
        reference: reference.to_string(),
        reason,
    };
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(bad(format!("it is over {MAX_MANIFEST_BYTES} bytes")));
    }
    let manifest = Manifest::parse(text, Path::new(PLUGIN_MANIFEST_ANNOTATION))
        .map_err(|e| bad(e.to_string()))?;
    let component = manifest.component.to_string_lossy();
    if !is_plain_file_name(&component) || component == MANIFEST_FILE || component == ENTRY_FILE {
        return Err(bad(format!(
            "its component must be a file name beside plugin.toml, not '{component}'"
        )));
    }
    Ok(manifest)
}

/// A regular file's bytes, if it is one and no larger than `limit`.
fn read_bounded(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= limit).then_some(bytes)
}

fn is_plain_file_name(name: &str) -> bool {
    let mut components = Path::new(name).components();
    matches!(
        (components.next(), components.next()),
        (Some(std::path::Component::Normal(_)), None)
    ) && !name.contains(['/', '\\'])
}

/// Collects a blob, refusing more than the manifest said it was.
struct BoundedSink {
    bytes: Vec<u8>,
    limit: usize,
}

impl tokio::io::AsyncWrite for BoundedSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.bytes.len() + buf.len() > self.limit {
            return Poll::Ready(Err(std::io::Error::other(format!(
                "the registry sent more than the {} bytes the manifest declares",
                self.limit
            ))));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    let io = |source| OciError::Io {
        path: path.to_path_buf(),
        source,
    };
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    let mut file = std::fs::File::create(&partial).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    drop(file);
    std::fs::rename(&partial, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as `download` writes it, for `component` and `toml`.
    fn entry_on_disk(store: &OciStore, component: &[u8], toml: &str) -> String {
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": super::super::IMAGE_MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": format!("sha256:{}", sha256_hex(b"{}")), "size": 2},
            "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": format!("sha256:{}", sha256_hex(component)), "size": component.len()}],
            "annotations": {PLUGIN_MANIFEST_ANNOTATION: toml},
        });
        let bytes = serde_json::to_vec(&manifest).unwrap();
        let digest = format!("sha256:{}", sha256_hex(&bytes));
        let dir = store.entry_dir(&digest);
        std::fs::create_dir_all(dir.join("plugin")).unwrap();
        std::fs::write(dir.join("plugin").join(MANIFEST_FILE), toml).unwrap();
        std::fs::write(dir.join("plugin/web.wasm"), component).unwrap();
        std::fs::write(dir.join(IMAGE_MANIFEST_FILE), &bytes).unwrap();
        let entry = Entry {
            digest: digest.clone(),
            local: "plugin".into(),
            // What the entry says of itself is not what is believed.
            component_sha256: "0".repeat(64),
            component_bytes: component.len() as u64,
            with_manifest: true,
        };
        std::fs::write(dir.join(ENTRY_FILE), serde_json::to_vec(&entry).unwrap()).unwrap();
        digest
    }

    #[test]
    fn a_cached_entry_is_checked_against_its_digest_each_time_it_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let store = OciStore::open(dir.path()).unwrap();
        let component = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        let toml =
            "name = \"web\"\nversion = \"0.1.0\"\ndescription = \"d\"\ncomponent = \"web.wasm\"\n";
        let digest = entry_on_disk(&store, &component, toml);
        let r = OciRef::parse(&format!("oci://127.0.0.1:5000/web@{digest}")).unwrap();
        let pulled = store
            .entry(&r, &digest, Fetch::Cached)
            .expect("an intact entry");
        // The component's digest is the one the image manifest names.
        assert_eq!(pulled.component_sha256, sha256_hex(&component));
        // A plugin.toml that asks for more than the one the digest pins.
        let plugin_toml = store.entry_dir(&digest).join("plugin").join(MANIFEST_FILE);
        std::fs::write(
            &plugin_toml,
            format!("{toml}[permissions]\nfiles = [\"/data:rw\"]\n"),
        )
        .unwrap();
        assert!(store.entry(&r, &digest, Fetch::Cached).is_none());
        std::fs::write(&plugin_toml, toml).unwrap();
        assert!(store.entry(&r, &digest, Fetch::Cached).is_some());
        // A manifest rewritten to name another component.
        let kept = store.entry_dir(&digest).join(IMAGE_MANIFEST_FILE);
        let text = std::fs::read_to_string(&kept).unwrap();
        std::fs::write(
            &kept,
            text.replace(&sha256_hex(&component), &"f".repeat(64)),
        )
        .unwrap();
        assert!(store.entry(&r, &digest, Fetch::Cached).is_none());
        // No manifest at all (an entry of an older build, or planted).
        std::fs::remove_file(&kept).unwrap();
        assert!(store.entry(&r, &digest, Fetch::Cached).is_none());
    }

    #[test]
    fn a_pulled_manifest_must_name_a_plain_file_beside_it() {
        let r = OciRef::parse("oci://127.0.0.1:5000/web:1").unwrap();
        let toml = |component: &str| {
            format!(
                "name = \"web\"\nversion = \"0.1.0\"\ndescription = \"d\"\ncomponent = \"{component}\"\n"
            )
        };
        assert!(checked_plugin_manifest(&r, &toml("web.wasm")).is_ok());
        for escape in [
            "../web.wasm",
            "/etc/passwd",
            "a/b.wasm",
            "entry.json",
            "plugin.toml",
        ] {
            let e = checked_plugin_manifest(&r, &toml(escape)).unwrap_err();
            assert!(
                matches!(e, OciError::PluginManifest { .. }),
                "{escape}: {e}"
            );
        }
    }
}
