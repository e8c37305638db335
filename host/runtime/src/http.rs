//! Outbound HTTP for gadgets: the standard `wasi:http/outgoing-handler`,
//! every request sent by the host's reqwest client behind the policy.
//!
//! A gadget uses its language's own wasi:http client; the host decides.
//! Before any connection, a request must match one of the plugin's granted
//! origins (scheme, host with `*.` wildcards, port), and the methods and
//! paths that grant names when it names some, and the call must have
//! requests left ([`MAX_HTTP_REQUESTS_PER_CALL`]). The name is resolved by
//! the plugin's own client, whose resolver drops every internal address
//! (loopback, private, link-local, ...) the operator did not allow, so a
//! granted name cannot be pointed at the host's network through DNS. An
//! address literal is checked the same way, unless the grant names that
//! very address. Redirects are not followed: the gadget sees the 3xx and a
//! request to the new place is checked like any other. Response bodies are
//! capped ([`MAX_HTTP_RESPONSE_BYTES`]); a request ends at the call's
//! deadline or when the call is cancelled (the abort signal), and never
//! outlives the call (dropping the call's store aborts its requests).
//!
//! A plugin's brokered secrets are put on its requests here, as the
//! operator bound them ([`crate::grants::broker_request`]): the value on
//! requests to its origins, a request carrying its placeholder anywhere
//! else refused, and the value scrubbed from what comes back.
//!
//! A refused request is a `wasi:http` error the gadget sees
//! (`HTTP-request-denied`) and a host log line on the call that names the
//! grant that would allow it.
//!
//! Every request, sent or refused, is told to the call's observer as an
//! [`Effect::Http`] (method, origin, path without its query, status, bytes
//! each way, duration) when its response body ends or is dropped: the
//! audit journal and `--json` see it.

use gadget_core::signal::AbortSignal;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error as HttpError, WasiBody, WasiHttpHooks};

use gadget_core::effect::Effect;
use gadget_core::ledger::{CallEvent, CallObserver};
use gadget_core::redact::Redactor;

use crate::grants::{
    Brokered, CallGrants, HttpRefusal, IpRange, Scrubber, broker_request, is_internal,
};
use crate::notes::Note;

/// Requests one call may make: enough for any honest tool (a page and its
/// redirects, a few API calls), few enough that a gadget cannot turn the
/// host into a crawler or a flood.
pub const MAX_HTTP_REQUESTS_PER_CALL: u32 = 64;

/// Largest response body a gadget may read, in bytes: a page or an API
/// answer fits many times over; a gadget cannot make the host buffer a
/// download of any size.
pub const MAX_HTTP_RESPONSE_BYTES: u64 = 16 << 20;

/// Largest request body a gadget may send, in bytes (it is buffered before
/// sending).
pub const MAX_HTTP_REQUEST_BYTES: usize = 8 << 20;

/// Longest wait for a connection: an unreachable host fails well before
/// most deadlines.
pub const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The hooks wasmtime-wasi-http calls for one call's requests.
pub(crate) struct HttpHooks {
    pub(crate) grants: Option<Arc<CallGrants>>,
    pub(crate) requests: u32,
    pub(crate) deadline: Instant,
    pub(crate) signal: Option<AbortSignal>,
    /// Refusals and failures to note on the call (drained into its log).
    pub(crate) notes: crate::notes::Notes,
    /// Told each request as an effect.
    pub(crate) observer: Option<CallObserver>,
    /// The caller's span (W3C `traceparent`), sent on every request.
    pub(crate) trace_parent: Option<Arc<str>>,
    /// The operator's deny rules on the gadget's URL parameters: each
    /// request (a redirect the gadget follows is one) is held to them too.
    pub(crate) denials: Option<gadget_core::approval::RequestDenials>,
}

/// One request as the observer is told it: filled in as it goes, told
/// once, when dropped (the response body ended, the gadget dropped it, or
/// the call's store went away).
struct Exchange {
    observer: Option<CallObserver>,
    redactor: Option<Arc<Redactor>>,
    method: String,
    origin: String,
    path: String,
    status: Option<u16>,
    bytes_out: u64,
    bytes_in: u64,
    started: Instant,
    refused: Option<String>,
    error: Option<String>,
}

