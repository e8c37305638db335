//! Outbound HTTP over the standard `wasi:http/outgoing-handler`.
//!
//! The host sends every request, and only to the origins the operator
//! granted this plugin (its manifest asks under `[permissions] http`).
//! A refused request fails with [`HttpError::Denied`]; the host's log for
//! the call names the grant that would allow it. Redirects are not
//! followed: a 3xx comes back as it is, and a request to its `location`
//! is checked like any other.
//!
//! ```ignore
//! let page = gadget_sdk::http::get("https://api.example.com/v1/weather?city=Paris")?;
//! if page.status != 200 { ... }
//! let text = page.text();
//! ```

use wasi::http::outgoing_handler;
use wasi::http::types::{ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

/// A response, read whole (the host caps its size).
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names are lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The host's policy does not grant this origin or address, the call
    /// made too many requests, or the request carries a secret's
    /// placeholder where the secret may not go.
    Denied,
    /// The URL could not be used.
    InvalidUrl(String),
    /// The request failed: connection, timeout, a body over the host's cap.
    Failed(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Denied => f.write_str(
                "the host refused the request (the call's log says why and what would allow it: an origin or address not granted, the call's request cap, or a secret's placeholder where the secret may not go)",
            ),
            HttpError::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            HttpError::Failed(why) => write!(f, "request failed: {why}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, HttpError> {
    request("GET", url, &[], None)
}

/// Any request: a method, a URL, headers and an optional body.
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Response, HttpError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| HttpError::InvalidUrl(format!("'{url}' has no scheme")))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => return Err(HttpError::InvalidUrl(format!("scheme '{other}'"))),
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let invalid = |what: &str| HttpError::InvalidUrl(format!("{what} in '{url}'"));
    let entries: Vec<(String, Vec<u8>)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    let fields = Fields::from_list(&entries).map_err(|e| invalid(&format!("header {e:?}")))?;
    let outgoing = OutgoingRequest::new(fields);
    let method = match method.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "OPTIONS" => Method::Options,
        other => Method::Other(other.to_string()),
    };
    outgoing
        .set_method(&method)
        .map_err(|()| invalid("method"))?;
    outgoing
        .set_scheme(Some(&scheme))
        .map_err(|()| invalid("scheme"))?;
    outgoing
        .set_authority(Some(authority))
        .map_err(|()| invalid("host"))?;
    outgoing
        .set_path_with_query(Some(&path))
        .map_err(|()| invalid("path"))?;
    let outgoing_body = outgoing.body().map_err(|()| invalid("body"))?;
    let future = outgoing_handler::handle(outgoing, None).map_err(failed)?;
    // A request the host refuses is dropped at once, so writing its body
    // fails (the stream is closed): the answer says why, so a failed
    // write is reported only when the answer has nothing to say.
    let mut unsent = None;
    if let Some(body) = body {
        match outgoing_body.write() {
            Ok(stream) => {
                for chunk in body.chunks(4096) {
                    if let Err(e) = stream.blocking_write_and_flush(chunk) {
                        unsent = Some(format!("writing the body: {e:?}"));
                        break;
                    }
                }
                drop(stream);
            }
            Err(()) => unsent = Some("cannot write the body".into()),
        }
    }
    if let Err(code) = OutgoingBody::finish(outgoing_body, None) {
        unsent.get_or_insert_with(|| failed(code).to_string());
    }
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(response))) => match unsent {
            None => response,
            Some(why) => return Err(HttpError::Failed(why)),
        },
        Some(Ok(Err(code))) => return Err(failed(code)),
        Some(Err(())) | None => {
            return Err(HttpError::Failed(unsent.unwrap_or("no response".into())));
        }
    };
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_ascii_lowercase(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect();
    let incoming = response
        .consume()
        .map_err(|()| HttpError::Failed("no body".into()))?;
    let stream = incoming
        .stream()
        .map_err(|()| HttpError::Failed("no body stream".into()))?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 << 10) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(error)) => {
                return Err(match wasi::http::types::http_error_code(&error) {
                    Some(code) => failed(code),
                    None => {
                        HttpError::Failed(format!("reading the body: {}", error.to_debug_string()))
                    }
                });
            }
        }
    }
    Ok(Response {
        status,
        headers,
        body: bytes,
    })
}

fn failed(code: ErrorCode) -> HttpError {
    match code {
        ErrorCode::HttpRequestDenied => HttpError::Denied,
        ErrorCode::HttpResponseBodySize(Some(limit)) => HttpError::Failed(format!(
            "the response body is over the host's {limit}-byte limit"
        )),
        ErrorCode::ConnectionTimeout => {
            HttpError::Failed("timed out (the call's deadline, or the connection)".into())
        }
        ErrorCode::ConnectionTerminated => HttpError::Failed("the call was cancelled".into()),
        other => HttpError::Failed(format!("{other:?}")),
    }
}
