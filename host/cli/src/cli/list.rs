//! `gadget list`: the loaded gadgets, as a table or as JSON.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use gadget_runtime::WasmGadget;
use gadget_runtime::describe::GadgetSummary;
use gadget_runtime::registry::Registry;

use super::print_json;

pub fn list(registry: &Registry, json: bool) -> Result<ExitCode> {
    if json {
        let items: Vec<GadgetSummary<'_>> = registry.gadgets().map(|g| g.as_ref().into()).collect();
        print_json(&items)?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = |len: fn(&WasmGadget) -> usize, header: &str| {
        registry
            .gadgets()
            .map(|g| len(g))
            .max()
            .unwrap_or(0)
            .max(header.len())
    };
    let name_width = width(|g| g.spec.name.len(), "NAME");
    let plugin_width = width(|g| g.plugin.name.len(), "PLUGIN");
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:name_width$}  {:plugin_width$}  DESCRIPTION",
        "NAME", "PLUGIN"
    )?;
    for g in registry.gadgets() {
        let description = g.spec.description.lines().next().unwrap_or_default();
        writeln!(
            out,
            "{:name_width$}  {:plugin_width$}  {}",
            g.spec.name,
            g.plugin.name,
            super::safe::safe(description)
        )?;
    }
    if registry.gadgets().next().is_none() {
        writeln!(out, "(no gadgets loaded)")?;
    }
    Ok(ExitCode::SUCCESS)
}
