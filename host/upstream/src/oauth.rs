//! OAuth 2.1 for upstream servers reached over HTTP: the client side of
//! MCP's authorization spec. A server that answers 401 (or 403
//! `insufficient_scope`) with a Bearer challenge is authorized, and the
//! request is sent again with the token.
//!
//! rmcp's `AuthorizationManager` does the protocol: protected resource
//! metadata (RFC 9728, the `resource` checked against the server's URL),
//! authorization server metadata (RFC 8414 or OpenID, its `issuer` checked),
//! the client's identity (pre-registered, a client ID metadata document,
//! else dynamic registration), PKCE S256, the `resource` parameter (RFC
//! 8707), the authorization response's `iss` (RFC 9207), scope selection
//! and refresh. This module decides when to authorize and how often, how
//! the authorization response is obtained (the authorization server
//! answers at once, or a person approves in a browser and the response
//! comes back to a loopback listener), and where the tokens are kept.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::OAuthState;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use rmcp::transport::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, CredentialStore,
    StoredCredentials,
};
use sse_stream::Sse;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Authorizations in a row for one request before the server's refusal
/// stands: a server that asks for a scope it never grants (or rejects
/// every token) is not authorized forever.
pub const MAX_AUTHORIZATIONS: u32 = 3;
/// How long a person has to approve in the browser before the attempt
/// ends (and the request fails, saying so).
pub const AUTHORIZATION_WAIT: Duration = Duration::from_secs(300);
/// How long the authorization endpoint may take to answer the host's own
/// request for it (the one that finds out whether a person is needed).
pub const AUTHORIZATION_PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request the loopback listener reads for the authorization
/// response (its first line carries it; a browser's headers fit easily).
pub const MAX_CALLBACK_REQUEST_BYTES: usize = 16 << 10;
/// The name the host registers as (dynamic client registration).
pub const CLIENT_NAME: &str = "gadget-host";
/// Where the authorization response comes back to, on the loopback
/// listener (RFC 8252: a native app's redirect, any port).
const CALLBACK_PATH: &str = "/callback";

/// Shows a person where to approve: the server's name and the
/// authorization URL. Given by a front end that has a person at hand (a
/// terminal); without one, a server that needs a person fails, naming
/// `gadget login`.
#[derive(Clone)]
pub struct ShowAuthorization(pub Arc<ShowFn>);

/// Takes the server's name and the authorization URL.
pub type ShowFn = dyn Fn(&str, &str) + Send + Sync;

impl std::fmt::Debug for ShowAuthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShowAuthorization")
    }
}

/// How the host authorizes with one server's authorization server: the
/// policy's `[mcp-servers.NAME.oauth]`, resolved by the front end.
#[derive(Debug, Clone, Default)]
pub struct OAuthSpec {
    /// A client registered out of band (`client-id`), with its secret
    /// when it is confidential.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// An https URL where the host's client ID metadata document is
    /// published, used when the authorization server supports those.
    pub client_metadata_url: Option<String>,
    /// Scopes always asked for (beside what the server's challenge names).
    pub scopes: Vec<String>,
    /// The loopback listener's port (0: any free port).
    pub redirect_port: u16,
    /// Where the tokens are kept between runs (private to the user);
    /// `None`: in memory only.
    pub token_file: Option<PathBuf>,
    /// Who approves, when the authorization server wants a person.
    pub person: Option<ShowAuthorization>,
}

/// The OAuth side of one upstream server: the HTTP client its transport
/// sends with (a token on each request when there is one) and the
/// authorizations that give it a token.
pub struct Authorizer {
    server: String,
    url: String,
    spec: OAuthSpec,
    client: AuthClient<reqwest::Client>,
    /// One authorization at a time; requests that failed before one ended
    /// are sent again with its token, not authorized twice.
    authorizing: tokio::sync::Mutex<()>,
    /// Bumped by each authorization that ends with a token.
    generation: AtomicU64,
    /// Whether requests carry a token (one was kept or obtained): until
    /// then the manager is not asked on every request.
    authorized: Arc<AtomicBool>,
    /// The last authorization was a refresh.
    refreshed: AtomicBool,
}

