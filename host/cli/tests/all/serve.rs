//! `gadget serve` as an operator and a load balancer see it: the official
//! Python client over Streamable HTTP, health, metrics, authentication,
//! overload and draining, with raw HTTP where a client library would hide
//! what is on the wire.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::mcp::{check_answered_and_declined, check_scenario, client, policy, python, run_client};

/// A `gadget serve` on an ephemeral port, stopped when dropped.
pub(crate) struct Server {
    child: Child,
    port: u16,
}

impl Server {
    pub(crate) fn start(extra: &[&str], token: &str) -> Server {
        Server::start_with(extra, token, &[])
    }

    /// [`Server::start`] with more environment variables.
    pub(crate) fn start_with(extra: &[&str], token: &str, env: &[(&str, &str)]) -> Server {
        Server::start_plugins(&common::shipped_plugins(), extra, token, env)
    }

    /// [`Server::start_with`] serving the plugins under `plugins`.
    pub(crate) fn start_plugins(
        plugins: &std::path::Path,
        extra: &[&str],
        token: &str,
        env: &[(&str, &str)],
    ) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let config = policy(dir.path());
        Server::start_config(plugins, &config, extra, token, env)
    }

    /// [`Server::start_plugins`] under the policy file `config`.
    pub(crate) fn start_config(
        plugins: &std::path::Path,
        config: &std::path::Path,
        extra: &[&str],
        token: &str,
        env: &[(&str, &str)],
    ) -> Server {
        let mut serve = vec!["--auth-token-env", "TEST_TOKEN"];
        serve.extend_from_slice(extra);
        let mut env = env.to_vec();
        env.push(("TEST_TOKEN", token));
        Server::spawn(plugins, config, &[], &serve, &env)
    }

    /// The shipped plugins served under `config`, authenticating callers
    /// as `auth` says (`--auth-jwks ...`), the journal written to
    /// `journal`.
    pub(crate) fn start_jwt(
        config: &std::path::Path,
        auth: &[&str],
        journal: &std::path::Path,
    ) -> Server {
        Server::start_jwt_plugins(&common::shipped_plugins(), config, auth, journal)
    }

    /// [`Server::start_jwt`] serving the plugins under `plugins`.
    pub(crate) fn start_jwt_plugins(
        plugins: &std::path::Path,
        config: &std::path::Path,
        auth: &[&str],
        journal: &std::path::Path,
    ) -> Server {
        let global = ["--audit", journal.to_str().unwrap()];
        Server::spawn(plugins, config, &global, auth, &[])
    }

    /// `gadget GLOBAL serve --listen 127.0.0.1:0 SERVE`.
    pub(crate) fn spawn(
        plugins: &std::path::Path,
        config: &std::path::Path,
        global: &[&str],
        serve: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(common::gadget_bin())
            .arg("--plugins")
            .arg(plugins)
            .arg("--config")
            .arg(config)
            .args(global)
            .env("XDG_CACHE_HOME", dir.path())
            .envs(env.iter().copied())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(serve)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut port = None;
        for _ in 0..100 {
            let mut line = String::new();
            if stderr.read_line(&mut line).unwrap() == 0 {
                break;
            }
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                port = rest.split('/').next().and_then(|p| p.parse().ok());
                break;
            }
        }
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = stderr.read_to_string(&mut sink);
        });
        let _keep = dir.keep();
        Server {
            child,
            port: port.expect("the server said where it listens"),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// One HTTP/1.1 request; the status, headers and body.
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String, String) {
        self.request_to("127.0.0.1", method, path, headers, body)
    }

    /// [`Server::request`] naming `host` in its `Host` header.
    pub(crate) fn request_to(
        &self,
        host: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, head.to_string(), body.to_string())
    }

    /// A stateless `tools/call` of protocol 2026-07-28, as the direct path
    /// takes it, with `authorization` (a whole header value) if any.
    pub(crate) fn call_tool(
        &self,
        authorization: Option<&str>,
        name: &str,
        arguments: &str,
    ) -> (u16, String, String) {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ];
        if let Some(authorization) = authorization {
            headers.push(("Authorization", authorization));
        }
        let body = modern_call(name, arguments, "{}", false);
        self.request("POST", "/mcp", &headers, &body)
    }

    /// Ends the server at once (SIGKILL): no drain, nothing said.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn metrics(&self) -> String {
        self.request("GET", "/metrics", &[("Authorization", "Bearer s3cret")], "")
            .2
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_python_mcp_client_over_http_and_what_an_operator_sees() {
    let server = Server::start(&[], "s3cret");
    let report = run_client(&["http", &server.url(), "s3cret"]);
    check_scenario(&report);

    let (status, _, body) = server.request("GET", "/healthz", &[], "");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, _, _) = server.request("GET", "/readyz", &[], "");
    assert_eq!(status, 200);
    // No token, a wrong token: 401, counted.
    let (status, head, _) = server.request("POST", "/mcp", &[], "{}");
    assert_eq!(status, 401);
    assert!(
        head.to_lowercase().contains("www-authenticate: bearer"),
        "{head}"
    );
    let (status, _, _) = server.request("GET", "/metrics", &[("Authorization", "Bearer nope")], "");
    assert_eq!(status, 401);
    let metrics = server.metrics();
    assert!(
        metrics.contains("gadget_calls_total{gadget=\"Calculator\",outcome=\"ok\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gadget_calls_total{gadget=\"Sleep\",outcome=\"cancelled\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gadget_calls_total{gadget=\"Sleep\",outcome=\"timeout\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gadget_calls_total{gadget=\"(unknown)\",outcome=\"rejected\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gadget_requests_refused_total{reason=\"unauthorized\"} 2"),
        "{metrics}"
    );
    assert!(metrics.contains("gadget_calls_in_flight 0"), "{metrics}");
}

