//! The wasm OCI artifact layout, as `wkg oci push` writes it: media types,
//! annotations and the size a registry's manifest may have.

/// The component layer's media type (wasm OCI artifact layout).
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The config's media type (wasm OCI artifact layout).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The image manifest's media type.
pub const IMAGE_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The manifest annotation that carries the plugin's `plugin.toml`.
pub const PLUGIN_MANIFEST_ANNOTATION: &str = "dev.gadget-host.plugin.manifest";
/// The layer annotation OCI tools name the file on disk by.
pub(super) const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// Largest image manifest accepted, in bytes: the distribution registry
/// refuses manifests over 4 MiB; a component's is about 1 KiB plus its
/// `plugin.toml` (itself at most [`crate::manifest::MAX_MANIFEST_BYTES`]).
pub const MAX_IMAGE_MANIFEST_BYTES: usize = 4 << 20;
