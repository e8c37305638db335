//! Grants: what one plugin may use during its calls, and why.
//!
//! A plugin gets what its manifest asks for AND what the operator's policy
//! grants (Zed's capability granter), never more than either: a grant the
//! manifest did not ask for is not applied, a request the operator did not
//! grant is not met, and both are reported so that `check`, `describe`,
//! `list --json` and the load warnings can say so. The result is computed
//! once, at load time, from the manifest and the policy; nothing a model
//! writes or a gadget does reaches it.
//!
//! - **files**: directories, each at a guest path, read-only unless both
//!   sides say `rw`. The host side is canonicalized here, once.
//! - **http**: origins (`scheme://host[:port]`, host may be `*.domain`);
//!   a request must match one, and every address its host resolves to must
//!   be public unless the grant names that address or the policy's
//!   `allow-addresses` holds it (no SSRF through DNS).
//! - **config**: environment variables of the instance; values read from
//!   the host's environment (`env = "VAR"`) are secrets, redacted from
//!   everything the host emits.

use std::net::{IpAddr, Ipv6Addr};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use gadget_core::call::{CallError, Outcome};
use gadget_core::redact::Redactor;

use crate::dirs::{OpenedDir, WriteQuota};
use crate::manifest::{FileMode, Permissions};
use crate::policy::{ConfigSource, PluginPolicy};

/// What each call of one plugin gets: its grants, and the redactor for
/// the secrets among them.
#[derive(Debug, Default)]
pub struct CallGrants {
    /// The plugin's manifest name (in refusals).
    pub plugin: String,
    pub grants: Grants,
    pub redactor: Arc<Redactor>,
    /// The plugin's HTTP client, built at its first request: its own
    /// connection pool and a resolver enforcing its address rules.
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
}

impl CallGrants {
    pub fn new(plugin: &str, grants: Grants) -> CallGrants {
        let redactor = Arc::new(Redactor::new(grants.secrets()));
        CallGrants {
            plugin: plugin.to_string(),
            grants,
            redactor,
            client: std::sync::OnceLock::new(),
        }
    }

    /// The plugin's HTTP client (built once).
    pub(crate) fn http_client(&self) -> Result<reqwest::Client, String> {
        self.client
            .get_or_init(|| crate::http::build_client(&self.plugin, &self.grants.http.addresses))
            .clone()
    }

    /// An outcome with the plugin's secrets replaced.
    pub fn redact_outcome(&self, outcome: Outcome) -> Outcome {
        let r = &self.redactor;
        if r.is_empty() {
            return outcome;
        }
        match outcome {
            Outcome::Result { result, details } => Outcome::Result {
                result: r.string(result),
                details: details.map(|d| r.value(d)),
            },
            Outcome::Finish { result, details } => Outcome::Finish {
                result: r.string(result),
                details: details.map(|d| r.value(d)),
            },
            Outcome::AskHuman { question } => Outcome::AskHuman {
                question: r.string(question),
            },
        }
    }

    /// An error with the plugin's secrets replaced in what the gadget wrote.
    pub fn redact_error(&self, error: CallError) -> CallError {
        let r = &self.redactor;
        match error {
            CallError::InvalidArguments { message } => CallError::InvalidArguments {
                message: r.string(message),
            },
            CallError::Failed { message } => CallError::Failed {
                message: r.string(message),
            },
            CallError::Crashed { gadget, reason } => CallError::Crashed {
                gadget,
                reason: r.string(reason),
            },
            other => other,
        }
    }
}

/// What a plugin's calls get.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grants {
    pub files: Vec<DirGrant>,
    pub http: HttpRules,
    pub config: Vec<ConfigGrant>,
    /// Completions through the host's LLM, when asked for and granted.
    pub llm: Option<LlmGrant>,
}

/// The models a plugin's calls may complete with, and their budgets.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LlmGrant {
    /// `provider:model`; the first is the default.
    pub models: Vec<String>,
    /// USD one call's completions may cost together.
    pub max_usd_per_call: Option<f64>,
    /// USD all of the plugin's completions may cost together in one run
    /// (see [`RunBudget`]).
    pub max_usd_per_run: Option<f64>,
    /// What the plugin's calls have spent (and reserved) in this run.
    #[serde(skip)]
    pub run: Arc<RunBudget>,
}

