//! The image manifest, fetched by the host itself: read as it streams and
//! broken off at [`MAX_IMAGE_MANIFEST_BYTES`] (a 1 GiB or endless manifest
//! costs that much and no more), and credentials that stay with the
//! registry they are for: a token realm on another host is asked without
//! them, redirects are not followed, and what the blob pull then uses is
//! the same scoped choice.

use oci_client::secrets::RegistryAuth;

use super::{IMAGE_MANIFEST_MEDIA_TYPE, MAX_IMAGE_MANIFEST_BYTES, OciError, OciOptions, OciRef};

/// Largest token response read, in bytes: a registry token is a few KiB.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 << 10;
/// Largest error body kept for a message, in bytes.
const MAX_ERROR_BODY_BYTES: usize = 4 << 10;

/// What fetching the manifest gave.
pub(super) struct Fetched {
    /// The manifest's bytes as the registry sent them.
    pub bytes: Vec<u8>,
    /// What the blob pull may authenticate with: the credentials, or
    /// nothing when the registry sends its clients to a token service on
    /// another host.
    pub auth: RegistryAuth,
}

/// Why it did not.
pub(super) enum FetchFailure {
    /// The registry could not be reached (the cache may stand in).
    Unreachable(String),
    Refused(OciError),
}

/// Fetches `reference`'s image manifest with `auth` (scoped as above).
pub(super) async fn manifest(
    reference: &OciRef,
    options: &OciOptions,
    auth: &RegistryAuth,
) -> Result<Fetched, FetchFailure> {
    let fetch = ManifestFetch::new(reference, options)?;
    let mut response = fetch.get(None).await?;
    let mut client_auth = auth.clone();
    if response.status() == reqwest::StatusCode::UNAUTHORIZED
        && let Some(authorization) = fetch.authorize(&response, auth, &mut client_auth).await?
    {
        response = fetch.get(Some(authorization)).await?;
    }
    fetch.accepted(&mut response).await?;
    let bytes = fetch.body(&mut response).await?;
    // The blob pull's client asks `/v2/` where to get its token: the
    // credentials go with it only if that realm is the registry's too.
    if matches!(client_auth, RegistryAuth::Basic(..)) && !fetch.blob_realm_is_registry().await {
        client_auth = RegistryAuth::Anonymous;
    }
    Ok(Fetched {
        bytes,
        auth: client_auth,
    })
}

/// One image manifest's fetch: the reference, the client (no redirects,
/// bounded waits) and where it asks.
struct ManifestFetch<'a> {
    reference: &'a OciRef,
    client: reqwest::Client,
    scheme: &'static str,
    registry: &'a str,
    url: String,
}

impl<'a> ManifestFetch<'a> {
    fn new(reference: &'a OciRef, options: &OciOptions) -> Result<Self, FetchFailure> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(super::REGISTRY_CONNECT_TIMEOUT)
            .read_timeout(super::REGISTRY_READ_TIMEOUT)
            .build()
            .map_err(|e| refused(reference, format!("cannot make an HTTP client: {e}")))?;
        let registry = reference.registry();
        let scheme = if options.plain_http(reference) {
            "http"
        } else {
            "https"
        };
        let url = format!(
            "{scheme}://{registry}/v2/{}/manifests/{}",
            reference.reference.repository(),
            reference
                .digest()
                .or(reference.reference.tag())
                .unwrap_or("latest")
        );
        Ok(ManifestFetch {
            reference,
            client,
            scheme,
            registry,
            url,
        })
    }

    fn refused(&self, message: String) -> FetchFailure {
        refused(self.reference, message)
    }

    /// A send that failed: the registry unreachable, or refused.
    fn sent(&self, e: reqwest::Error) -> FetchFailure {
        if e.is_connect() || e.is_timeout() {
            FetchFailure::Unreachable(super::error_chain(&e))
        } else {
            self.refused(super::error_chain(&e))
        }
    }

