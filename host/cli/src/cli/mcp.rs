//! `gadget mcp`, `gadget serve` and `gadget schemas`: the loaded gadgets for
//! MCP clients (stdio or Streamable HTTP, through the gadget-mcp crate) and
//! as native tool definitions for LLM APIs.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use gadget_core::tool::Tools;
use gadget_mcp::http::{DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CONCURRENT_CALLS, ServeOptions};
use gadget_mcp::metrics::Metrics;
use gadget_mcp::server::{GadgetServer, tool_of};

use super::EXIT_BAD_INPUT;

/// Options of `gadget serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The address to listen on. Anything but loopback needs --auth-token-env.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    listen: SocketAddr,
    /// The environment variable holding the bearer token every request must carry.
    #[arg(long, value_name = "VAR", conflicts_with = "auth_jwks")]
    auth_token_env: Option<String>,
    /// Check callers' JWT access tokens against this JWKS (a file, or an https:// URL of the authorization server's keys); each caller is then known by the token's subject. Needs --auth-audience.
    #[arg(long, value_name = "FILE|URL", requires = "auth_audience")]
    auth_jwks: Option<String>,
    /// The audience tokens must be for: this server's resource, as the authorization server names it (e.g. https://mcp.example.com/mcp).
    #[arg(long, value_name = "AUD", requires = "auth_jwks")]
    auth_audience: Option<String>,
    /// The issuer tokens must come from (their `iss`); also listed in /.well-known/oauth-protected-resource.
    #[arg(long, value_name = "ISS", requires = "auth_jwks")]
    auth_issuer: Option<String>,
    /// Tool calls running at once; one more is refused with 503 and Retry-After.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONCURRENT_CALLS)]
    max_concurrent_calls: usize,
    /// On SIGTERM, how long calls in flight may finish before they are cancelled, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_DRAIN_TIMEOUT.as_millis() as u64)]
    drain_timeout: u64,
    /// A Host header value to accept besides loopback names (the public name clients use; repeatable).
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// Also serve /metrics (and /healthz) at ADDR without the token, for a scraper that has none (Prometheus in the cluster).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Keep a session per client of protocol 2025-11-25 or older, so a gadget can ask it mid-call (elicitation, sampling, roots). A session lives in one replica: route it there (sticky on Mcp-Session-Id). 2026-07-28 clients are stateless either way.
    #[arg(long)]
    sessions: bool,
    /// Share MCP tasks and rate-limit windows with the other replicas in this store: redis://HOST:PORT/DB (rediss:// for TLS). A password may come from GADGET_STATE_PASSWORD instead of the URL. Without it, each replica keeps its own in memory.
    #[arg(
        long,
        value_name = "URL",
        env = "GADGET_STATE_URL",
        hide_env_values = true
    )]
    state: Option<String>,
}

/// The format of `gadget schemas`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SchemaFormat {
    /// Chat Completions `tools`: `{"type": "function", "function": {...}}`.
    Openai,
    /// Messages API `tools`: `{"name", "description", "input_schema"}`.
    Anthropic,
    /// MCP `tools/list` entries.
    Mcp,
}

/// What `gadget mcp` serves, once loaded: the tools, how many gadgets,
/// and the reload.
type Loaded = Option<(Arc<dyn Tools>, usize, gadget_mcp::Reload)>;

