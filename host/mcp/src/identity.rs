//! Who is calling `gadget serve`: OAuth 2.1 resource-server style, a JWT
//! access token in `Authorization: Bearer`, checked against the
//! authorization server's keys (a JWKS file, or its URL): the signature
//! (asymmetric algorithms only, and the one the key is for), the
//! audience (this server), the issuer when one is named, the expiry and
//! not-before (with [`CLOCK_SKEW`]). The token's subject is the caller's
//! identity: it is what per-client rate limits count, and the journal and
//! the spans name it.
//!
//! A JWKS from a URL is fetched at start-up and again when a token names
//! a key it lacks (the authorization server rotated its keys), at most
//! once per [`JWKS_REFETCH_INTERVAL`], so unknown keys cannot make the
//! server hammer the authorization server.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// Clock skew allowed on `exp` and `nbf`: the authorization server's
/// clock and this one's may differ by a little, never by minutes.
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Least time between two fetches of a JWKS URL when a token names a key
/// it lacks: a rotation is picked up within this long, and a stream of
/// forged key ids costs the authorization server one request at most.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(60);

/// Longest wait for the JWKS URL to answer.
pub const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest JWKS accepted, in bytes: a few keys take a few KiB.
pub const MAX_JWKS_BYTES: usize = 256 << 10;

/// Longest subject kept, in bytes: an identity, not a document.
pub const MAX_SUBJECT_BYTES: usize = 256;

/// The authenticated caller of one request, as the guard leaves it in
/// the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity(pub Arc<str>);

/// Where the keys come from.
#[derive(Debug, Clone)]
pub enum JwksSource {
    File(PathBuf),
    Url(String),
}

impl JwksSource {
    /// `https://...` or `http://...` is a URL; anything else a file.
    pub fn parse(text: &str) -> JwksSource {
        if text.starts_with("https://") || text.starts_with("http://") {
            JwksSource::Url(text.to_string())
        } else {
            JwksSource::File(PathBuf::from(text))
        }
    }
}

/// Why a JWKS cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("the JWKS {source_name}: {why}")]
    Unusable { source_name: String, why: String },
}

/// What `gadget serve --auth-jwks` checks tokens with.
#[derive(Debug)]
pub struct JwtAuth {
    source: JwksSource,
    audience: String,
    issuer: Option<String>,
    keys: Mutex<Keys>,
}

#[derive(Debug)]
struct Keys {
    set: Arc<JwkSet>,
    fetched: Instant,
}

/// Why a token was refused, as the `WWW-Authenticate` error says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// RFC 6750: `invalid_request` (no token) or `invalid_token`.
    pub error: &'static str,
    pub description: String,
}

#[derive(serde::Deserialize)]
struct Claims {
    sub: Option<String>,
}

impl JwtAuth {
    /// Loads the keys (a URL is fetched now): a server that cannot check
    /// tokens does not start.
    pub async fn new(
        source: JwksSource,
        audience: String,
        issuer: Option<String>,
    ) -> Result<JwtAuth, JwksError> {
        let set = load(&source).await?;
        Ok(JwtAuth {
            source,
            audience,
            issuer,
            keys: Mutex::new(Keys {
                set: Arc::new(set),
                fetched: Instant::now(),
            }),
        })
    }

