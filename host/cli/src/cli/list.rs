//! `gadget list`: the loaded gadgets, as a table or as JSON.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use serde_json::{Value, json};

use std::sync::Arc;

use gadget_core::tool::{Tool, Tools};
use gadget_runtime::WasmGadget;
use gadget_runtime::describe::GadgetSummary;
use gadget_runtime::registry::Registry;

use super::print_json;

/// What the plugin column says of one of the policy's agents.
const AGENT_COLUMN: &str = "(agent)";

/// What the status column says of a gadget that can be called.
const STATUS_READY: &str = "ready";

/// `ready`, or the grants its plugin lacks (`needs files, llm`).
fn status(gadget: &WasmGadget) -> String {
    let mut doors: Vec<&str> = gadget.plugin.missing_grants().map(|n| n.door()).collect();
    doors.dedup();
    if doors.is_empty() {
        STATUS_READY.to_string()
    } else {
        format!("needs {}", doors.join(", "))
    }
}

/// Digits of a component's SHA-256 shown in the plugin table (the full
/// digest is in `describe` and `list --json`).
const DIGEST_SHOWN: usize = 12;

/// Each plugin's provenance under the gadgets: what it is, whose signature
/// it carries, and where it came from.
fn plugins_table(out: &mut impl Write, registry: &Registry) -> Result<()> {
    let plugins = registry.plugins();
    if plugins.is_empty() {
        return Ok(());
    }
    let origins: Vec<_> = plugins.iter().map(|p| &p.origin).collect();
    let width = |len: &dyn Fn(&gadget_core::tool::Origin) -> usize, header: &str| {
        origins
            .iter()
            .map(|o| len(o))
            .chain([header.len()])
            .max()
            .unwrap_or(0)
    };
    let plugin_width = width(&|o| o.plugin.len(), "PLUGIN");
    let signature_width = width(&|o| o.signature.len(), "SIGNATURE");
    writeln!(
        out,
        "\n{:plugin_width$}  {:signature_width$}  {:DIGEST_SHOWN$}  SOURCE",
        "PLUGIN", "SIGNATURE", "SHA256"
    )?;
    for origin in origins {
        writeln!(
            out,
            "{:plugin_width$}  {:signature_width$}  {:DIGEST_SHOWN$}  {}",
            origin.plugin,
            origin.signature,
            origin.digest.get(..DIGEST_SHOWN).unwrap_or(&origin.digest),
            super::safe::safe(&origin.source)
        )?;
    }
    Ok(())
}

/// The gadgets, then the policy's agents (tools that are not a plugin's).
pub fn list(registry: &Registry, tools: &dyn Tools, json: bool, quiet: bool) -> Result<ExitCode> {
    let agents: Vec<_> = tools
        .all()
        .into_iter()
        .filter(|t| registry.get(t.name()).is_none())
        .collect();
    if json {
        let mut items: Vec<Value> = registry
            .gadgets()
            .map(|g| serde_json::to_value(GadgetSummary::from(g.as_ref())))
            .collect::<Result<_, _>>()?;
        items.extend(agents.iter().map(|tool| match tool.origin() {
            // An upstream MCP server's tool.
            Some(origin) => json!({
                "name": tool.name(),
                "description": tool.spec().description,
                "plugin": origin.plugin,
                "kind": "mcp",
                "source": origin.source,
                "access": tool.access(),
            }),
            None => json!({
                "name": tool.name(),
                "description": tool.spec().description,
                "plugin": null,
                "kind": "agent",
                "access": tool.access(),
            }),
        }));
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
    // Agents widen the columns only when there are some.
    let agent_names = agents.iter().map(|a| a.name().len()).max().unwrap_or(0);
    let name_width = width(|g| g.card.spec.name.len(), "NAME").max(agent_names);
    // Agents say so; an upstream MCP server's tools name their server.
    let owner = |tool: &Arc<dyn Tool>| {
        tool.origin()
            .map_or_else(|| AGENT_COLUMN.to_string(), |o| o.plugin.clone())
    };
    let plugin_width = width(|g| g.plugin.identity.name.len(), "PLUGIN")
        .max(agents.iter().map(|a| owner(a).len()).max().unwrap_or(0));
    let statuses: Vec<String> = registry.gadgets().map(|g| status(g)).collect();
    let status_width = statuses
        .iter()
        .map(|s| s.len())
        .chain([STATUS_READY.len(), "STATUS".len()])
        .max()
        .unwrap_or(0);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:name_width$}  {:plugin_width$}  {:status_width$}  DESCRIPTION",
        "NAME", "PLUGIN", "STATUS"
    )?;
    for (g, status) in registry.gadgets().zip(&statuses) {
        let description = g.card.spec.description.lines().next().unwrap_or_default();
        writeln!(
            out,
            "{:name_width$}  {:plugin_width$}  {status:status_width$}  {}",
            g.card.spec.name,
            g.plugin.identity.name,
            super::safe::safe(description)
        )?;
    }
    for agent in &agents {
        let description = agent.spec().description.lines().next().unwrap_or_default();
        writeln!(
            out,
            "{:name_width$}  {:plugin_width$}  {STATUS_READY:status_width$}  {}",
            agent.name(),
            owner(agent),
            super::safe::safe(description)
        )?;
    }
    plugins_table(&mut out, registry)?;
    if !quiet && statuses.iter().any(|s| s != STATUS_READY) {
        eprintln!(
            "note: a gadget that needs a grant is not offered to models or MCP clients until the operator grants its plugin what its manifest asks for (`gadget check` or `gadget describe NAME` says how)"
        );
    }
    if registry.gadgets().next().is_none() && agents.is_empty() {
        writeln!(out, "(no gadgets loaded)")?;
    }
    Ok(ExitCode::SUCCESS)
}
