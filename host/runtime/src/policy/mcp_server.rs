//! `[mcp-servers.NAME]`: another MCP server whose tools are served as
//! gadgets under this policy (its allow and deny lists, rules, approvals,
//! limits and journal).
//!
//! ```toml
//! [mcp-servers.everything]
//! command = ["node", "servers/everything/dist/index.js", "stdio"]   # stdio
//! env = { PATH = { env = "PATH" } }     # nothing is inherited
//! prefix = "everything_"                # the default: NAME_
//! timeout-ms = 60000
//!
//! llm = { models = ["openai:gpt-4o-mini"], max-usd-per-run = 0.50 }  # its sampling
//!
//! [mcp-servers.tickets]
//! url = "https://mcp.example.com/mcp"   # Streamable HTTP
//! bearer-token-env = "TICKETS_TOKEN"    # sent as Authorization: Bearer
//!
//! [mcp-servers.github]
//! url = "https://mcp.example.com/mcp"   # no token: OAuth when it asks
//! oauth = { client-id = "gadget-host-prod", client-secret-env = "GH_SECRET", scopes = ["repo:read"] }
//! ```
//!
//! A url server without `bearer-token-env` is authorized with OAuth 2.1
//! when it answers 401 (`gadget login NAME` for one that wants a person);
//! `oauth` only refines how (a client registered out of band, a client ID
//! metadata document, scopes, the loopback port).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::plugin::{ConfigSource, LlmPolicy, MAX_PREFIX_BYTES};
use crate::specs::check_gadget_name;

/// Longest call deadline an upstream server may be given, ms: the host's
/// hard maximum for any call.
const MAX_TIMEOUT_MS: u64 = gadget_core::limits::HARD_MAX_TIMEOUT.as_millis() as u64;

/// One upstream server.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct McpServerPolicy {
    /// A program and its arguments, spoken to over stdio.
    pub command: Option<Vec<String>>,
    /// A Streamable HTTP endpoint (`http://` or `https://`).
    pub url: Option<String>,
    /// The host's environment variable holding a bearer token for `url`.
    pub bearer_token_env: Option<String>,
    /// Prepended to each of its tools' names; default `NAME_`.
    pub prefix: Option<String>,
    /// The environment of its process: nothing of the host's is inherited
    /// unless named here (`{ env = "VAR" }` or `{ value = "..." }`).
    #[serde(default)]
    pub env: BTreeMap<String, ConfigSource>,
    /// Its working directory (relative to the policy file); default: the
    /// host's.
    pub dir: Option<PathBuf>,
    /// How long one of its calls may take, ms; default 60000.
    pub timeout_ms: Option<u64>,
    /// How OAuth authorizes with it (a url server without a bearer token).
    pub oauth: Option<OAuthPolicy>,
    /// Its `sampling/createMessage` requests are answered with the first
    /// of these models, within these budgets (`max-usd-per-call` per
    /// request, `max-usd-per-run` while the host runs); absent: refused.
    pub llm: Option<LlmPolicy>,
}

/// `[mcp-servers.NAME.oauth]`: every field optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OAuthPolicy {
    /// A client registered with the authorization server out of band
    /// (else a client ID metadata document, else dynamic registration).
    pub client_id: Option<String>,
    /// The host's environment variable holding that client's secret.
    pub client_secret_env: Option<String>,
    /// An https URL where the host's client ID metadata document is
    /// published (used when the authorization server supports those).
    pub client_metadata_url: Option<String>,
    /// Scopes always asked for, beside those the server's challenge names.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The port of the loopback listener the authorization response comes
    /// back to (default: any free port).
    pub redirect_port: Option<u16>,
}

impl McpServerPolicy {
    /// The prefix of its tools' names.
    pub fn prefix_for(&self, name: &str) -> String {
        self.prefix.clone().unwrap_or_else(|| format!("{name}_"))
    }
}

/// The host's own state (what it keeps between runs that is not a
/// cache): `$GADGET_STATE_DIR`, else `$XDG_STATE_HOME/gadget-host`, else
/// `~/.local/state/gadget-host`. No file grant may open it.
pub fn state_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("GADGET_STATE_DIR").filter(|d| !d.is_empty()) {
        Some(PathBuf::from(dir))
    } else if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        Some(PathBuf::from(dir).join("gadget-host"))
    } else {
        Some(PathBuf::from(std::env::var_os("HOME")?).join(".local/state/gadget-host"))
    }
}

/// Where upstream servers' OAuth tokens are kept, one file per server:
/// `oauth` in the host's [`state_dir`].
pub fn oauth_token_dir() -> Option<PathBuf> {
    Some(state_dir()?.join("oauth"))
}

