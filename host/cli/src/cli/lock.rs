//! `gadget lock`: pin each loaded plugin's source, component digest and
//! verified signers in the lock file that `--locked` enforces.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};

use gadget_runtime::lockfile::{LOCK_VERSION, LockedPlugin, Lockfile};
use gadget_runtime::provenance::Verification;
use gadget_runtime::registry::Registry;

use super::safe;

/// Writes the lock file for what loaded; refuses when a plugin did not
/// load (a lock that leaves one out would refuse it later, unexplained).
pub fn lock(registry: &Registry, path: &Path) -> Result<ExitCode> {
    if registry.failed_plugins() > 0 {
        bail!(
            "{} plugin(s) did not load (see above): fix or remove them before locking",
            registry.failed_plugins()
        );
    }
    let plugins: Vec<LockedPlugin> = registry
        .plugins()
        .iter()
        .map(|plugin| LockedPlugin {
            name: plugin.identity.name.clone(),
            source: plugin.origin.source.clone(),
            sha256: plugin.artifact.sha256.clone(),
            manifest_sha256: plugin.artifact.manifest_sha256.clone(),
            oci_digest: plugin.artifact.source.oci_digest().map(str::to_string),
            signed_by: match &plugin.artifact.provenance {
                Some(Verification::Signed { by }) => by.clone(),
                _ => Vec::new(),
            },
        })
        .collect();
    let lock = Lockfile {
        version: LOCK_VERSION,
        plugins,
    };
    let partial = path.with_extension("lock.partial");
    std::fs::write(&partial, lock.to_toml())
        .and_then(|()| std::fs::rename(&partial, path))
        .with_context(|| format!("writing {}", path.display()))?;
    for plugin in &lock.plugins {
        println!(
            "locked {} sha256 {} ({}) from {}",
            plugin.name,
            &plugin.sha256[..12],
            if plugin.signed_by.is_empty() {
                "no trusted signer".to_string()
            } else {
                format!("signed by {}", plugin.signed_by.join(", "))
            },
            safe::safe(&plugin.source)
        );
    }
    let plugins = match lock.plugins.len() {
        1 => "1 plugin".to_string(),
        n => format!("{n} plugins"),
    };
    println!(
        "wrote {} ({plugins}); `gadget --locked ...` refuses any that differ",
        path.display(),
    );
    Ok(ExitCode::SUCCESS)
}
