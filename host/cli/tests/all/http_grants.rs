//! The HTTP door, with a local server on 127.0.0.1: granted origins and
//! nothing else, no SSRF through DNS, no redirects, capped bodies and
//! requests, the deadline and abort signal, and the SDKs of each language.

use serde_json::Value;

use crate::capabilities::{call_json, error_message, probe_plugin, run};
use crate::cli::{stderr, stdout};
use crate::common;

/// A small HTTP/1.1 server on 127.0.0.1 for the HTTP tests: a few routes,
/// a count of the requests it got, and it stops when dropped.
pub(crate) struct TestServer {
    port: u16,
    hits: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The `traceparent` header of each request that carried one.
    trace_parents: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Each request's head as it arrived: its request line and headers.
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl TestServer {
    pub(crate) fn start() -> TestServer {
        use std::io::{BufRead, BufReader, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let trace_parents = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (hits_seen, stopping) = (hits.clone(), stop.clone());
        let parents_seen = trace_parents.clone();
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let heads_seen = heads.clone();
        std::thread::spawn(move || {
            // Bounded: the server ends when the test drops it, or after a
            // minute whatever happens.
            let started = std::time::Instant::now();
            while !stopping.load(Ordering::Relaxed)
                && started.elapsed() < std::time::Duration::from_secs(60)
            {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                };
                let hits = hits_seen.clone();
                let parents = parents_seen.clone();
                let heads = heads_seen.clone();
                std::thread::spawn(move || {
                    stream.set_nonblocking(false).unwrap();
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let mut head = line.clone();
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                            break;
                        }
                        head.push_str(&header);
                        if let Some((name, value)) = header.split_once(':')
                            && name.eq_ignore_ascii_case("traceparent")
                        {
                            parents.lock().unwrap().push(value.trim().to_string());
                        }
                    }
                    hits.lock().unwrap().push(path.clone());
                    heads.lock().unwrap().push(head.clone());
                    let mut stream = stream;
                    let reply = |stream: &mut std::net::TcpStream, head: &str, body: &[u8]| {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 {head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(body);
                    };
                    if path.starts_with("/gzecho") {
                        // The same echo, gzipped although the request asked
                        // for identity: an origin that compresses anyway.
                        use flate2::write::GzEncoder;
                        let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::best());
                        encoder.write_all(head.as_bytes()).unwrap();
                        let body = encoder.finish().unwrap();
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(&body);
                        return;
                    }
                    if path.starts_with("/echo") {
                        // The request's head, back in a header and the body:
                        // an origin that reflects what it was sent.
                        let first = head
                            .lines()
                            .map(str::trim_end)
                            .find(|l| l.to_ascii_lowercase().starts_with("authorization:"));
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\nx-echo: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{head}",
                            first.unwrap_or("none"),
                            head.len()
                        );
                        return;
                    }
                    match path.split('?').next().unwrap_or_default() {
                        "/hello" => reply(&mut stream, "200 OK", b"hello from the test server"),
                        "/page" => {
                            let body = "<!DOCTYPE html><html><head><title>A &amp; B</title><style>p{x:1}</style><script>var a='<p>';</script></head><body><h1>Hello</h1><p>One&nbsp;two &lt;three&gt;</p><!-- hidden --><ul><li>x</li><li>y &#x263A;</li></ul></body></html>";
                            let _ = write!(
                                stream,
                                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                                body.len()
                            );
                        }
                        "/moved" => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 301 Moved Permanently\r\nlocation: /page\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            );
                        }
                        "/to-admin" => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 302 Found\r\nlocation: /admin/panel\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            );
                        }
                        "/redirect" => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:1/elsewhere\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            );
                        }
                        "/huge" => {
                            let size = 20 << 20;
                            let _ = write!(
                                stream,
                                "HTTP/1.1 200 OK\r\ncontent-length: {size}\r\nconnection: close\r\n\r\n"
                            );
                            let chunk = vec![b'x'; 64 << 10];
                            for _ in 0..(size / chunk.len()) {
                                if stream.write_all(&chunk).is_err() {
                                    break;
                                }
                            }
                        }
                        "/slow" => {
                            std::thread::sleep(std::time::Duration::from_secs(10));
                            reply(&mut stream, "200 OK", b"too late");
                        }
                        _ => reply(&mut stream, "404 Not Found", b"no such page"),
                    }
                });
            }
        });
        TestServer {
            port,
            hits,
            trace_parents,
            heads,
            stop,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }

    /// Each request's head (request line and headers) as it arrived.
    pub(crate) fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }

    pub(crate) fn trace_parents(&self) -> Vec<String> {
        self.trace_parents.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn fetch(policy: Option<&str>, url: &str) -> Value {
    call_json(policy, &[], "Fetch", &format!(r#"{{"url": "{url}"}}"#))
}

/// The host's log lines on a call (`call --json`), one per line.
pub(crate) fn host_logs(call: &Value) -> String {
    call["logs"]
        .as_array()
        .map(|logs| {
            logs.iter()
                .map(|l| l["message"].as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn a_granted_origin_is_reached_and_nothing_else_is() {
    let server = TestServer::start();
    let port = server.port;
    let granted = format!("[plugins.probe]\nhttp = [\"http://127.0.0.1:{port}\"]\n");
    let ok = fetch(Some(&granted), &server.url("/hello"));
    assert_eq!(ok["ok"], true, "{ok}");
    assert_eq!(ok["result"], "200 hello from the test server");

    // Nothing granted; another port; another scheme: refused before any
    // connection, with the grant that would allow it.
    let https_only = format!("[plugins.probe]\nhttp = [\"https://127.0.0.1:{port}\"]\n");
    let other_port = format!(
        "[plugins.probe]\nhttp = [\"http://127.0.0.1:{}\"]\n",
        port + 1
    );
    for policy in [None, Some(https_only.as_str()), Some(other_port.as_str())] {
        let refused = fetch(policy, &server.url("/hello"));
        assert_eq!(refused["ok"], false, "{policy:?}: {refused}");
        assert!(
            error_message(&refused).contains("the host refused the request"),
            "{refused}"
        );
        let logs = host_logs(&refused);
        assert!(
            logs.contains(&format!("HTTP to http://127.0.0.1:{port} is not granted")),
            "{logs}"
        );
        assert!(
            logs.contains(&format!("--grant probe:http=http://127.0.0.1:{port}")),
            "{logs}"
        );
    }
    assert_eq!(
        server.hits(),
        ["/hello"],
        "a refused request reached the server"
    );
}

#[test]
fn a_granted_name_that_resolves_to_an_internal_address_is_refused() {
    let server = TestServer::start();
    let port = server.port;
    let by_name = format!("[plugins.probe]\nhttp = [\"http://localhost:{port}\"]\n");
    let url = format!("http://localhost:{port}/hello");
    let refused = fetch(Some(&by_name), &url);
    assert_eq!(refused["ok"], false, "{refused}");
    let logs = host_logs(&refused);
    assert!(logs.contains("localhost resolves to"), "{logs}");
    assert!(logs.contains("an internal address"), "{logs}");
    assert!(logs.contains("allow-addresses"), "{logs}");
    // What the gadget itself is told does not say the origin is the
    // problem (it is granted): it names every door and points at the log.
    let told = refused["error"].to_string();
    assert!(
        told.contains("an origin or address not granted")
            && told.contains("the call's log says why")
            && !told.contains("this origin"),
        "{told}"
    );
    // The host adds the reason for the model, which cannot read the log.
    assert!(
        told.contains("[the host refused: ") && told.contains("an internal address"),
        "{told}"
    );
    assert!(server.hits().is_empty(), "{:?}", server.hits());

    // The operator allows the address explicitly: now it is reached.
    let allowed = format!("{by_name}allow-addresses = [\"127.0.0.0/8\", \"::1\"]\n");
    let ok = fetch(Some(&allowed), &url);
    assert_eq!(ok["ok"], true, "{ok}");
}

#[test]
fn redirects_are_not_followed_and_bodies_and_requests_are_capped() {
    let server = TestServer::start();
    let port = server.port;
    let granted = format!("[plugins.probe]\nhttp = [\"http://127.0.0.1:{port}\"]\n");

    let redirect = fetch(Some(&granted), &server.url("/redirect"));
    assert_eq!(redirect["ok"], true, "{redirect}");
    assert_eq!(redirect["result"], "302 ");
    assert_eq!(
        redirect["details"]["location"],
        "http://127.0.0.1:1/elsewhere"
    );

    let huge = fetch(Some(&granted), &server.url("/huge"));
    assert_eq!(huge["ok"], false, "{}", huge["ok"]);
    assert!(
        error_message(&huge).contains("body size exceeds limit: 16777216 bytes"),
        "{}",
        error_message(&huge)
    );

    let many = call_json(
        Some(&granted),
        &[],
        "Fetch",
        &format!(r#"{{"url": "{}", "times": 65}}"#, server.url("/hello")),
    );
    assert_eq!(many["ok"], false);
    assert!(
        error_message(&many).starts_with("request 65:"),
        "{}",
        error_message(&many)
    );
    assert!(
        host_logs(&many).contains("the call made 64 requests"),
        "{}",
        host_logs(&many)
    );
    let hello = server.hits().iter().filter(|p| *p == "/hello").count();
    assert_eq!(hello, 64);
}

#[test]
fn a_request_body_over_the_cap_is_refused_before_it_is_sent() {
    let server = TestServer::start();
    let granted = format!(
        "[plugins.probe]\nhttp = [\"http://127.0.0.1:{}\"]\n",
        server.port
    );
    let upload = call_json(
        Some(&granted),
        &[],
        "Upload",
        &format!(
            r#"{{"url": "{}", "bytes": {}}}"#,
            server.url("/hello"),
            9 << 20
        ),
    );
    assert_eq!(upload["ok"], false, "{}", upload["ok"]);
    let logs = host_logs(&upload);
    assert!(
        logs.contains("request body over the 8388608-byte limit"),
        "{logs}: {}",
        upload["error"]
    );
    assert!(server.hits().is_empty(), "{:?}", server.hits());
}

#[test]
fn a_slow_server_is_cut_off_at_the_call_deadline() {
    let server = TestServer::start();
    let granted = format!(
        "[plugins.probe]\nhttp = [\"http://127.0.0.1:{}\"]\n",
        server.port
    );
    let started = std::time::Instant::now();
    let slow = fetch(Some(&granted), &server.url("/slow"));
    let took = started.elapsed();
    assert_eq!(slow["ok"], false, "{slow}");
    // The gadget's timeout is 3 s; the server answers after 10.
    assert!(took < std::time::Duration::from_secs(8), "{took:?}");
    let message = error_message(&slow);
    assert!(
        message.contains("timed out") || message.contains("timeout"),
        "{message}"
    );
}

#[test]
fn a_grant_scoped_by_method_and_path_holds_every_request_and_every_hop() {
    let server = TestServer::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    // GET only: a GET reaches the server, a POST is refused before it is
    // sent, naming the grant and the one that would allow it.
    let get_only =
        format!("[plugins.probe]\nhttp = [{{ origin = \"{origin}\", methods = [\"GET\"] }}]\n");
    let got = fetch(Some(&get_only), &server.url("/hello"));
    assert_eq!(got["result"], "200 hello from the test server", "{got}");
    let posted = call_json(
        Some(&get_only),
        &[],
        "Upload",
        &format!(r#"{{"url": "{}", "bytes": 10}}"#, server.url("/hello")),
    );
    assert_eq!(posted["ok"], false, "{posted}");
    let logs = host_logs(&posted);
    assert!(
        logs.contains(&format!(
            "POST {origin}/hello is outside its grant {origin} (GET; any path) (grant it with [plugins.probe] http = [{{ origin = \"{origin}\", methods = [\"POST\"], paths = [\"/hello\"] }}])"
        )),
        "{logs}"
    );

    // Paths: the web plugin follows a redirect, and the hop out of the
    // grant is refused at the door.
    let moved_only =
        format!("[plugins.web]\nhttp = [{{ origin = \"{origin}\", paths = [\"/moved\"] }}]\n");
    let hop = call_json(
        Some(&moved_only),
        &[],
        "FetchUrl",
        &format!(r#"{{"url": "{}"}}"#, server.url("/moved")),
    );
    assert_eq!(hop["ok"], false, "{hop}");
    assert!(
        host_logs(&hop).contains(&format!(
            "GET {origin}/page is outside its grant {origin} (any method; /moved)"
        )),
        "{}",
        host_logs(&hop)
    );
    // A path is what the server reads: dot segments do not leave a grant.
    let hello_only = format!(
        "[plugins.probe]\nhttp = [{{ origin = \"{origin}\", paths = [\"/hello\", \"/hello/*\"] }}]\n"
    );
    for sneaky in ["/hello/../page", "/hello/%2e%2e/page"] {
        let refused = fetch(Some(&hello_only), &server.url(sneaky));
        assert_eq!(refused["ok"], false, "{sneaky}: {refused}");
        assert!(
            host_logs(&refused).contains(&format!("GET {origin}/page is outside its grant")),
            "{sneaky}: {}",
            host_logs(&refused)
        );
    }
    assert_eq!(
        server.hits(),
        ["/hello", "/moved"],
        "a refused request reached the server"
    );
}

#[test]
fn the_web_plugin_reads_a_granted_page_as_text_and_nothing_else() {
    let server = TestServer::start();
    let port = server.port;
    let granted = format!("[plugins.web]\nhttp = [\"http://127.0.0.1:{port}\"]\n");
    let page = call_json(
        Some(&granted),
        &[],
        "FetchUrl",
        &format!(r#"{{"url": "{}"}}"#, server.url("/moved")),
    );
    assert_eq!(page["ok"], true, "{page}");
    assert_eq!(page["result"], "Hello\nOne two <three>\nx\ny ☺");
    assert_eq!(page["details"]["title"], "A & B");
    assert_eq!(page["details"]["final_url"], server.url("/page"));
    assert_eq!(page["details"]["status"], 200);
    // Each hop went through the host's checks: both reached the server.
    assert_eq!(server.hits(), ["/moved", "/page"]);

    // Without the grant, nothing is fetched.
    let refused = call_json(
        None,
        &[],
        "FetchUrl",
        &format!(r#"{{"url": "{}"}}"#, server.url("/page")),
    );
    assert_eq!(refused["ok"], false);
    assert!(
        error_message(&refused).contains("the host refused the request"),
        "{refused}"
    );
    assert_eq!(server.hits().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_abort_signal_stops_a_request_in_flight() {
    use std::sync::Arc;

    use gadget_host::loader::{LoadOptions, NoProgress, load_dirs};
    use gadget_host::runtime::policy::Policy;

    let server = TestServer::start();
    let mut policy = Policy::default();
    policy
        .add_grant(&format!("probe:http=http://127.0.0.1:{}", server.port))
        .unwrap();
    let runtime = common::runtime(gadget_host::runtime::EpochMode::Ticker);
    let (registry, errors) = load_dirs(
        runtime,
        &[probe_plugin().to_path_buf()],
        &LoadOptions::from_policy(&policy, None),
        Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    let gadget = registry.get("Fetch").unwrap().clone();
    let cancel = gadget_core::signal::AbortSignal::new();
    let raise = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        raise.raise();
    });
    let started = std::time::Instant::now();
    let report = gadget
        .invoke_request(gadget_host::runtime::CallRequest {
            gadget: "Fetch".into(),
            component_name: None,
            invocation_id: "f1".into(),
            params: format!(r#"{{"url": "{}", "times": 1}}"#, server.url("/slow")),
            limits: gadget.limits.clone(),
            signal: Some(cancel),
            observer: None,
            grants: Some(gadget.plugin.access.grants.clone()),
            trace_parent: None,
            request_denials: None,
            human: None,
        })
        .await;
    let took = started.elapsed();
    // Well before the server's 10 s and the gadget's 3 s timeout.
    assert!(took < std::time::Duration::from_millis(1500), "{took:?}");
    let error = report.outcome.unwrap_err().to_string();
    assert!(error.contains("cancelled"), "{error}");
}

/// An SDK example's `HttpStatus` through a granted origin, then refused
/// without the grant; for an SDK that sends bodies (`with_body`), a
/// refused request with a body too, which must be the same refusal (the
/// closed body stream is not a crash).
fn sdk_example_fetches(example: &str, plugin: &str, with_body: bool) {
    let server = TestServer::start();
    let dir = crate::languages::built(&common::workspace().join("examples").join(example));
    let granted = format!("--grant={plugin}:http=http://127.0.0.1:{}", server.port);
    let params = format!(r#"{{"url": "{}"}}"#, server.url("/hello"));
    let call_with = |grant: Option<&str>, params: &str| {
        let mut args = vec!["--plugins", dir.to_str().unwrap()];
        args.extend(grant);
        args.extend(["call", "HttpStatus", "--params", params, "--json"]);
        let out = run(None, &[], &args);
        serde_json::from_str::<Value>(&stdout(&out))
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)))
    };
    let call = |grant: Option<&str>| call_with(grant, &params);
    let ok = call(Some(&granted));
    assert_eq!(ok["ok"], true, "{example}: {ok}");
    assert_eq!(ok["result"], "200 hello from the test server");
    let refused = call(None);
    assert_eq!(refused["ok"], false, "{example}: {refused}");
    assert!(
        error_message(&refused).contains("the host refused the request"),
        "{example}: {refused}"
    );
    // The model is told why (it reads neither the log nor the policy), and
    // not the operator's TOML.
    let told = error_message(&refused);
    assert!(
        told.contains("[the host refused: ") && told.contains("is not granted"),
        "{example}: {told}"
    );
    let reason = told.split("[the host refused: ").nth(1).unwrap_or_default();
    let reason = reason.split(']').next().unwrap_or_default();
    assert!(!reason.contains("grant it with"), "{example}: {told}");
    if with_body {
        let posted = format!(
            r#"{{"url": "{}", "body": "{}"}}"#,
            server.url("/hello"),
            "x".repeat(20_000)
        );
        let refused = call_with(None, &posted);
        assert_eq!(refused["ok"], false, "{example}: {refused}");
        assert_ne!(refused["error"]["kind"], "crashed", "{example}: {refused}");
        assert!(
            error_message(&refused).contains("the host refused the request"),
            "{example}: {refused}"
        );
    }
    assert_eq!(server.hits(), ["/hello"], "{example}");
}

#[test]
fn a_python_gadget_reaches_a_granted_origin_through_the_sdk() {
    sdk_example_fetches("python-gadget", "python-words", true);
}

#[test]
fn a_c_gadget_reaches_a_granted_origin_through_the_sdk() {
    // The C and Go SDKs send GET requests only: no body to refuse.
    sdk_example_fetches("c-gadget", "c-cipher", false);
}

#[test]
fn a_go_gadget_reaches_a_granted_origin_through_the_sdk() {
    sdk_example_fetches("go-gadget", "go-roman", false);
}

#[test]
fn a_javascript_gadget_reaches_a_granted_origin_with_fetch() {
    // The manifest asks for http, so `gadget build` used SpiderMonkey, whose
    // fetch() runs over wasi:http. A refused request is a network error in
    // JavaScript; the host's log of the call says which grant is missing.
    let server = TestServer::start();
    let dir = crate::languages::built(&common::workspace().join("examples/js-web-gadget"));
    let granted = format!("--grant=js-web:http=http://127.0.0.1:{}", server.port);
    let params = format!(r#"{{"url": "{}"}}"#, server.url("/hello"));
    let call = |grant: Option<&str>| {
        let mut args = vec!["--plugins", dir.to_str().unwrap()];
        args.extend(grant);
        args.extend(["call", "HttpStatus", "--params", &params, "--json"]);
        let out = run(None, &[], &args);
        serde_json::from_str::<Value>(&stdout(&out))
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)))
    };
    let ok = call(Some(&granted));
    assert_eq!(ok["ok"], true, "{ok}");
    assert_eq!(ok["result"], "200 hello from the test server");
    assert_eq!(ok["details"]["bytes"], 26, "{ok}");
    let refused = call(None);
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(
        error_message(&refused).contains("the host refused the request"),
        "{refused}"
    );
    assert!(
        host_logs(&refused).contains("--grant js-web:http=http://127.0.0.1:"),
        "{refused}"
    );
    let told = error_message(&refused);
    assert!(
        told.contains("[the host refused: js-web: HTTP to http://127.0.0.1:"),
        "{told}"
    );
    // With a body, the same refusal (the closed body stream is no crash).
    let posted = format!(
        r#"{{"url": "{}", "body": "{}"}}"#,
        server.url("/hello"),
        "x".repeat(20_000)
    );
    let mut args = vec!["--plugins", dir.to_str().unwrap()];
    args.extend(["call", "HttpStatus", "--params", &posted, "--json"]);
    let out = run(None, &[], &args);
    let refused: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    assert_eq!(refused["ok"], false, "{refused}");
    assert_ne!(refused["error"]["kind"], "crashed", "{refused}");
    assert!(
        error_message(&refused).contains("the host refused the request"),
        "{refused}"
    );
    assert_eq!(server.hits(), ["/hello"]);
}

#[test]
fn an_async_javascript_gadget_without_http_says_what_it_needs() {
    // QuickJS (no http asked) cannot wait for a promise: the call fails in
    // words that say how to get the engine that can.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("plugin.toml"),
        "name = \"js-async\"\nversion = \"0.1.0\"\ndescription = \"d\"\ncomponent = \"a.wasm\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("app.js"),
        "import { defineGadget, exportGadgets } from 'gadget-sdk';\n\
         export const gadget = exportGadgets(defineGadget({ name: 'Later', description: 'd',\n\
           async run() { return 'never'; } }));\n",
    )
    .unwrap();
    let built = crate::languages::built(dir.path());
    let out = run(
        None,
        &[],
        &[
            "--plugins",
            built.to_str().unwrap(),
            "call",
            "Later",
            "--json",
        ],
    );
    let call: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(call["ok"], false, "{call}");
    assert!(
        error_message(&call).contains("ask for http under [permissions]"),
        "{call}"
    );
}

#[test]
fn a_javascript_gadget_reads_granted_config() {
    let dir = crate::languages::built(&common::workspace().join("examples/js-gadget"));
    let greet = |grant: &[&str]| {
        let mut args = vec!["--plugins", dir.to_str().unwrap()];
        args.extend(grant);
        args.extend(["call", "Greet", "--params", r#"{"name": "Ada"}"#]);
        let out = run(None, &[("GREETING", "from the host")], &args);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    assert_eq!(
        greet(&["--grant", "js-slug:config=GREETING=value:Bonjour"]),
        "Bonjour, Ada!\n"
    );
    // The host's own GREETING is not the gadget's to read.
    assert_eq!(greet(&[]), "Hello, Ada!\n");
}