impl Authorizer {
    /// The authorizer of `server` at `url`, with the tokens kept from an
    /// earlier run when there are any (and still for this server's
    /// authorization server).
    pub async fn new(
        server: &str,
        url: &str,
        spec: OAuthSpec,
        http: reqwest::Client,
    ) -> Result<Authorizer, String> {
        let mut manager = manager(url, &spec).await?;
        let mut kept = false;
        if spec.token_file.as_ref().is_some_and(|f| f.exists()) {
            // Kept tokens are a convenience: if they cannot be used, the
            // server's challenge starts a new authorization.
            match manager.initialize_from_store().await {
                Ok(found) => kept = found,
                Err(e) => {
                    tracing::warn!(mcp_server = %server, "its kept OAuth tokens are not used: {e}")
                }
            }
        }
        Ok(Authorizer {
            server: server.to_string(),
            url: url.to_string(),
            spec,
            client: AuthClient::new(http, manager),
            authorizing: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            authorized: Arc::new(AtomicBool::new(kept)),
            refreshed: AtomicBool::new(false),
        })
    }

    /// The client the server's transport sends with.
    pub fn http(&self) -> OAuthHttp {
        OAuthHttp {
            tokens: self.client.clone(),
            authorized: self.authorized.clone(),
        }
    }

