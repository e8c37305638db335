//! The operator's policy file: what the person running the host allows,
//! over what any plugin's manifest asks for.
//!
//! Where it is found: `--config FILE`, else `$GADGET_CONFIG`, else
//! `$XDG_CONFIG_HOME/gadget-host/config.toml` (or
//! `~/.config/gadget-host/config.toml`) when it exists, else none: every
//! default applies and nothing is granted. TOML; unknown fields are an
//! error that names the line.
//!
//! ```toml
//! [limits]                 # ceilings over what any manifest asks for
//! max-timeout-ms = 120000
//! max-memory-mib = 1024
//! host-memory-mib = 8192   # linear memory of all running calls together
//!
//! [gadgets]
//! deny = ["Sleep", "Json*"] # names or globs, case-insensitive
//! # allow = ["Calc*"]       # when present, only these
//! approve = ["WriteFile"]  # each call waits for a person's approval
//!
//! [[rate-limits]]          # at most `calls` calls in any window
//! gadget = "web_*"         # a name or glob: the calls of all share it
//! calls = 10
//! per-seconds = 1
//! scope = "client"         # each caller apart; "gadget" (default): everyone
//!
//! [[rules]]                # on the validated arguments
//! gadget = "FetchUrl"
//! param = "/url"           # a JSON pointer
//! matches = "http://*"     # a glob, or regex = "..."
//! action = "deny"          # or "approve"
//! reason = "plain HTTP is not allowed"
//!
//! [plugins.web]            # one plugin, by its manifest name
//! prefix = "web_"          # its gadgets are served as web_<Name>
//! http = ["https://api.example.com", "https://*.wikipedia.org",
//!   { origin = "https://api.github.com", methods = ["GET"], paths = ["/repos/*"] }]
//! allow-addresses = ["10.0.0.0/8"]   # internal addresses its names may resolve to
//!
//! [plugins.files]
//! files = [{ host = "./data", guest = "/data", mode = "ro" }]
//!
//! [plugins.weather]
//! config = { UNITS = { value = "metric" } }
//!
//! [plugins.weather.secrets.API_KEY]  # the gadget sees a placeholder
//! env = "WEATHER_API_KEY"
//! origins = ["https://api.weather.example"]
//! header = "Authorization"           # optional: the host sets it
//! format = "Bearer {}"
//! ```
//!
//! Relative `host` paths are relative to the policy file's directory (to
//! the working directory for `--grant`). What a plugin finally gets is
//! what this file grants AND what its manifest asks for (`grants`).
//!
//! Nothing in a model's output or a gadget's behaviour reaches this file:
//! it is read once, at startup, by the front end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use gadget_core::approval::{RuleSpec, Rules};
pub(crate) use gadget_core::limits::HARD_MAX_TIMEOUT;
use gadget_core::limits::{
    HARD_MAX_MEMORY_BYTES, LimitCeilings, MAX_LOG_BYTES, MAX_RESULT_BYTES, MAX_STDIO_BYTES,
};
use gadget_core::rate::{RateLimitSpec, RateLimits};

use crate::grants::{self, IpRange};
use crate::manifest::{FileMode, MAX_MANIFEST_BYTES};
use crate::specs::check_gadget_name;

/// The environment variable naming the policy file.
pub const CONFIG_ENV: &str = "GADGET_CONFIG";

/// The policy file under the XDG configuration directory.
pub const CONFIG_RELATIVE_PATH: &str = "gadget-host/config.toml";

/// Memory one component's compilation may use, in bytes: compiling the
/// largest guests here (CPython, SpiderMonkey) peaks well under 1 GiB;
/// 4 GiB leaves room for any honest component and stops one built to make
/// the compiler exhaust the machine.
pub const DEFAULT_COMPILE_MEMORY_BYTES: u64 = 4 << 30;