impl PartialEq for LlmGrant {
    fn eq(&self, other: &Self) -> bool {
        self.models == other.models
            && self.max_usd_per_call == other.max_usd_per_call
            && self.max_usd_per_run == other.max_usd_per_run
    }
}

impl LlmGrant {
    pub fn new(
        models: Vec<String>,
        max_usd_per_call: Option<f64>,
        max_usd_per_run: Option<f64>,
    ) -> LlmGrant {
        LlmGrant {
            models,
            max_usd_per_call,
            max_usd_per_run,
            run: Arc::default(),
        }
    }
}

/// What all of one plugin's completions have cost in this run: one
/// `gadget run`, `agent` or `call`, or one load of the plugins in `gadget
/// mcp`/`serve` (a reload starts a new run). Shared by the plugin's calls,
/// which reserve a completion's worst case before sending it, so calls in
/// parallel cannot each pass the check and together go over.
#[derive(Debug, Default)]
pub struct RunBudget {
    /// USD spent, plus the worst case of completions in flight.
    spent: std::sync::Mutex<f64>,
}

impl RunBudget {
    fn spent(&self) -> std::sync::MutexGuard<'_, f64> {
        self.spent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What has been spent or reserved, USD.
    pub fn used(&self) -> f64 {
        *self.spent()
    }

    /// Reserves `worst` USD if it fits under `limit`; else what is left.
    pub fn reserve(self: &Arc<Self>, worst: f64, limit: Option<f64>) -> Result<Reservation, f64> {
        let mut spent = self.spent();
        if let Some(limit) = limit
            && *spent + worst > limit
        {
            return Err((limit - *spent).max(0.0));
        }
        *spent += worst;
        Ok(Reservation {
            budget: self.clone(),
            reserved: worst,
            settled: false,
        })
    }
}

/// A completion's worst case, held against the run's budget while it is in
/// flight. Settled with the real cost, or released when nothing was spent;
/// dropped otherwise (cancelled mid-flight, when what the provider charged
/// is unknown), the worst case stays spent.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<RunBudget>,
    reserved: f64,
    settled: bool,
}

impl Reservation {
    /// The completion cost `cost` (at most what was reserved).
    pub fn settle(mut self, cost: f64) {
        *self.budget.spent() += cost.min(self.reserved) - self.reserved;
        self.settled = true;
    }

    /// The completion was never charged (the provider refused it).
    pub fn release(self) {
        self.settle(0.0);
    }
}

/// A directory visible to the plugin's calls.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DirGrant {
    /// Canonical path on the host.
    pub host: PathBuf,
    /// Where the gadget opens it.
    pub guest: String,
    pub mode: FileMode,
    /// The directory itself, open since the grant was resolved: each call's
    /// preopen is made from it, never from the path again.
    #[serde(skip)]
    pub opened: Arc<OpenedDir>,
    /// What one call may write into it (read-write grants).
    pub quota: WriteQuota,
}

/// An environment variable of the plugin's instances.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigGrant {
    pub key: String,
    pub value: String,
    /// Read from the host's environment: never shown, redacted from output.
    pub secret: bool,
}

impl std::fmt::Debug for ConfigGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigGrant")
            .field("key", &self.key)
            .field(
                "value",
                &if self.secret {
                    "[redacted]"
                } else {
                    &self.value
                },
            )
            .finish()
    }
}

