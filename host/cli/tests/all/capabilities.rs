//! Capabilities under the operator's policy, through the real `gadget`
//! binary: every door a plugin could use (files, environment, secrets,
//! gadget names) is shut unless the policy opens it, and opens only as far
//! as both the manifest and the policy say.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use crate::cli::{stderr, stdout};
use crate::common;

/// One compile cache for these tests: each plugin is compiled once.
fn cache_dir() -> &'static Path {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    CACHE.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// The probe fixture as a plugin directory (manifest + component).
pub(crate) fn probe_plugin() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let plugin = dir.path().join("probe");
        std::fs::create_dir(&plugin).unwrap();
        std::fs::copy(
            common::workspace().join("tests/fixtures/probe/plugin.toml"),
            plugin.join("plugin.toml"),
        )
        .unwrap();
        std::fs::copy(common::fixture("fixture-probe"), plugin.join("probe.wasm")).unwrap();
        dir
    })
    .path()
}

/// Runs `gadget` with the shipped plugins and the probe, a policy file
/// (or none), extra environment and arguments.
pub(crate) fn run(policy: Option<&str>, env: &[(&str, &str)], args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .arg("--plugins")
        .arg(probe_plugin())
        .arg("--cache-dir")
        .arg(cache_dir())
        // No policy from the machine running the tests.
        .env_remove("GADGET_CONFIG")
        .env("XDG_CONFIG_HOME", home.path())
        .stdin(Stdio::null());
    let policy_file = home.path().join("policy.toml");
    if let Some(policy) = policy {
        std::fs::write(&policy_file, policy).unwrap();
        command.arg("--config").arg(&policy_file);
    }
    command.envs(env.iter().copied()).args(args);
    command.output().expect("run gadget")
}

fn call_json(policy: Option<&str>, env: &[(&str, &str)], gadget: &str, params: &str) -> Value {
    let out = run(policy, env, &["call", gadget, "--params", params, "--json"]);
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)))
}

/// A directory to grant, a file beside it that must stay out of reach, and
/// a symlink inside that points at that file.
struct Tree {
    root: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("notes.txt"), "alpha\nTODO: beta\ngamma\n").unwrap();
        std::fs::create_dir(data.join("sub")).unwrap();
        std::fs::write(data.join("sub/more.txt"), "TODO: delta\n").unwrap();
        std::fs::write(root.path().join("outside.txt"), "the host's secret file\n").unwrap();
        std::os::unix::fs::symlink(root.path().join("outside.txt"), data.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(root.path(), data.join("up")).unwrap();
        Tree { root }
    }

    fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    fn policy(&self, mode: &str) -> String {
        format!(
            "[plugins.files]\nfiles = [{{ host = \"{}\", guest = \"/data\", mode = \"{mode}\" }}]\n",
            self.data().display()
        )
    }
}