/// The policy, as read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Policy {
    #[serde(default)]
    pub limits: PolicyLimits,
    /// Which gadgets are served at all.
    #[serde(default)]
    pub gadgets: GadgetRules,
    /// Per plugin, by its manifest name.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginPolicy>,
    /// The agent's defaults (`gadget agent`).
    #[serde(default)]
    pub llm: LlmSettings,
    /// Sub-agents, each served as a gadget of that name.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentDefinition>,
    /// `[[rules]]`: argument rules that refuse a call or make it wait for
    /// a person (with `[gadgets] approve`).
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// `[[rate-limits]]`: how many calls of a gadget may run in a window,
    /// for everyone or for each caller.
    #[serde(default)]
    pub rate_limits: Vec<RateLimitSpec>,
    /// `[audit]`: the audit journal.
    #[serde(default)]
    pub audit: AuditPolicy,
    /// `[telemetry]`: OpenTelemetry export.
    #[serde(default)]
    pub telemetry: TelemetryPolicy,
    /// `[trust]`: whose signatures count, and whether one is required.
    #[serde(default)]
    pub trust: TrustPolicy,
    /// `[mcp-servers.NAME]`: other MCP servers whose tools are served
    /// under this policy.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerPolicy>,
    /// The file this policy was read from (none: built in, or text).
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

/// `[agents.NAME]`: an agent served as a gadget (agentsm's `as_tool`): a
/// call's `task` runs a nested agent loop with these gadgets only, and its
/// answer is the call's result.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AgentDefinition {
    /// What the agent does, for the model that may call it.
    pub description: String,
    /// `provider:model`; default: `[llm] model`.
    pub model: Option<String>,
    /// Its system text, before the gadget instructions.
    pub system: Option<String>,
    /// The gadgets it may call: names or globs (other agents included).
    pub gadgets: Vec<String>,
    /// Requests one call may make; default 5.
    pub max_iterations: Option<usize>,
    /// How long one call may take, ms; default 300000.
    pub timeout_ms: Option<u64>,
}

/// `[llm]`: what `gadget agent` uses when its options do not say.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LlmSettings {
    /// `PROVIDER:MODEL`, as `--model` takes it.
    pub model: Option<String>,
    /// The API's base URL (an OpenAI-compatible server's, for example).
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// Prices and context windows over the built-in model table, keyed by
    /// `PROVIDER:MODEL` or `MODEL`.
    #[serde(default)]
    pub models: BTreeMap<String, ModelPrices>,
    /// `[llm.on-error]`: what a session does when a request still fails
    /// after its retries; absent: it ends with the error.
    pub on_error: Option<OnLlmErrorSettings>,
}

/// `[llm.on-error]`: fallback models in order, then a response.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OnLlmErrorSettings {
    /// Each tried in order, with its own retries.
    #[serde(default)]
    pub fallback: Vec<FallbackModel>,
    /// Then this text, as if the model had answered it (plain text is the
    /// session's answer; a block in it runs).
    pub respond: Option<String>,
}

/// A fallback model: `"PROVIDER:MODEL"`, or a table with its own endpoint.
/// Without one, a model of the session's provider uses the session's base
/// URL and key variable, another provider its own defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum FallbackModel {
    Name(String),
    Endpoint(FallbackEndpoint),
}

/// `{ model = "PROVIDER:MODEL", base-url = "...", api-key-env = "VAR" }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FallbackEndpoint {
    pub model: String,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
}

impl FallbackModel {
    /// `PROVIDER:MODEL` as written, its base URL and key variable if given.
    pub fn parts(&self) -> (&str, Option<&str>, Option<&str>) {
        match self {
            FallbackModel::Name(model) => (model, None, None),
            FallbackModel::Endpoint(e) => {
                (&e.model, e.base_url.as_deref(), e.api_key_env.as_deref())
            }
        }
    }
}

/// `[llm.models."NAME"]`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ModelPrices {
    /// USD per million input tokens.
    pub input_per_mtok: f64,
    /// USD per million output tokens.
    pub output_per_mtok: f64,
    /// Tokens the model reads at most (sizes output limiting).
    pub context_window: Option<u64>,
}

pub use gadget_core::tool::glob_matches;

/// `[limits]`: the ceilings over what manifests ask for, and the host-wide
/// memory budget. Each absent field keeps the built-in default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyLimits {
    pub max_timeout_ms: Option<u64>,
    pub max_memory_mib: Option<u64>,
    pub max_result_kib: Option<u64>,
    pub max_log_kib: Option<u64>,
    pub max_stdio_kib: Option<u64>,
    /// Linear memory of every call running at once, MiB.
    pub host_memory_mib: Option<u64>,
    /// Memory the compiler may use for one component, MiB.
    pub compile_memory_mib: Option<u64>,
}