    /// The audience tokens must name: this server's resource.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    pub fn issuer(&self) -> Option<&str> {
        self.issuer.as_deref()
    }

    /// The caller an `Authorization` header proves, or why it does not.
    pub async fn authenticate(&self, header: Option<&str>) -> Result<ClientIdentity, Refusal> {
        let token = header
            .and_then(|h| {
                let (scheme, token) = h.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Refusal {
                error: "invalid_request",
                description: "a bearer access token is required".into(),
            })?;
        let invalid = |description: String| Refusal {
            error: "invalid_token",
            description,
        };
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| invalid(format!("the token is not a JWT ({e})")))?;
        match critical_parameters(token) {
            Ok(None) => {}
            Ok(Some(critical)) => {
                return Err(invalid(format!(
                    "its header marks parameters critical ({critical}) that this server does not understand (RFC 7515 4.1.11)"
                )));
            }
            // Never a check skipped: a header the JWT library read but
            // this reading cannot is refused.
            Err(()) => return Err(invalid("its header cannot be read as JSON".into())),
        }
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(invalid(format!(
                "{:?} is a shared-secret algorithm; tokens must be signed with the authorization server's key",
                header.alg
            )));
        }
        let jwk = self.key_for(header.kid.as_deref()).await.map_err(invalid)?;
        if let Some(alg) = jwk.common.key_algorithm
            && format!("{alg:?}") != format!("{:?}", header.alg)
        {
            return Err(invalid(format!(
                "the token says {:?} but its key is for {alg:?}",
                header.alg
            )));
        }
        let key = public_key(&jwk).ok_or_else(|| {
            invalid("its key is not a public key this server can check a signature with".into())
        })?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = CLOCK_SKEW.as_secs();
        validation.validate_nbf = true;
        validation.set_audience(&[&self.audience]);
        let mut required = vec!["exp", "aud", "sub"];
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| invalid(describe(&e, &self.audience, self.issuer.as_deref())))?
            .claims;
        let subject = claims
            .sub
            .filter(|s| !s.is_empty() && s.len() <= MAX_SUBJECT_BYTES && !s.contains(misleading))
            .ok_or_else(|| {
                invalid(format!(
                    "its subject is empty, over {MAX_SUBJECT_BYTES} bytes, or holds control, bidirectional or zero-width characters"
                ))
            })?;
        Ok(ClientIdentity(subject.into()))
    }

    /// The key `kid` names (or the only key, for a token that names none);
    /// an unknown key sends the server to fetch the keys again, at most
    /// once per [`JWKS_REFETCH_INTERVAL`].
    async fn key_for(&self, kid: Option<&str>) -> Result<Jwk, String> {
        let (set, fetched) = {
            let keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            (keys.set.clone(), keys.fetched)
        };
        if let Some(jwk) = pick(&set, kid)? {
            return Ok(jwk);
        }
        if matches!(self.source, JwksSource::Url(_)) && fetched.elapsed() >= JWKS_REFETCH_INTERVAL {
            {
                // Claimed before the fetch: concurrent requests do not
                // all fetch.
                let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
                keys.fetched = Instant::now();
            }
            if let Ok(fresh) = load(&self.source).await {
                let fresh = Arc::new(fresh);
                self.keys.lock().unwrap_or_else(|p| p.into_inner()).set = fresh.clone();
                if let Some(jwk) = pick(&fresh, kid)? {
                    return Ok(jwk);
                }
            }
        }
        Err(match kid {
            Some(kid) => format!("no key '{kid}' in the authorization server's keys"),
            None => "the token names no key (kid) and the keys are not one".into(),
        })
    }
}