/// Checks a server's `oauth` table: where the refusal is, and why.
fn check_oauth(server: &McpServerPolicy) -> Result<(), (&'static str, String)> {
    let Some(oauth) = &server.oauth else {
        return Ok(());
    };
    if server.url.is_none() || server.bearer_token_env.is_some() {
        return Err((
            ".oauth",
            "OAuth is for a url server without bearer-token-env".into(),
        ));
    }
    if oauth.client_secret_env.is_some() && oauth.client_id.is_none() {
        return Err((
            ".oauth.client-secret-env",
            "a secret belongs to a client-id registered out of band".into(),
        ));
    }
    if let Some(url) = &oauth.client_metadata_url
        && !url.starts_with("https://")
    {
        return Err((
            ".oauth.client-metadata-url",
            format!("'{url}' is not an https:// URL"),
        ));
    }
    Ok(())
}

/// Checks each `[mcp-servers.NAME]`; relative directories become relative
/// to `base` (the policy file's directory).
pub(super) fn check(
    servers: &mut BTreeMap<String, McpServerPolicy>,
    base: &Path,
) -> Result<(), String> {
    for (name, server) in servers.iter_mut() {
        let at = |field: &str, e: String| format!("mcp-servers.{name}{field}: {e}");
        check_gadget_name(name).map_err(|e| at("", e))?;
        match (&server.command, &server.url) {
            (None, None) => {
                return Err(at(
                    "",
                    "say how to reach it: command = [\"program\", \"arg\", ...] (stdio) or url = \"https://...\" (Streamable HTTP)".into(),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(at(
                    "",
                    "give command (stdio) or url (HTTP), not both".into(),
                ));
            }
            (Some(command), None) if command.is_empty() || command[0].trim().is_empty() => {
                return Err(at(".command", "name the program to run".into()));
            }
            (None, Some(url))
                if !(url.starts_with("http://") || url.starts_with("https://"))
                    || url.contains(char::is_whitespace) =>
            {
                return Err(at(
                    ".url",
                    format!("'{url}' is not an http:// or https:// URL"),
                ));
            }
            _ => {}
        }
        if server.url.is_some() && (!server.env.is_empty() || server.dir.is_some()) {
            return Err(at(
                "",
                "env and dir are for a command (stdio), not a url".into(),
            ));
        }
        check_oauth(server).map_err(|(field, e)| at(field, e))?;
        if server.command.is_some() && server.bearer_token_env.is_some() {
            return Err(at(
                ".bearer-token-env",
                "a bearer token is for a url (HTTP); give a command its secrets in env".into(),
            ));
        }
        let prefix = server.prefix_for(name);
        if prefix.len() > MAX_PREFIX_BYTES {
            return Err(at(
                ".prefix",
                format!("'{prefix}' is over {} bytes", MAX_PREFIX_BYTES),
            ));
        }
        check_gadget_name(&prefix).map_err(|e| at(".prefix", e))?;
        for (key, source) in &server.env {
            if key.is_empty() || key.contains(['=', '\0']) {
                return Err(at(".env", format!("'{key}' is not a variable name")));
            }
            if source.env.is_some() == source.value.is_some() {
                return Err(at(
                    &format!(".env.{key}"),
                    "give one of { env = \"VAR\" } or { value = \"...\" }".into(),
                ));
            }
        }
        match server.timeout_ms {
            Some(0) => return Err(at(".timeout-ms", "must be more than 0".into())),
            Some(ms) if ms > MAX_TIMEOUT_MS => {
                return Err(at(
                    ".timeout-ms",
                    format!("{ms} is over the host's hard maximum of {MAX_TIMEOUT_MS}"),
                ));
            }
            _ => {}
        }
        if let Some(llm) = &server.llm {
            if llm.models.is_empty() {
                return Err(at(
                    ".llm.models",
                    "name the model its requests go to".into(),
                ));
            }
            if let Some(model) = llm.models.iter().find(|m| !m.contains(':')) {
                return Err(at(
                    ".llm.models",
                    format!("'{model}' is not \"provider:model\""),
                ));
            }
            for (what, value) in [
                ("max-usd-per-call", llm.max_usd_per_call),
                ("max-usd-per-run", llm.max_usd_per_run),
            ] {
                if value.is_some_and(|v| !v.is_finite() || v < 0.0) {
                    return Err(at(&format!(".llm.{what}"), "must be 0 or more".into()));
                }
            }
        }
        if let Some(dir) = &mut server.dir
            && dir.is_relative()
        {
            *dir = base.join(&*dir);
        }
    }
    Ok(())
}
