//! HTTP origins and addresses: what a manifest may request, what a grant
//! names (an origin, whole or for some methods and paths), and the
//! addresses a host may resolve to (public unless granted: no SSRF
//! through DNS).
//!
//! A grant's paths are globs matched against the request path's normal
//! form (dot segments removed, `%2e` included; escapes of unreserved
//! characters decoded), so `/v1/public/../admin` is `/v1/admin`. A path
//! that servers or the proxies before them may read otherwise never
//! matches a path-scoped grant (nor a secret scoped to paths), and the
//! refusal says which reading: an escaped `/` or `\` (`%2f`, `%5c`) or a
//! raw `\`; a segment that is `.` or `..` before a `;` parameter (`..;`,
//! which Tomcat and Spring read as `..`); one that is a dot segment once
//! decoded again (`%252e%252e`, as proxies that decode twice read it); and
//! one of dot look-alikes (fullwidth `．`, `․`, `‥`, `﹒`, and the overlong
//! UTF-8 forms of `.`), which some servers fold into dots.

use std::net::IpAddr;

use gadget_core::address::canonical;

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
    /// The origin as the operator wrote it, for messages.
    pub text: String,
    /// The methods it is for, upper case (empty: any).
    pub methods: Vec<String>,
    /// Globs over the request's normal path (empty: any).
    pub paths: Vec<String>,
}

/// Most methods or paths one grant may list: an operator's list, not a
/// generated one (each path is a glob tried on every request).
pub const MAX_GRANT_SCOPES: usize = 64;

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
            methods: Vec::new(),
            paths: Vec::new(),
        })
    }

    /// This origin for `methods` and `paths` only (empty: any).
    pub fn scoped(mut self, methods: &[String], paths: &[String]) -> Result<OriginRule, String> {
        let at = &self.text;
        if methods.len() > MAX_GRANT_SCOPES || paths.len() > MAX_GRANT_SCOPES {
            return Err(format!(
                "'{at}': at most {MAX_GRANT_SCOPES} methods and {MAX_GRANT_SCOPES} paths per grant"
            ));
        }
        for method in methods {
            if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(format!("'{at}': '{method}' is not an HTTP method"));
            }
        }
        for path in paths {
            if !path.starts_with('/') || path.contains(['?', '#']) {
                return Err(format!(
                    "'{at}': path '{path}' is not a path glob (it starts with / and has no query: \"/v1/public/*\")"
                ));
            }
        }
        self.methods = methods.iter().map(|m| m.to_ascii_uppercase()).collect();
        self.paths = paths.to_vec();
        Ok(self)
    }

    /// Whether every request this grant's origin holds, `other`'s origin
    /// holds too (methods and paths aside).
    pub(crate) fn within(&self, other: &OriginRule) -> bool {
        self.https == other.https && self.port == other.port && self.host.within(&other.host)
    }

    pub(crate) fn allows(&self, https: bool, host: &str, port: u16) -> bool {
        self.https == https && self.port == port && self.host.matches(host)
    }

    /// Whether this grant is for `method` on `path` (a request's normal
    /// path; `odd`: it holds an escaped or raw slash of another kind).
    fn covers_request(&self, method: &str, path: &str, odd: bool) -> bool {
        let method_ok = self.methods.is_empty() || self.methods.iter().any(|m| m == method);
        let path_ok = self.paths.is_empty()
            || (!odd
                && self.paths.iter().any(|glob| {
                    gadget_core::glob::glob_matches_chars(
                        &glob.chars().collect::<Vec<_>>(),
                        &path.chars().collect::<Vec<_>>(),
                    )
                }));
        method_ok && path_ok
    }

    /// The grant as the operator wrote it: `https://api.example (GET;
    /// /v1/public/*)`.
    pub fn describe(&self) -> String {
        if self.methods.is_empty() && self.paths.is_empty() {
            return self.text.clone();
        }
        let methods = if self.methods.is_empty() {
            "any method".to_string()
        } else {
            self.methods.join(", ")
        };
        let paths = if self.paths.is_empty() {
            "any path".to_string()
        } else {
            self.paths.join(", ")
        };
        format!("{} ({methods}; {paths})", self.text)
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
    pub(crate) fn covers(&self, grant: &OriginRule) -> bool {
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

/// Whether an address is one a name on the public internet should never
/// make the host connect to: loopback, private, link-local (cloud metadata
/// services live there), shared (CGNAT), unspecified, multicast, broadcast,
/// documentation and other reserved ranges ([`gadget_core::address`], the
/// one classifier every door uses).
pub fn is_internal(address: IpAddr) -> bool {
    gadget_core::address::classify(address).is_internal()
}

/// Why an outbound request was refused, in words that name the grant that
/// would allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpRefusal {
    #[error(
        "{plugin}: HTTP to {origin} is not granted (grant it with [plugins.{plugin}] http = [\"{origin}\"] or --grant {plugin}:http={origin})"
    )]
    Origin { plugin: String, origin: String },
    #[error("{0}")]
    Scope(Box<ScopeRefusal>),
    #[error(
        "{plugin}: {host} resolves to {address}, an internal address; only addresses granted explicitly are reached (grant it with [plugins.{plugin}] allow-addresses = [\"{address}\"])"
    )]
    Address {
        plugin: String,
        host: String,
        address: IpAddr,
    },
}

/// A request to a granted origin outside the methods or paths its grants
/// are for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{plugin}: {method} {origin}{path} is outside its grant {grants} (grant it with [plugins.{plugin}] http = [{{ origin = \"{origin}\", methods = [\"{method}\"], paths = [\"{path}\"] }}]){odd}"
)]
pub struct ScopeRefusal {
    pub plugin: String,
    pub method: String,
    pub origin: String,
    /// The request's path in normal form.
    pub path: String,
    /// The grants of that origin, described.
    pub grants: String,
    /// Why the path matched no glob whatever it is, if that is why.
    pub odd: &'static str,
}

