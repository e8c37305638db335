//! OCI distribution: plugins pulled from, and pushed to, OCI registries.
//!
//! The layout is the one `wkg oci push` (wasm-pkg-tools) writes for a
//! component, the CNCF wasm OCI artifact layout: an image manifest whose
//! config is `application/vnd.wasm.config.v0+json` and whose one layer is the
//! component, `application/wasm`. gadget-host carries the plugin's
//! `plugin.toml` as an annotation on that manifest
//! ([`PLUGIN_MANIFEST_ANNOTATION`]) rather than as a second layer, so `wkg` and
//! every other tool still see exactly the one wasm layer they expect. A
//! component pushed without it (by `wkg`, say) loads as a bare component:
//! default limits, nothing granted.
//!
//! Pulls are cached by manifest digest in the compile cache's directory
//! (`oci/`): a reference by digest never touches the network once pulled,
//! and a tag whose registry cannot be reached falls back to the digest it
//! last named, saying so. Every byte a registry sends is bounded and checked
//! against its digest before anything is written where the loader looks.
//!
//! Signatures travel inside the component (see `provenance`), so a pulled
//! plugin is verified exactly as a local one is.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

mod fetch;
mod push;
mod store;

pub use push::push;
pub use store::{Fetch, OciStore, Pulled};

/// What a plugin reference on the command line starts with.
pub const SCHEME: &str = "oci://";
/// The component layer's media type (wasm OCI artifact layout).
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The config's media type (wasm OCI artifact layout).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The image manifest's media type.
pub const IMAGE_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The manifest annotation that carries the plugin's `plugin.toml`.
pub const PLUGIN_MANIFEST_ANNOTATION: &str = "dev.gadget-host.plugin.manifest";
/// The layer annotation OCI tools name the file on disk by.
const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// Largest image manifest accepted, in bytes: the distribution registry
/// refuses manifests over 4 MiB; a component's is about 1 KiB plus its
/// `plugin.toml` (itself at most [`crate::manifest::MAX_MANIFEST_BYTES`]).
pub const MAX_IMAGE_MANIFEST_BYTES: usize = 4 << 20;
/// How long a registry may take to accept a connection: a registry that
/// does not answer in this time is treated as unreachable (the cache is used).
pub const REGISTRY_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a registry may go without sending a byte: a stalled pull must
/// not hang the host's start-up forever.
pub const REGISTRY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Variables that give registry credentials, before the Docker config.
pub const USERNAME_VAR: &str = "GADGET_OCI_USERNAME";
pub const PASSWORD_VAR: &str = "GADGET_OCI_PASSWORD";
/// The registry (`HOST[:PORT]`) the variables' credentials are for: they
/// are sent to it and to no other.
pub const REGISTRY_VAR: &str = "GADGET_OCI_REGISTRY";

/// Why a pull or a push did not happen. The messages do not repeat the
/// reference (each variant carries it): the caller names it once.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(
        "'{reference}' is not a plugin reference: {reason} (expected oci://HOST[:PORT]/REPOSITORY:TAG or oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST)"
    )]
    BadReference { reference: String, reason: String },
    #[error("the registry refused or failed: {message}")]
    Registry { reference: String, message: String },
    #[error(
        "the registry cannot be reached ({message}) and nothing is cached for it; pull it once while the registry is reachable"
    )]
    Unreachable { reference: String, message: String },
    #[error(
        "not a wasm component artifact: {reason} (expected one {LAYER_MEDIA_TYPE} layer and a {CONFIG_MEDIA_TYPE} config, as `wkg oci push` writes)"
    )]
    NotAComponent { reference: String, reason: String },
    #[error("the {what} is {bytes} bytes, over the limit of {limit} bytes")]
    TooLarge {
        reference: String,
        what: &'static str,
        bytes: u64,
        limit: u64,
    },
    #[error("the registry sent content whose digest is {actual}, not {expected}")]
    DigestMismatch {
        reference: String,
        expected: String,
        actual: String,
    },
    #[error("its plugin manifest ({PLUGIN_MANIFEST_ANNOTATION}) is not valid: {reason}")]
    PluginManifest { reference: String, reason: String },
    #[error("the registry's credentials: {reason}")]
    Credentials { reference: String, reason: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    BadSource { path: PathBuf, reason: String },
}