    /// Which authorization the requests are sent with now: pass it to
    /// [`Authorizer::authorize`] with a challenge they met.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Authorizes after a request sent at `seen` met `challenge` (a 401's
    /// or 403's `WWW-Authenticate`): does nothing if another authorization
    /// ended since. A 403 `insufficient_scope` asks for the scopes granted
    /// so far and the challenged ones together.
    pub async fn authorize(&self, challenge: &str, seen: u64) -> Result<(), String> {
        let _one = self.authorizing.lock().await;
        if self.generation() != seen {
            return Ok(());
        }
        // A rejected token (expired early, revoked) is refreshed first when
        // there is a refresh token: no person, no new registration. Once:
        // a refreshed token that is rejected too calls for a whole
        // authorization (the resource may trust another server now).
        if !challenge.contains("insufficient_scope")
            && self.authorized.load(Ordering::Acquire)
            && !self.refreshed.swap(false, Ordering::AcqRel)
            && self
                .client
                .auth_manager
                .lock()
                .await
                .refresh_token()
                .await
                .is_ok()
        {
            self.refreshed.store(true, Ordering::Release);
            self.generation.fetch_add(1, Ordering::AcqRel);
            tracing::info!(mcp_server = %self.server, "its OAuth token was refreshed");
            return Ok(());
        }
        let mut scopes = self.spec.scopes.clone();
        if challenge.contains("insufficient_scope") {
            scopes.extend(
                self.client
                    .auth_manager
                    .lock()
                    .await
                    .get_current_scopes()
                    .await,
            );
            // Tokens kept from an earlier run: their grant, as recorded.
            if let Some(file) = &self.spec.token_file
                && let Ok(Some(kept)) = TokenFile(file.clone()).load().await
            {
                scopes.extend(kept.granted_scopes);
            }
            scopes.extend(challenged_scopes(challenge));
        }
        let mut unique = Vec::new();
        for scope in scopes {
            if !unique.contains(&scope) {
                unique.push(scope);
            }
        }
        let manager = self
            .authorization(challenge, unique)
            .await
            .map_err(|e| format!("authorizing: {e}"))?;
        *self.client.auth_manager.lock().await = manager;
        self.authorized.store(true, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        tracing::info!(mcp_server = %self.server, "authorized (OAuth)");
        Ok(())
    }

    /// One whole authorization: discovery from the challenge, the client's
    /// identity, the authorization response, the token.
    async fn authorization(
        &self,
        challenge: &str,
        scopes: Vec<String>,
    ) -> Result<AuthorizationManager, String> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.spec.redirect_port))
            .await
            .map_err(|e| {
                format!(
                    "cannot listen on 127.0.0.1:{} for the authorization response: {e}",
                    self.spec.redirect_port
                )
            })?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
        let manager = manager(&self.url, &self.spec).await?;
        // A new authorization registers anew: a client registered with
        // another authorization server is never presented to this one.
        if let Some(file) = &self.spec.token_file {
            let _ = std::fs::remove_file(file);
        }
        let mut request = AuthorizationRequest::new(redirect_uri.clone())
            .with_client_name(CLIENT_NAME)
            .with_application_type("native")
            .with_challenge(challenge)
            .with_scopes(scopes);
        if let Some(id) = &self.spec.client_id {
            request = request.with_preregistered_client(id.clone());
            if let Some(secret) = &self.spec.client_secret {
                request = request.with_client_secret(secret.clone());
            }
        } else if let Some(url) = &self.spec.client_metadata_url {
            request = request.with_client_metadata_url(url.clone());
        }
        let mut state = OAuthState::Unauthorized(manager);
        state
            .start_authorization(request)
            .await
            .map_err(|e| e.to_string())?;
        let authorization_url = state
            .get_authorization_url()
            .await
            .map_err(|e| e.to_string())?;
        let response = self
            .authorization_response(&authorization_url, &redirect_uri, listener)
            .await?;
        refused_by_server(&response)?;
        state
            .handle_callback_url(&response)
            .await
            .map_err(|e| e.to_string())?;
        state
            .into_authorization_manager()
            .ok_or_else(|| "the authorization did not end with a token".to_string())
    }

    /// The authorization response (the URL the authorization server sends
    /// the user agent back to). The host asks for the authorization URL
    /// itself first: an authorization server that grants without a person
    /// (a pre-approved client) answers with the redirect at once. Else a
    /// person approves in a browser, and the response arrives on the
    /// loopback listener.
    async fn authorization_response(
        &self,
        authorization_url: &str,
        redirect_uri: &str,
        listener: tokio::net::TcpListener,
    ) -> Result<String, String> {
        if let Some(probe) = probe_client(authorization_url, &self.url).await
            && let Ok(answer) = probe.get(authorization_url).send().await
            && answer.status().is_redirection()
            && let Some(location) = answer
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
            && location.starts_with(&format!("{redirect_uri}?"))
        {
            return Ok(location.to_string());
        }
        let Some(person) = &self.spec.person else {
            return Err(format!(
                "a person must approve gadget-host at its authorization server: \
                 run `gadget login {}` on a terminal (the tokens are kept for later runs)",
                self.server
            ));
        };
        (person.0)(&self.server, authorization_url);
        tokio::time::timeout(AUTHORIZATION_WAIT, callback(listener, redirect_uri))
            .await
            .map_err(|_| format!("nobody approved within {} s", AUTHORIZATION_WAIT.as_secs()))?
    }
}

/// The HTTP client of a server authorized with OAuth: reqwest's own, each
/// method delegated (so SSE handling and the response limits are exactly
/// those of a server without OAuth), with the current access token on each
/// request once there is one (refreshed by rmcp's manager when it nears
/// expiry). A refusal (401, 403) comes back to the caller, which
/// authorizes and sends again.
#[derive(Clone)]
pub struct OAuthHttp {
    tokens: AuthClient<reqwest::Client>,
    authorized: Arc<AtomicBool>,
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl OAuthHttp {
    /// The bearer token for a request: the operator's fixed one when the
    /// transport has it, else the current access token, if any.
    async fn token(&self, fixed: Option<String>) -> Option<String> {
        if fixed.is_some() || !self.authorized.load(Ordering::Acquire) {
            return fixed;
        }
        self.tokens.get_access_token().await.ok()
    }

    fn http(&self) -> &reqwest::Client {
        &self.tokens.http_client
    }
}

impl StreamableHttpClient for OAuthHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let token = self.token(auth).await;
        self.http()
            .post_message(uri, message, session_id, token, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let token = self.token(auth).await;
        self.http()
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                token,
                headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let token = self.token(auth).await;
        self.http()
            .post_message_with_response_limits(uri, message, session_id, token, headers, limits)
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        let token = self.token(auth).await;
        self.http()
            .delete_session(uri, session_id, token, headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let token = self.token(auth).await;
        self.http()
            .get_stream(uri, session_id, last_event_id, token, headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let token = self.token(auth).await;
        self.http()
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                token,
                headers,
                max_sse_event_size,
            )
            .await
    }
}

/// Where an address is, for who may be sent there: the one classifier
/// every door uses ([`gadget_core::address`]), link-local and reserved
/// addresses never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    Public,
    Private,
    Loopback,
    Forbidden,
}