fn error_message(call: &Value) -> String {
    call["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_granted_directory_is_readable_and_nothing_outside_it_is() {
    let tree = Tree::new();
    let policy = tree.policy("ro");
    let read = call_json(
        Some(&policy),
        &[],
        "ReadFile",
        r#"{"path": "/data/notes.txt"}"#,
    );
    assert_eq!(read["ok"], true, "{read}");
    assert!(read["result"].as_str().unwrap().contains("TODO: beta"));

    let grep = call_json(
        Some(&policy),
        &[],
        "Grep",
        r#"{"pattern": "TODO", "path": "/data"}"#,
    );
    assert_eq!(grep["ok"], true, "{grep}");
    let found = grep["result"].as_str().unwrap();
    assert!(found.contains("/data/notes.txt:2: TODO: beta"), "{found}");
    assert!(
        found.contains("/data/sub/more.txt:1: TODO: delta"),
        "{found}"
    );
    assert!(!found.contains("secret"), "{found}");

    let list = call_json(Some(&policy), &[], "ListDir", r#"{"path": "/data"}"#);
    assert_eq!(list["ok"], true, "{list}");

    // `..`, an absolute path elsewhere, and symlinks out of the directory.
    for escape in [
        "/data/../outside.txt",
        "/outside.txt",
        "/data/link.txt",
        "/data/up/outside.txt",
        "/etc/passwd",
    ] {
        let read = call_json(
            Some(&policy),
            &[],
            "ReadFile",
            &format!(r#"{{"path": "{escape}"}}"#),
        );
        assert_eq!(read["ok"], false, "{escape} was read: {read}");
        assert!(
            !read.to_string().contains("the host's secret file"),
            "{escape}: {read}"
        );
    }
}

#[test]
fn a_read_only_grant_refuses_writes_and_a_read_write_grant_allows_them() {
    let tree = Tree::new();
    let write = r#"{"path": "/data/new.txt", "content": "written by a gadget"}"#;
    let refused = call_json(Some(&tree.policy("ro")), &[], "WriteFile", write);
    assert_eq!(refused["ok"], false, "{refused}");
    let message = error_message(&refused);
    assert!(message.contains("cannot write /data/new.txt"), "{message}");
    assert!(message.contains("read-only"), "{message}");
    assert!(!tree.data().join("new.txt").exists());

    let written = call_json(Some(&tree.policy("rw")), &[], "WriteFile", write);
    assert_eq!(written["ok"], true, "{written}");
    assert_eq!(
        std::fs::read_to_string(tree.data().join("new.txt")).unwrap(),
        "written by a gadget"
    );
}

#[test]
fn without_a_grant_there_are_no_files_and_the_load_says_why() {
    let tree = Tree::new();
    let _ = &tree;
    let out = run(
        None,
        &[],
        &[
            "call",
            "ReadFile",
            "--params",
            r#"{"path": "/data/notes.txt"}"#,
        ],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("plugin 'files': asks for files * (rw), not granted"),
        "{err}"
    );
    assert!(err.contains("--grant files:files=DIR:/PATH"), "{err}");
}

#[test]
fn a_grant_from_the_command_line_works_like_one_from_the_file() {
    let tree = Tree::new();
    let grant = format!("files:files={}:/data", tree.data().display());
    let out = run(
        None,
        &[],
        &[
            "--grant",
            &grant,
            "call",
            "ReadFile",
            "--params",
            r#"{"path": "/data/notes.txt"}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("TODO: beta"));
}

#[test]
fn only_granted_config_is_in_the_environment() {
    let policy = "[plugins.probe]\nconfig = { SECRET_TOKEN = { env = \"PROBE_SECRET\" }, UNITS = { value = \"metric\" }, NOT_ASKED = { value = \"x\" } }\n";
    let env = [
        ("PROBE_SECRET", "tok-4f9a2c81e6"),
        ("HOST_ONLY_VARIABLE", "must-not-be-seen"),
    ];
    let listed = call_json(Some(policy), &env, "Env", "{}");
    assert_eq!(listed["ok"], true, "{listed}");
    let vars = listed["result"].as_str().unwrap();
    // The secret's value is redacted even from the gadget's own listing.
    assert_eq!(vars, "SECRET_TOKEN=[redacted]\nUNITS=metric", "{vars}");

    let out = run(Some(policy), &env, &["describe", "Env"]);
    let text = stdout(&out);
    assert!(
        text.contains("Permissions granted: config: SECRET_TOKEN, UNITS"),
        "{text}"
    );
    assert!(
        text.contains(
            "config NOT_ASKED is granted, but the manifest does not ask for it: not applied"
        ),
        "{text}"
    );
    assert!(!text.contains("tok-4f9a2c81e6"), "{text}");

    // Nothing granted: an empty environment.
    let listed = call_json(None, &env, "Env", "{}");
    assert_eq!(listed["result"], "", "{listed}");
}

#[test]
fn a_secret_never_leaves_through_any_channel() {
    let secret = "tok-4f9a2c81e6";
    let policy = "[plugins.probe]\nconfig = { SECRET_TOKEN = { env = \"PROBE_SECRET\" } }\n";
    let env = [("PROBE_SECRET", secret)];
    for gadget in ["Leak", "LeakInError"] {
        let out = run(
            Some(policy),
            &env,
            &[
                "call",
                gadget,
                "--params",
                r#"{"key": "SECRET_TOKEN"}"#,
                "--json",
            ],
        );
        let everything = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            !everything.contains(secret),
            "{gadget} leaked: {everything}"
        );
        assert!(everything.contains("[redacted]"), "{gadget}: {everything}");
    }
    let leak = call_json(Some(policy), &env, "Leak", r#"{"key": "SECRET_TOKEN"}"#);
    assert_eq!(leak["result"], "result [redacted]");
    assert_eq!(leak["details"]["v"], "[redacted]");
    assert_eq!(leak["logs"][0]["message"], "log [redacted]");
    assert_eq!(leak["logs"][0]["fields"]["v"], "[redacted]");
    assert_eq!(leak["progress"][0], "progress [redacted]");
    assert_eq!(leak["updates"][0]["partial"], "update [redacted]");
    assert_eq!(leak["stdout"], "stdout [redacted]\n");
    assert_eq!(leak["stderr"], "stderr [redacted]\n");

    // The same through `gadget run`'s events.
    let response = "!!!GADGET_START:Leak:l1\n!!!ARG:key\nSECRET_TOKEN\n!!!GADGET_END\n";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("response.txt");
    std::fs::write(&file, response).unwrap();
    let out = run(
        Some(policy),
        &env,
        &["run", "--json", file.to_str().unwrap()],
    );
    let events = stdout(&out);
    assert!(events.contains("result [redacted]"), "{events}");
    assert!(!events.contains(secret), "{events}");
}

#[test]
fn a_denied_gadget_is_absent_from_lists_and_prompts_and_refused_when_called() {
    let policy = "[gadgets]\ndeny = [\"Env\", \"leak*\"]\n";
    let out = run(Some(policy), &[], &["list", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let names: Vec<&str> = list.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert!(
        !names
            .iter()
            .any(|n| ["Env", "Leak", "LeakInError"].contains(n)),
        "{names:?}"
    );
    assert!(names.contains(&"Calculator"), "{names:?}");

    let out = run(Some(policy), &[], &["prompt"]);
    assert!(!stdout(&out).contains("Env"), "{}", stdout(&out));

    let out = run(Some(policy), &[], &["call", "env", "--params", "{}"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("gadget 'Env' is denied by the operator's policy ([gadgets] deny = \"Env\")"),
        "{err}"
    );

    // A model that calls it reads that it does not exist.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("response.txt");
    std::fs::write(&file, "!!!GADGET_START:Env:e1\n!!!GADGET_END\n").unwrap();
    let out = run(Some(policy), &[], &["run", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("Gadget 'Env' not found"),
        "{}",
        stdout(&out)
    );

    // `--deny-gadget` does the same for one run; an allow list keeps only
    // what it names.
    let out = run(None, &[], &["--deny-gadget", "calc*", "list", "--json"]);
    assert!(!stdout(&out).contains("\"Calculator\""));
    let out = run(
        Some("[gadgets]\nallow = [\"Calculator\"]\n"),
        &[],
        &["list", "--json"],
    );
    let list: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
}

#[test]
fn a_policy_file_with_an_unknown_field_is_refused_with_its_line() {
    let out = run(
        Some("[plugins.files]\nfiles = []\nhttp-hosts = [\"x\"]\n"),
        &[],
        &["list"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("unknown field `http-hosts`"), "{err}");
    assert!(err.contains("(line 3)"), "{err}");
}

#[test]
fn check_and_list_show_requested_and_granted() {
    let tree = Tree::new();
    let policy = tree.policy("ro");
    let out = run(
        Some(&policy),
        &[],
        &[
            "check",
            common::shipped_plugins().join("files").to_str().unwrap(),
        ],
    );
    let text = stdout(&out);
    assert!(
        text.contains("✓ permissions: asks for files: * (rw); granted files: /data (ro, from"),
        "{text}"
    );
    let out = run(Some(&policy), &[], &["list", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let read = list.iter().find(|g| g["name"] == "ReadFile").unwrap();
    assert_eq!(read["granted_permissions"]["files"][0]["guest"], "/data");
    assert_eq!(read["granted_permissions"]["files"][0]["mode"], "ro");
    assert_eq!(read["requested_permissions"]["files"][0]["path"], "*");
}

/// A small HTTP/1.1 server on 127.0.0.1 for the HTTP tests: a few routes,
/// a count of the requests it got, and it stops when dropped.
struct TestServer {
    port: u16,
    hits: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl TestServer {
    fn start() -> TestServer {
        use std::io::{BufRead, BufReader, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (hits_seen, stopping) = (hits.clone(), stop.clone());
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
                std::thread::spawn(move || {
                    stream.set_nonblocking(false).unwrap();
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                            break;
                        }
                    }
                    hits.lock().unwrap().push(path.clone());
                    let mut stream = stream;
                    let reply = |stream: &mut std::net::TcpStream, head: &str, body: &[u8]| {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 {head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(body);
                    };
                    match path.as_str() {
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
        TestServer { port, hits, stop }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
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

fn host_logs(call: &Value) -> String {
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
    use std::sync::atomic::{AtomicBool, Ordering};

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
    let cancel = Arc::new(AtomicBool::new(false));
    let raise = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        raise.store(true, Ordering::Relaxed);
    });
    let started = std::time::Instant::now();
    let report = gadget
        .invoke_request(gadget_host::runtime::CallRequest {
            gadget: "Fetch".into(),
            component_name: None,
            invocation_id: "f1".into(),
            params: format!(r#"{{"url": "{}", "times": 1}}"#, server.url("/slow")),
            limits: gadget.limits.clone(),
            cancel: Some(cancel),
            observer: None,
            grants: Some(gadget.plugin.grants.clone()),
        })
        .await;
    let took = started.elapsed();
    // Well before the server's 10 s and the gadget's 3 s timeout.
    assert!(took < std::time::Duration::from_millis(1500), "{took:?}");
    let error = report.outcome.unwrap_err().to_string();
    assert!(error.contains("cancelled"), "{error}");
}

/// An SDK example's `HttpStatus` through a granted origin, then refused
/// without the grant.
fn sdk_example_fetches(example: &str, plugin: &str) {
    let server = TestServer::start();
    let dir = crate::languages::built(&common::workspace().join("examples").join(example));
    let granted = format!("--grant={plugin}:http=http://127.0.0.1:{}", server.port);
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
    assert_eq!(ok["ok"], true, "{example}: {ok}");
    assert_eq!(ok["result"], "200 hello from the test server");
    let refused = call(None);
    assert_eq!(refused["ok"], false, "{example}: {refused}");
    assert!(
        error_message(&refused).contains("the host refused the request"),
        "{example}: {refused}"
    );
    assert_eq!(server.hits(), ["/hello"], "{example}");
}

#[test]
fn a_python_gadget_reaches_a_granted_origin_through_the_sdk() {
    sdk_example_fetches("python-gadget", "python-words");
}

#[test]
fn a_c_gadget_reaches_a_granted_origin_through_the_sdk() {
    sdk_example_fetches("c-gadget", "c-cipher");
}

#[test]
fn a_go_gadget_reaches_a_granted_origin_through_the_sdk() {
    sdk_example_fetches("go-gadget", "go-roman");
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

/// The probe's `Fs` gadget run once with this script; its result lines and
/// the call's log messages.
fn fs_script(policy: &str, script: &str) -> (Vec<String>, String) {
    let report = call_json(
        Some(policy),
        &[],
        "Fs",
        &serde_json::json!({ "script": script }).to_string(),
    );
    let result = report["result"].as_str().unwrap_or_default();
    (
        result.lines().map(str::to_string).collect(),
        report["logs"].to_string(),
    )
}

/// A grant is the directory it named at load, not whatever its path names
/// later: a gadget that can write the parent of another grant moves that
/// directory away and leaves a symlink (relative or absolute) in its
/// place; the next call still sees the granted directory. Links that climb
/// out of a grant cannot be planted, and nested grants are reported.
#[test]
fn a_grant_cannot_be_re_pointed_and_links_cannot_climb_out() {
    let root = tempfile::tempdir().unwrap();
    let outer = root.path().join("outer");
    let inner = outer.join("inner");
    let secret = root.path().join("secret");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(inner.join("granted.txt"), "granted").unwrap();
    std::fs::write(secret.join("key.txt"), "SECRET KEY").unwrap();
    let policy = format!(
        "[plugins.probe]\nfiles = [{{ host = \"{}\", guest = \"/outer\", mode = \"rw\" }}, {{ host = \"{}\", guest = \"/inner\", mode = \"rw\" }}]\n",
        outer.display(),
        inner.display()
    );
    // The nested grant is reported at load.
    let out = run(Some(&policy), &[], &["list"]);
    assert!(
        stderr(&out).contains("lies inside") || stdout(&out).contains("lies inside"),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );

    for target in ["../../secret", "../secret", "/etc", "a/../../x"] {
        let (lines, logs) = fs_script(&policy, &format!("symlink {target} /outer/link"));
        assert!(lines[0].starts_with("error"), "{target}: {lines:?}");
        assert!(logs.contains("a symlink was refused"), "{target}: {logs}");
    }
    let (lines, _) = fs_script(&policy, "mkdir /outer/sub\nsymlink sub /outer/down");
    assert_eq!(lines, ["ok made", "ok linked"]);

    // The attack, inside one long-running host: between two calls, the
    // inner grant is moved away and a symlink to the secret directory put
    // where it was (from the host side here, as another plugin's gadget or
    // any process of the user's could). The next call still sees the
    // directory that was granted.
    let runtime = common::runtime(gadget_host::runtime::EpochMode::Ticker);
    let options = gadget_host::loader::LoadOptions::from_policy(
        &gadget_host::runtime::policy::Policy::parse(&policy, root.path()).unwrap(),
        None,
    );
    let (registry, errors) =
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(gadget_host::loader::load_sources(
                runtime,
                vec![gadget_host::loader::PluginSource::Dir(
                    probe_plugin().join("probe"),
                )],
                &options,
                std::sync::Arc::new(gadget_host::loader::NoProgress),
            ));
    assert!(errors.is_empty(), "{errors:?}");
    let script = |script: &str| -> Vec<String> {
        let report = tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(registry.call("Fs", serde_json::json!({ "script": script }), "fs", None))
            .unwrap();
        match report.outcome.unwrap() {
            gadget_host::runtime::Outcome::Result { result, .. } => {
                result.lines().map(str::to_string).collect()
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(script("list /inner"), ["ok granted.txt"]);
    std::fs::rename(&inner, outer.join("moved")).unwrap();
    std::os::unix::fs::symlink("../secret", &inner).unwrap();
    let lines = script("list /inner\nread /inner/key.txt\nread /inner/granted.txt");
    assert_eq!(lines[0], "ok granted.txt", "{lines:?}");
    assert!(lines[1].starts_with("error"), "{lines:?}");
    assert_eq!(lines[2], "ok granted", "{lines:?}");
}

/// A read-write grant has a quota per call of bytes written and entries
/// created; past it writes fail with WASI's quota error and the call's log
/// says which quota was spent. The next call starts with a full quota.
#[test]
fn read_write_grants_have_a_write_quota_per_call() {
    let root = tempfile::tempdir().unwrap();
    let policy = format!(
        "[plugins.probe]\nfiles = [{{ host = \"{}\", guest = \"/data\", mode = \"rw\", write-quota-mib = 2, max-entries = 50 }}]\n",
        root.path().display()
    );
    let (lines, logs) = fs_script(&policy, "write /data/a 1048576\nwrite /data/b 4194304");
    assert_eq!(lines[0], "ok wrote 1048576", "{lines:?}");
    assert!(lines[1].starts_with("error"), "{lines:?}");
    assert!(
        logs.contains("write quota of 2097152 bytes is spent"),
        "{logs}"
    );
    let written: u64 = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(written <= 2 << 20, "{written} bytes written");

    let (lines, logs) = fs_script(&policy, "mkdir /data/many\ntouch-many /data/many 100");
    assert_eq!(lines[0], "ok made", "{lines:?}");
    assert!(lines[1].starts_with("error after 49:"), "{lines:?}");
    assert!(logs.contains("quota of 50 created files"), "{logs}");
    let (lines, _) = fs_script(&policy, "write /data/c 1048576");
    assert_eq!(lines, ["ok wrote 1048576"]);
}

/// A policy section or `--grant` for a plugin that is not loaded is
/// reported, not ignored.
#[test]
fn a_grant_for_a_plugin_that_is_not_loaded_is_reported() {
    let out = run(
        Some("[plugins.probbe]\nhttp = [\"https://example.com\"]\n"),
        &[],
        &["--grant", "fles:files=/tmp:/data", "list"],
    );
    let err = stderr(&out);
    assert!(
        err.contains("[plugins.probbe] (or --grant probbe:...) names no loaded plugin"),
        "{err}"
    );
    assert!(err.contains("[plugins.fles]"), "{err}");
    assert!(err.contains("loaded: ") && err.contains("probe"), "{err}");
}
