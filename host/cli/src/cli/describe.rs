//! `gadget describe NAME`: one gadget's description, parameters,
//! examples, limits and plugin, for people or as JSON.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::Value;

use gadget_core::approval::Rules;
use gadget_core::limits::OwnTimeout;
use gadget_core::rate::RateLimits;
use gadget_core::schema;
use gadget_core::tool::{Tool, Tools};
use gadget_runtime::describe::GadgetDescription;
use gadget_runtime::registry::Registry;

use super::{EXIT_BAD_INPUT, human_bytes, print_json};

/// What the operator's policy says of calls: shown beside the gadget.
pub struct Operator<'a> {
    pub rules: &'a Rules,
    pub rates: Option<&'a RateLimits>,
}

impl Operator<'_> {
    /// The approval rules, then the rate limits, that apply to `name`.
    fn rules_for(&self, name: &str) -> (Vec<String>, Vec<String>) {
        let rates = self.rates.map(|r| r.rules_for(name)).unwrap_or_default();
        (self.rules.rules_for(name), rates)
    }
}

pub fn describe(
    registry: &Registry,
    tools: &dyn Tools,
    name: &str,
    json: bool,
    operator: &Operator<'_>,
) -> Result<ExitCode> {
    let Some(g) = registry.get(name) else {
        // One of the policy's agents, or nothing at all.
        if let Some(tool) = tools.find(name) {
            return describe_tool(&*tool, json, operator);
        }
        eprintln!(
            "error: {}",
            super::safe::safe(&registry.rejection(name).to_string())
        );
        return Ok(ExitCode::from(EXIT_BAD_INPUT));
    };
    let limits = &g.limits;
    let (approval, rates) = operator.rules_for(&g.card.spec.name);
    if json {
        let mut described = serde_json::to_value(GadgetDescription::from(g.as_ref()))?;
        described["approval"] = serde_json::json!(approval);
        described["rate_limits"] = serde_json::json!(rates);
        print_json(&described)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    let title = match &g.card.spec.label {
        Some(label) if label != &g.card.spec.name => format!("{} ({label})", g.card.spec.name),
        _ => g.card.spec.name.clone(),
    };
    out.push_str(&format!("{title}\n{}\n\n", g.card.spec.description));
    out.push_str("Parameters:\n");
    match g.card.schema.schema() {
        None => out.push_str("  (none)\n"),
        Some(schema) => render_properties(schema, 1, &mut out),
    }
    if !g.card.spec.examples.is_empty() {
        out.push_str("\nExamples:\n");
        for example in &g.card.spec.examples {
            if let Some(comment) = &example.comment {
                out.push_str(&format!("  # {comment}\n"));
            }
            out.push_str(&format!("  {}\n", example.params));
            if let Some(output) = &example.output {
                out.push_str(&format!("    -> {output}\n"));
            }
        }
    }
    out.push_str(&format!(
        "\nLimits: timeout {} ms (+{} ms grace), memory {}, result {}, logs {}, stdout/stderr {} each\n",
        limits.timeout.as_millis(),
        limits.grace.as_millis(),
        human_bytes(limits.memory_bytes),
        human_bytes(limits.result_bytes),
        human_bytes(limits.log_bytes),
        human_bytes(limits.stdio_bytes),
    ));
    out.push_str(&format!(
        "Concurrency: {}{}\n",
        if g.card.spec.exclusive {
            "exclusive (runs alone)"
        } else {
            "parallel"
        },
        g.card
            .spec
            .max_concurrent
            .map(|n| format!(", at most {n} at once"))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "Plugin: {} {} ({})\n",
        g.plugin.identity.name,
        g.plugin.identity.version,
        super::safe::safe(&g.plugin.origin.source)
    ));
    out.push_str(&format!(
        "Provenance: {}, sha256 {}\n",
        g.plugin.origin.signature, g.plugin.artifact.sha256
    ));
    let requested = &g.plugin.access.requested;
    let granted = &g.plugin.access.grants.grants;
    if !requested.is_empty() || !granted.is_empty() || !g.plugin.report.grant_notes.is_empty() {
        out.push_str(&format!(
            "Permissions asked for: {}\nPermissions granted: {}\n",
            requested.describe(),
            granted.describe()
        ));
        for note in &g.plugin.report.grant_notes {
            out.push_str(&format!("  ! {note}\n"));
        }
    }
    approval_lines(&approval, &mut out);
    rate_lines(&rates, &mut out);
    std::io::stdout()
        .lock()
        .write_all(super::safe::safe(&out).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The operator's approval rules that apply to a tool.
fn approval_lines(approval: &[String], out: &mut String) {
    for (i, line) in approval.iter().enumerate() {
        let label = if i == 0 { "Approval:" } else { "         " };
        out.push_str(&format!("{label} {line}\n"));
    }
}

/// The operator's rate limits that count a tool's calls.
fn rate_lines(rates: &[String], out: &mut String) {
    for (i, line) in rates.iter().enumerate() {
        let label = if i == 0 {
            "Rate limits:"
        } else {
            "            "
        };
        out.push_str(&format!("{label} {line}\n"));
    }
}

/// A tool that is not a plugin's gadget (one of the policy's agents, or an
/// upstream MCP server's tool): what every tool says of itself through the
/// `Tool` trait.
fn describe_tool(tool: &dyn Tool, json: bool, operator: &Operator<'_>) -> Result<ExitCode> {
    let (approval, rates) = operator.rules_for(tool.name());
    let spec = tool.spec();
    let timeout_ms = match tool.own_timeout() {
        OwnTimeout::Declared(t) | OwnTimeout::Default(t) => Some(t.as_millis() as u64),
        OwnTimeout::None => None,
    };
    let access = tool.access();
    // An upstream MCP server's tool names its server.
    let origin = tool.origin();
    if json {
        print_json(&serde_json::json!({
            "name": spec.name,
            "label": spec.label,
            "description": spec.description,
            "parameters_schema": tool.schema().schema(),
            "kind": if origin.is_some() { "mcp" } else { "agent" },
            "server": origin.as_ref().map(|o| &o.plugin),
            "source": origin.as_ref().map(|o| &o.source),
            "timeout_ms": timeout_ms,
            "access": access,
            "approval": approval,
            "rate_limits": rates,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = format!("{}\n{}\n\nParameters:\n", spec.name, spec.description);
    match tool.schema().schema() {
        None => out.push_str("  (none)\n"),
        Some(schema) => render_properties(schema, 1, &mut out),
    }
    let timeout = timeout_ms
        .map(|ms| format!("; timeout {ms} ms"))
        .unwrap_or_default();
    if let Some(origin) = &origin {
        out.push_str(&format!(
            "\nServer: {} ({}){timeout}\n",
            origin.plugin, origin.source
        ));
    } else {
        out.push_str(&format!(
            "\nAgent: completes with {}{}\n",
            if access.llm.is_empty() {
                "no model".to_string()
            } else {
                access.llm.join(", ")
            },
            timeout
        ));
    }
    approval_lines(&approval, &mut out);
    rate_lines(&rates, &mut out);
    std::io::stdout()
        .lock()
        .write_all(super::safe::safe(&out).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Renders an object schema's properties as an indented list: type,
/// required or optional (with the default), enum values, description.
fn render_properties(object: &Value, depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    let Some(properties) = schema::properties(object) else {
        out.push_str(&format!("{indent}(none)\n"));
        return;
    };
    for property in &properties {
        let mut facts = vec![type_name(property.schema)];
        if let Some(default) = property.default() {
            facts.push(format!("optional, default {default}"));
        } else if property.listed_required {
            facts.push("required".into());
        } else {
            facts.push("optional".into());
        }
        if let Some(values) = property.enum_values() {
            let values: Vec<String> = values
                .iter()
                .map(|v| v.as_str().map_or(v.to_string(), str::to_string))
                .collect();
            facts.push(format!("one of: {}", values.join(", ")));
        }
        out.push_str(&format!(
            "{indent}{}  ({})\n",
            property.name,
            facts.join("; ")
        ));
        if let Some(description) = property.description() {
            out.push_str(&format!("{indent}    {description}\n"));
        }
        let nested = property
            .schema
            .get("properties")
            .map(|_| property.schema)
            .or_else(|| {
                property
                    .schema
                    .get("items")
                    .filter(|i| i.get("properties").is_some())
            });
        if let Some(nested) = nested {
            render_properties(nested, depth + 2, out);
        }
    }
}

/// Every type a schema allows, for people: `string or number`, `array of
/// integer`, `one of several shapes`.
fn type_name(of: &Value) -> String {
    let types = schema::types(of);
    let base = if !types.is_empty() && of.get("type").is_some() {
        types.join(" or ")
    } else if of.get("enum").is_some() {
        "string".into()
    } else if of.get("anyOf").is_some() || of.get("oneOf").is_some() {
        "one of several shapes".into()
    } else {
        "any".into()
    };
    if base == "array"
        && let Some(items) = of.get("items")
    {
        return format!("array of {}", type_name(items));
    }
    base
}