impl Grants {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.http.origins.is_empty()
            && self.config.is_empty()
            && self.llm.is_none()
    }

    /// The secret values to redact from what the plugin's calls emit.
    pub fn secrets(&self) -> Vec<String> {
        self.config
            .iter()
            .filter(|c| c.secret && !c.value.is_empty())
            .map(|c| c.value.clone())
            .collect()
    }

    /// "http: https://a.com; config: KEY; files: /data (ro)", or "none",
    /// for reports.
    pub fn describe(&self) -> String {
        if self.is_empty() {
            return "none".into();
        }
        let mut parts = Vec::new();
        if !self.http.origins.is_empty() {
            let origins: Vec<&str> = self.http.origins.iter().map(|o| o.text.as_str()).collect();
            parts.push(format!("http: {}", origins.join(", ")));
        }
        if !self.config.is_empty() {
            let keys: Vec<&str> = self.config.iter().map(|c| c.key.as_str()).collect();
            parts.push(format!("config: {}", keys.join(", ")));
        }
        if !self.files.is_empty() {
            let files: Vec<String> = self
                .files
                .iter()
                .map(|f| format!("{} ({}, from {})", f.guest, f.mode, f.host.display()))
                .collect();
            parts.push(format!("files: {}", files.join(", ")));
        }
        if let Some(llm) = &self.llm {
            let mut budget = String::new();
            if let Some(usd) = llm.max_usd_per_call {
                budget.push_str(&format!(", up to ${usd} per call"));
            }
            if let Some(usd) = llm.max_usd_per_run {
                budget.push_str(&format!(", up to ${usd} per run"));
            }
            parts.push(format!("llm: {}{budget}", llm.models.join(", ")));
        }
        parts.join("; ")
    }

    /// The grants as JSON for `describe --json` and `list --json` (secret
    /// values never appear; config shows keys only).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "http": self.http.origins.iter().map(|o| &o.text).collect::<Vec<_>>(),
            "allow_addresses": self.http.addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "config": self.config.iter().map(|c| &c.key).collect::<Vec<_>>(),
            "files": self.files,
            "llm": self.llm,
        })
    }
}

/// The outbound HTTP a plugin may make.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRules {
    pub origins: Vec<OriginRule>,
    /// Non-public addresses its names may resolve to (the operator's
    /// `allow-addresses`).
    pub addresses: Vec<IpRange>,
}

/// One granted origin: `https://api.example.com`, `http://127.0.0.1:8080`,
/// `https://*.wikipedia.org`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginRule {
    pub https: bool,
    pub host: HostPattern,
    pub port: u16,
    /// As the operator wrote it, for messages.
    pub text: String,
}

/// A host name, an address, or every subdomain of a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Lower case; may be an address literal.
    Exact(String),
    /// `*.example.com`: any name ending in `.example.com` (not the domain
    /// itself). Holds `example.com`.
    Subdomains(String),
}

impl HostPattern {
    fn parse(host: &str) -> Result<HostPattern, String> {
        let host = host.to_ascii_lowercase();
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if let Some(domain) = host.strip_prefix("*.") {
            check_host_name(domain)?;
            return Ok(HostPattern::Subdomains(domain.to_string()));
        }
        if host.parse::<IpAddr>().is_err() {
            check_host_name(&host)?;
        }
        Ok(HostPattern::Exact(host))
    }

    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match self {
            HostPattern::Exact(exact) => exact.eq_ignore_ascii_case(host),
            HostPattern::Subdomains(domain) => {
                // Bytes, not string slices: a host with non-ASCII bytes
                // must not make a slice land inside a character.
                let (host, domain) = (host.as_bytes(), domain.as_bytes());
                host.len() > domain.len() + 1
                    && host[host.len() - domain.len() - 1] == b'.'
                    && host[host.len() - domain.len()..].eq_ignore_ascii_case(domain)
            }
        }
    }

    /// Whether every host this pattern matches, `other` matches too.
    fn within(&self, other: &HostPattern) -> bool {
        match (self, other) {
            (_, HostPattern::Exact(_)) => self == other,
            (HostPattern::Exact(host), HostPattern::Subdomains(_)) => other.matches(host),
            (HostPattern::Subdomains(mine), HostPattern::Subdomains(theirs)) => {
                mine == theirs || other.matches(mine)
            }
        }
    }

    /// The address this pattern names, if it is an address literal.
    fn address(&self) -> Option<IpAddr> {
        match self {
            HostPattern::Exact(host) => host.parse().ok(),
            HostPattern::Subdomains(_) => None,
        }
    }
}

fn check_host_name(host: &str) -> Result<(), String> {
    let valid = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if valid {
        Ok(())
    } else {
        Err(format!("'{host}' is not a host name"))
    }
}