/// An `oci://` reference: a registry, a repository, and a tag or a digest.
#[derive(Clone)]
pub struct OciRef {
    reference: Reference,
    text: String,
}

impl OciRef {
    /// Whether `text` is meant as an OCI reference (starts with `oci://`).
    pub fn is_oci(text: &str) -> bool {
        text.starts_with(SCHEME)
    }

    /// Parses `oci://HOST[:PORT]/REPOSITORY[:TAG][@sha256:DIGEST]`. The
    /// registry must be named: no implicit Docker Hub.
    pub fn parse(text: &str) -> Result<OciRef, OciError> {
        let bad = |reason: &str| OciError::BadReference {
            reference: text.to_string(),
            reason: reason.to_string(),
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("it does not start with oci://"))?;
        // The distribution grammar, checked by hand: oci-spec's parser
        // compiles a large regex on first use (~20 ms of every start-up that
        // names a reference, even one served from the cache).
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (rest, None),
        };
        let last_slash = name.rfind('/').unwrap_or(0);
        let (name, tag) = match name[last_slash..].rfind(':') {
            Some(colon) => (
                &name[..last_slash + colon],
                Some(&name[last_slash + colon + 1..]),
            ),
            None => (name, None),
        };
        let (registry, repository) = name
            .split_once('/')
            .ok_or_else(|| bad("no repository after the registry"))?;
        if !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
            return Err(bad("the first part must be a registry host"));
        }
        check_registry(registry).map_err(bad)?;
        check_repository(repository).map_err(bad)?;
        if let Some(tag) = tag {
            check_tag(tag).map_err(bad)?;
        }
        if let Some(digest) = digest
            && !is_sha256_digest(digest)
        {
            return Err(bad("a digest must be sha256: and 64 lower-case hex digits"));
        }
        let (registry, repository) = (registry.to_string(), repository.to_string());
        let reference = match (tag, digest) {
            (Some(tag), Some(digest)) => {
                Reference::with_tag_and_digest(registry, repository, tag.into(), digest.into())
            }
            (None, Some(digest)) => Reference::with_digest(registry, repository, digest.into()),
            (tag, None) => {
                Reference::with_tag(registry, repository, tag.unwrap_or(DEFAULT_TAG).to_string())
            }
        };
        Ok(OciRef {
            reference,
            text: text.to_string(),
        })
    }

    /// The registry, `HOST[:PORT]`.
    pub fn registry(&self) -> &str {
        self.reference.resolve_registry()
    }

    /// The digest the reference pins, if it names one.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// The reference pinned to `digest` (what a lock or a log should name).
    pub fn pinned(&self, digest: &str) -> String {
        format!(
            "{SCHEME}{}/{}@{digest}",
            self.reference.registry(),
            self.reference.repository()
        )
    }

    /// The registry is this machine (`localhost`, `127.0.0.0/8`, `::1`):
    /// the only place plain HTTP is spoken to without being asked.
    pub fn is_loopback(&self) -> bool {
        let host = registry_host(self.registry());
        host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// The file name a bare component from this repository is stored as:
    /// its last path segment, so the plugin is named after the repository.
    fn bare_file_name(&self) -> String {
        let last = self
            .reference
            .repository()
            .rsplit('/')
            .next()
            .unwrap_or("component");
        format!("{last}.wasm")
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The tag a reference without one names, as everywhere in OCI.
const DEFAULT_TAG: &str = "latest";
/// Longest repository name, in bytes (the distribution spec's limit).
const MAX_REPOSITORY_BYTES: usize = 255;
/// Longest tag, in bytes (the distribution spec's limit).
const MAX_TAG_BYTES: usize = 128;

/// `HOST[:PORT]`: dot-separated labels of letters, digits and inner `-`.
fn check_registry(registry: &str) -> Result<(), &'static str> {
    let (host, port) = match registry.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (registry, None),
    };
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if !host.split('.').all(label_ok) {
        return Err("the registry must be a host name or an IPv4 address");
    }
    if port.is_some_and(|p| p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit())) {
        return Err("the registry's port must be a number");
    }
    Ok(())
}

