//! `gadget mcp`'s transport: rmcp's line-delimited stdio transport with
//! two answers it does not give.
//!
//! - **A message over `MAX_STDIO_MESSAGE_BYTES`** is cut off where it goes
//!   over (so rmcp never holds more than that), the rest of its line is
//!   skipped, and the client gets an error naming the limit, with the
//!   request's id when the id came before the cut. rmcp alone drops it with
//!   a log line, and the client waits forever.
//! - **A request whose id is already in flight** is refused with an error,
//!   and the first request keeps its answer. rmcp alone keys each call's
//!   cancellation by id: a second request with the same id takes the first
//!   one's place, the first answer cancels the second call, and the second
//!   answer is dropped without a word.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;

/// The largest message read from stdio, bytes: the same as the HTTP
/// server's request body, so both transports take the same calls.
pub const MAX_STDIO_MESSAGE_BYTES: usize = crate::http::MAX_REQUEST_BODY_BYTES;

/// How much of an oversized message is kept to find its id, bytes. JSON-RPC
/// clients write the id near the start; one written later gets an error
/// without an id.
const ID_SEARCH_BYTES: usize = 4 << 10;

/// The transport `gadget mcp` serves on: stdin and stdout.
pub fn transport() -> impl Transport<RoleServer, Error = std::io::Error> + 'static {
    GuardedLines::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
        MAX_STDIO_MESSAGE_BYTES,
    )
}

/// rmcp's transport over a capped reader, with the id bookkeeping.
pub struct GuardedLines<R: AsyncRead + Unpin, W: AsyncWrite> {
    inner: AsyncRwTransport<RoleServer, LineCap<R>, W>,
    /// Ids of the client's requests that have not been answered yet.
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
    /// Oversized messages, with the id found before the cut.
    oversized: mpsc::UnboundedReceiver<Option<RequestId>>,
    limit: usize,
}

impl<R, W> GuardedLines<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(read: R, write: W, limit: usize) -> Self {
        let (tell, oversized) = mpsc::unbounded_channel();
        let capped = LineCap::new(read, limit, tell);
        GuardedLines {
            inner: AsyncRwTransport::new_server(capped, write),
            in_flight: Arc::default(),
            oversized,
            limit,
        }
    }

    /// Sends an error straight to the client, beside rmcp's own traffic
    /// (rmcp's writer is behind a lock, so lines never interleave).
    fn refuse(&mut self, message: String, id: Option<RequestId>) {
        let send = self.inner.send(JsonRpcMessage::error(
            ErrorData::invalid_request(message, None),
            id,
        ));
        tokio::spawn(async move {
            if let Err(err) = send.await {
                tracing::debug!("could not send a refusal: {err}");
            }
        });
    }
}

/// What one turn of `receive` saw.
enum Received {
    Message(Option<Box<RxJsonRpcMessage<RoleServer>>>),
    Oversized(Option<RequestId>),
}

