//! Brokered secrets: values the host keeps for a plugin and puts on its
//! HTTP requests itself, so that the gadget never holds them.
//!
//! The gadget's environment variable holds a placeholder
//! (`gadget-secret-API_KEY-<random>`), made afresh at each load. At the
//! HTTP door, for each of the plugin's secrets:
//!
//! - a request to an origin the secret may go to gets the value: in the
//!   header the operator named (set by the host on every such request,
//!   whatever the gadget wrote there), or, when none is named, wherever
//!   the gadget's request carries the placeholder in a header or the
//!   query;
//! - a request to any other origin that carries the placeholder anywhere
//!   (URL, headers, body) is refused before anything is sent, and so is a
//!   placeholder where the host does not put secrets (the path, the body,
//!   or any place but the named header), so that a mistake is an error
//!   that says so rather than a silent 401;
//! - a response to a request that carried a secret has the value replaced
//!   by the placeholder in its headers and body, so an origin that echoes
//!   the credential does not hand it to the gadget (and the request asks
//!   for an unencoded body, where the value can be seen).
//!
//! The values are also in the plugin's redactor, like config secrets: a
//! result, log or error can only ever hold the placeholder.

use std::io::Read as _;

use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};

use crate::origins::{HttpRules, origin_text};

/// What starts every placeholder, so that it reads as what it is.
pub const PLACEHOLDER_PREFIX: &str = "gadget-secret-";

/// Random bytes at the end of a placeholder: it names one load's secret
/// and matches no text a request would carry by chance.
const PLACEHOLDER_NONCE_BYTES: usize = 12;

/// A secret the host keeps for a plugin's calls.
#[derive(Clone, PartialEq, Eq)]
pub struct BrokeredSecret {
    /// The environment variable the gadget reads (and sees the placeholder in).
    pub key: String,
    /// What stands for the value in the gadget's world.
    pub placeholder: String,
    /// Where the value may be sent (origins, some scoped to methods and paths).
    pub origins: HttpRules,
    /// The header the host sets on every request to those origins.
    pub header: Option<HeaderName>,
    /// The header's value, `{}` standing for the secret.
    pub format: String,
    value: String,
}

impl std::fmt::Debug for BrokeredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokeredSecret")
            .field("key", &self.key)
            .field("placeholder", &self.placeholder)
            .field("origins", &self.origins_text())
            .field("header", &self.header)
            .field("value", &"[redacted]")
            .finish()
    }
}

impl BrokeredSecret {
    /// A secret with a fresh placeholder. `header` is a valid header name
    /// and `format` holds one `{}` (the policy was checked when read).
    pub fn new(
        key: &str,
        value: String,
        origins: HttpRules,
        header: Option<HeaderName>,
        format: Option<&str>,
    ) -> BrokeredSecret {
        BrokeredSecret {
            key: key.to_string(),
            placeholder: format!("{PLACEHOLDER_PREFIX}{key}-{}", nonce()),
            origins,
            header,
            format: format.unwrap_or("{}").to_string(),
            value,
        }
    }

    /// The value (for the plugin's redactor).
    pub fn value(&self) -> &str {
        &self.value
    }

    /// "https://api.github.com, https://uploads.github.com (POST; any path)".
    pub fn origins_text(&self) -> String {
        let origins: Vec<String> = self.origins.origins.iter().map(|o| o.describe()).collect();
        origins.join(", ")
    }

    /// "API_KEY (to https://api.github.com, in Authorization)", for reports.
    pub fn describe(&self) -> String {
        match &self.header {
            Some(header) => format!("{} (to {}, in {header})", self.key, self.origins_text()),
            None => format!("{} (to {})", self.key, self.origins_text()),
        }
    }

    /// Whether a `method` request to `uri` may carry the value.
    fn bound_for(&self, plugin: &str, method: &Method, uri: &Uri) -> bool {
        let (https, host, port) = origin_parts(uri);
        self.origins
            .check_request(plugin, method.as_str(), https, &host, port, uri.path())
            .is_ok()
    }
}