/// Path components of lower-case letters and digits, joined inside by
/// `.`, `_`, `__` or dashes (the distribution spec's grammar).
fn check_repository(repository: &str) -> Result<(), &'static str> {
    if repository.len() > MAX_REPOSITORY_BYTES {
        return Err("the repository name is over 255 bytes");
    }
    let component_ok = |component: &str| {
        let bytes = component.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        if bytes.is_empty() || !alnum(&bytes[0]) || !alnum(&bytes[bytes.len() - 1]) {
            return false;
        }
        // Each run of separators between letters and digits.
        component
            .split(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            .filter(|run| !run.is_empty())
            .all(|run| matches!(run, "." | "_" | "__") || run.bytes().all(|b| b == b'-'))
    };
    if repository.split('/').all(component_ok) {
        Ok(())
    } else {
        Err(
            "the repository must be lower-case letters, digits and . _ - between them, in /-separated parts",
        )
    }
}

/// A letter, digit or `_`, then up to 127 of those, `.` and `-`.
fn check_tag(tag: &str) -> Result<(), &'static str> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    if bytes.is_empty()
        || bytes.len() > MAX_TAG_BYTES
        || !word(bytes[0])
        || !bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-')
    {
        return Err("a tag is letters, digits, _ . and - (not first), at most 128");
    }
    Ok(())
}

