//! The push side: a plugin directory or a component, in the layout `wkg`
//! writes, its `plugin.toml` as a manifest annotation.

use std::collections::BTreeMap;
use std::path::Path;

use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use serde::Serialize;

use super::{
    CONFIG_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, LAYER_MEDIA_TYPE, OciError, OciOptions, OciRef,
    PLUGIN_MANIFEST_ANNOTATION, TITLE_ANNOTATION, credentials, registry_error,
};
use crate::cache::sha256_hex;
use crate::loader::MAX_COMPONENT_BYTES;
use crate::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest};

/// Pushes the plugin at `source` (a plugin directory or a `.wasm`
/// file) to `reference`; returns the pushed manifest's digest.
pub async fn push(
    source: &Path,
    reference: &OciRef,
    options: &OciOptions,
) -> Result<String, OciError> {
    let bad = |reason: String| OciError::BadSource {
        path: source.to_path_buf(),
        reason,
    };
    let (component, plugin_toml, file_name) = if source.is_dir() {
        let manifest = Manifest::from_dir(source).map_err(|e| bad(e.to_string()))?;
        let text = crate::plugin_files::read_plugin_file(
            source,
            &source.join(MANIFEST_FILE),
            MAX_MANIFEST_BYTES,
        )
        .map_err(bad)?;
        let component_path = source.join(&manifest.component);
        let component =
            crate::plugin_files::read_plugin_file(source, &component_path, MAX_COMPONENT_BYTES)
                .map_err(bad)?;
        let file_name = manifest
            .component
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| reference.bare_file_name());
        (
            component,
            Some(String::from_utf8(text).map_err(|_| bad("plugin.toml is not UTF-8".into()))?),
            file_name,
        )
    } else {
        let root = source.parent().unwrap_or(Path::new("."));
        let component = crate::plugin_files::read_plugin_file(root, source, MAX_COMPONENT_BYTES)
            .map_err(bad)?;
        let file_name = source
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| reference.bare_file_name());
        (component, None, file_name)
    };
    let (imports, exports) = component_interfaces(&component).map_err(bad)?;
    let layer_digest = format!("sha256:{}", sha256_hex(&component));
    let config = WasmConfig {
        created: gadget_core::audit::rfc3339(unix_ms_now()),
        author: None,
        architecture: "wasm",
        os: "wasip2",
        layer_digests: vec![layer_digest],
        component: Some(ComponentInfo {
            exports,
            imports,
            target: None,
        }),
    };
    let config = Config {
        data: serde_json::to_vec(&config).map_err(|e| bad(e.to_string()))?,
        media_type: CONFIG_MEDIA_TYPE.to_string(),
        annotations: None,
    };
    let layers = vec![ImageLayer {
        data: component,
        media_type: LAYER_MEDIA_TYPE.to_string(),
        annotations: Some(BTreeMap::from([(TITLE_ANNOTATION.to_string(), file_name)])),
    }];
    let annotations =
        plugin_toml.map(|text| BTreeMap::from([(PLUGIN_MANIFEST_ANNOTATION.to_string(), text)]));
    let mut manifest = OciImageManifest::build(&layers, &config, annotations);
    manifest.media_type = Some(IMAGE_MANIFEST_MEDIA_TYPE.to_string());
    // The manifest goes up as these exact bytes (standard JSON, whose
    // digest is the one printed): oci-client's own `push` re-encodes it as
    // canonical JSON, which leaves the newlines of a plugin.toml unescaped
    // and the distribution registry rejects.
    let body = serde_json::to_vec(&manifest).map_err(|e| bad(e.to_string()))?;
    let digest = format!("sha256:{}", sha256_hex(&body));
    let client = options.client(reference);
    let auth = credentials(reference)?;
    let failed = |e| registry_error(reference, &e);
    client
        .store_auth_if_needed(reference.reference.resolve_registry(), &auth)
        .await;
    for (data, digest) in layers
        .iter()
        .zip(&manifest.layers)
        .map(|(layer, descriptor)| (&layer.data, &descriptor.digest))
        .chain([(&config.data, &manifest.config.digest)])
    {
        client
            .push_blob(&reference.reference, data, digest)
            .await
            .map_err(failed)?;
    }
    client
        .push_manifest_raw(
            &reference.reference,
            body,
            http::HeaderValue::from_static(IMAGE_MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(failed)?;
    Ok(digest)
}

/// The config `wkg` writes (oci-wasm's `WasmConfig`), field for field.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig {
    created: String,
    author: Option<String>,
    architecture: &'static str,
    os: &'static str,
    layer_digests: Vec<String>,
    component: Option<ComponentInfo>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ComponentInfo {
    exports: Vec<String>,
    imports: Vec<String>,
    target: Option<String>,
}

/// The names of a component's top-level imports and exports (what the
/// config lists for registries to index); an error when it is not a
/// component.
fn component_interfaces(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    use wasmparser::{Parser, Payload};
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut depth = 0usize;
    let mut is_component = false;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("not a WebAssembly component: {e}"))? {
            Payload::Version { encoding, .. } if depth == 0 => {
                is_component = encoding == wasmparser::Encoding::Component;
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    let import = import.map_err(|e| e.to_string())?;
                    imports.push(import.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    let export = export.map_err(|e| e.to_string())?;
                    exports.push(export.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    if !is_component {
        return Err("a core module, not a component (gadgets are WASI 0.2 components)".into());
    }
    Ok((imports, exports))
}

fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_components_are_pushed() {
        let module = b"\0asm\x01\0\0\0";
        assert!(
            component_interfaces(module)
                .unwrap_err()
                .contains("core module")
        );
        assert!(component_interfaces(b"not wasm").is_err());
    }
}