    async fn get(&self, authorization: Option<String>) -> Result<reqwest::Response, FetchFailure> {
        let mut request = self.client.get(&self.url).header(
            reqwest::header::ACCEPT,
            format!(
                "{IMAGE_MANIFEST_MEDIA_TYPE}, application/vnd.docker.distribution.manifest.v2+json"
            ),
        );
        if let Some(value) = authorization {
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        request.send().await.map_err(|e| self.sent(e))
    }

    /// The `Authorization` a 401's challenge asks for, with `auth`
    /// (a token service elsewhere gets no credentials, and then neither
    /// does the blob pull: `client_auth`).
    async fn authorize(
        &self,
        response: &reqwest::Response,
        auth: &RegistryAuth,
        client_auth: &mut RegistryAuth,
    ) -> Result<Option<String>, FetchFailure> {
        let challenge = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let (realm, service, scope) = match Challenge::parse(&challenge) {
            Challenge::Basic => {
                return Ok(match auth {
                    RegistryAuth::Basic(user, password) => Some(basic(user, password)),
                    _ => None,
                });
            }
            Challenge::Other => return Ok(None),
            Challenge::Bearer {
                realm,
                service,
                scope,
            } => (realm, service, scope),
        };
        let realm = reqwest::Url::parse(&realm)
            .map_err(|e| self.refused(format!("its token realm '{realm}' is not a URL: {e}")))?;
        // Credentials go to the registry they are for, never to a token
        // service elsewhere that the registry names.
        let same_host = same_authority(&realm, self.scheme, self.registry);
        if !same_host {
            *client_auth = RegistryAuth::Anonymous;
            if matches!(auth, RegistryAuth::Basic(..)) {
                tracing::warn!(
                    registry = self.registry,
                    realm = %realm,
                    "the registry's token service is on another host: asking it without the registry's credentials"
                );
            }
        }
        let scope = scope.unwrap_or_else(|| {
            format!("repository:{}:pull", self.reference.reference.repository())
        });
        let token = token(&self.client, realm, service, &scope, auth, same_host)
            .await
            .map_err(|e| match e {
                FetchFailure::Refused(OciError::Registry { message, .. }) => {
                    self.refused(format!("its token service: {message}"))
                }
                other => other,
            })?;
        Ok(Some(format!("Bearer {token}")))
    }

    /// Refuses a redirect (never followed) and any answer but success,
    /// saying how to give credentials when they were wanted.
    async fn accepted(&self, response: &mut reqwest::Response) -> Result<(), FetchFailure> {
        let status = response.status();
        if status.is_redirection() {
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("?")
                .to_string();
            return Err(self.refused(format!(
                "it answered the manifest request with {status}, to {}; redirects are not followed",
                to.chars().take(256).collect::<String>()
            )));
        }
        if status.is_success() {
            return Ok(());
        }
        let body = bounded_body(response, MAX_ERROR_BODY_BYTES)
            .await
            .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let mut message = format!("the manifest request answered {status}: {}", body.trim());
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            message.push_str(&format!(
                "; it wants credentials: set {} and {} (with {} = \"{}\"), or log in with `docker login {}`",
                super::USERNAME_VAR,
                super::PASSWORD_VAR,
                super::REGISTRY_VAR,
                self.registry,
                self.registry
            ));
        }
        Err(self.refused(message))
    }

    /// The manifest's bytes, bounded.
    async fn body(&self, response: &mut reqwest::Response) -> Result<Vec<u8>, FetchFailure> {
        let (bytes, over) = bounded_body(response, MAX_IMAGE_MANIFEST_BYTES)
            .await
            .map_err(|e| self.sent(e))?;
        if over {
            return Err(FetchFailure::Refused(OciError::TooLarge {
                reference: self.reference.to_string(),
                what: "image manifest",
                bytes: response
                    .content_length()
                    .unwrap_or(bytes.len() as u64 + 1)
                    .max(bytes.len() as u64 + 1),
                limit: MAX_IMAGE_MANIFEST_BYTES as u64,
            }));
        }
        Ok(bytes)
    }

    /// Whether the token realm `/v2/` names is the registry's own (else
    /// the blob pull goes without the registry's credentials).
    async fn blob_realm_is_registry(&self) -> bool {
        let base = format!("{}://{}/v2/", self.scheme, self.registry);
        let challenge = match self.client.get(&base).send().await {
            Ok(response) => response
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(Challenge::parse),
            Err(_) => None,
        };
        match challenge {
            Some(Challenge::Bearer { realm, .. }) => reqwest::Url::parse(&realm)
                .is_ok_and(|r| same_authority(&r, self.scheme, self.registry)),
            _ => true,
        }
    }
}

/// A registry's refusal of `reference`.
fn refused(reference: &OciRef, message: String) -> FetchFailure {
    FetchFailure::Refused(OciError::Registry {
        reference: reference.to_string(),
        message,
    })
}

