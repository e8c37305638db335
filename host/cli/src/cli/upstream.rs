//! The policy's `[mcp-servers.NAME]`: resolved into what `gadget_mcp`
//! starts (the program found on the host's `PATH`, the environment it is
//! given, nothing more); each starts when its tools are first needed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};

use gadget_core::llm::LlmBackend;
use std::io::IsTerminal;

use sha2::Digest;

use gadget_mcp::upstream::{
    DEFAULT_CALL_TIMEOUT, OAuthSpec, Sampling, ShowAuthorization, Transport, UpstreamSpec,
    UpstreamTools,
};
use gadget_runtime::policy::{OAuthPolicy, Policy, oauth_token_dir};

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
                    oauth: oauth_spec(name, url, server.oauth.as_ref())?,
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

/// How OAuth authorizes with a url server: the policy's `oauth` table,
/// its secret read from the host's environment, the tokens kept in a file
/// of their own under the host's state, and a person asked (on this
/// terminal) only when stderr is one.
fn oauth_spec(name: &str, url: &str, policy: Option<&OAuthPolicy>) -> Result<OAuthSpec> {
    let default = OAuthPolicy::default();
    let policy = policy.unwrap_or(&default);
    let client_secret = match &policy.client_secret_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            anyhow::anyhow!(
                "mcp-servers.{name}.oauth.client-secret-env: the host's environment has no {var}"
            )
        })?),
        None => None,
    };
    // One file per server and URL: a server moved to another URL is
    // authorized anew, not sent the old one's tokens.
    let token_file = oauth_token_dir().map(|dir| {
        let digest = sha2::Sha256::digest(url.as_bytes());
        let tag: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        dir.join(format!("{name}-{tag}.json"))
    });
    let person = std::io::stderr().is_terminal().then(|| {
        ShowAuthorization(Arc::new(|server: &str, url: &str| {
            eprintln!(
                "MCP server '{server}' asks for authorization: open this address in a browser and approve (waiting up to {} s):\n  {url}",
                gadget_mcp::upstream::AUTHORIZATION_WAIT.as_secs()
            );
        }) as Arc<gadget_mcp::upstream::ShowFn>)
    });
    Ok(OAuthSpec {
        client_id: policy.client_id.clone(),
        client_secret,
        client_metadata_url: policy.client_metadata_url.clone(),
        scopes: policy.scopes.clone(),
        redirect_port: policy.redirect_port.unwrap_or(0),
        token_file,
        person,
    })
}

/// `gadget login NAME`: authorizes with the server now (a person approves
/// on this terminal when its authorization server wants one), keeping the
/// tokens; `--forget` removes them.
pub async fn login(policy: &Policy, name: &str, forget: bool) -> Result<ExitCode> {
    let Some(server) = policy.mcp_servers.get(name) else {
        bail!(
            "the policy names no [mcp-servers.{name}] (it names: {})",
            policy
                .mcp_servers
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let (Some(url), None) = (&server.url, &server.bearer_token_env) else {
        bail!(
            "mcp-servers.{name} is not authorized with OAuth: only a url server without bearer-token-env is"
        );
    };
    let mut oauth = oauth_spec(name, url, server.oauth.as_ref())?;
    let Some(file) = oauth.token_file.clone() else {
        bail!("no place to keep the tokens: set GADGET_STATE_DIR (or HOME)");
    };
    if forget {
        match std::fs::remove_file(&file) {
            Ok(()) => eprintln!("removed the tokens kept for '{name}' ({})", file.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("no tokens are kept for '{name}'")
            }
            Err(e) => bail!("removing {}: {e}", file.display()),
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Asked here whatever stderr is: this command is for a person.
    oauth.person = Some(ShowAuthorization(Arc::new(|server: &str, url: &str| {
        eprintln!(
            "Open this address in a browser to authorize gadget-host with '{server}' (waiting up to {} s):\n  {url}",
            gadget_mcp::upstream::AUTHORIZATION_WAIT.as_secs()
        );
    })));
    let spec = UpstreamSpec {
        name: name.to_string(),
        prefix: server.prefix_for(name),
        transport: Transport::Http {
            url: url.clone(),
            bearer: None,
            oauth,
        },
        timeout: DEFAULT_CALL_TIMEOUT,
        sampling: None,
    };
    let tools = UpstreamTools::new(vec![spec], Arc::new(|_: &str| true));
    let server = &tools.servers()[0];
    let started = server.ensure_started().await;
    server.stop().await;
    match started {
        Ok(()) => {
            eprintln!(
                "'{name}' answers: {} tools; its tokens, if it asked for any, are kept in {}",
                server.tools().len(),
                file.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => bail!("{why}"),
    }
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
