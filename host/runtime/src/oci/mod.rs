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

mod client;
mod error;
mod fetch;
mod layout;
mod push;
mod reference;
mod store;

pub use client::{
    OciOptions, PASSWORD_VAR, REGISTRY_CONNECT_TIMEOUT, REGISTRY_READ_TIMEOUT, REGISTRY_VAR,
    USERNAME_VAR,
};
use client::{credentials, error_chain, registry_error};
pub use error::OciError;
use layout::TITLE_ANNOTATION;
pub use layout::{
    CONFIG_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, LAYER_MEDIA_TYPE, MAX_IMAGE_MANIFEST_BYTES,
    PLUGIN_MANIFEST_ANNOTATION,
};
pub use push::push;
use reference::is_sha256_digest;
pub use reference::{OciRef, SCHEME};
pub use store::{Fetch, OciStore, Pulled};