/// Why the policy file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: over the {MAX_MANIFEST_BYTES}-byte limit for a policy file", path.display())]
    TooLarge { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// A TOML type error in words an operator uses, with the form expected:
/// serde says "invalid type: string \"Sleep\", expected a sequence".
pub fn plain_types(message: &str) -> String {
    let Some(rest) = message.strip_prefix("invalid type: ") else {
        return message.to_string();
    };
    let Some((found, expected)) = rest.split_once(", expected ") else {
        return message.to_string();
    };
    let found = found
        .replacen("string ", "the text ", 1)
        .replacen("integer ", "the number ", 1)
        .replacen("floating point ", "the number ", 1)
        .replacen("boolean ", "", 1)
        .replace("sequence", "a list")
        .replace("map", "a table");
    let expected = if expected.contains("sequence") {
        "a list in brackets, for example [\"first\", \"second\"]".to_string()
    } else if expected.contains("boolean") || expected == "a bool" {
        "true or false".to_string()
    } else if ["u8", "u16", "u32", "u64", "usize", "i32", "i64"].contains(&expected) {
        "a whole number, for example 1000".to_string()
    } else if expected == "f64" || expected == "f32" {
        "a number, for example 0.05".to_string()
    } else if expected.contains("string") {
        "text in quotes, for example \"value\"".to_string()
    } else if expected.contains("map") || expected.starts_with("struct ") {
        "a table, for example { key = \"value\" } or a [section]".to_string()
    } else {
        expected.to_string()
    };
    format!("expected {expected}, found {found}")
}

impl Policy {
    /// Every secret value the policy grants (config read from the host's
    /// environment, and brokered secrets), for the journal to redact
    /// whatever plugin it reaches.
    pub fn secret_values(&self) -> Vec<String> {
        self.plugins
            .values()
            .flat_map(|plugin| {
                let config = plugin.config.values().filter_map(|c| c.env.as_deref());
                config.chain(plugin.secrets.values().map(|s| s.env.as_str()))
            })
            .filter_map(|var| std::env::var(var).ok())
            .filter(|value| !value.is_empty())
            .collect()
    }

    /// The policy file to read: `explicit` (`--config`), else
    /// `$GADGET_CONFIG`, else the XDG path when that file exists.
    pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(path) = explicit {
            return Some(path.to_path_buf());
        }
        if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(path));
        }
        let config_home = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
        let path = config_home.join(CONFIG_RELATIVE_PATH);
        path.is_file().then_some(path)
    }

    /// Reads and checks a policy file.
    pub fn from_file(path: &Path) -> Result<Policy, PolicyError> {
        use gadget_core::operator_file::{self, OperatorFileError};
        // A regular file within the limit, read once (no size checked
        // first and then read without bound).
        let text = operator_file::read_text(path, MAX_MANIFEST_BYTES).map_err(|e| match e {
            OperatorFileError::Io { source, .. } => PolicyError::Read {
                path: path.to_path_buf(),
                source,
            },
            OperatorFileError::TooLarge { .. } => PolicyError::TooLarge {
                path: path.to_path_buf(),
            },
            OperatorFileError::NotRegular { .. } => PolicyError::Invalid {
                path: path.to_path_buf(),
                message: "not a regular file".into(),
            },
            OperatorFileError::NotText { .. } => PolicyError::Invalid {
                path: path.to_path_buf(),
                message: "not UTF-8 text".into(),
            },
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut policy = Policy::parse(&text, base).map_err(|message| PolicyError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
        policy.file = Some(path.to_path_buf());
        policy.gadgets.file = Some(path.to_path_buf());
        Ok(policy)
    }

    /// Parses and checks a policy's text; relative directories in it are
    /// relative to `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Policy, String> {
        let mut policy: Policy = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        for (plugin, grants) in &policy.plugins {
            if let Some(prefix) = &grants.prefix {
                // A prefix must keep every name a valid gadget name.
                if prefix.len() > MAX_PREFIX_BYTES {
                    return Err(format!(
                        "plugins.{plugin}.prefix: '{prefix}' is over {MAX_PREFIX_BYTES} bytes"
                    ));
                }
                check_gadget_name(prefix).map_err(|e| format!("plugins.{plugin}.prefix: {e}"))?;
            }
            check_grants(plugin, grants)?;
        }
        mcp_server::check(&mut policy.mcp_servers, base)?;
        if let Some(file) = &mut policy.audit.file
            && file.is_relative()
        {
            *file = base.join(&*file);
        }
        for grants in policy.plugins.values_mut() {
            for file in &mut grants.files {
                if file.host.is_relative() {
                    file.host = base.join(&file.host);
                }
            }
        }
        if let Some(model) = &policy.llm.model
            && !model.contains(':')
        {
            return Err(format!("llm.model: '{model}' is not \"provider:model\""));
        }
        for (name, agent) in &policy.agents {
            check_gadget_name(name).map_err(|e| format!("agents.{name}: {e}"))?;
            if agent.description.trim().is_empty() {
                return Err(format!(
                    "agents.{name}.description: say what the agent does"
                ));
            }
            if let Some(model) = &agent.model
                && !model.contains(':')
            {
                return Err(format!(
                    "agents.{name}.model: '{model}' is not \"provider:model\""
                ));
            }
            if agent.max_iterations == Some(0) {
                return Err(format!("agents.{name}.max-iterations: must be at least 1"));
            }
        }
        for (name, prices) in &policy.llm.models {
            for (what, value) in [
                ("input-per-mtok", prices.input_per_mtok),
                ("output-per-mtok", prices.output_per_mtok),
            ] {
                if !value.is_finite() || value < 0.0 {
                    return Err(format!(
                        "llm.models.\"{name}\".{what}: {value} is not a price (USD per million tokens, 0 or more)"
                    ));
                }
            }
        }
        policy.approval_rules()?;
        policy.rate_limits()?;
        check_limits(&policy.limits)?;
        Ok(policy)
    }

    /// The ceilings this policy sets (the defaults where it says nothing).
    pub fn ceilings(&self) -> LimitCeilings {
        let defaults = LimitCeilings::default();
        let limits = &self.limits;
        LimitCeilings {
            timeout: limits
                .max_timeout_ms
                .map_or(defaults.timeout, Duration::from_millis),
            memory_bytes: limits
                .max_memory_mib
                .map_or(defaults.memory_bytes, |mib| mib << 20),
            result_bytes: limits
                .max_result_kib
                .map_or(defaults.result_bytes, |kib| kib << 10),
            log_bytes: limits
                .max_log_kib
                .map_or(defaults.log_bytes, |kib| kib << 10),
            stdio_bytes: limits
                .max_stdio_kib
                .map_or(defaults.stdio_bytes, |kib| kib << 10),
        }
    }

    /// Memory for compiling one component, bytes (the policy's, else
    /// [`DEFAULT_COMPILE_MEMORY_BYTES`]).
    pub fn compile_memory_bytes(&self) -> u64 {
        self.limits
            .compile_memory_mib
            .map_or(DEFAULT_COMPILE_MEMORY_BYTES, |mib| mib << 20)
    }

    /// The host-wide memory budget in bytes, if the policy sets one.
    pub fn host_memory_bytes(&self) -> Option<u64> {
        self.limits.host_memory_mib.map(|mib| mib << 20)
    }

    /// Adds one command-line grant: `PLUGIN:http=URL`,
    /// `PLUGIN:files=HOST[:GUEST][:ro|rw]`, `PLUGIN:config=KEY=env:VAR` or
    /// `PLUGIN:config=KEY=value:TEXT`. Relative directories are relative
    /// to the working directory.
    pub fn add_grant(&mut self, grant: &str) -> Result<(), String> {
        let usage = "a grant is one of PLUGIN:http=URL; PLUGIN:files=HOST[:GUEST][:ro|rw] (GUEST defaults to / and HOST's last name, the mode to ro); PLUGIN:config=KEY=env:VAR or PLUGIN:config=KEY=value:TEXT; PLUGIN:llm=PROVIDER:MODEL";
        let (plugin, rest) = grant
            .split_once(':')
            .ok_or_else(|| format!("'{grant}': {usage}"))?;
        let (kind, value) = rest
            .split_once('=')
            .ok_or_else(|| format!("'{grant}': {usage}"))?;
        let entry = self.plugins.entry(plugin.to_string()).or_default();
        match kind {
            "http" => entry.http.push(plugin::HttpGrantSpec::from(value)),
            "llm" => {
                if !value.contains(':') {
                    return Err(format!(
                        "'{grant}': an llm grant is PLUGIN:llm=PROVIDER:MODEL"
                    ));
                }
                entry
                    .llm
                    .get_or_insert_with(LlmPolicy::default)
                    .models
                    .push(value.to_string());
            }
            "files" => {
                let mut parts: Vec<&str> = value.split(':').collect();
                let mode = match parts.last() {
                    Some(&"ro") if parts.len() > 1 => {
                        parts.pop();
                        FileMode::ReadOnly
                    }
                    Some(&"rw") if parts.len() > 1 => {
                        parts.pop();
                        FileMode::ReadWrite
                    }
                    _ => FileMode::ReadOnly,
                };
                let (host, guest) = match parts.as_slice() {
                    [host] => (*host, None),
                    [host, guest] => (*host, Some(guest.to_string())),
                    _ => return Err(format!("'{grant}': {usage}")),
                };
                let host = PathBuf::from(host);
                let host = if host.is_relative() {
                    std::env::current_dir()
                        .map_err(|e| format!("'{grant}': {e}"))?
                        .join(host)
                } else {
                    host
                };
                entry.files.push(FileGrant {
                    host,
                    guest,
                    mode,
                    write_quota_mib: None,
                    max_entries: None,
                    sensitive: false,
                });
            }
            "config" => {
                let (key, source) = value
                    .split_once('=')
                    .ok_or_else(|| format!("'{grant}': {usage}"))?;
                let source = match source.split_once(':') {
                    Some(("env", var)) => ConfigSource {
                        env: Some(var.to_string()),
                        value: None,
                    },
                    Some(("value", text)) => ConfigSource {
                        env: None,
                        value: Some(text.to_string()),
                    },
                    _ => {
                        return Err(format!(
                            "'{grant}': a config grant is KEY=env:VAR or KEY=value:TEXT"
                        ));
                    }
                };
                entry.config.insert(key.to_string(), source);
            }
            other => {
                return Err(format!(
                    "'{grant}': '{other}' is not http, files, config or llm; {usage}"
                ));
            }
        }
        // The command line says `--grant` in front of every such error.
        check_grants(plugin, entry).map_err(|e| format!("'{grant}': {e}"))
    }

    /// `--approve-gadget`: every call of a gadget (name or glob) waits
    /// for a person's approval, for this run.
    pub fn approve_gadget(&mut self, pattern: &str) {
        self.gadgets.approve.push(pattern.to_string());
        self.gadgets.approved_by_flag.push(pattern.to_string());
    }

    /// The approval rules, compiled (`[gadgets] approve`,
    /// `approval-timeout-ms`, `[[rules]]` and `--approve-gadget`).
    pub fn approval_rules(&self) -> Result<Rules, String> {
        let gadgets = &self.gadgets;
        let from_file: Vec<String> = gadgets
            .approve
            .iter()
            .filter(|p| !gadgets.approved_by_flag.contains(p))
            .cloned()
            .collect();
        let mut rules = Rules::new(
            from_file,
            self.rules.clone(),
            gadgets.approval_timeout_ms.map(Duration::from_millis),
        )?;
        for pattern in &gadgets.approved_by_flag {
            rules.approve_gadget(pattern);
        }
        Ok(rules)
    }

    /// The rate limits, compiled, with fresh windows (`None`: none).
    pub fn rate_limits(&self) -> Result<Option<std::sync::Arc<RateLimits>>, String> {
        if self.rate_limits.is_empty() {
            return Ok(None);
        }
        RateLimits::new(self.rate_limits.clone()).map(|limits| Some(std::sync::Arc::new(limits)))
    }

    /// Denies a gadget (name or glob) for this run.
    pub fn deny_gadget(&mut self, pattern: &str) {
        self.gadgets.deny.push(pattern.to_string());
        self.gadgets.denied_by_flag.push(pattern.to_string());
    }

    /// The prefix the operator gives a plugin's gadget names.
    pub fn prefix(&self, plugin: &str) -> Option<&str> {
        self.plugins.get(plugin)?.prefix.as_deref()
    }
}

/// Checks one plugin's grants as written.
fn check_grants(plugin: &str, grants: &PluginPolicy) -> Result<(), String> {
    if let Some(source) = &grants.source {
        crate::oci::OciRef::parse(source).map_err(|e| {
            format!("plugins.{plugin}.source: '{source}' is not an oci:// reference: {e}")
        })?;
    }
    for grant in &grants.http {
        grant
            .rule()
            .map_err(|e| format!("plugins.{plugin}.http: {e}"))?;
    }
    for address in &grants.allow_addresses {
        IpRange::parse(address).map_err(|e| format!("plugins.{plugin}.allow-addresses: {e}"))?;
    }
    for file in &grants.files {
        if let Some(guest) = &file.guest {
            grants::check_guest_path(guest).map_err(|e| format!("plugins.{plugin}.files: {e}"))?;
        }
        if file.host.as_os_str().is_empty() {
            return Err(format!("plugins.{plugin}.files: host must not be empty"));
        }
    }
    if let Some(llm) = &grants.llm {
        if llm.models.is_empty() {
            return Err(format!(
                "plugins.{plugin}.llm.models: name at least one model, as \"provider:model\""
            ));
        }
        for model in &llm.models {
            match model.split_once(':') {
                Some((provider, name)) if !provider.is_empty() && !name.is_empty() => {}
                _ => {
                    return Err(format!(
                        "plugins.{plugin}.llm.models: '{model}' is not \"provider:model\""
                    ));
                }
            }
        }
        for (key, usd) in [
            ("max-usd-per-call", llm.max_usd_per_call),
            ("max-usd-per-run", llm.max_usd_per_run),
        ] {
            if let Some(usd) = usd
                && !(usd.is_finite() && usd >= 0.0)
            {
                return Err(format!(
                    "plugins.{plugin}.llm.{key}: {usd} is not an amount of USD"
                ));
            }
        }
    }
    for (key, spec) in &grants.secrets {
        secret::check_secret(plugin, key, spec, grants.config.get(key))?;
    }
    for (key, source) in &grants.config {
        grants::check_config_key(key).map_err(|e| format!("plugins.{plugin}.config: {e}"))?;
        match (&source.env, &source.value) {
            (Some(_), None) | (None, Some(_)) => {}
            _ => {
                return Err(format!(
                    "plugins.{plugin}.config.{key}: give exactly one of env = \"VAR\" or value = \"...\""
                ));
            }
        }
    }
    Ok(())
}

mod audit;
mod gadgets;
mod mcp_server;
mod plugin;
mod secret;
mod trust;
pub use audit::{AuditPolicy, TelemetryPolicy};
pub use gadgets::{DenyRule, GadgetRules, RuleSource};
pub use mcp_server::{McpServerPolicy, OAuthPolicy, oauth_token_dir, state_dir};
pub use plugin::{
    ConfigSource, FileGrant, HttpGrantSpec, LlmPolicy, MAX_PREFIX_BYTES, PluginPolicy,
    ScopedHttpGrant, SecretSpec,
};
pub use trust::{Require, SignerSpec, TrustPolicy};

/// A TOML error as the operator reads it: the message with plain type
/// names, and the line it is on.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    // Counted in bytes: a span need not fall on a character boundary.
    let line = e.span().map(|span| {
        let before = &text.as_bytes()[..span.start.min(text.len())];
        before.iter().filter(|&&b| b == b'\n').count() + 1
    });
    let message = plain_types(e.message());
    match line {
        Some(line) => {
            let shown: String = text
                .lines()
                .nth(line - 1)
                .unwrap_or_default()
                .trim()
                .chars()
                .take(80)
                .collect();
            format!("{message} (line {line}: {shown})")
        }
        None => message,
    }
}