impl Exchange {
    fn new(hooks: &HttpHooks, request: &http::Request<WasiBody>) -> Exchange {
        let uri = request.uri();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let host = uri.host().unwrap_or_default().to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Exchange {
            observer: hooks.observer.clone(),
            redactor: hooks.grants.as_ref().map(|g| g.redactor.clone()),
            method: request.method().to_string(),
            origin: crate::grants::origin_text(https, &host, port),
            path: uri.path().to_string(),
            status: None,
            bytes_out: 0,
            bytes_in: 0,
            started: Instant::now(),
            refused: None,
            error: None,
        }
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let Some(observer) = &self.observer else {
            return;
        };
        // A secret a gadget put in a URL or an error stays out of the record.
        let clean = |text: String| match &self.redactor {
            Some(redactor) => redactor.string(text),
            None => text,
        };
        observer(&CallEvent::Effect(Effect::Http {
            method: std::mem::take(&mut self.method),
            origin: clean(std::mem::take(&mut self.origin)),
            path: clean(std::mem::take(&mut self.path)),
            status: self.status,
            bytes_out: self.bytes_out,
            bytes_in: self.bytes_in,
            duration_ms: self.started.elapsed().as_secs_f64() * 1e3,
            refused: self.refused.take().map(clean),
            error: self.error.take().map(clean),
        }));
    }
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl HttpHooks {
    /// The client to send with and the plugin's secrets put on the
    /// request, or why the request is refused.
    fn admit(
        &mut self,
        request: &mut http::Request<WasiBody>,
    ) -> Result<(reqwest::Client, Option<Brokered>), String> {
        let (method, uri) = (request.method(), request.uri());
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let host = uri.host().unwrap_or_default().to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let Some(grants) = &self.grants else {
            // A call made without a plugin's grants (an embedder's own
            // `CallRequest`) may reach nothing.
            return Err(format!(
                "HTTP to {} refused: this call was made with no grants",
                crate::grants::origin_text(https, &host, port)
            ));
        };
        let plugin = &grants.plugin;
        if let Some(reason) = self
            .denials
            .as_ref()
            .and_then(|d| d.refusal(&uri.to_string()))
        {
            return Err(format!(
                "{plugin}: refused a request to {uri}: the operator's deny rule holds for the call's requests too: {reason}"
            ));
        }
        let rules = &grants.grants.http;
        let rule = rules
            .check_request(plugin, method.as_str(), https, &host, port, uri.path())
            .map_err(|e| e.to_string())?;
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(address) = literal.parse::<IpAddr>() {
            rules
                .check_address(plugin, rule, &host, address)
                .map_err(|e| e.to_string())?;
        }
        if self.requests >= MAX_HTTP_REQUESTS_PER_CALL {
            return Err(format!(
                "{plugin}: refused a request to {}: the call made {MAX_HTTP_REQUESTS_PER_CALL} requests, the most one call may make",
                crate::grants::origin_text(https, &host, port)
            ));
        }
        // Last, on the request as admitted: a refusal here is for what it
        // carries, not where it goes.
        let brokered = if grants.grants.brokered.is_empty() {
            None
        } else {
            let method = request.method().clone();
            let mut uri = request.uri().clone();
            let brokered = broker_request(
                &grants.grants.brokered,
                plugin,
                &method,
                &mut uri,
                request.headers_mut(),
            )?;
            *request.uri_mut() = uri;
            Some(brokered)
        };
        self.requests += 1;
        let client = http_client(grants).map_err(|e| format!("{plugin}: {e}"))?;
        Ok((client, brokered))
    }
}

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let mut exchange = Exchange::new(self, &request);
        // As the gadget wrote it: after brokering, the URL may hold a
        // secret (percent-encoded, which no redactor would recognise).
        let shown = request.uri().to_string();
        let (client, brokered) = match self.admit(&mut request) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                self.notes.refused("refused an HTTP request: ", &refusal);
                exchange.refused = Some(refusal);
                drop(exchange);
                // The body the guest is still writing is read (and thrown
                // away, within the request cap and the call's deadline)
                // before the refusal is answered: a guest whose write
                // failed on a closed stream would see that, not the
                // refusal (Python's SDK raised it; StarlingMonkey's fetch
                // aborted the instance).
                let (deadline, signal) = (self.deadline, self.signal.clone());
                return Box::new(async move {
                    let mut body = request.into_body();
                    let _ = bounded(collect(&mut body), deadline, signal).await;
                    Err(HttpError::HttpRequestDenied)
                });
            }
        };
        // The host's span is the trace's truth: a header the gadget wrote
        // itself is replaced, never merged.
        if let Some(trace_parent) = &self.trace_parent
            && let Ok(value) = http::HeaderValue::from_str(trace_parent)
        {
            request.headers_mut().insert("traceparent", value);
        }
        let deadline = self.deadline;
        let signal = self.signal.clone();
        let notes = self.notes.clone();
        Box::new(async move {
            // The request body stays alive until the failure is noted: its
            // end is what the gadget sees, and the call must not end (and
            // its notes be collected) before the reason is written down.
            let (parts, mut body) = request.into_parts();
            let door = Door {
                shown,
                deadline,
                signal,
                brokered,
            };
            let sent = send(client, parts, &mut body, door, exchange).await;
            drop(body);
            sent.map_err(|(error, note)| {
                notes.push(note);
                error
            })
        })
    }
}