/// `HOST` of `HOST[:PORT]`, brackets of an IPv6 address removed.
fn registry_host(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct OciOptions {
    /// Registries (`HOST[:PORT]`) spoken to in plain HTTP although they are
    /// not on this machine (the operator asked, `--insecure-registry`).
    pub insecure: Vec<String>,
}

impl OciOptions {
    /// Whether `reference`'s registry is spoken to in plain HTTP.
    fn plain_http(&self, reference: &OciRef) -> bool {
        reference.is_loopback() || self.insecure.iter().any(|r| r == reference.registry())
    }

    fn client(&self, reference: &OciRef) -> Client {
        let registry = reference.registry().to_string();
        let plain = self.plain_http(reference);
        Client::new(ClientConfig {
            protocol: if plain {
                ClientProtocol::HttpsExcept(vec![registry])
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(REGISTRY_CONNECT_TIMEOUT),
            read_timeout: Some(REGISTRY_READ_TIMEOUT),
            // A component artifact is never a multi-platform index.
            platform_resolver: None,
            ..Default::default()
        })
    }
}

/// Credentials for `reference`'s registry: `GADGET_OCI_USERNAME` and
/// `GADGET_OCI_PASSWORD` when `GADGET_OCI_REGISTRY` names this registry,
/// else the Docker config (`$DOCKER_CONFIG` or `~/.docker/config.json`,
/// credential helpers included, each entry for its own registry), else
/// anonymous. Credentials are for one registry: the variables without the
/// registry they are for are an error, not a password sent everywhere.
fn credentials(reference: &OciRef) -> Result<RegistryAuth, OciError> {
    let username = std::env::var(USERNAME_VAR).ok().filter(|v| !v.is_empty());
    let password = std::env::var(PASSWORD_VAR).ok();
    let scoped = std::env::var(REGISTRY_VAR).ok().filter(|v| !v.is_empty());
    let error = |reason: String| OciError::Credentials {
        reference: reference.to_string(),
        reason,
    };
    match (username, password, scoped) {
        (Some(_), None, _) => {
            return Err(error(format!(
                "{USERNAME_VAR} is set but {PASSWORD_VAR} is not"
            )));
        }
        (Some(_), Some(_), None) => {
            return Err(error(format!(
                "{USERNAME_VAR} and {PASSWORD_VAR} are set, but {REGISTRY_VAR} does not say which registry they are for; set {REGISTRY_VAR}={} to send them there (and nowhere else)",
                reference.registry()
            )));
        }
        (Some(user), Some(password), Some(registry))
            if registry.trim().trim_start_matches(SCHEME) == reference.registry() =>
        {
            return Ok(RegistryAuth::Basic(user, password));
        }
        _ => {}
    }
    match docker_credential::get_credential(reference.registry()) {
        Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        Ok(docker_credential::DockerCredential::IdentityToken(_)) => Err(OciError::Credentials {
            reference: reference.to_string(),
            reason: format!(
                "the Docker config holds an identity token, which gadget cannot use; set {USERNAME_VAR} and {PASSWORD_VAR}"
            ),
        }),
        Err(e) => {
            tracing::debug!(
                registry = reference.registry(),
                "no Docker credentials: {e:?}"
            );
            Ok(RegistryAuth::Anonymous)
        }
    }
}

/// The registry answered with a refusal, a failure or content that does
/// not match its digest; a refusal that wants credentials says where they
/// come from.
fn registry_error(
    reference: &OciRef,
    error: &oci_client::errors::OciDistributionError,
) -> OciError {
    use oci_client::errors::OciDistributionError as E;
    // Content that is not what its digest names is a lie, not a failure.
    if let E::DigestError(oci_client::errors::DigestError::VerificationError { expected, actual }) =
        error
    {
        return OciError::DigestMismatch {
            reference: reference.to_string(),
            expected: expected.clone(),
            actual: actual.clone(),
        };
    }
    let mut message = error_chain(error);
    let wants_credentials = matches!(
        error,
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. }
    ) || message.contains("code: 401")
        || message.contains("UNAUTHORIZED");
    if wants_credentials {
        message.push_str(&format!(
            "; it wants credentials: set {USERNAME_VAR} and {PASSWORD_VAR} (with {REGISTRY_VAR}={}), or log in with `docker login {}`",
            reference.registry(),
            reference.registry()
        ));
    }
    OciError::Registry {
        reference: reference.to_string(),
        message,
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_a_registry_and_a_sha256_digest() {
        let r = OciRef::parse("oci://127.0.0.1:5000/gadgets/web:1.0").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert!(r.is_loopback());
        assert_eq!(r.bare_file_name(), "web.wasm");
        assert_eq!(r.reference.repository(), "gadgets/web");
        assert_eq!(r.reference.tag(), Some("1.0"));
        let r = OciRef::parse("oci://ghcr.io/a.b/c__d/e-f--g/h_i:v1.2-rc_3").unwrap();
        assert_eq!(r.reference.repository(), "a.b/c__d/e-f--g/h_i");
        assert_eq!(r.reference.tag(), Some("v1.2-rc_3"));
        let r = OciRef::parse("oci://localhost:5000/web").unwrap();
        assert_eq!(r.reference.tag(), Some("latest"));
        let digest = format!("sha256:{}", "a".repeat(64));
        let r = OciRef::parse(&format!("oci://localhost/web@{digest}")).unwrap();
        assert_eq!(r.digest(), Some(digest.as_str()));
        assert!(r.is_loopback());
        assert!(
            !OciRef::parse("oci://ghcr.io/acme/web:1")
                .unwrap()
                .is_loopback()
        );
        for bad in [
            "ghcr.io/acme/web:1",
            "oci://web:1",
            "oci://acme/web:1",
            "oci://ghcr.io",
            "oci://ghcr.io/acme/web@sha256:abc",
            "oci://ghcr.io/Acme/web:1",
            "oci://ghcr.io/acme//web:1",
            "oci://ghcr.io/acme/-web:1",
            "oci://ghcr.io/acme/web:",
            "oci://ghcr.io/acme/web:.1",
            "oci://ghcr.io:port/acme/web:1",
            "oci://gh_cr.io/acme/web:1",
        ] {
            let e = OciRef::parse(bad).unwrap_err().to_string();
            assert!(e.contains("oci://HOST[:PORT]/REPOSITORY"), "{bad}: {e}");
        }
    }
}