/// Each `[limits]` ceiling: more than 0, and within the host's hard
/// maximum.
fn check_limits(limits: &PolicyLimits) -> Result<(), String> {
    let over = |what: &str, value: Option<u64>, unit: u64, hard: u64| match value {
        Some(v) if v.saturating_mul(unit) > hard => Err(format!(
            "limits.{what}: {v} is over the host's hard maximum of {}",
            hard / unit
        )),
        Some(0) => Err(format!("limits.{what}: must be more than 0")),
        _ => Ok(()),
    };
    over(
        "max-timeout-ms",
        limits.max_timeout_ms,
        1,
        HARD_MAX_TIMEOUT.as_millis() as u64,
    )?;
    over(
        "max-memory-mib",
        limits.max_memory_mib,
        1 << 20,
        HARD_MAX_MEMORY_BYTES,
    )?;
    over(
        "max-result-kib",
        limits.max_result_kib,
        1 << 10,
        MAX_RESULT_BYTES,
    )?;
    over("max-log-kib", limits.max_log_kib, 1 << 10, MAX_LOG_BYTES)?;
    over(
        "max-stdio-kib",
        limits.max_stdio_kib,
        1 << 10,
        MAX_STDIO_BYTES,
    )?;
    over("host-memory-mib", limits.host_memory_mib, 1, u64::MAX)?;
    over("compile-memory-mib", limits.compile_memory_mib, 1, u64::MAX)?;
    Ok(())
}

#[cfg(test)]
mod tests;