impl OriginRule {
    /// Parses an operator's grant: a scheme is required (`http` or `https`);
    /// no path, query or credentials.
    pub fn parse(text: &str) -> Result<OriginRule, String> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("'{text}': an HTTP grant is an origin like https://api.example.com (the scheme is required)"))?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "https" => true,
            "http" => false,
            other => return Err(format!("'{text}': scheme '{other}' is not http or https")),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(format!(
                "'{text}': an HTTP grant is an origin (scheme, host, port), without a path, query or credentials"
            ));
        }
        let (host, port) = split_host_port(rest).map_err(|e| format!("'{text}': {e}"))?;
        Ok(OriginRule {
            https,
            host: HostPattern::parse(host).map_err(|e| format!("'{text}': {e}"))?,
            port: port.unwrap_or(if https { 443 } else { 80 }),
            text: text.to_string(),
        })
    }

    fn allows(&self, https: bool, host: &str, port: u16) -> bool {
        self.https == https && self.port == port && self.host.matches(host)
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`.
fn split_host_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address must be closed with ']'")?;
        (host, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => None,
        Some(port) => Some(
            port.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("'{port}' is not a port"))?,
        ),
    };
    if host.is_empty() {
        return Err("the host is missing".into());
    }
    Ok((host, port))
}

/// A manifest's HTTP request: `*`, a host pattern, or an origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequestRule {
    https: Option<bool>,
    host: Option<HostPattern>,
    port: Option<u16>,
}

impl HttpRequestRule {
    pub fn parse(text: &str) -> Result<HttpRequestRule, String> {
        if text == "*" {
            return Ok(HttpRequestRule {
                https: None,
                host: None,
                port: None,
            });
        }
        if text.contains("://") {
            let origin = OriginRule::parse(text)?;
            let explicit_port = text.split_once("://").is_some_and(|(_, rest)| {
                split_host_port(rest.trim_end_matches('/')).is_ok_and(|(_, p)| p.is_some())
            });
            return Ok(HttpRequestRule {
                https: Some(origin.https),
                host: Some(origin.host),
                port: explicit_port.then_some(origin.port),
            });
        }
        let (host, port) = split_host_port(text).map_err(|e| format!("'{text}': {e}"))?;
        Ok(HttpRequestRule {
            https: None,
            host: Some(HostPattern::parse(host).map_err(|e| format!("'{text}': {e}"))?),
            port,
        })
    }

    /// Whether this request covers the operator's grant.
    fn covers(&self, grant: &OriginRule) -> bool {
        self.https.is_none_or(|https| https == grant.https)
            && self.port.is_none_or(|port| port == grant.port)
            && self
                .host
                .as_ref()
                .is_none_or(|host| grant.host.within(host))
    }
}

/// An address range (`10.0.0.0/8`, `127.0.0.1`, `fd00::/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    pub network: IpAddr,
    pub prefix: u8,
}

impl IpRange {
    pub fn parse(text: &str) -> Result<IpRange, String> {
        let bad = || format!("'{text}' is not an address or a range like 10.0.0.0/8");
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.parse().map_err(|_| bad())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(bad)?,
        };
        Ok(IpRange { network, prefix })
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        match (self.network, address) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0);
                u32::from(net) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix as u32).unwrap_or(0);
                u128::from(net) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for IpRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let max = if self.network.is_ipv4() { 32 } else { 128 };
        if self.prefix == max {
            write!(f, "{}", self.network)
        } else {
            write!(f, "{}/{}", self.network, self.prefix)
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Whether an address is one a name on the public internet should never
/// make the host connect to: loopback, private, link-local (cloud metadata
/// services live there), shared (CGNAT), unspecified, multicast, broadcast,
/// documentation and other reserved ranges.
pub fn is_internal(address: IpAddr) -> bool {
    match canonical(address) {
        IpAddr::V4(a) => {
            let [b0, b1, ..] = a.octets();
            a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_multicast()
                || a.is_broadcast()
                || a.is_documentation()
                || b0 == 0
                || (b0 == 100 && (64..128).contains(&b1)) // shared address space
                || (b0 == 192 && b1 == 0 && a.octets()[2] == 0) // IETF protocol assignments
                || (b0 == 198 && (18..20).contains(&b1)) // benchmarking
                || b0 >= 240 // reserved
        }
        IpAddr::V6(a) => {
            let first = a.segments()[0];
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
                || a == Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0) // NAT64 prefix itself
                || first == 0x2001 && a.segments()[1] == 0xdb8 // documentation
        }
    }
}