/// A fresh random suffix, in hex. `/dev/urandom` cannot fail on any host
/// this runs on; if it did, the time and the process stand in (the
/// placeholder must differ between loads, not stay secret).
fn nonce() -> String {
    let mut bytes = [0u8; PLACEHOLDER_NONCE_BYTES];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let mixed = now ^ ((std::process::id() as u128) << 64);
        bytes.copy_from_slice(&mixed.to_le_bytes()[..PLACEHOLDER_NONCE_BYTES]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn origin_parts(uri: &Uri) -> (bool, String, u16) {
    let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    let host = uri.host().unwrap_or_default().to_ascii_lowercase();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    (https, host, port)
}

/// What brokering did to one request: which secrets it carries (their
/// values are scrubbed from the response) and which it may carry at all
/// (for the body, checked once it is read).
#[derive(Default)]
pub struct Brokered {
    /// (value, placeholder) of each secret put on the request, and
    /// (value percent-encoded, placeholder) when that differs.
    pub carried: Vec<(String, String)>,
    /// (key, placeholder, where it may go, or None when it may go here)
    /// of each of the plugin's secrets.
    placeholders: Vec<(String, String, Option<String>)>,
    plugin: String,
    origin: String,
}

impl std::fmt::Debug for Brokered {
    /// Keys and counts: the values never.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.placeholders.iter().map(|(k, ..)| k.as_str()).collect();
        f.debug_struct("Brokered")
            .field("origin", &self.origin)
            .field("secrets", &keys)
            .field("carried", &self.carried.len())
            .finish()
    }
}

/// Puts the plugin's secrets on a request where they are bound, or says
/// why the request is refused.
pub fn broker_request(
    secrets: &[BrokeredSecret],
    plugin: &str,
    method: &Method,
    uri: &mut Uri,
    headers: &mut HeaderMap,
) -> Result<Brokered, String> {
    let (https, host, port) = origin_parts(uri);
    let origin = origin_text(https, &host, port);
    let mut brokered = Brokered {
        plugin: plugin.to_string(),
        origin: origin.clone(),
        ..Brokered::default()
    };
    for secret in secrets {
        let bound = secret.bound_for(plugin, method, uri);
        let place = &secret.placeholder;
        let in_uri = uri.to_string().contains(place.as_str());
        let in_header = |h: &HeaderValue| contains(h.as_bytes(), place.as_bytes());
        let header_names: Vec<HeaderName> = headers
            .iter()
            .filter(|(_, v)| in_header(v))
            .map(|(n, _)| n.clone())
            .collect();
        let key = &secret.key;
        let refuse = |why: String| format!("{plugin}: refused a request to {origin}: {why}");
        if !bound {
            if in_uri || !header_names.is_empty() {
                // A path servers may read otherwise is why, when it is.
                let reading = crate::origins::ambiguous_path(uri.path()).unwrap_or_default();
                return Err(refuse(format!(
                    "it carries the placeholder of the secret {key}, which may go only to {} (to send it here too, add this origin to [plugins.{plugin}.secrets.{key}] origins){reading}",
                    secret.origins_text()
                )));
            }
            brokered
                .placeholders
                .push((key.clone(), place.clone(), Some(secret.origins_text())));
            continue;
        }
        brokered
            .placeholders
            .push((key.clone(), place.clone(), None));
        let query_has = uri.query().is_some_and(|q| q.contains(place.as_str()));
        let path_has = uri.path().contains(place.as_str());
        if let Some(name) = &secret.header {
            // The operator's header is the one place: the placeholder in it
            // is overwritten below; anywhere else it is a mistake.
            let elsewhere = header_names.iter().find(|n| *n != name);
            if in_uri || elsewhere.is_some() {
                let place = match elsewhere {
                    Some(other) => format!("the {other} header"),
                    None => "the URL".to_string(),
                };
                return Err(refuse(format!(
                    "the placeholder of the secret {key} is in {place}; the host puts {key} only in the {name} header, which it sets itself on every request to {}",
                    secret.origins_text()
                )));
            }
            let credential = secret.format.replacen("{}", &secret.value, 1);
            let mut value = HeaderValue::from_str(&credential).map_err(|_| refuse(unfit(key)))?;
            value.set_sensitive(true);
            headers.insert(name.clone(), value);
        } else {
            if path_has {
                return Err(refuse(format!(
                    "the placeholder of the secret {key} is in the path; the host puts a secret only in a header or the query"
                )));
            }
            if header_names.is_empty() && !query_has {
                continue;
            }
            fill_headers(headers, &header_names, secret).map_err(|()| refuse(unfit(key)))?;
            if query_has {
                fill_query(uri, secret)
                    .map_err(|()| refuse(format!("the secret {key} makes the URL invalid")))?;
            }
        }
        brokered
            .carried
            .push((secret.value.clone(), secret.placeholder.clone()));
        // As it went in a query: an echo of the URL must not hand the
        // gadget the value to decode.
        let encoded = percent_encode(&secret.value);
        if encoded != secret.value {
            brokered.carried.push((encoded, secret.placeholder.clone()));
        }
    }
    if !brokered.carried.is_empty() {
        // A compressed echo of the credential could not be scrubbed.
        headers.insert(
            http::header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
    }
    Ok(brokered)
}

fn unfit(key: &str) -> String {
    format!(
        "the value of the secret {key} cannot be sent in a header (it holds a character no header may)"
    )
}

/// The named headers with the secret's placeholder replaced by its value.
fn fill_headers(
    headers: &mut HeaderMap,
    names: &[HeaderName],
    secret: &BrokeredSecret,
) -> Result<(), ()> {
    let (place, value) = (secret.placeholder.as_bytes(), secret.value.as_bytes());
    for name in names {
        let filled: Vec<HeaderValue> = headers
            .get_all(name)
            .iter()
            .map(|v| {
                let mut filled =
                    HeaderValue::from_bytes(&replace_bytes(v.as_bytes(), place, value))
                        .map_err(|_| ())?;
                filled.set_sensitive(true);
                Ok(filled)
            })
            .collect::<Result<_, ()>>()?;
        headers.remove(name);
        for value in filled {
            headers.append(name.clone(), value);
        }
    }
    Ok(())
}

/// The query with the secret's placeholder replaced by its value,
/// percent-encoded. The query alone: a placeholder elsewhere in the URL
/// (a subdomain a wildcard origin allows) stays one, or the value would
/// go out in a DNS question.
fn fill_query(uri: &mut Uri, secret: &BrokeredSecret) -> Result<(), ()> {
    let query = uri.query().unwrap_or_default();
    let filled = query.replace(&secret.placeholder, &percent_encode(&secret.value));
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(format!("{}?{filled}", uri.path()).parse().map_err(|_| ())?);
    *uri = Uri::from_parts(parts).map_err(|_| ())?;
    Ok(())
}

impl Brokered {
    /// Why the request is refused for its body: the host never puts a
    /// secret in a body, so its placeholder there is a mistake (to an
    /// origin the secret may go to) or a try at sending it elsewhere.
    pub fn body_refusal(&self, body: &[u8]) -> Option<String> {
        let (plugin, origin) = (&self.plugin, &self.origin);
        self.placeholders
            .iter()
            .find(|(_, place, _)| contains(body, place.as_bytes()))
            .map(|(key, _, elsewhere)| match elsewhere {
                Some(origins) => format!(
                    "{plugin}: refused a request to {origin}: its body carries the placeholder of the secret {key}, which may go only to {origins} (to send it here too, add this origin to [plugins.{plugin}.secrets.{key}] origins)"
                ),
                None => format!(
                    "{plugin}: refused a request to {origin}: the placeholder of the secret {key} is in the body; the host puts a secret only in a header or the query"
                ),
            })
    }
}

/// Percent-encodes everything but the unreserved characters, so a value
/// is one query component whatever it holds.
pub(crate) fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn replace_bytes(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Replaces secret values by their placeholders in a response as it
/// streams: a value split across two chunks is still found, because the
/// last bytes of each chunk that could begin one are held back until the
/// next chunk (or the end) comes. Not `Debug`: it holds values.
pub struct Scrubber {
    /// (value, placeholder), values non-empty.
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    held: Vec<u8>,
    longest: usize,
    /// The bytes some value begins with: runs of any other byte are
    /// copied whole, so a body without a value costs about a copy.
    firsts: [bool; 256],
}

impl Scrubber {
    /// A scrubber for what a request carried (None: nothing to scrub).
    pub fn new(carried: &[(String, String)]) -> Option<Scrubber> {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = carried
            .iter()
            .filter(|(value, _)| !value.is_empty())
            .map(|(v, p)| (v.as_bytes().to_vec(), p.as_bytes().to_vec()))
            .collect();
        let longest = pairs.iter().map(|(v, _)| v.len()).max()?;
        let mut firsts = [false; 256];
        for (value, _) in &pairs {
            firsts[value[0] as usize] = true;
        }
        Some(Scrubber {
            pairs,
            held: Vec::new(),
            longest,
            firsts,
        })
    }

    /// A header value with the values replaced.
    pub fn header(&self, value: &HeaderValue) -> HeaderValue {
        let (bytes, _) = self.scan(value.as_bytes(), true);
        HeaderValue::from_bytes(&bytes).unwrap_or_else(|_| value.clone())
    }

    /// The next chunk, scrubbed, less what is held back.
    pub fn chunk(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut data = std::mem::take(&mut self.held);
        data.extend_from_slice(chunk);
        let (out, held) = self.scan(&data, false);
        self.held = held.to_vec();
        out
    }

    /// What was held back, at the body's end.
    pub fn finish(&mut self) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        self.scan(&held, true).0
    }

    /// `data` with each value replaced, and (unless `last`) the tail that
    /// may begin a value the next chunk completes, unreplaced. What was
    /// put in is never scanned again, so a value inside a placeholder
    /// cannot make it grow.
    fn scan<'d>(&self, data: &'d [u8], last: bool) -> (Vec<u8>, &'d [u8]) {
        let mut out = Vec::with_capacity(data.len());
        let mut at = 0;
        while at < data.len() {
            let skip = data[at..].iter().position(|&b| self.firsts[b as usize]);
            let next = skip.map_or(data.len(), |skip| at + skip);
            out.extend_from_slice(&data[at..next]);
            at = next;
            if at == data.len() {
                break;
            }
            let rest = &data[at..];
            if let Some((from, to)) = self.pairs.iter().find(|(from, _)| rest.starts_with(from)) {
                out.extend_from_slice(to);
                at += from.len();
                continue;
            }
            if !last
                && rest.len() < self.longest
                && self.pairs.iter().any(|(from, _)| from.starts_with(rest))
            {
                return (out, rest);
            }
            out.push(data[at]);
            at += 1;
        }
        (out, &[])
    }
}