/// What one admitted request is held to on its way: the call's deadline
/// and abort signal, and the secrets it carries.
struct Door {
    /// The request's URL as the gadget wrote it, for messages.
    shown: String,
    deadline: Instant,
    signal: Option<AbortSignal>,
    brokered: Option<Brokered>,
}

/// Sends one admitted request; an error carries the code the gadget sees
/// and the call's note of it.
async fn send(
    client: reqwest::Client,
    parts: http::request::Parts,
    body: &mut WasiBody,
    door: Door,
    mut exchange: Exchange,
) -> Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    (HttpError, Note),
> {
    let Door {
        shown: target,
        deadline,
        signal,
        brokered,
    } = door;
    let mut fail = |error: HttpError, why: String| {
        exchange.error = Some(why.clone());
        let note = match (&error, why.strip_prefix("refused: ")) {
            // The policy refused the address the name resolved to.
            (HttpError::HttpRequestDenied, Some(reason)) => {
                Note::refusal(&format!("HTTP {target}: refused: "), reason)
            }
            _ => Note::plain(format!("HTTP {target}: {why}")),
        };
        (error, note)
    };
    let body = match bounded(collect(body), deadline, signal.clone()).await {
        Ok(Ok(body)) => body,
        Ok(Err((e, why))) | Err((e, why)) => return Err(fail(e, why)),
    };
    if let Some(refusal) = brokered.as_ref().and_then(|b| b.body_refusal(&body)) {
        exchange.refused = Some(refusal.clone());
        return Err((
            HttpError::HttpRequestDenied,
            Note::refusal("refused an HTTP request: ", &refusal),
        ));
    }
    let scrubber = brokered.and_then(|b| Scrubber::new(&b.carried));
    let bytes_out = body.len() as u64;
    let url = reqwest::Url::parse(&parts.uri.to_string())
        .map_err(|e| fail(HttpError::HttpRequestUriInvalid, e.to_string()))?;
    let mut outgoing = reqwest::Request::new(parts.method, url);
    let mut headers = parts.headers;
    headers.remove(http::header::HOST);
    *outgoing.headers_mut() = headers;
    *outgoing.body_mut() = Some(body.into());
    let response = bounded(client.execute(outgoing), deadline, signal.clone())
        .await
        .map_err(|(e, why)| fail(e, why))?
        .map_err(|error| {
            let (code, why) = classify(&error.without_url());
            fail(code, why)
        })?;
    // The scrubber reads the bytes as sent: an encoded answer would carry
    // the secret in a form only the gadget's decoder would show.
    if scrubber.is_some()
        && let Some(coding) = encoded(response.headers())
    {
        let why = format!(
            "refused the response: the request carried a secret and the origin answered with Content-Encoding {coding}, which the host cannot scrub (it asked for identity)"
        );
        exchange.refused = Some(why.clone());
        return Err((
            HttpError::HttpResponseContentCoding(Some(coding)),
            Note::refusal(&format!("HTTP {target}: "), &why),
        ));
    }
    let mut builder = http::Response::builder()
        .status(response.status())
        .version(response.version());
    if let Some(headers) = builder.headers_mut() {
        *headers = response.headers().clone();
        if let Some(scrubber) = &scrubber {
            // The scrubbed body's length is not the one announced.
            headers.remove(http::header::CONTENT_LENGTH);
            for value in headers.values_mut() {
                *value = scrubber.header(value);
            }
        }
    }
    exchange.bytes_out = bytes_out;
    exchange.status = Some(response.status().as_u16());
    let body = capped_body(response, deadline, signal, exchange, scrubber);
    let response = builder.body(body).map_err(|e| {
        (
            HttpError::InternalError(Some(e.to_string())),
            Note::plain(format!("HTTP {target}: {e}")),
        )
    })?;
    Ok((response, Box::new(async { Ok(()) })))
}

