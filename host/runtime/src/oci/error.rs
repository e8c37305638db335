//! Why a pull or a push did not happen.

use std::path::PathBuf;

use super::layout::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, PLUGIN_MANIFEST_ANNOTATION};

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