fn reach(address: std::net::IpAddr) -> Reach {
    use gadget_core::address::AddressClass;
    match gadget_core::address::classify(address) {
        AddressClass::Public => Reach::Public,
        AddressClass::Private => Reach::Private,
        AddressClass::Loopback => Reach::Loopback,
        AddressClass::LinkLocal | AddressClass::Reserved => Reach::Forbidden,
    }
}

/// Whether the authorization server may be at `target`, for a server at
/// `server`: a public address always, a loopback or private one only when
/// the MCP server is on one of the same kind (rmcp's rule for the metadata
/// it fetches), a link-local one never.
fn may_reach(target: &[std::net::IpAddr], server: &[std::net::IpAddr]) -> bool {
    !target.is_empty()
        && target.iter().all(|t| match reach(*t) {
            Reach::Public => true,
            Reach::Forbidden => false,
            near => server.iter().any(|s| reach(*s) == near),
        })
}

async fn addresses(url: &url::Url) -> Vec<std::net::SocketAddr> {
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Vec::new();
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    tokio::net::lookup_host((host, port))
        .await
        .map(|a| a.collect())
        .unwrap_or_default()
}

/// The client for the host's own request of the authorization page, bound
/// to the addresses it checked (a second lookup cannot move it), or `None`
/// when it may not be sent there: a hostile server's metadata must not
/// point the host at its cloud's metadata service or its own network.
async fn probe_client(authorization_url: &str, server_url: &str) -> Option<reqwest::Client> {
    let target = url::Url::parse(authorization_url).ok()?;
    let server = url::Url::parse(server_url).ok()?;
    let found = addresses(&target).await;
    let server_addresses: Vec<_> = addresses(&server).await.iter().map(|a| a.ip()).collect();
    let ips: Vec<_> = found.iter().map(|a| a.ip()).collect();
    if !may_reach(&ips, &server_addresses) {
        tracing::warn!(
            "not asking for {authorization_url} itself: its address is not one the host may reach for this server"
        );
        return None;
    }
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(AUTHORIZATION_PROBE_TIMEOUT)
        .resolve_to_addrs(target.host_str()?, &found)
        .build()
        .ok()
}

/// A manager for `url` that keeps its tokens where the spec says.
async fn manager(url: &str, spec: &OAuthSpec) -> Result<AuthorizationManager, String> {
    // rmcp builds its own HTTP client for the OAuth requests (one that
    // refuses metadata naming link-local or, for a public server, private
    // addresses); its TLS takes the process's default provider: ring, the
    // one the rest of the host uses. Installed once; later calls find it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if let Some(file) = &spec.token_file {
        manager.set_credential_store(TokenFile(file.clone()));
    }
    Ok(manager)
}