/// A bearer token from `realm`, with the credentials only when the realm
/// is the registry's own host.
async fn token(
    client: &reqwest::Client,
    mut realm: reqwest::Url,
    service: Option<String>,
    scope: &str,
    auth: &RegistryAuth,
    send_credentials: bool,
) -> Result<String, FetchFailure> {
    let shown = realm.to_string();
    let refused = |message: String| {
        FetchFailure::Refused(OciError::Registry {
            reference: shown.clone(),
            message,
        })
    };
    {
        let mut query = realm.query_pairs_mut();
        if let Some(service) = &service {
            query.append_pair("service", service);
        }
        query.append_pair("scope", scope);
    }
    let mut request = client.get(realm.clone());
    if send_credentials && let RegistryAuth::Basic(user, password) = auth {
        request = request.header(reqwest::header::AUTHORIZATION, basic(user, password));
    }
    let mut response = request.send().await.map_err(|e| {
        if e.is_connect() || e.is_timeout() {
            FetchFailure::Unreachable(super::error_chain(&e))
        } else {
            refused(super::error_chain(&e))
        }
    })?;
    if !response.status().is_success() {
        return Err(refused(format!("it answered {}", response.status())));
    }
    let (body, over) = bounded_body(&mut response, MAX_TOKEN_RESPONSE_BYTES)
        .await
        .map_err(|e| refused(super::error_chain(&e)))?;
    if over {
        return Err(refused(format!(
            "its answer is over {MAX_TOKEN_RESPONSE_BYTES} bytes"
        )));
    }
    let parsed: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| refused(format!("its answer: {e}")))?;
    parsed["token"]
        .as_str()
        .or(parsed["access_token"].as_str())
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
        .ok_or_else(|| refused("its answer holds no token".into()))
}

/// Reads at most `limit` bytes as they arrive; `true` when there was more.
async fn bounded_body(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > limit {
            return Ok((bytes, true));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, false))
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// Whether `url` is on the registry's own scheme, host and port.
fn same_authority(url: &reqwest::Url, scheme: &str, registry: &str) -> bool {
    let default_port = if scheme == "https" { 443 } else { 80 };
    let (host, port) = match registry.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || registry.starts_with('[') => {
            match port.parse::<u16>() {
                Ok(port) => (host, port),
                Err(_) => (registry, default_port),
            }
        }
        _ => (registry, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    url.scheme() == scheme
        && url.host_str().is_some_and(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .eq_ignore_ascii_case(host)
        })
        && url.port_or_known_default() == Some(port)
}

/// A `WWW-Authenticate` challenge, as far as a registry's go.
#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
    Other,
}

impl Challenge {
    fn parse(header: &str) -> Challenge {
        let header = header.trim();
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Challenge::Basic;
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Challenge::Other;
        }
        let mut realm = None;
        let mut service = None;
        let mut scope = None;
        for (key, value) in parameters(rest) {
            match key.to_ascii_lowercase().as_str() {
                "realm" => realm = Some(value),
                "service" => service = Some(value),
                "scope" => scope = Some(value),
                _ => {}
            }
        }
        match realm {
            Some(realm) => Challenge::Bearer {
                realm,
                service,
                scope,
            },
            None => Challenge::Other,
        }
    }
}

