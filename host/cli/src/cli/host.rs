//! The host the commands that run gadgets start from, wired once: the
//! policy, then the runtime (with the operator's LLM providers behind the
//! `llm` import), then the registry of loaded plugins, then the tools a
//! model or client is given (the gadgets, then the policy's agents).

use std::sync::Arc;

use anyhow::{Context as _, Result};

use gadget_agent::backend::Providers;
use gadget_core::tool::Tools;
use gadget_runtime::policy::Policy;
use gadget_runtime::registry::Registry;
use gadget_runtime::{Runtime, RuntimeConfig};

use super::agent::{self, AgentOptions};
use super::{GlobalArgs, load, load_options};

/// How instances are allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calls {
    /// At most one call (`call`, `list`, ...): the pooling allocator's
    /// up-front reservation would only slow start-up down.
    Few,
    /// A response of thousands of calls, or a server's many at once: the
    /// pooling allocator pays for itself.
    Many,
}

/// A started runtime with its plugins loaded.
pub struct Host {
    pub runtime: Arc<Runtime>,
    pub registry: Arc<Registry>,
    pub providers: Arc<Providers>,
    /// The policy's upstream MCP servers' tools.
    pub upstream: Option<Arc<gadget_mcp::upstream::UpstreamTools>>,
    /// `-q`: no warnings.
    quiet: bool,
}

/// Starts the runtime and loads the plugins; `None` when loading failed
/// (each reason has been printed).
pub async fn start(
    global: &GlobalArgs,
    policy: &Policy,
    calls: Calls,
    agent_options: Option<&AgentOptions>,
) -> Result<Option<Host>> {
    let runtime = runtime(policy, calls)?;
    let providers = agent::providers(&policy.llm, agent_options);
    let backend = agent::llm_backend(&policy.llm, providers.clone());
    runtime.set_llm_backend(backend.clone());
    // The upstream MCP servers start when their tools are first needed.
    let upstream = super::upstream::upstream(policy, &backend)?;
    let Some(registry) = load(&runtime, global, &load_options(global, policy)?).await? else {
        return Ok(None);
    };
    if !plugin_names_match(global, policy, &registry) {
        return Ok(None);
    }
    Ok(Some(Host {
        runtime,
        registry: Arc::new(registry),
        providers,
        upstream,
        quiet: global.quiet,
    }))
}

/// `--grant NAME:...` and `[plugins.NAME]` for a plugin that is not
/// loaded grant nothing, and are most often a misspelt name or a gadget's
/// name: an error for `--grant` (this command's own words), a warning for
/// the policy file (it may serve other plugin directories too). `false`
/// when the command must stop.
fn plugin_names_match(global: &GlobalArgs, policy: &Policy, registry: &Registry) -> bool {
    let from_flags: std::collections::BTreeSet<&str> = global
        .grants
        .iter()
        .filter_map(|grant| grant.split_once(':').map(|(plugin, _)| plugin))
        .collect();
    let loaded: Vec<&str> = registry.plugins().iter().map(|p| p.name()).collect();
    let mut fine = true;
    for name in policy.plugins.keys() {
        if registry.has_plugin(name) {
            continue;
        }
        let hint = match registry.get(name) {
            Some(gadget) => format!(
                "'{}' is a gadget of plugin '{}': name the plugin",
                gadget.card.spec.name,
                gadget.plugin.name()
            ),
            None => format!("loaded: {}", loaded.join(", ")),
        };
        if from_flags.contains(name.as_str()) {
            eprintln!("error: --grant {name}:...: no plugin named '{name}' is loaded ({hint})");
            fine = false;
        } else if !global.quiet {
            let file = policy
                .file
                .as_ref()
                .map(|f| format!(" {}", f.display()))
                .unwrap_or_default();
            eprintln!(
                "warning: policy file{file}: [plugins.{name}] names no loaded plugin, so it grants nothing ({hint})"
            );
        }
    }
    fine
}

/// The runtime alone (`check` loads one plugin directory itself).
pub fn runtime(policy: &Policy, calls: Calls) -> Result<Arc<Runtime>> {
    let config = RuntimeConfig {
        pooling: calls == Calls::Many,
        memory_budget: policy.host_memory_bytes(),
        ..RuntimeConfig::default()
    };
    Ok(Arc::new(
        Runtime::new(&config).context("starting the WebAssembly runtime")?,
    ))
}

impl Host {
    /// The gadgets, the upstream MCP servers' tools, then the policy's
    /// agents.
    pub fn tools(&self, policy: &Policy) -> Result<Arc<dyn Tools>> {
        self.tools_of(policy, true)
    }

    /// The tools that need no process started: the gadgets and the
    /// policy's agents, without the upstream MCP servers' tools (listing
    /// those starts their servers). What `call --dry-run` checks.
    pub fn local_tools(&self, policy: &Policy) -> Result<Arc<dyn Tools>> {
        self.tools_of(policy, false)
    }

    /// Whether the policy names upstream MCP servers.
    pub fn has_upstream(&self) -> bool {
        self.upstream.is_some()
    }

    fn tools_of(&self, policy: &Policy, upstream: bool) -> Result<Arc<dyn Tools>> {
        let upstream = self
            .upstream
            .clone()
            .filter(|_| upstream)
            .map(|u| u as Arc<dyn Tools>);
        let tools = agent::with_agents(
            self.registry.clone(),
            upstream,
            policy,
            self.providers.clone(),
        )?;
        if !self.quiet {
            warn_unmatched_rules(policy, &*self.registry, self.upstream.as_deref());
        }
        Ok(tools)
    }
}

/// Approval patterns and rules that name no served gadget protect
/// nothing: a warning each (most often a misspelt name).
///
/// The upstream MCP servers' tools are not listed for this (listing them
/// starts every server, and a command that calls only gadgets starts
/// none): a pattern that could name a tool under one of their prefixes
/// counts as matched.
pub fn warn_unmatched_rules(
    policy: &Policy,
    gadgets: &dyn Tools,
    upstream: Option<&gadget_mcp::upstream::UpstreamTools>,
) {
    let Ok(rules) = policy.approval_rules() else {
        return; // checked when the policy was read
    };
    // No rules, nothing to match: the names (which would start every
    // upstream MCP server to list its tools) are not needed.
    if rules.is_empty() {
        return;
    }
    // What catalog requests are named by (`resource:URI`, the template
    // for a family, `prompt:NAME`) counts as served too.
    let mut names = gadgets.names();
    names.extend(policy.agents.keys().cloned());
    for catalog in gadgets.catalogs() {
        let specs = catalog.specs();
        names.extend(
            specs
                .resources
                .iter()
                .map(|r| format!("resource:{}", r.uri)),
        );
        names.extend(
            specs
                .templates
                .iter()
                .map(|t| format!("resource:{}", t.uri_template)),
        );
        names.extend(specs.prompts.iter().map(|p| format!("prompt:{}", p.name)));
    }
    let upstream_may_serve = |pattern: &str| upstream.is_some_and(|u| u.may_serve(pattern));
    for what in rules.unmatched(&names, upstream_may_serve) {
        eprintln!("warning: {what} names no gadget that is served, so it has no effect");
    }
}