/// The scopes a challenge names (`scope="a b"`).
fn challenged_scopes(challenge: &str) -> Vec<String> {
    let Some(start) = challenge.find("scope=\"") else {
        return Vec::new();
    };
    let rest = &challenge[start + "scope=\"".len()..];
    rest[..rest.find('"').unwrap_or(rest.len())]
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// An authorization response that says the authorization server refused
/// (`error=access_denied`, ...): its reason, not "missing code".
fn refused_by_server(response: &str) -> Result<(), String> {
    let Ok(url) = url::Url::parse(response) else {
        return Err(format!("'{response}' is not an authorization response"));
    };
    let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    match query.get("error") {
        Some(error) => Err(format!(
            "the authorization server refused: {error}{}",
            query
                .get("error_description")
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        )),
        None => Ok(()),
    }
}

/// Waits on the loopback listener for the browser's request carrying the
/// authorization response; answers it with a page saying where to go on.
async fn callback(listener: tokio::net::TcpListener, redirect_uri: &str) -> Result<String, String> {
    loop {
        let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut request = Vec::new();
        let mut chunk = [0u8; 2048];
        while !request.windows(4).any(|w| w == b"\r\n\r\n")
            && request.len() < MAX_CALLBACK_REQUEST_BYTES
        {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => request.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
        let line = String::from_utf8_lossy(&request);
        let target = line
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("");
        if !target.starts_with(&format!("{CALLBACK_PATH}?")) {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let page = "gadget-host has the authorization response; you can close this window.";
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                )
                .as_bytes(),
            )
            .await;
        let base = redirect_uri
            .strip_suffix(CALLBACK_PATH)
            .unwrap_or(redirect_uri);
        return Ok(format!("{base}{target}"));
    }
}

/// The tokens of one server in a file private to the user (written whole,
/// then renamed into place, so a reader never sees half of it).
struct TokenFile(PathBuf);

#[async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match std::fs::read(&self.0) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| AuthError::CredentialStoreError(format!("{}: {e}", self.0.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(AuthError::CredentialStoreError(format!(
                "{}: {e}",
                self.0.display()
            ))),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let failed = |e: std::io::Error| {
            AuthError::CredentialStoreError(format!("{}: {e}", self.0.display()))
        };
        let bytes = serde_json::to_vec(&credentials)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        if let Some(dir) = self.0.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let partial = self.0.with_extension("partial");
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&partial).map_err(failed)?;
            file.write_all(&bytes).map_err(failed)?;
        }
        std::fs::rename(&partial, &self.0).map_err(failed)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.0) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(
                AuthError::CredentialStoreError(format!("{}: {e}", self.0.display())),
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_read_from_a_challenge() {
        assert_eq!(
            challenged_scopes(
                r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="x""#
            ),
            ["mcp:basic", "mcp:write"]
        );
        assert!(challenged_scopes("Bearer resource_metadata=\"x\"").is_empty());
    }

    #[test]
    fn the_authorization_page_is_asked_for_only_where_the_host_may_reach() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let public = [ip("93.184.216.34")];
        let loopback = [ip("127.0.0.1")];
        let private = [ip("10.0.0.9")];
        // A public authorization server: from anywhere.
        assert!(may_reach(&public, &public));
        assert!(may_reach(&public, &loopback));
        // The cloud's metadata service: never, not even from a local server.
        for never in [
            "169.254.169.254",
            "fe80::1",
            "0.0.0.0",
            "::ffff:169.254.169.254",
        ] {
            assert!(!may_reach(&[ip(never)], &loopback), "{never}");
            assert!(!may_reach(&[ip(never)], &public), "{never}");
        }
        // Loopback and private: only for a server that is on one too.
        assert!(may_reach(&loopback, &loopback));
        assert!(!may_reach(&loopback, &public));
        assert!(may_reach(&private, &private));
        assert!(!may_reach(&private, &public));
        assert!(!may_reach(&[ip("fd00::1")], &public));
        // One bad address among good ones is enough to refuse.
        assert!(!may_reach(&[public[0], ip("169.254.169.254")], &public));
        assert!(!may_reach(&[], &public));
    }

    #[test]
    fn a_refusal_names_its_reason() {
        let refused = refused_by_server(
            "http://127.0.0.1:1/callback?error=access_denied&error_description=no+thanks&state=s",
        )
        .unwrap_err();
        assert_eq!(
            refused,
            "the authorization server refused: access_denied (no thanks)"
        );
        assert!(refused_by_server("http://127.0.0.1:1/callback?code=c&state=s").is_ok());
    }
}
