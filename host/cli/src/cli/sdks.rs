//! The SDKs a plugin builds against, carried by the binary, so that an
//! author who installed only `gadget` needs no gadget-host checkout:
//! `gadget new --lang rust` writes the Rust SDK into the plugin it makes
//! (`gadget-sdk/`, a path dependency of the binary's own version, which
//! also builds where the plugin is copied, such as an image), and `gadget
//! build` writes the Go SDK beside the module it builds. (Python, C and
//! JavaScript's SDKs are written by their builds, in `build.rs`.)

use std::path::Path;

use anyhow::{Context as _, Result};
use include_dir::{Dir, include_dir};

static RUST_SDK_SOURCES: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../sdk/rust/src");
static GO_SDK: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../sdk/go");
const CONTRACT: &str = include_str!("../../../../wit/gadget@0.3.0/gadget.wit");

/// Where a Rust plugin's SDK goes, inside the plugin.
pub const RUST_SDK_DIR: &str = "gadget-sdk";

/// Where the SDK's bindings find the contract in the checkout, and where
/// they find it once written into a plugin.
const CONTRACT_IN_CHECKOUT: &str = "\"../../wit/gadget@0.3.0\"";
const CONTRACT_IN_PLUGIN: &str = "\"wit/gadget@0.3.0\"";

/// The SDK's manifest: its dependencies pinned as the workspace pins them
/// (a test holds the two together).
fn rust_manifest() -> String {
    format!(
        r#"# The gadget-host Rust SDK {version}, written here by `gadget new`: the
# plugin builds with no gadget-host checkout. Replace this directory with
# a newer `gadget new`'s to upgrade.
[package]
name = "gadget-sdk"
version = "{version}"
edition = "2024"
publish = false

[dependencies]
wit-bindgen = "0.63.0"
serde = {{ version = "1", features = ["derive", "rc"] }}
serde_json = {{ version = "1", features = ["preserve_order"] }}
schemars = "1.2"
wasi = "0.14"
"#,
        version = env!("CARGO_PKG_VERSION")
    )
}

/// Writes the Rust SDK into `plugin/gadget-sdk/`.
pub fn write_rust_sdk(plugin: &Path) -> Result<()> {
    let sdk = plugin.join(RUST_SDK_DIR);
    let sources = sdk.join("src");
    std::fs::create_dir_all(&sources).with_context(|| format!("creating {}", sources.display()))?;
    for file in RUST_SDK_SOURCES.files() {
        let text = file
            .contents_utf8()
            .context("the Rust SDK's sources are UTF-8")?
            .replace(CONTRACT_IN_CHECKOUT, CONTRACT_IN_PLUGIN);
        let path = sources.join(file.path());
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let contract = sdk.join("wit/gadget@0.3.0");
    std::fs::create_dir_all(&contract)?;
    std::fs::write(contract.join("gadget.wit"), CONTRACT)?;
    std::fs::write(sdk.join("Cargo.toml"), rust_manifest())?;
    Ok(())
}

/// Writes the Go SDK (its packages, generated bindings and vendored
/// runtime) into `dir`.
pub fn write_go_sdk(dir: &Path) -> Result<()> {
    GO_SDK
        .extract(dir)
        .with_context(|| format!("writing the Go SDK into {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rust_sdk_written_into_a_plugin_pins_what_the_workspace_pins() {
        let workspace =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"))
                .unwrap();
        let manifest = rust_manifest();
        for dependency in ["wit-bindgen", "serde", "serde_json", "schemars"] {
            let pinned = workspace
                .lines()
                .find(|l| l.starts_with(&format!("{dependency} = ")))
                .unwrap_or_else(|| panic!("{dependency} is not in the workspace"));
            assert!(manifest.contains(pinned), "{pinned} is not in:\n{manifest}");
        }
        let sdk = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../sdk/rust/Cargo.toml"
        ))
        .unwrap();
        assert!(sdk.contains("wasi = \"0.14\""));
        // The bindings' path is rewritten: the one in the checkout is there.
        let lib = RUST_SDK_SOURCES.get_file("lib.rs").unwrap();
        assert!(lib.contents_utf8().unwrap().contains(CONTRACT_IN_CHECKOUT));
    }
}