impl<R, W> Transport<RoleServer> for GuardedLines<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered {
            lock(&self.in_flight).remove(id);
        }
        self.inner.send(item)
    }

    // Cancel-safe, as rmcp requires (it polls `receive` in a `select!`):
    // both branches are, and nothing is awaited after a message is taken.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let received = tokio::select! {
                biased;
                Some(id) = self.oversized.recv() => Received::Oversized(id),
                message = self.inner.receive() => Received::Message(message.map(Box::new)),
            };
            let message = match received {
                Received::Oversized(id) => {
                    let limit = self.limit;
                    self.refuse(
                        format!(
                            "the message is over {limit} bytes (MAX_STDIO_MESSAGE_BYTES) and was not read"
                        ),
                        id,
                    );
                    continue;
                }
                Received::Message(message) => *message?,
            };
            match &message {
                JsonRpcMessage::Request(request)
                    if !lock(&self.in_flight).insert(request.id.clone()) =>
                {
                    let id = request.id.clone();
                    self.refuse(
                        format!(
                            "request id {id} is already in use by a request in flight: each request needs its own id (this one was not run)"
                        ),
                        Some(id),
                    );
                    continue;
                }
                // A cancelled request is never answered (rmcp drops its
                // response): the client may use its id again.
                JsonRpcMessage::Notification(notification) => {
                    if let ClientNotification::CancelledNotification(cancelled) =
                        &notification.notification
                        && let Some(id) = &cancelled.params.request_id
                    {
                        lock(&self.in_flight).remove(id);
                    }
                }
                _ => {}
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A reader that never lets a line grow past `limit` bytes: the byte that
/// goes over becomes a NUL and a newline (so the cut line is never valid
/// JSON and rmcp skips it), the rest of the line is dropped, and the id
/// found in the line's first bytes is told to `oversized`.
pub struct LineCap<R> {
    inner: R,
    limit: usize,
    /// Bytes of the current line so far.
    line: usize,
    /// The start of the current line, to find its id.
    start: Vec<u8>,
    /// Dropping the rest of an oversized line.
    discarding: bool,
    /// The newline that ends a cut line, not yet given out.
    newline_owed: bool,
    /// Bytes read after a cut, given out after its newline.
    held: Vec<u8>,
    oversized: mpsc::UnboundedSender<Option<RequestId>>,
}

impl<R> LineCap<R> {
    fn new(inner: R, limit: usize, oversized: mpsc::UnboundedSender<Option<RequestId>>) -> Self {
        LineCap {
            inner,
            limit: limit.max(1),
            line: 0,
            start: Vec::new(),
            discarding: false,
            newline_owed: false,
            held: Vec::new(),
            oversized,
        }
    }

    /// Filters bytes in place: how many are kept (moved to the front) and
    /// how many were looked at. It stops after cutting a line, so that the
    /// cut line's newline goes out before anything that follows it.
    fn filter(&mut self, bytes: &mut [u8]) -> (usize, usize) {
        let mut kept = 0;
        for at in 0..bytes.len() {
            let byte = bytes[at];
            if self.discarding {
                if byte == b'\n' {
                    self.discarding = false;
                    self.line = 0;
                    self.start.clear();
                }
                continue;
            }
            if byte == b'\n' {
                self.line = 0;
                self.start.clear();
                bytes[kept] = byte;
                kept += 1;
                continue;
            }
            self.line += 1;
            if self.line > self.limit {
                // The cut line ends in NUL (never valid JSON), then its
                // newline on the next read; the rest of it is dropped.
                bytes[kept] = 0;
                self.newline_owed = true;
                self.discarding = true;
                let _ = self.oversized.send(top_level_id(&self.start));
                return (kept + 1, at + 1);
            }
            if self.start.len() < ID_SEARCH_BYTES {
                self.start.push(byte);
            }
            bytes[kept] = byte;
            kept += 1;
        }
        (kept, bytes.len())
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if this.newline_owed {
            this.newline_owed = false;
            buf.put_slice(b"\n");
            return Poll::Ready(Ok(()));
        }
        loop {
            let before = buf.filled().len();
            if this.held.is_empty() {
                match Pin::new(&mut this.inner).poll_read(cx, buf) {
                    Poll::Ready(Ok(())) => {}
                    other => return other,
                }
                if buf.filled().len() == before {
                    return Poll::Ready(Ok(())); // end of input
                }
            } else {
                let take = this.held.len().min(buf.remaining());
                buf.put_slice(&this.held[..take]);
                this.held.drain(..take);
            }
            let region = &mut buf.filled_mut()[before..];
            let (kept, looked_at) = this.filter(region);
            // What follows a cut is looked at after the cut's newline.
            let rest = region[looked_at..].to_vec();
            this.held.splice(0..0, rest);
            buf.set_filled(before + kept);
            // Everything read was dropped: read again rather than return
            // nothing, which would mean the end of input.
            if kept > 0 {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

/// The `"id"` member of the top-level object at the start of a JSON-RPC
/// message, if the start holds all of it.
fn top_level_id(start: &[u8]) -> Option<RequestId> {
    let mut depth = 0usize;
    // Whether the next string at depth 1 is a key: after `{` or `,`.
    let mut key_next = false;
    let mut at = 0;
    while at < start.len() {
        match start[at] {
            b'{' | b'[' => {
                depth += 1;
                key_next = depth == 1 && start[at] == b'{';
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => key_next = depth == 1,
            b'"' => {
                let end = string_end(start, at)?;
                if key_next && depth == 1 && &start[at..=end] == b"\"id\"" {
                    let value = skip_space(start, end + 1);
                    if start.get(value) != Some(&b':') {
                        return None;
                    }
                    let value = skip_space(start, value + 1);
                    let value_end = match start.get(value)? {
                        b'"' => string_end(start, value)? + 1,
                        _ => {
                            value
                                + start[value..]
                                    .iter()
                                    .take_while(|b| b"-+.0123456789eE".contains(b))
                                    .count()
                        }
                    };
                    return serde_json::from_slice(&start[value..value_end]).ok();
                }
                key_next = false;
                at = end;
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// The index of the quote that closes the string opening at `open`.
fn string_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut at = open + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at),
            _ => at += 1,
        }
    }
    None
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| b.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[test]
    fn the_id_is_found_only_at_the_top_level() {
        let id = |s: &str| top_level_id(s.as_bytes());
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":7,"method":"x"#),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            id(r#"{ "id" : "a\"b", "method":"#),
            Some(RequestId::String("a\"b".into()))
        );
        // Ids inside parameters, in strings, or cut off are not the id.
        assert_eq!(id(r#"{"params":{"id":3},"method":"x"#), None);
        assert_eq!(id(r#"{"method":"\"id\":5","params":"#), None);
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":"unfinis"#), None);
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","params":{"a":[1,{"id":2}]},"id":9,"#),
            Some(RequestId::Number(9))
        );
        assert_eq!(id(""), None);
        assert_eq!(id("[[[[[[\"id\":1"), None);
    }

    /// Fuzz target: any bytes through the line cap: no line that comes out
    /// is longer than the cap allows, and input whose lines all fit comes
    /// out unchanged.
    #[test]
    fn fuzz_the_line_cap() {
        let seeds: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"X"}}"#,
            b"{\"id\":\"a\\\"b\",\"x\":[[[{}]]]}\n\n{\"id\":2}\r\n",
        ];
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        gadget_core::fuzz::run("line-cap", seeds, |input| {
            let _ = top_level_id(input);
            let limit = 1 + input.first().map_or(0, |&b| usize::from(b) % 64);
            let (tell, _told) = mpsc::unbounded_channel();
            let reader = tokio::io::BufReader::with_capacity(5, input);
            let mut out = Vec::new();
            runtime
                .block_on(LineCap::new(reader, limit, tell).read_to_end(&mut out))
                .unwrap();
            assert!(
                out.split(|&b| b == b'\n')
                    .all(|line| line.len() <= limit + 1)
            );
            if input.split(|&b| b == b'\n').all(|line| line.len() <= limit) {
                assert_eq!(out, input);
            }
        });
    }

    /// Fuzz target: client messages, mutated from real ones, into a real
    /// server (rmcp and this transport, an empty registry) over a socket;
    /// after each, the server still answers a ping: nothing a client
    /// writes stops or wedges the session.
    #[test]
    fn fuzz_mcp_requests() {
        use std::io::{BufRead as _, Write as _};
        let (client, server_end) = std::os::unix::net::UnixStream::pair().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.spawn(async move {
            server_end.set_nonblocking(true).unwrap();
            let stream = tokio::net::UnixStream::from_std(server_end).unwrap();
            let (read, write) = stream.into_split();
            let server = crate::GadgetServer::new(
                Arc::new(gadget_core::tool::Toolbox::new()),
                Arc::new(crate::metrics::Metrics::new()),
            );
            let transport = GuardedLines::new(read, write, 1 << 16);
            if let Ok(running) = rmcp::ServiceExt::serve(server, transport).await {
                let _ = running.waiting().await;
            }
        });
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let mut reader = std::io::BufReader::new(client.try_clone().unwrap());
        let mut writer = client;
        let answered = |reader: &mut std::io::BufReader<_>, id: &str| loop {
            let mut line = String::new();
            let read = reader
                .read_line(&mut line)
                .expect("the server stopped answering");
            assert!(read > 0, "the server closed the session");
            if line.contains(id) {
                break;
            }
        };
        writeln!(
            writer,
            r#"{{"jsonrpc":"2.0","id":"init","method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"fuzz","version":"1"}}}}}}"#
        )
        .unwrap();
        answered(&mut reader, "\"init\"");
        writeln!(
            writer,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        let seeds: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Calculator","arguments":{"a":1,"b":[{}]},"_meta":{"progressToken":"t"}}}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"debug"}}"#,
            br#"{"jsonrpc":"2.0","id":4,"result":{"action":"accept","content":{"answer":"y"}}}"#,
            br#"[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"ping"}]"#,
            br#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{"elicitation":{}},"clientInfo":{"name":"x","version":"1"}}}"#,
        ];
        let mut probe = 0u64;
        gadget_core::fuzz::run("mcp-requests", seeds, |input| {
            writer.write_all(input).unwrap();
            probe += 1;
            writeln!(
                writer,
                "\n{{\"jsonrpc\":\"2.0\",\"id\":\"probe-{probe}\",\"method\":\"ping\"}}"
            )
            .unwrap();
            answered(&mut reader, &format!("\"probe-{probe}\""));
        });
    }

    fn long_line() -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":4,"params":"{}"}}"#,
            "a".repeat(100)
        )
    }

    #[tokio::test]
    async fn an_oversized_line_is_cut_and_told_and_the_next_one_is_whole() {
        let long = long_line();
        let input = format!("{long}\n{{\"ok\":1}}\n{long}{long}\n\n");
        // Lines that cross reads, and a cut line and the next one in one read.
        for capacity in [7, 1 << 16] {
            let (tell, mut told) = mpsc::unbounded_channel();
            let reader = tokio::io::BufReader::with_capacity(capacity, input.as_bytes());
            let mut capped = LineCap::new(reader, 50, tell);
            let mut out = Vec::new();
            capped.read_to_end(&mut out).await.unwrap();
            check(String::from_utf8(out).unwrap(), &mut told).await;
        }
    }

    async fn check(out: String, told: &mut mpsc::UnboundedReceiver<Option<RequestId>>) {
        let long = long_line();
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines.len(), 5, "{out:?}");
        assert_eq!(lines[0].len(), 51);
        assert!(lines[0].ends_with('\0') && lines[0].starts_with(&long[..50]));
        assert_eq!(lines[1], "{\"ok\":1}");
        assert_eq!(lines[2].len(), 51);
        assert_eq!((lines[3], lines[4]), ("", ""));
        assert_eq!(told.recv().await, Some(Some(RequestId::Number(4))));
        assert_eq!(told.recv().await, Some(Some(RequestId::Number(4))));
        assert!(told.try_recv().is_err());
    }
}