impl HttpRules {
    /// The grant a request to `scheme://host:port` falls under, whatever
    /// its method and path.
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

    /// The grant a `method` request to `scheme://host:port` with `path`
    /// (as sent, without its query) falls under: its origin, and its
    /// methods and paths when the grant names some.
    pub fn check_request(
        &self,
        plugin: &str,
        method: &str,
        https: bool,
        host: &str,
        port: u16,
        path: &str,
    ) -> Result<&OriginRule, HttpRefusal> {
        self.check_origin(plugin, https, host, port)?;
        let odd = ambiguous_path(path);
        let normal = normal_request_path(path);
        let mut same_origin = self
            .origins
            .iter()
            .filter(|rule| rule.allows(https, host, port));
        if let Some(rule) = same_origin
            .clone()
            .find(|rule| rule.covers_request(method, &normal, odd.is_some()))
        {
            return Ok(rule);
        }
        let grants: Vec<String> = same_origin.by_ref().map(OriginRule::describe).collect();
        Err(HttpRefusal::Scope(Box::new(ScopeRefusal {
            plugin: plugin.to_string(),
            method: method.to_string(),
            origin: origin_text(https, host, port),
            path: normal,
            grants: grants.join(", "),
            odd: odd.unwrap_or_default(),
        })))
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

/// Why servers may read `path` otherwise than its normal form (the tail
/// of a refusal), or `None`. Such a path matches no path-scoped grant.
pub fn ambiguous_path(path: &str) -> Option<&'static str> {
    let lower = path.to_ascii_lowercase();
    if lower.contains("%2f") || lower.contains("%5c") || path.contains('\\') {
        return Some(
            "; a path with an escaped slash (%2F, %5C) or a backslash matches no path grant",
        );
    }
    path.split('/').find_map(dot_reading)
}

/// The most times a segment is decoded in search of a dot segment: a
/// chain of proxies that each decode once is rarely longer.
const MAX_DECODINGS: usize = 4;

/// Why one path segment reads as `.` or `..` under a reading other than
/// the one the normal form applies, or `None`.
fn dot_reading(segment: &str) -> Option<&'static str> {
    let once = percent_decoded(segment.as_bytes());
    let dots = |bytes: &[u8]| bytes == b"." || bytes == b"..";
    if let Some(at) = once.iter().position(|&b| b == b';')
        && dots(&once[..at])
    {
        return Some(
            "; a segment that is a dot segment before its ';' parameter (read as '..' by Tomcat and Spring) matches no path grant",
        );
    }
    let mut decoded = once.clone();
    for _ in 1..MAX_DECODINGS {
        let again = percent_decoded(&decoded);
        if again == decoded {
            break;
        }
        let before_parameter = again.split(|&b| b == b';').next().unwrap_or_default();
        if dots(&again) || dots(before_parameter) {
            return Some(
                "; a segment that is a dot segment once decoded again (%252e, as proxies that decode twice read it) matches no path grant",
            );
        }
        decoded = again;
    }
    let folded = folded_dots(&decoded);
    if folded.as_deref().is_some_and(dots) {
        return Some(
            "; a segment of dot look-alikes (fullwidth or leader dots, overlong UTF-8) matches no path grant",
        );
    }
    None
}

/// `bytes` with every `%XX` escape decoded (others kept as they are).
fn percent_decoded(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%'
            && let (Some(high), Some(low)) = (
                bytes.get(at + 1).copied().and_then(hex),
                bytes.get(at + 2).copied().and_then(hex),
            )
        {
            out.push(high << 4 | low);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    out
}

/// The segment with look-alikes of `.` folded into dots, when it holds
/// any: the overlong UTF-8 forms of `.` (`C0 AE`, `E0 80 AE`, `F0 80 80
/// AE`), fullwidth `．` (U+FF0E), small `﹒` (U+FE52), one-dot leader `․`
/// (U+2024) and two-dot leader `‥` (U+2025, two dots).
fn folded_dots(bytes: &[u8]) -> Option<Vec<u8>> {
    const LOOKALIKES: [(&[u8], &[u8]); 7] = [
        (&[0xC0, 0xAE], b"."),
        (&[0xE0, 0x80, 0xAE], b"."),
        (&[0xF0, 0x80, 0x80, 0xAE], b"."),
        ("\u{FF0E}".as_bytes(), b"."),
        ("\u{FE52}".as_bytes(), b"."),
        ("\u{2024}".as_bytes(), b"."),
        ("\u{2025}".as_bytes(), b".."),
    ];
    let mut out = Vec::with_capacity(bytes.len());
    let (mut at, mut found) = (0, false);
    'bytes: while at < bytes.len() {
        for (from, to) in LOOKALIKES {
            if bytes[at..].starts_with(from) {
                out.extend_from_slice(to);
                at += from.len();
                found = true;
                continue 'bytes;
            }
        }
        out.push(bytes[at]);
        at += 1;
    }
    found.then_some(out)
}

/// A request path's normal form: dot segments removed (`%2e` included)
/// and escapes of unreserved characters decoded, as a server reads it.
pub fn normal_request_path(path: &str) -> String {
    let path = if path.is_empty() { "/" } else { path };
    gadget_core::approval::normal_url(&format!("http://host{path}"))
        .and_then(|url| {
            let rest = url.strip_prefix("http://host")?;
            Some(rest.split(['?', '#']).next().unwrap_or("/").to_string())
        })
        .unwrap_or_else(|| gadget_core::approval::normal_path(path))
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