/// Why an outbound request was refused, in words that name the grant that
/// would allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpRefusal {
    #[error(
        "{plugin}: HTTP to {origin} is not granted (grant it with [plugins.{plugin}] http = [\"{origin}\"] or --grant {plugin}:http={origin})"
    )]
    Origin { plugin: String, origin: String },
    #[error(
        "{plugin}: {host} resolves to {address}, an internal address; only addresses granted explicitly are reached (grant it with [plugins.{plugin}] allow-addresses = [\"{address}\"])"
    )]
    Address {
        plugin: String,
        host: String,
        address: IpAddr,
    },
}

impl HttpRules {
    /// The grant a request to `scheme://host:port` falls under.
    pub fn check_origin(
        &self,
        plugin: &str,
        https: bool,
        host: &str,
        port: u16,
    ) -> Result<&OriginRule, HttpRefusal> {
        self.origins
            .iter()
            .find(|rule| rule.allows(https, host, port))
            .ok_or_else(|| HttpRefusal::Origin {
                plugin: plugin.to_string(),
                origin: origin_text(https, host, port),
            })
    }

    /// Whether the host of a granted request may be reached at `address`:
    /// public addresses always; internal ones only when the grant names the
    /// address itself or the operator allows it.
    pub fn check_address(
        &self,
        plugin: &str,
        rule: &OriginRule,
        host: &str,
        address: IpAddr,
    ) -> Result<(), HttpRefusal> {
        let named = rule
            .host
            .address()
            .is_some_and(|granted| canonical(granted) == canonical(address));
        if !is_internal(address) || named || self.addresses.iter().any(|r| r.contains(address)) {
            Ok(())
        } else {
            Err(HttpRefusal::Address {
                plugin: plugin.to_string(),
                host: host.to_string(),
                address,
            })
        }
    }
}

/// `https://host` with the port only when it is not the scheme's default.
pub fn origin_text(https: bool, host: &str, port: u16) -> String {
    let scheme = if https { "https" } else { "http" };
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    if port == if https { 443 } else { 80 } {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

/// Checks what a manifest asks for (at manifest parse time).
pub fn check_requests(permissions: &Permissions) -> Result<(), String> {
    for http in &permissions.http {
        HttpRequestRule::parse(http).map_err(|e| format!("permissions.http: {e}"))?;
    }
    for key in &permissions.config {
        check_config_key(key).map_err(|e| format!("permissions.config: {e}"))?;
    }
    for file in &permissions.files {
        if file.path() != "*" {
            check_guest_path(file.path()).map_err(|e| format!("permissions.files: {e}"))?;
        }
    }
    Ok(())
}

/// An environment variable name: letters, digits and `_`, not starting
/// with a digit.
pub fn check_config_key(key: &str) -> Result<(), String> {
    let valid = !key.is_empty()
        && key.len() <= 128
        && !key.as_bytes()[0].is_ascii_digit()
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "'{key}' is not a configuration key (letters, digits and '_', like API_KEY)"
        ))
    }
}

/// A guest path: absolute, no `.` or `..` components.
pub fn check_guest_path(path: &str) -> Result<(), String> {
    let valid = path.starts_with('/')
        && path.len() <= 256
        && path
            .split('/')
            .skip(1)
            .all(|part| part != "." && part != ".." && !part.chars().any(char::is_control))
        && (path == "/" || !path.ends_with('/'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "'{path}' is not a guest path (absolute, like /data, without '.' or '..')"
        ))
    }
}

/// The default guest path of a granted directory: `/` and its name.
pub fn default_guest_path(host: &Path) -> String {
    match host.file_name() {
        Some(name) => format!("/{}", name.to_string_lossy()),
        None => "/".into(),
    }
}

