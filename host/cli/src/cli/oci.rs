//! `gadget pull` and `gadget push`: plugins to and from OCI registries, in
//! the layout `wkg oci push` writes (see `gadget_runtime::oci`).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use gadget_runtime::oci::{self, Fetch, OciRef};

use super::plugins::{oci_options, pull as pull_into_cache};
use super::{GlobalArgs, human_bytes, safe};

/// Pulls `reference` into the cache and says what arrived.
pub async fn pull(global: &GlobalArgs, reference: &str) -> Result<ExitCode> {
    let pulled = pull_into_cache(global, reference)
        .await
        .with_context(|| format!("pulling {}", safe::safe(reference)))?;
    let parsed = OciRef::parse(reference)?;
    let how = match pulled.fetch {
        Fetch::Downloaded => "pulled",
        Fetch::Cached => "already cached",
        Fetch::CachedOffline { .. } => "cached earlier (registry unreachable)",
    };
    println!("{how}: {}", safe::safe(reference));
    println!("  digest:    {}", pulled.digest);
    println!("  pinned:    {}", parsed.pinned(&pulled.digest));
    println!(
        "  component: sha256 {} ({})",
        pulled.component_sha256,
        human_bytes(pulled.component_bytes)
    );
    println!(
        "  manifest:  {}",
        if pulled.with_manifest {
            "plugin.toml carried with it"
        } else {
            "none: a bare component (default limits, nothing granted)"
        }
    );
    println!("  stored:    {}", pulled.local.display());
    println!("Use it: gadget --plugins {} list", safe::safe(reference));
    Ok(ExitCode::SUCCESS)
}

/// Pushes a plugin directory or a component to `reference`.
pub async fn push(global: &GlobalArgs, source: &Path, reference: &str) -> Result<ExitCode> {
    let parsed = OciRef::parse(reference)?;
    let digest = oci::push(source, &parsed, &oci_options(global))
        .await
        .with_context(|| format!("pushing {} to {}", source.display(), safe::safe(reference)))?;
    println!("pushed: {} -> {}", source.display(), safe::safe(reference));
    println!("  digest: {digest}");
    println!("  pinned: {}", parsed.pinned(&digest));
    Ok(ExitCode::SUCCESS)
}