#[test]
fn ask_human_is_a_stateless_round_trip_over_http() {
    let server = Server::start(&[], "s3cret");
    let report = run_client(&["ask-http", &server.url(), "s3cret"]);
    // The modern protocol: the answer comes back in a second, independent
    // request (any replica could take it).
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    // A client that did not declare elicitation is told what the call
    // needs (-32021, MissingRequiredClientCapability), as 2026-07-28 asks.
    let refused = report
        .as_object()
        .unwrap()
        .get("no_elicitation")
        .cloned()
        .unwrap();
    assert_eq!(refused["error_code"], -32021, "{report}");
    assert!(
        refused["data"]["requiredCapabilities"]["elicitation"].is_object(),
        "{report}"
    );
    check_answered_and_declined(&report);
    let metrics = server.metrics();
    for (outcome, n) in [("input-required", 2), ("ask-human", 1), ("human-input", 2)] {
        assert!(
            metrics.contains(&format!(
                "gadget_calls_total{{gadget=\"AskUser\",outcome=\"{outcome}\"}} {n}"
            )),
            "{outcome}: {metrics}"
        );
    }
    assert!(metrics.contains("gadget_calls_in_flight 0"), "{metrics}");
}

/// Starts one long call through the Python client in the background.
fn long_call(server: &Server, ms: u64) -> Child {
    Command::new(python())
        .arg(client())
        .args([
            "call",
            &server.url(),
            "s3cret",
            "Sleep",
            &format!("{{\"ms\": {ms}}}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// What a long call printed, once it has ended.
fn finish(mut call: Child) -> String {
    let mut out = String::new();
    if let Some(mut stdout) = call.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    let _ = call.wait();
    out
}

fn wait_for_in_flight(server: &Server, n: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server
        .metrics()
        .contains(&format!("gadget_calls_in_flight {n}"))
    {
        assert!(
            Instant::now() < deadline,
            "no call in flight: {}",
            server.metrics()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_full_server_answers_503_with_retry_after_and_never_queues() {
    let server = Server::start(&["--max-concurrent-calls", "1"], "s3cret");
    let first = long_call(&server, 2500);
    wait_for_in_flight(&server, 1);
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Calculator","arguments":{"operation":"add","a":1,"b":2}}}"#;
    let started = Instant::now();
    let (status, head, _) = server.request(
        "POST",
        "/mcp",
        &[
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
        ],
        call,
    );
    assert_eq!(status, 503, "{head}");
    assert!(head.to_lowercase().contains("retry-after: 1"), "{head}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused at once"
    );
    // Listing still works while the slot is taken.
    let list = r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#;
    let (status, _, _) = server.request(
        "POST",
        "/mcp",
        &[
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
        ],
        list,
    );
    assert_ne!(status, 503);
    let out = finish(first);
    assert!(out.contains("slept 2500 ms"), "{out}");
    assert!(
        server
            .metrics()
            .contains("gadget_requests_refused_total{reason=\"overload\"} 1")
    );
}

#[test]
fn sigterm_drains_calls_in_flight_then_cancels_what_is_left() {
    // A drain long enough: the call finishes, then the server exits.
    let mut server = Server::start(&["--drain-timeout", "10000"], "s3cret");
    let call = long_call(&server, 1500);
    wait_for_in_flight(&server, 1);
    // SAFETY: kill(2) on the server's pid with SIGTERM, as an orchestrator would.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let out = finish(call);
    assert!(
        out.contains("slept 1500 ms") && out.contains("\"is_error\": false"),
        "{out}"
    );
    assert!(server.child.wait().unwrap().success());

    // A short drain: the call still running gets the abort signal.
    let mut server = Server::start(&["--drain-timeout", "300"], "s3cret");
    let call = long_call(&server, 2900);
    wait_for_in_flight(&server, 1);
    let started = Instant::now();
    // SAFETY: as above.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let out = finish(call);
    assert!(
        out.contains("\"is_error\": true") && out.contains("cancelled"),
        "{out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(server.child.wait().unwrap().success());
}

#[test]
fn serving_beyond_loopback_needs_a_token() {
    let out = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without authentication"),
        "{stderr}"
    );
}

/// A token as files and Kubernetes secrets give it (a trailing newline) is
/// trimmed and required; one that cannot be a header is a start-up error,
/// never "no authentication", on any interface.
#[test]
fn a_configured_token_is_never_turned_off() {
    let server = Server::start(&[], "s3cret\r\n");
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let (status, _, _) = server.request("POST", "/mcp", &[], call);
    assert_eq!(status, 401);
    assert!(server.metrics().contains("gadget_calls_in_flight 0"));

    for token in ["to\nken", "\n", "tök"] {
        let out = Command::new(common::gadget_bin())
            .arg("--plugins")
            .arg(common::shipped_plugins())
            .env("TEST_TOKEN", token)
            .args([
                "serve",
                "--listen",
                "0.0.0.0:0",
                "--auth-token-env",
                "TEST_TOKEN",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{token:?} started: {stderr}");
        assert!(stderr.contains("--auth-token-env TEST_TOKEN"), "{stderr}");
        assert!(!stderr.contains("serving"), "{stderr}");
    }
}

/// A 2026-07-28 client's `subscriptions/listen` stream is acknowledged
/// with the filter the server accepts, and told when a reload (SIGHUP)
/// changed the tool list, tagged with the subscription's id.
#[test]
fn a_listen_stream_is_told_when_a_reload_changes_the_tools() {
    let server = Server::start(&[], "s3cret");
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": true},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
            }
        }
    })
    .to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut lines = BufReader::new(stream).lines();
    let mut next_message = |what: &str| -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let Some(Ok(line)) = lines.next() else {
                panic!("the stream ended before {what}")
            };
            if let Some(data) = line.strip_prefix("data:")
                && let Ok(message) = serde_json::from_str::<serde_json::Value>(data.trim())
                && message["method"] == what
            {
                return message;
            }
        }
        panic!("no {what} within 20 s")
    };
    let ack = next_message("notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"], true,
        "{ack}"
    );
    // SAFETY: kill(2) on the server's pid with SIGHUP, as an operator would.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGHUP) };
    let changed = next_message("notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen-1",
        "{changed}"
    );
}

#[test]
fn the_typescript_sdks_client_lists_and_calls_over_http() {
    let server = Server::start(&[], "s3cret");
    crate::mcp::run_ts_client(&["http", &server.url(), "s3cret"]);
}

/// A 2026-07-28 `tools/call` of `name` with `arguments`, the client
/// declaring `capabilities` (and, when given, a progress token).
fn modern_call(name: &str, arguments: &str, capabilities: &str, progress: bool) -> String {
    let token = if progress {
        r#","progressToken":"p1""#
    } else {
        ""
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{name}","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{capabilities}{token}}}}}}}"#
    )
}