/// `gadget mcp`: MCP over stdio until the client goes away. The session
/// starts at once and `loading` runs beside it, so a client's start-up
/// timeout never waits for cold compiles; its first list or call waits for
/// the tools instead.
pub async fn mcp(
    loading: impl std::future::Future<Output = Result<Loaded>>,
    guards: &super::guards::Guards,
    journal: Option<Arc<gadget_exec::audit::Journal>>,
) -> Result<ExitCode> {
    use rmcp::ServiceExt as _;
    let hangups = gadget_mcp::Hangups::listen();
    let key = match gadget_mcp::approval::ApprovalKey::from_env() {
        Ok(key) => key,
        Err(e) => {
            super::out::tell_operator(&format!("error: {e}"), true);
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    let (loaded_tx, loaded_rx) = tokio::sync::watch::channel(false);
    let server = GadgetServer::new(
        Arc::new(gadget_core::tool::Toolbox::new()),
        Arc::new(Metrics::new()),
    )
    .with_server_requests(true)
    .with_loading(loaded_rx)
    .with_approvals(guards.rules.clone(), key)
    .with_rates(guards.rates.clone())
    .with_journal(journal);
    let session = server.clone().serve(gadget_mcp::stdio::transport());
    let loading = async {
        let loaded = loading.await;
        if let Ok(Some((tools, _, _))) = &loaded {
            server.replace_tools(tools.clone());
            let _ = loaded_tx.send(true);
        }
        loaded
    };
    let (running, loaded) = tokio::join!(session, loading);
    let reload = match loaded {
        Ok(Some((_, _, reload))) => reload,
        Ok(None) => return Ok(ExitCode::from(EXIT_BAD_INPUT)),
        Err(e) => return Err(e),
    };
    let running = running.context("starting the MCP session on stdio")?;
    // On SIGHUP the plugins are loaded again and the client is told the
    // tool and resource lists changed, and each resource it subscribed to
    // may have.
    let peer = running.peer().clone();
    let session = server.clone();
    gadget_mcp::reload_on_sighup(
        server,
        reload,
        move || {
            let peer = peer.clone();
            let subscribed = session.subscribed();
            Box::pin(async move {
                let _ = peer.notify_tool_list_changed().await;
                let _ = peer.notify_resource_list_changed().await;
                for uri in subscribed {
                    let _ = peer
                        .notify_resource_updated(
                            rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                        )
                        .await;
                }
            })
        },
        hangups,
    );
    // An upstream MCP server's changed tools are this session's too.
    let peer = running.peer().clone();
    let mut upstream_changes = gadget_mcp::upstream::changes();
    tokio::spawn(async move {
        while upstream_changes.changed().await.is_ok() {
            let _ = peer.notify_tool_list_changed().await;
        }
    });
    running.waiting().await.context("the MCP session")?;
    Ok(ExitCode::SUCCESS)
}

/// `gadget serve`: MCP over Streamable HTTP until SIGTERM or Ctrl-C.
pub async fn serve(
    tools: Arc<dyn Tools>,
    waiting_for_grants: usize,
    args: &ServeArgs,
    reload: gadget_mcp::Reload,
    guards: &super::guards::Guards,
    journal: Option<Arc<gadget_exec::audit::Journal>>,
) -> Result<ExitCode> {
    // A configured token is either usable or a start-up error: never "no
    // authentication" (see BearerToken).
    let auth_token = match &args.auth_token_env {
        Some(var) => match std::env::var(var) {
            Ok(raw) => match gadget_mcp::http::BearerToken::new(&raw) {
                Ok(token) => Some(token),
                Err(e) => {
                    super::out::tell_operator(&format!("error: --auth-token-env {var}: {e}"), true);
                    return Ok(ExitCode::from(EXIT_BAD_INPUT));
                }
            },
            Err(_) => {
                super::out::tell_operator(
                    &format!("error: --auth-token-env {var}: the variable is not set"),
                    true,
                );
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            }
        },
        None => None,
    };
    let jwt = match (&args.auth_jwks, &args.auth_audience) {
        (Some(jwks), Some(audience)) => {
            let source = gadget_mcp::identity::JwksSource::parse(jwks);
            match gadget_mcp::identity::JwtAuth::new(
                source,
                audience.clone(),
                args.auth_issuer.clone(),
            )
            .await
            {
                Ok(auth) => Some(Arc::new(auth)),
                Err(e) => {
                    super::out::tell_operator(&format!("error: --auth-jwks: {e}"), true);
                    return Ok(ExitCode::from(EXIT_BAD_INPUT));
                }
            }
        }
        _ => None,
    };
    let state = match open_state(args.state.as_deref()).await {
        Ok(state) => state,
        Err(code) => return Ok(code),
    };
    let shared_state = state
        .as_ref()
        .map(|store| {
            format!(
                ", tasks and rate limits shared in {} as {}",
                store.shown(),
                store.replica()
            )
        })
        .unwrap_or_default();
    let options = ServeOptions {
        listen: args.listen,
        auth_token,
        jwt,
        max_concurrent_calls: args.max_concurrent_calls,
        drain_timeout: Duration::from_millis(args.drain_timeout),
        allowed_hosts: args.allowed_hosts.clone(),
        metrics_listen: args.metrics_listen,
        sessions: args.sessions,
        state,
        rules: guards.rules.clone(),
        rates: guards.rates.clone(),
        journal,
        approval_key: match gadget_mcp::approval::ApprovalKey::from_env() {
            Ok(key) => key,
            Err(e) => {
                super::out::tell_operator(&format!("error: {e}"), true);
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            }
        },
    };
    // What clients will list, not what was loaded: a gadget whose plugin
    // lacks a grant it asks for is not offered.
    let offered = tools.all().len();
    let waiting = match waiting_for_grants {
        0 => String::new(),
        n => format!("; {n} more gadgets wait for grants (`gadget check` says which)"),
    };
    let served = gadget_mcp::http::serve(
        tools,
        options,
        tokio_util::sync::CancellationToken::new(),
        Some(reload),
        |addr| {
            super::out::tell_operator(
                &format!("serving {offered} tools over MCP at http://{addr}/mcp (health /healthz, metrics /metrics){shared_state}{waiting}"),
                false,
            )
        },
    )
    .await;
    match served {
        Ok(()) => {
            super::out::tell_operator("stopped", false);
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ gadget_mcp::http::ServeError::Unauthenticated(_)) => {
            super::out::tell_operator(&format!("error: {e}"), true);
            Ok(ExitCode::from(EXIT_BAD_INPUT))
        }
        Err(e) => Err(e.into()),
    }
}

/// The store `--state` names, if any: a URL that cannot be one is a
/// start-up error; a store that does not answer yet is only a warning (the
/// replica starts not ready, and is ready once the store answers).
async fn open_state(
    url: Option<&str>,
) -> Result<Option<Arc<gadget_mcp::state::StateStore>>, ExitCode> {
    let Some(url) = url else {
        return Ok(None);
    };
    let password = std::env::var(gadget_mcp::state::STATE_PASSWORD_ENV).ok();
    match gadget_mcp::state::StateStore::open(url, password.as_deref()) {
        Ok(store) => {
            let store = Arc::new(store);
            if let Err(e) = store.ping().await {
                super::out::tell_operator(
                    &format!("warning: {e}; /readyz says not ready until it answers"),
                    true,
                );
            }
            Ok(Some(store))
        }
        Err(e) => {
            super::out::tell_operator(&format!("error: {e}"), true);
            Err(ExitCode::from(EXIT_BAD_INPUT))
        }
    }
}

/// `gadget schemas`: the gadgets as native tool definitions, one JSON
/// document on stdout.
pub fn schemas(served: &dyn Tools, format: SchemaFormat) -> Result<ExitCode> {
    let tools: Vec<Value> = served
        .all()
        .iter()
        .map(|tool| {
            let spec = tool.spec();
            let schema = tool
                .schema()
                .schema()
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            match format {
                SchemaFormat::Openai => json!({
                    "type": "function",
                    "function": {
                        "name": spec.name,
                        "description": spec.description,
                        "parameters": schema,
                    },
                }),
                SchemaFormat::Anthropic => json!({
                    "name": spec.name,
                    "description": spec.description,
                    "input_schema": schema,
                }),
                SchemaFormat::Mcp => serde_json::to_value(tool_of(&**tool)).unwrap_or(Value::Null),
            }
        })
        .collect();
    println!("{}", serde_json::to_string_pretty(&tools)?);
    Ok(ExitCode::SUCCESS)
}