/// What the manifest asks for AND the operator grants, and a note for each
/// request not met and each grant not applied. `env` reads the host's
/// environment (for `env = "VAR"` values).
pub fn resolve(
    plugin: &str,
    requested: &Permissions,
    policy: Option<&PluginPolicy>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Grants, Vec<String>) {
    let empty = PluginPolicy::default();
    let policy = policy.unwrap_or(&empty);
    let mut grants = Grants::default();
    let mut notes = Vec::new();

    // HTTP: each operator origin applies when some request covers it.
    let requests: Vec<(String, HttpRequestRule)> = requested
        .http
        .iter()
        .filter_map(|r| Some((r.clone(), HttpRequestRule::parse(r).ok()?)))
        .collect();
    let mut met = vec![false; requests.len()];
    for text in &policy.http {
        let Ok(rule) = OriginRule::parse(text) else {
            continue; // checked when the policy was read
        };
        let covering: Vec<usize> = (0..requests.len())
            .filter(|&i| requests[i].1.covers(&rule))
            .collect();
        if covering.is_empty() {
            notes.push(format!(
                "http {text} is granted, but the manifest does not ask for it: not applied"
            ));
            continue;
        }
        for i in covering {
            met[i] = true;
        }
        grants.http.origins.push(rule);
    }
    for ((text, _), met) in requests.iter().zip(met) {
        if !met {
            let how = if text == "*" {
                format!("[plugins.{plugin}] http = [\"https://HOST\"]")
            } else {
                format!(
                    "[plugins.{plugin}] http = [\"https://{}\"]",
                    text.trim_start_matches("https://")
                )
            };
            notes.push(format!(
                "asks for http {text}, not granted (grant it with {how})"
            ));
        }
    }
    if !grants.http.origins.is_empty() {
        grants.http.addresses = policy
            .allow_addresses
            .iter()
            .filter_map(|a| IpRange::parse(a).ok())
            .collect();
    }

    // Config: by key.
    for key in &requested.config {
        match policy.config.get(key) {
            None => notes.push(format!(
                "asks for config {key}, not granted (grant it with [plugins.{plugin}] config = {{ {key} = {{ env = \"VAR\" }} }})"
            )),
            Some(ConfigSource { env: Some(var), .. }) => match env(var) {
                Some(value) => grants.config.push(ConfigGrant {
                    key: key.clone(),
                    value,
                    secret: true,
                }),
                None => notes.push(format!(
                    "config {key} is granted from ${var}, which is not set: not applied"
                )),
            },
            Some(ConfigSource {
                value: Some(value), ..
            }) => grants.config.push(ConfigGrant {
                key: key.clone(),
                value: value.clone(),
                secret: false,
            }),
            Some(_) => {} // checked when the policy was read
        }
    }
    for key in policy.config.keys() {
        if !requested.config.contains(key) {
            notes.push(format!(
                "config {key} is granted, but the manifest does not ask for it: not applied"
            ));
        }
    }

    // LLM: the manifest asks, the operator names the models and budget.
    match (&policy.llm, requested.llm) {
        (Some(llm), true) => {
            grants.llm = Some(LlmGrant::new(
                llm.models.clone(),
                llm.max_usd_per_call,
                llm.max_usd_per_run,
            ))
        }
        (Some(_), false) => notes.push(
            "llm is granted, but the manifest does not ask for it: not applied".to_string(),
        ),
        (None, true) => notes.push(format!(
            "asks for llm, not granted (grant it with [plugins.{plugin}] llm = {{ models = [\"openai:gpt-4o-mini\"], max-usd-per-call = 0.05 }} or --grant {plugin}:llm=openai:gpt-4o-mini)"
        )),
        (None, false) => {}
    }

    // Files: each operator directory applies when the manifest asks for its
    // guest path (or for `*`); the mode is the narrower of the two.
    let mut files_met = vec![false; requested.files.len()];
    for grant in &policy.files {
        let guest = grant
            .guest
            .clone()
            .unwrap_or_else(|| default_guest_path(&grant.host));
        let request = requested
            .files
            .iter()
            .position(|r| r.path() == guest)
            .or_else(|| requested.files.iter().position(|r| r.path() == "*"));
        let Some(index) = request else {
            notes.push(format!(
                "files {} → {guest} is granted, but the manifest does not ask for {guest}: not applied",
                grant.host.display()
            ));
            continue;
        };
        if grants.files.iter().any(|f| f.guest == guest) {
            notes.push(format!(
                "files: {guest} is granted twice; the first grant applies"
            ));
            continue;
        }
        let host = match grant.host.canonicalize() {
            Ok(host) if host.is_dir() => host,
            Ok(_) => {
                notes.push(format!(
                    "files {} is granted but is not a directory: not applied",
                    grant.host.display()
                ));
                continue;
            }
            Err(e) => {
                notes.push(format!(
                    "files {} is granted but cannot be used ({e}): not applied",
                    grant.host.display()
                ));
                continue;
            }
        };
        let wanted = requested.files[index].mode();
        let mode = wanted.min(grant.mode);
        if grant.mode == FileMode::ReadWrite && wanted == FileMode::ReadOnly {
            notes.push(format!(
                "files {guest} is granted rw, but the manifest asks for ro: read-only"
            ));
        }
        if grant.mode == FileMode::ReadOnly && wanted == FileMode::ReadWrite {
            notes.push(format!(
                "files {guest}: the manifest asks for rw, granted ro: read-only"
            ));
        }
        let opened = match OpenedDir::open(&host) {
            Ok(opened) => Arc::new(opened),
            Err(e) => {
                notes.push(format!(
                    "files {} is granted but cannot be opened ({e}): not applied",
                    grant.host.display()
                ));
                continue;
            }
        };
        files_met[index] = true;
        let defaults = WriteQuota::default();
        let quota = WriteQuota {
            bytes: grant
                .write_quota_mib
                .map_or(defaults.bytes, |mib| mib.saturating_mul(1 << 20)),
            entries: grant.max_entries.unwrap_or(defaults.entries),
        };
        grants.files.push(DirGrant {
            host,
            guest,
            mode,
            opened,
            quota,
        });
    }
    for (request, met) in requested.files.iter().zip(files_met) {
        if !met {
            let guest = if request.path() == "*" {
                "/PATH".to_string()
            } else {
                request.path().to_string()
            };
            notes.push(format!(
                "asks for files {} ({}), not granted (grant it with [plugins.{plugin}] files = [{{ host = \"DIR\", guest = \"{guest}\" }}] or --grant {plugin}:files=DIR:{guest})",
                request.path(),
                request.mode()
            ));
        }
    }
    (grants, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::FileRequest;
    use crate::policy::FileGrant;

    fn policy(text: &str) -> PluginPolicy {
        crate::policy::Policy::parse(text, Path::new("."))
            .unwrap()
            .plugins
            .remove("p")
            .unwrap()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn origins_match_scheme_host_and_port() {
        let rule = OriginRule::parse("https://*.wikipedia.org").unwrap();
        assert!(rule.allows(true, "en.wikipedia.org", 443));
        assert!(rule.allows(true, "EN.Wikipedia.org", 443));
        assert!(!rule.allows(true, "wikipedia.org", 443));
        assert!(!rule.allows(true, "evilwikipedia.org", 443));
        assert!(!rule.allows(true, "é.wikipedia.orgé", 443));
        assert!(!rule.allows(true, "xé.wikipedia.or", 443));
        assert!(!rule.allows(false, "en.wikipedia.org", 80));
        assert!(!rule.allows(true, "en.wikipedia.org", 8443));
        let rule = OriginRule::parse("http://127.0.0.1:8080").unwrap();
        assert!(rule.allows(false, "127.0.0.1", 8080));
        assert!(!rule.allows(false, "127.0.0.1", 80));
        assert!(OriginRule::parse("api.example.com").is_err());
        assert!(OriginRule::parse("ftp://example.com").is_err());
        assert!(OriginRule::parse("https://example.com/path").is_err());
        assert!(OriginRule::parse("https://user@example.com").is_err());
    }

    #[test]
    fn internal_addresses_are_recognised() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn an_internal_address_needs_an_explicit_grant() {
        let rules = HttpRules {
            origins: vec![
                OriginRule::parse("http://localhost:8080").unwrap(),
                OriginRule::parse("http://127.0.0.1:8080").unwrap(),
            ],
            addresses: vec![IpRange::parse("10.0.0.0/8").unwrap()],
        };
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let by_name = rules.check_origin("p", false, "localhost", 8080).unwrap();
        let refusal = rules
            .check_address("p", by_name, "localhost", loopback)
            .unwrap_err();
        assert!(refusal.to_string().contains("allow-addresses"), "{refusal}");
        let by_address = rules.check_origin("p", false, "127.0.0.1", 8080).unwrap();
        assert!(
            rules
                .check_address("p", by_address, "127.0.0.1", loopback)
                .is_ok()
        );
        assert!(
            rules
                .check_address("p", by_name, "localhost", "10.9.9.9".parse().unwrap())
                .is_ok()
        );
        assert!(
            rules
                .check_address("p", by_name, "localhost", "93.184.216.34".parse().unwrap())
                .is_ok()
        );
        let refusal = rules
            .check_origin("p", true, "localhost", 8080)
            .unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "p: HTTP to https://localhost:8080 is not granted (grant it with [plugins.p] http = [\"https://localhost:8080\"] or --grant p:http=https://localhost:8080)"
        );
    }

    #[test]
    fn only_what_both_sides_say_is_granted() {
        let requested = Permissions {
            llm: false,
            http: vec!["api.example.com".into(), "*.wikipedia.org".into()],
            config: vec!["API_KEY".into(), "UNITS".into(), "MISSING".into()],
            files: vec![],
        };
        let granted = policy(
            r#"[plugins.p]
http = ["https://api.example.com", "https://en.wikipedia.org", "https://evil.example.net"]
config = { API_KEY = { env = "TEST_KEY" }, UNITS = { value = "metric" }, OTHER = { value = "x" } }
"#,
        );
        let env = |var: &str| (var == "TEST_KEY").then(|| "s3cret-value".to_string());
        let (grants, notes) = resolve("p", &requested, Some(&granted), &env);
        let origins: Vec<&str> = grants
            .http
            .origins
            .iter()
            .map(|o| o.text.as_str())
            .collect();
        assert_eq!(
            origins,
            ["https://api.example.com", "https://en.wikipedia.org"]
        );
        assert_eq!(grants.config.len(), 2);
        assert_eq!(grants.secrets(), ["s3cret-value"]);
        let notes = notes.join("\n");
        assert!(notes.contains("http https://evil.example.net is granted, but the manifest does not ask for it: not applied"), "{notes}");
        assert!(
            notes.contains("asks for config MISSING, not granted"),
            "{notes}"
        );
        assert!(
            notes.contains("config OTHER is granted, but the manifest does not ask for it"),
            "{notes}"
        );
        assert!(
            !format!("{grants:?}").contains("s3cret"),
            "a secret in Debug output"
        );
    }

    #[test]
    fn directories_take_the_narrower_mode() {
        let dir = tempfile::tempdir().unwrap();
        let requested = Permissions {
            llm: false,
            files: vec![
                FileRequest::Path("/data".into()),
                FileRequest::Full {
                    path: "/out".into(),
                    mode: FileMode::ReadWrite,
                },
            ],
            ..Permissions::default()
        };
        let granted = PluginPolicy {
            files: vec![
                FileGrant {
                    host: dir.path().to_path_buf(),
                    guest: Some("/data".into()),
                    mode: FileMode::ReadWrite,
                    write_quota_mib: None,
                    max_entries: None,
                },
                FileGrant {
                    host: dir.path().to_path_buf(),
                    guest: Some("/elsewhere".into()),
                    mode: FileMode::ReadOnly,
                    write_quota_mib: None,
                    max_entries: None,
                },
            ],
            ..PluginPolicy::default()
        };
        let (grants, notes) = resolve("p", &requested, Some(&granted), &no_env);
        assert_eq!(grants.files.len(), 1);
        assert_eq!(grants.files[0].guest, "/data");
        assert_eq!(grants.files[0].mode, FileMode::ReadOnly);
        let notes = notes.join("\n");
        assert!(
            notes.contains("granted rw, but the manifest asks for ro: read-only"),
            "{notes}"
        );
        assert!(
            notes.contains("does not ask for /elsewhere: not applied"),
            "{notes}"
        );
        assert!(
            notes.contains("asks for files /out (rw), not granted"),
            "{notes}"
        );
    }

    #[test]
    fn nothing_is_granted_without_a_policy() {
        let requested = Permissions {
            llm: false,
            http: vec!["*".into()],
            config: vec!["KEY".into()],
            files: vec![FileRequest::Path("*".into())],
        };
        let (grants, notes) = resolve("p", &requested, None, &no_env);
        assert!(grants.is_empty());
        assert_eq!(notes.len(), 3, "{notes:?}");
    }

    #[test]
    fn ranges_contain_their_addresses() {
        let range = IpRange::parse("10.0.0.0/8").unwrap();
        assert!(range.contains("10.255.0.1".parse().unwrap()));
        assert!(!range.contains("11.0.0.1".parse().unwrap()));
        assert!(range.contains("::ffff:10.0.0.1".parse().unwrap()));
        assert!(IpRange::parse("10.0.0.0/33").is_err());
        assert_eq!(IpRange::parse("::1").unwrap().to_string(), "::1");
    }
}
