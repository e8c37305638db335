//! `oci://` references: parsed, checked against the distribution spec's
//! grammar and limits, and never an implicit registry.

use std::fmt;
use std::net::IpAddr;

use oci_client::Reference;

use super::error::OciError;

/// What a plugin reference on the command line starts with.
pub const SCHEME: &str = "oci://";

/// An `oci://` reference: a registry, a repository, and a tag or a digest.
#[derive(Clone)]
pub struct OciRef {
    pub(super) reference: Reference,
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
    pub(super) fn bare_file_name(&self) -> String {
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

pub(super) fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
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
