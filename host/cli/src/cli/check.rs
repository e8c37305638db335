//! `gadget check PATH`: load one plugin directory, component or `oci://`
//! reference and report each check it passed (manifest, component,
//! provenance, world, specs, schemas, examples) or the one it failed.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use serde_json::Value;

use gadget_runtime::Runtime;
use gadget_runtime::loader::{self, CacheOutcome, LoadError, LoadOptions, PluginSource};
use gadget_runtime::oci::OciRef;

use super::{CompileBars, EXIT_FAILED, GlobalArgs, human_bytes};

/// What `gadget check` checks a plugin against: the command's options,
/// how plugins load, and the operator's approval rules (when the policy
/// has valid ones).
pub struct Checking<'a> {
    pub global: &'a GlobalArgs,
    pub options: &'a LoadOptions,
    pub rules: Option<&'a gadget_core::approval::Rules>,
}

pub async fn check(
    runtime: &Arc<Runtime>,
    path: &std::path::Path,
    checking: &Checking<'_>,
) -> Result<ExitCode> {
    let (global, options) = (checking.global, checking.options);
    println!("checking {}", path.display());
    let text = path.to_string_lossy();
    let found = if OciRef::is_oci(&text) {
        super::plugins::pull(global, &text)
            .await
            .map(|pulled| PluginSource::Oci {
                reference: text.to_string(),
                local: pulled.local,
                digest: pulled.digest,
                component_sha256: pulled.component_sha256,
            })
            .map_err(|e| LoadError::pull(&text, e))
    } else {
        PluginSource::from_path(path)
    };
    let source = match found {
        Ok(source) => source,
        Err(e) => {
            println!("  ✗ {}", e.reason);
            println!("FAIL");
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    let progress = CompileBars::new();
    let loaded = loader::load_plugin(runtime, source, options, &progress).await;
    progress.finish();
    let (plugin, gadgets) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            println!("  ✗ {}", e.reason);
            println!("FAIL");
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    println!(
        "  ✓ manifest: {} {} — {}",
        plugin.identity.name,
        plugin.identity.version,
        super::safe::safe(&plugin.identity.description)
    );
    println!(
        "  ✓ component: {} ({}, sha256 {}; {})",
        plugin.artifact.component_path.display(),
        human_bytes(plugin.artifact.component_bytes),
        plugin.artifact.sha256,
        match plugin.artifact.cache {
            CacheOutcome::Hit => "loaded from the cache",
            CacheOutcome::Miss => "compiled and cached",
            CacheOutcome::Off => "compiled, not cached",
        }
    );
    println!(
        "  {} provenance: {}, from {}",
        if plugin.artifact.provenance.is_some() {
            "✓"
        } else {
            "·"
        },
        plugin.origin.signature,
        super::safe::safe(&plugin.origin.source),
    );
    let version = plugin.contract_version().as_str();
    println!("  ✓ world: exports gadget:plugin/gadget@{version} (gadget:plugin@{version})");
    for gadget in &gadgets {
        print_gadget(gadget);
        if let Some(rules) = checking.rules {
            let schema = gadget.card.schema.schema_for_rules();
            for inferred in rules.inferred_kinds(&gadget.card.spec.name, schema) {
                println!("    · {}", super::safe::safe(&inferred));
            }
        }
    }
    let requested = &plugin.access.requested;
    let granted = &plugin.access.grants.grants;
    if !requested.is_empty() || !granted.is_empty() {
        let line = format!(
            "  ✓ permissions: asks for {}; granted {}",
            requested.describe(),
            granted.describe()
        );
        println!("{}", super::safe::safe(&line));
    }
    for note in &plugin.report.grant_notes {
        println!("  ! {}", super::safe::safe(&note.to_string()));
    }
    for (name, rule) in &plugin.report.denied {
        println!(
            "  ! gadget {name}: {}",
            super::safe::safe(&rule.to_string())
        );
    }
    for warning in &plugin.report.warnings {
        println!("  ! {}", super::safe::safe(warning));
    }
    for refused in &plugin.report.refused {
        println!("  ✗ {}", super::safe::safe(&refused.to_string()));
    }
    if !plugin.report.refused.is_empty() {
        println!(
            "FAIL ({} gadget(s) refused; the others load)",
            plugin.report.refused.len()
        );
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    println!("PASS");
    Ok(ExitCode::SUCCESS)
}

/// One gadget's line (and its warnings).
fn print_gadget(gadget: &gadget_runtime::plugin::LoadedGadget) {
    let params = match gadget.card.schema.schema() {
        Some(schema) => format!(
            "{} parameter(s)",
            schema
                .get("properties")
                .and_then(Value::as_object)
                .map_or(0, |p| p.len())
        ),
        None => "no parameters".into(),
    };
    println!(
        "  ✓ gadget {}: schema compiles ({params}), {} example(s) validate, timeout {} ms",
        gadget.card.spec.name,
        gadget.card.spec.examples.len(),
        gadget.limits.timeout.as_millis()
    );
    if gadget.card.spec.exclusive {
        println!(
            "    ! exclusive: while it runs no other call starts, for up to {} ms",
            gadget.limits.timeout.as_millis()
        );
    }
    if gadget.card.spec.examples.is_empty() {
        println!("    ! no examples: models call gadgets more reliably with one");
    }
}