/// The response's content coding when it is not `identity` (a
/// `Content-Encoding` of one or more codings, or one that is not text).
fn encoded(headers: &http::HeaderMap) -> Option<String> {
    let codings: Vec<String> = headers
        .get_all(http::header::CONTENT_ENCODING)
        .iter()
        .map(|v| {
            v.to_str()
                .unwrap_or("(not text)")
                .trim()
                .to_ascii_lowercase()
        })
        .flat_map(|v| {
            v.split(',')
                .map(|c| c.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty() && c != "identity")
        .collect();
    (!codings.is_empty()).then(|| codings.join(", "))
}

/// The request body, buffered up to [`MAX_HTTP_REQUEST_BYTES`].
async fn collect(body: &mut WasiBody) -> Result<Bytes, (HttpError, String)> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            let why = e.to_string();
            (e, why)
        })?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > MAX_HTTP_REQUEST_BYTES {
                return Err((
                    HttpError::HttpRequestBodySize(Some(MAX_HTTP_REQUEST_BYTES as u64)),
                    format!("request body over the {MAX_HTTP_REQUEST_BYTES}-byte limit"),
                ));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes.into())
}

/// Runs `work` until the call's deadline or its cancellation, whichever
/// comes first.
async fn bounded<T>(
    work: impl Future<Output = T>,
    deadline: Instant,
    signal: Option<AbortSignal>,
) -> Result<T, (HttpError, String)> {
    let cancelled = gadget_core::signal::raised(signal.as_ref());
    tokio::select! {
        done = work => Ok(done),
        _ = tokio::time::sleep_until(deadline.into()) => Err((
            HttpError::ConnectionTimeout,
            "stopped at the call's deadline".into(),
        )),
        _ = cancelled => Err((
            HttpError::ConnectionTerminated,
            "stopped: the call was cancelled".into(),
        )),
    }
}