/// `key="value", key=value` pairs of a challenge.
fn parameters(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (quoted[..end].to_string(), &quoted[end + 1..]),
                None => (quoted.to_string(), ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (after[..end].trim().to_string(), &after[end..]),
                None => (after.trim().to_string(), ""),
            }
        };
        pairs.push((key, value));
        rest = next.trim_start().trim_start_matches(',');
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

    /// What a test registry answers a request (its first line and its
    /// headers, lower-cased): the head of the response and its body, or a
    /// body that never ends.
    type Answer = Arc<dyn Fn(&str, &str) -> (String, Body) + Send + Sync>;

    enum Body {
        Bytes(Vec<u8>),
        Endless,
    }

    /// A registry on `address` that answers with `answer` and keeps every
    /// request head it was sent. It lives as long as the test's runtime.
    async fn registry(address: &str, answer: Answer) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let at = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let heads = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (answer, heads) = (answer.clone(), heads.clone());
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut reader = BufReader::new(read);
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        head.push_str(&line.to_ascii_lowercase());
                    }
                    heads.lock().unwrap().push(head.clone());
                    let first = head.lines().next().unwrap_or_default().to_string();
                    let (status, body) = answer(&first, &head);
                    match body {
                        Body::Bytes(bytes) => {
                            let _ = write
                                .write_all(
                                    format!(
                                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                                        bytes.len()
                                    )
                                    .as_bytes(),
                                )
                                .await;
                            let _ = write.write_all(&bytes).await;
                        }
                        Body::Endless => {
                            let _ = write
                                .write_all(
                                    format!("HTTP/1.1 {status}\r\nconnection: close\r\n\r\n")
                                        .as_bytes(),
                                )
                                .await;
                            let chunk = vec![b' '; 64 << 10];
                            // Bounded: a gigabyte, or until the reader leaves.
                            for _ in 0..(1 << 14) {
                                if write.write_all(&chunk).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                });
            }
        });
        (at, seen)
    }

    fn reference(at: &str) -> OciRef {
        OciRef::parse(&format!("oci://{at}/web:1")).unwrap()
    }

    #[tokio::test]
    async fn an_endless_manifest_is_broken_off_at_its_bound() {
        let (at, _) = registry(
            "127.0.0.1:0",
            Arc::new(|_, _| ("200 OK".into(), Body::Endless)),
        )
        .await;
        let started = std::time::Instant::now();
        let fetched = manifest(
            &reference(&at),
            &OciOptions::default(),
            &RegistryAuth::Anonymous,
        )
        .await;
        let Err(FetchFailure::Refused(OciError::TooLarge { limit, .. })) = fetched else {
            panic!("an endless manifest was not refused as too large");
        };
        assert_eq!(limit, MAX_IMAGE_MANIFEST_BYTES as u64);
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[tokio::test]
    async fn credentials_never_follow_a_realm_to_another_host() {
        let basic_auth = RegistryAuth::Basic("user".into(), "the-password".into());
        let basic_header = basic("user", "the-password").to_ascii_lowercase();
        // The token service, on another host of this machine.
        let (realm, realm_seen) = registry(
            "127.0.0.2:0",
            Arc::new(|_, _| {
                (
                    "200 OK".into(),
                    Body::Bytes(br#"{"token":"t0k3n"}"#.to_vec()),
                )
            }),
        )
        .await;
        let challenge = format!(
            "401 Unauthorized\r\nwww-authenticate: Bearer realm=\"http://{realm}/token\",service=\"reg\""
        );
        let (at, seen) = registry(
            "127.0.0.1:0",
            Arc::new(move |_, head| {
                if head.contains("authorization: bearer t0k3n") {
                    ("200 OK".into(), Body::Bytes(b"{}".to_vec()))
                } else {
                    (challenge.clone(), Body::Bytes(Vec::new()))
                }
            }),
        )
        .await;
        let fetched = manifest(&reference(&at), &OciOptions::default(), &basic_auth)
            .await
            .unwrap_or_else(|_| panic!("the manifest through the token"));
        assert_eq!(fetched.bytes, b"{}");
        // The realm was asked without the registry's password, and the
        // blob pull is told to send none either.
        let asked = realm_seen.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(!asked[0].contains("authorization"), "{asked:?}");
        assert!(
            asked[0].contains("scope=repository%3aweb%3apull"),
            "{asked:?}"
        );
        assert!(matches!(fetched.auth, RegistryAuth::Anonymous));
        assert!(
            seen.lock()
                .unwrap()
                .iter()
                .all(|h| !h.contains(&basic_header)),
            "the password went to the registry only as a token's: {:?}",
            seen.lock().unwrap()
        );

        // A registry that asks for its own Basic credentials gets them.
        let wanted = basic_header.clone();
        let (at, _) = registry(
            "127.0.0.1:0",
            Arc::new(move |_, head| {
                if head.contains(&wanted) {
                    ("200 OK".into(), Body::Bytes(b"{}".to_vec()))
                } else {
                    (
                        "401 Unauthorized\r\nwww-authenticate: Basic realm=\"reg\"".into(),
                        Body::Bytes(Vec::new()),
                    )
                }
            }),
        )
        .await;
        let fetched = manifest(&reference(&at), &OciOptions::default(), &basic_auth)
            .await
            .unwrap_or_else(|_| panic!("the manifest with Basic credentials"));
        assert!(matches!(fetched.auth, RegistryAuth::Basic(..)));
    }

    #[test]
    fn challenges_are_read_as_registries_write_them() {
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#
            ),
            Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull".into()),
            }
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="Registry""#),
            Challenge::Basic
        );
        assert_eq!(Challenge::parse("Negotiate"), Challenge::Other);
        assert_eq!(Challenge::parse("Bearer service=x"), Challenge::Other);
    }

    #[test]
    fn only_the_registry_itself_is_the_same_authority() {
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert!(same_authority(
            &url("https://ghcr.io/token"),
            "https",
            "ghcr.io"
        ));
        assert!(same_authority(
            &url("http://127.0.0.1:5000/t"),
            "http",
            "127.0.0.1:5000"
        ));
        assert!(!same_authority(
            &url("http://127.0.0.2:5000/t"),
            "http",
            "127.0.0.1:5000"
        ));
        assert!(!same_authority(
            &url("http://127.0.0.1:5001/t"),
            "http",
            "127.0.0.1:5000"
        ));
        assert!(!same_authority(
            &url("https://auth.ghcr.io/t"),
            "https",
            "ghcr.io"
        ));
        assert!(!same_authority(
            &url("http://ghcr.io/t"),
            "https",
            "ghcr.io"
        ));
    }
}