/// The JSON-RPC messages of a response (one JSON body, or SSE `data:`
/// lines), with what differs between two answers of one request (a
/// signed, timestamped `requestState`, a progress message's milliseconds)
/// taken out.
fn messages(body: &str) -> Vec<serde_json::Value> {
    fn scrub(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(fields) => {
                fields.remove("requestState");
                if fields.contains_key("progressToken") {
                    fields.remove("message");
                }
                fields.values_mut().for_each(scrub);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    let texts: Vec<&str> = match body.trim_start().starts_with('{') {
        true => vec![body],
        false => body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect(),
    };
    texts
        .into_iter()
        .map(|text| {
            let mut value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            scrub(&mut value);
            value
        })
        .collect()
}

#[test]
fn the_direct_path_answers_as_the_sdk_does() {
    let server = Server::start(&[], "s3cret");
    let elicit = r#"{"elicitation":{"form":{}}}"#;
    let cases = [
        (
            "Calculator",
            r#"{"operation":"add","a":2,"b":3}"#,
            "{}",
            false,
        ),
        (
            "Calculator",
            r#"{"operation":"add","a":"two"}"#,
            "{}",
            false,
        ),
        ("NoSuchGadget", "{}", "{}", false),
        // A question without the capability to ask it: -32021, HTTP 400.
        ("AskUser", r#"{"question":"Which?"}"#, "{}", false),
        ("AskUser", r#"{"question":"Which?"}"#, elicit, false),
        // Progress before the result: an SSE stream of both.
        ("Sleep", r#"{"ms":1100}"#, "{}", true),
    ];
    for (name, arguments, capabilities, progress) in cases {
        let body = modern_call(name, arguments, capabilities, progress);
        let answer = |accept: &str| {
            let (status, head, body) = server.request(
                "POST",
                "/mcp",
                &[
                    ("Authorization", "Bearer s3cret"),
                    ("Content-Type", "application/json"),
                    ("Accept", accept),
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", name),
                ],
                &body,
            );
            let kind = head
                .lines()
                .find_map(|l| l.strip_prefix("content-type: "))
                .unwrap_or_default()
                .to_string();
            (status, kind, messages(&body))
        };
        // The same request, once as the direct path takes it and once with
        // a weighted Accept header (the same meaning), which it leaves to rmcp.
        let direct = answer("application/json, text/event-stream");
        let sdk = answer("application/json;q=1, text/event-stream");
        assert_eq!(direct, sdk, "{name} {arguments} {capabilities}");
    }
    let progress = modern_call("Sleep", r#"{"ms":1100}"#, "{}", true);
    let (_, head, body) = server.request(
        "POST",
        "/mcp",
        &[
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "Sleep"),
        ],
        &progress,
    );
    assert!(head.contains("text/event-stream"), "{head}");
    let sent = messages(&body);
    assert_eq!(sent[0]["method"], "notifications/progress", "{body}");
    assert_eq!(sent.last().unwrap()["result"]["isError"], false, "{body}");
    let metrics = server.metrics();
    for (path, n) in [("direct", 7), ("sdk", 6)] {
        assert!(
            metrics.contains(&format!("gadget_mcp_requests_total{{path=\"{path}\"}} {n}")),
            "{path}: {metrics}"
        );
    }
}

#[test]
fn what_the_direct_path_does_not_know_is_the_sdks() {
    let server = Server::start(&[], "s3cret");
    let body = modern_call(
        "Calculator",
        r#"{"operation":"add","a":2,"b":3}"#,
        "{}",
        false,
    );
    let base = [
        ("Authorization", "Bearer s3cret"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "Calculator"),
    ];
    // Each a header the SDK reads and refuses: it does so on either path.
    for (header, value, status) in [
        ("Mcp-Name", "Sleep", 400),
        ("Mcp-Method", "tools/list", 400),
        ("MCP-Protocol-Version", "2025-11-25", 400),
        ("Accept", "application/json", 406),
        ("Content-Type", "text/plain", 415),
    ] {
        let headers: Vec<(&str, &str)> = base
            .iter()
            .map(|&(name, v)| {
                if name == header {
                    (name, value)
                } else {
                    (name, v)
                }
            })
            .collect();
        let (got, _, answer) = server.request("POST", "/mcp", &headers, &body);
        assert_eq!(got, status, "{header}: {value}: {answer}");
    }
    // A Host the server does not answer to (DNS rebinding) is refused.
    let (status, _, answer) = server.request_to("evil.example", "POST", "/mcp", &base, &body);
    assert_eq!(status, 403, "{answer}");
    let metrics = server.metrics();
    assert!(
        metrics.contains("gadget_mcp_requests_total{path=\"direct\"} 0"),
        "{metrics}"
    );
}