/// The `crit` header parameter of a token, when it has one (RFC 7515
/// 4.1.11): the names it lists must be understood, and this server
/// understands no extension, so any `crit` refuses the token. The header
/// is read as JSON here because the JWT library does not keep `crit`;
/// `Err` when it cannot be.
fn critical_parameters(token: &str) -> Result<Option<String>, ()> {
    use base64::Engine as _;
    let encoded = token.split('.').next().ok_or(())?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .map_err(|_| ())?;
    let header: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| ())?;
    let Some(critical) = header.get("crit") else {
        return Ok(None);
    };
    Ok(Some(match critical.as_array() {
        Some(names) if !names.is_empty() => names
            .iter()
            .map(|n| n.as_str().map_or_else(|| n.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
        _ => critical.to_string(),
    }))
}

/// A character a subject must not hold: it is shown to operators (logs,
/// the journal, `describe`) and compared by rules, so nothing that hides,
/// reorders or fakes text there: controls, bidirectional controls
/// (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069) and zero-width
/// characters (U+200B-U+200D, U+2060, U+FEFF).
fn misleading(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// The verifying key of an asymmetric JWK (RSA, EC, OKP); `None` for a
/// shared secret (`oct`: whoever holds it could mint tokens) or a key that
/// does not parse.
fn public_key(jwk: &Jwk) -> Option<DecodingKey> {
    if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
        return None;
    }
    DecodingKey::from_jwk(jwk).ok()
}

/// The key a token names in `set`: by `kid`, or the only key.
fn pick(set: &JwkSet, kid: Option<&str>) -> Result<Option<Jwk>, String> {
    Ok(match kid {
        Some(kid) => set.find(kid).cloned(),
        None if set.keys.len() == 1 => set.keys.first().cloned(),
        None => None,
    })
}

/// Reads or fetches a JWKS, bounded in size and time.
async fn load(source: &JwksSource) -> Result<JwkSet, JwksError> {
    let (name, bytes) = match source {
        JwksSource::File(path) => {
            let bytes =
                gadget_core::operator_file::read(path, MAX_JWKS_BYTES as u64).map_err(|e| {
                    JwksError::Unusable {
                        source_name: path.display().to_string(),
                        why: e.to_string(),
                    }
                })?;
            (path.display().to_string(), bytes)
        }
        JwksSource::Url(url) => (
            url.clone(),
            fetch(url).await.map_err(|why| JwksError::Unusable {
                source_name: url.clone(),
                why,
            })?,
        ),
    };
    let unusable = |why: String| JwksError::Unusable {
        source_name: name.clone(),
        why,
    };
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(unusable(format!("over {MAX_JWKS_BYTES} bytes")));
    }
    let set: JwkSet =
        serde_json::from_slice(&bytes).map_err(|e| unusable(format!("not a JWK set ({e})")))?;
    // Not `Jwk::is_supported`: it panics on a key without `alg`, and a
    // JWKS from a URL is not ours to trust.
    let usable = set.keys.iter().filter(|k| public_key(k).is_some()).count();
    if usable == 0 {
        return Err(unusable(
            "it holds no key this server can check a signature with".into(),
        ));
    }
    Ok(set)
}

/// Fetches the key set at `url`, from an address the one classifier
/// allows (never link-local or reserved: a cloud's metadata service is
/// no key server), pinned to the addresses checked, and following no
/// redirect: the keys come from the URL the operator gave, or not at all.
async fn fetch(url: &str) -> Result<Vec<u8>, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
        return Err("the URL names no host".into());
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<std::net::SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|e| format!("{host} does not resolve: {e}"))?
        .collect();
    if let Some(forbidden) = addresses
        .iter()
        .find(|a| gadget_core::address::classify(a.ip()).is_forbidden())
    {
        return Err(format!(
            "{host} resolves to {}, a link-local or reserved address, where no key set is fetched from",
            forbidden.ip()
        ));
    }
    if addresses.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    let client = gadget_upstream::http_client_builder()?
        .redirect(reqwest::redirect::Policy::none())
        .resolve_to_addrs(bare, &addresses)
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let response = client
        .get(url)
        .timeout(JWKS_FETCH_TIMEOUT)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if response.status().is_redirection() {
        return Err(format!(
            "answered {} (a redirect, to {}); the keys are fetched from the URL given, never from where it points",
            response.status(),
            response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .unwrap_or("nowhere")
        ));
    }
    if !response.status().is_success() {
        return Err(format!("answered {}", response.status()));
    }
    let mut response = response;
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_JWKS_BYTES {
            return Err(format!("over {MAX_JWKS_BYTES} bytes"));
        }
    }
    Ok(bytes)
}

/// A decoding error in words a client's developer can act on.
fn describe(error: &jsonwebtoken::errors::Error, audience: &str, issuer: Option<&str>) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => {
            format!("the token is not for this server (audience {audience})")
        }
        ErrorKind::InvalidIssuer => format!(
            "the token is not from the expected issuer ({})",
            issuer.unwrap_or_default()
        ),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no '{claim}' claim"),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not fit its key".into(),
        other => format!("the token is refused ({other:?})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jwks_source_is_a_url_or_a_file() {
        assert!(matches!(
            JwksSource::parse("https://idp/keys"),
            JwksSource::Url(_)
        ));
        assert!(matches!(
            JwksSource::parse("keys.json"),
            JwksSource::File(_)
        ));
    }
}
