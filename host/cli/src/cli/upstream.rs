//! The policy's `[mcp-servers.NAME]`: resolved into what `gadget_mcp`
//! starts (the program found on the host's `PATH`, the environment it is
//! given, nothing more); each starts when its tools are first needed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};

use gadget_core::llm::LlmBackend;
use gadget_mcp::upstream::{
    DEFAULT_CALL_TIMEOUT, Sampling, Transport, UpstreamSpec, UpstreamTools,
};
use gadget_runtime::policy::Policy;

/// The servers the policy names, resolved; an error names the entry.
/// Completions a server is granted go through `backend`.
pub fn specs(policy: &Policy, backend: &Arc<dyn LlmBackend>) -> Result<Vec<UpstreamSpec>> {
    let mut specs = Vec::new();
    for (name, server) in &policy.mcp_servers {
        let sampling = server.llm.as_ref().map(|llm| {
            Arc::new(Sampling::new(
                backend.clone(),
                llm.models[0].clone(),
                llm.max_usd_per_call,
                llm.max_usd_per_run,
            ))
        });
        let timeout = server
            .timeout_ms
            .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis);
        if let Some(url) = &server.url {
            let bearer = match &server.bearer_token_env {
                Some(var) => Some(std::env::var(var).map_err(|_| {
                    anyhow::anyhow!(
                        "mcp-servers.{name}.bearer-token-env: the host's environment has no {var}"
                    )
                })?),
                None => None,
            };
            specs.push(UpstreamSpec {
                name: name.clone(),
                prefix: server.prefix_for(name),
                transport: Transport::Http {
                    url: url.clone(),
                    bearer,
                },
                timeout,
                sampling,
            });
            continue;
        }
        let Some((program, args)) = server.command.as_ref().and_then(|c| c.split_first()) else {
            bail!("mcp-servers.{name}: no command");
        };
        let program = find_program(program, server.dir.as_deref()).ok_or_else(|| {
            anyhow::anyhow!(
                "mcp-servers.{name}.command: '{program}' is not a file nor found on PATH"
            )
        })?;
        let mut env = Vec::new();
        for (key, source) in &server.env {
            let value = match (&source.env, &source.value) {
                (Some(var), _) => std::env::var(var).map_err(|_| {
                    anyhow::anyhow!(
                        "mcp-servers.{name}.env.{key}: the host's environment has no {var}"
                    )
                })?,
                (None, Some(value)) => value.clone(),
                (None, None) => bail!("mcp-servers.{name}.env.{key}: no env nor value"),
            };
            env.push((key.clone(), value));
        }
        specs.push(UpstreamSpec {
            name: name.clone(),
            prefix: server.prefix_for(name),
            transport: Transport::Stdio {
                program,
                args: args.to_vec(),
                env,
                dir: server.dir.clone(),
            },
            timeout,
            sampling,
        });
    }
    Ok(specs)
}

/// A program as the shell would find it: a path (relative to `dir` when
/// given), else the first match on the host's `PATH`.
fn find_program(program: &str, dir: Option<&Path>) -> Option<PathBuf> {
    if program.contains('/') {
        let path = match dir {
            Some(dir) => dir.join(program),
            None => PathBuf::from(program),
        };
        return path.is_file().then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// The policy's servers, ready to start when their tools are first
/// needed; `None` when it names none.
pub fn upstream(
    policy: &Policy,
    backend: &Arc<dyn LlmBackend>,
) -> Result<Option<Arc<UpstreamTools>>> {
    let specs = specs(policy, backend)?;
    if specs.is_empty() {
        return Ok(None);
    }
    let rules = policy.gadgets.clone();
    Ok(Some(Arc::new(UpstreamTools::new(
        specs,
        Arc::new(move |name: &str| rules.check(name).is_ok()),
    ))))
}
