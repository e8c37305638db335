//! The HTTP client the host's own requests are sent with: to upstream
//! MCP servers, their authorization servers, and a JWKS URL. One place for
//! its TLS roots and its refusal of the environment's proxy.

use std::sync::Arc;
use std::time::Duration;

/// The longest a connection may take to open: as long as an upstream
/// server may take to start (`START_TIMEOUT`), since opening one is part
/// of starting it; a server that accepts nothing in that time is down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP client upstream servers are reached with: rustls with ring
/// and the Mozilla roots (as the host's other clients), no proxy from
/// the environment, bounded connection time.
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    http_client_builder()?
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}

/// The builder of [`http_client`]: the webpki roots, no proxy, the start
/// timeout; a caller adds what its requests need (a redirect policy, the
/// addresses it checked).
pub fn http_client_builder() -> Result<reqwest::ClientBuilder, String> {
    let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT))
}
