//! Who may call `gadget serve`, checked first by its guard: nobody in
//! particular (loopback only), the holders of one shared bearer token, or
//! callers with a JWT access token ([`crate::identity`]), each then known
//! by the token's subject. A refusal is 401 with a `WWW-Authenticate`
//! that says why and, for tokens, where the protected-resource metadata
//! is (RFC 9728), served at `/.well-known/oauth-protected-resource`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::identity::{ClientIdentity, JwtAuth};

/// The path of the protected-resource metadata (RFC 9728); it is also
/// served with the MCP path after it, where clients look first.
pub const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// How requests are authenticated.
pub(crate) enum Auth {
    /// Nothing asked (a loopback listener).
    Open,
    /// `Authorization` must be exactly this (`Bearer TOKEN`).
    Token(HeaderValue),
    /// A JWT access token the keys verify.
    Jwt(Arc<JwtAuth>),
}

impl Auth {
    /// The caller's identity (`None`: anonymous), or the 401 to answer.
    pub(crate) async fn check(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<ClientIdentity>, Response> {
        let given = headers.get(header::AUTHORIZATION);
        match self {
            Auth::Open => Ok(None),
            Auth::Token(expected) => {
                if given.is_some_and(|g| constant_time_eq(g.as_bytes(), expected.as_bytes())) {
                    Ok(None)
                } else {
                    Err((
                        StatusCode::UNAUTHORIZED,
                        [(header::WWW_AUTHENTICATE, "Bearer")],
                        "a bearer token is required\n",
                    )
                        .into_response())
                }
            }
            Auth::Jwt(jwt) => {
                let given = given.and_then(|g| g.to_str().ok());
                jwt.authenticate(given).await.map(Some).map_err(|refusal| {
                    // Where the metadata is comes from the configuration
                    // alone: never from a header the client wrote.
                    let metadata = metadata_url(jwt.audience())
                        .map(|url| format!("resource_metadata=\"{url}\", "))
                        .unwrap_or_default();
                    let challenge = format!(
                        "Bearer {metadata}error=\"{}\", error_description=\"{}\"",
                        refusal.error,
                        refusal.description.replace(['"', '\\'], "'")
                    );
                    let mut response = (
                        StatusCode::UNAUTHORIZED,
                        format!("{}\n", refusal.description),
                    )
                        .into_response();
                    if let Ok(value) = HeaderValue::from_str(&challenge) {
                        response
                            .headers_mut()
                            .insert(header::WWW_AUTHENTICATE, value);
                    }
                    response
                })
            }
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        matches!(self, Auth::Open)
    }
}

/// Where a client finds the metadata: beside the audience when it is
/// this server's URL (RFC 9728's path-suffixed form). An audience that is
/// not a URL says nothing of where this server is reached, and the
/// request's `Host` header is the client's to write (a challenge built
/// from it would point the client wherever the header said): the
/// challenge then names no metadata (`--auth-audience` with the server's
/// public URL names it).
fn metadata_url(audience: &str) -> Option<String> {
    let url = url::Url::parse(audience).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return None;
    }
    let path = url.path().trim_end_matches('/');
    Some(format!(
        "{}{RESOURCE_METADATA_PATH}{path}",
        url.origin().ascii_serialization()
    ))
}

/// The protected-resource metadata: the resource (the audience tokens
/// must name), its authorization server (the issuer) and how a token is
/// sent. 404 when tokens are not how this server authenticates.
pub(crate) async fn resource_metadata(State(auth): State<Arc<Auth>>) -> Response {
    let Auth::Jwt(jwt) = &*auth else {
        return (
            StatusCode::NOT_FOUND,
            "this server does not take OAuth access tokens\n",
        )
            .into_response();
    };
    let mut metadata = serde_json::json!({
        "resource": jwt.audience(),
        "bearer_methods_supported": ["header"],
        "resource_name": "gadget-host",
    });
    if let Some(issuer) = jwt.issuer() {
        metadata["authorization_servers"] = serde_json::json!([issuer]);
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        metadata.to_string(),
    )
        .into_response()
}

/// Compares secrets in time that does not depend on where they differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"Bearer x", b"Bearer x"));
        assert!(!constant_time_eq(b"Bearer x", b"Bearer y"));
        assert!(!constant_time_eq(b"Bearer", b"Bearer x"));
    }

    #[test]
    fn the_metadata_is_found_beside_the_audience_and_nowhere_a_header_says() {
        assert_eq!(
            metadata_url("https://mcp.example.com/mcp").as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(metadata_url("gadgets"), None);
        assert_eq!(metadata_url("urn:gadgets"), None);
    }
}