/// The response body as the guest reads it: capped, ended at the
/// deadline or on cancellation, and scrubbed of the secrets the request
/// carried.
fn capped_body(
    response: reqwest::Response,
    deadline: Instant,
    signal: Option<AbortSignal>,
    exchange: Exchange,
    scrubber: Option<Scrubber>,
) -> WasiBody {
    // The exchange rides along and is told when the body ends or is dropped.
    let state = (response, exchange, scrubber, false);
    let stream = futures_util::stream::unfold(state, move |state| {
        let (mut response, mut exchange, mut scrubber, done) = state;
        let signal = signal.clone();
        async move {
            if done {
                return None;
            }
            let next = bounded(response.chunk(), deadline, signal).await;
            let item = match next {
                Err((error, why)) => {
                    exchange.error = Some(why);
                    Err(error)
                }
                Ok(Err(error)) => {
                    let (code, why) = classify(&error.without_url());
                    exchange.error = Some(why);
                    Err(code)
                }
                Ok(Ok(None)) => {
                    // What the scrubber held back, waiting for more.
                    let held = scrubber.as_mut().map(Scrubber::finish)?;
                    if held.is_empty() {
                        return None;
                    }
                    let frame = http_body::Frame::data(Bytes::from(held));
                    return Some((Ok(frame), (response, exchange, None, true)));
                }
                Ok(Ok(Some(chunk))) => {
                    let read = exchange.bytes_in + chunk.len() as u64;
                    if read > MAX_HTTP_RESPONSE_BYTES {
                        exchange.error = Some(format!(
                            "the response body is over {MAX_HTTP_RESPONSE_BYTES} bytes"
                        ));
                        Err(HttpError::HttpResponseBodySize(Some(
                            MAX_HTTP_RESPONSE_BYTES,
                        )))
                    } else {
                        exchange.bytes_in = read;
                        let chunk = match scrubber.as_mut() {
                            Some(scrubber) => Bytes::from(scrubber.chunk(&chunk)),
                            None => chunk,
                        };
                        return Some((
                            Ok(http_body::Frame::data(chunk)),
                            (response, exchange, scrubber, false),
                        ));
                    }
                }
            };
            // An error ends the body.
            Some((item, (response, exchange, scrubber, true)))
        }
    });
    http_body_util::StreamBody::new(stream).boxed_unsync()
}

/// The wasi:http error for a failed send, and why in words (naming the
/// grant when the policy refused the address).
fn classify(error: &reqwest::Error) -> (HttpError, String) {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(refusal) = cause.downcast_ref::<HttpRefusal>() {
            return (HttpError::HttpRequestDenied, format!("refused: {refusal}"));
        }
        source = cause.source();
    }
    let why = error_chain(error);
    let code = if error.is_timeout() {
        HttpError::ConnectionTimeout
    } else if error.is_connect() {
        HttpError::ConnectionRefused
    } else if error.is_body() || error.is_decode() {
        HttpError::HttpResponseIncomplete
    } else {
        HttpError::InternalError(Some(why.clone()))
    };
    (code, why)
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The plugin's HTTP client, built once per plugin (kept in its grants).
fn http_client(grants: &CallGrants) -> Result<reqwest::Client, String> {
    grants
        .client
        .get_or_init(|| build_client(&grants.plugin, &grants.grants.http.addresses))
        .clone()
}

/// Builds a plugin's HTTP client: rustls, no proxy from the environment
/// (it would bypass the address checks), no redirects, and a resolver that
/// drops the internal addresses the operator did not allow.
pub(crate) fn build_client(plugin: &str, allowed: &[IpRange]) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(HTTP_CONNECT_TIMEOUT)
        .dns_resolver(Arc::new(PolicyResolver {
            plugin: plugin.to_string(),
            allowed: allowed.to_vec(),
        }))
        .user_agent(concat!("gadget-host/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// Resolves names for one plugin's client, keeping only the addresses the
/// policy lets it reach. The check happens on the very addresses the
/// client connects to, so a name that changes its answer between a check
/// and the connection (DNS rebinding) gains nothing.
struct PolicyResolver {
    plugin: String,
    allowed: Vec<IpRange>,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let plugin = self.plugin.clone();
        let allowed = self.allowed.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let permitted: Vec<SocketAddr> = found
                .iter()
                .filter(|a| !is_internal(a.ip()) || allowed.iter().any(|r| r.contains(a.ip())))
                .copied()
                .collect();
            match (permitted.is_empty(), found.first()) {
                (true, Some(refused)) => Err(Box::new(HttpRefusal::Address {
                    plugin,
                    host,
                    address: refused.ip(),
                })
                    as Box<dyn std::error::Error + Send + Sync>),
                _ => Ok(Box::new(permitted.into_iter()) as reqwest::dns::Addrs),
            }
        }) as Pin<Box<_>>
    }
}
