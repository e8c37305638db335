//! Other MCP servers' tools under gadget-host's policy, against servers no
//! one here wrote: the reference servers from the npm registry
//! (`server-everything`, `server-filesystem`, pinned by
//! tests/mcp/servers/package-lock.json and installed by the setup script),
//! and a Python server of ours that dies mid-call.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common;

pub(crate) fn reference_server(package: &str) -> PathBuf {
    let path = common::workspace()
        .join("tests/mcp/servers/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        path.is_file(),
        "{} (run scripts/setup-tests.sh)",
        path.display()
    );
    path
}

/// A policy with `body`, and the binary run with it.
pub(crate) struct Policy {
    dir: tempfile::TempDir,
}

impl Policy {
    pub(crate) fn new(body: &str) -> Policy {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.toml"), body).unwrap();
        Policy { dir }
    }

    pub(crate) fn everything(extra: &str) -> Policy {
        Policy::new(&format!(
            "[mcp-servers.everything]\ncommand = [\"node\", {:?}, \"stdio\"]\ntimeout-ms = 2000\n{extra}",
            reference_server("server-everything")
        ))
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(common::gadget_bin());
        command
            .current_dir(self.path())
            .env_remove("GADGET_CONFIG")
            .env_remove("GADGET_PLUGINS")
            // OAuth tokens stay with the test, never in the user's state.
            .env("GADGET_STATE_DIR", self.path().join("state"))
            .args(["--config", "policy.toml"]);
        command
    }

    pub(crate) fn gadget(&self, args: &[&str]) -> Output {
        self.command().args(args).output().unwrap()
    }
}

pub(crate) fn said(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A raw MCP session with `gadget mcp` over stdio. Its output is read on
/// a thread of its own, so every wait is bounded.
pub(crate) struct Session {
    child: Child,
    stdin: ChildStdin,
    messages: std::sync::mpsc::Receiver<Value>,
    /// Notifications seen while waiting for answers.
    notifications: Vec<String>,
    next_id: u64,
    /// The person's answer to any `elicitation/create` (the session says
    /// it can elicit when there is one).
    answer: Option<String>,
    /// The questions it was asked.
    pub(crate) asked: Vec<String>,
}

/// Longest wait for one message from the session.
const MESSAGE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Session {
    pub(crate) fn start(policy: &Policy) -> Session {
        Session::start_answering(policy, None)
    }

    /// A session whose client answers elicitations with `answer`.
    pub(crate) fn start_answering(policy: &Policy, answer: Option<&str>) -> Session {
        let mut child = policy
            .command()
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut session = Session {
            child,
            stdin,
            messages,
            notifications: Vec::new(),
            next_id: 0,
            answer: answer.map(str::to_string),
            asked: Vec::new(),
        };
        let capabilities = if answer.is_some() {
            json!({"elicitation": {"form": {}}})
        } else {
            json!({})
        };
        session.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": "raw", "version": "1"}}),
        );
        session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    pub(crate) fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    pub(crate) fn next(&mut self) -> Value {
        let message = self
            .messages
            .recv_timeout(MESSAGE_WAIT)
            .expect("a message from gadget mcp");
        if let Some(method) = message["method"].as_str()
            && message.get("id").is_none()
        {
            self.notifications.push(method.to_string());
        }
        // The server asks the person: answered as the test says.
        if message["method"] == "elicitation/create"
            && let Some(answer) = self.answer.clone()
        {
            self.asked.push(
                message["params"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            let id = message["id"].clone();
            self.send(json!({"jsonrpc": "2.0", "id": id,
                "result": {"action": "accept", "content": {"answer": answer}}}));
        }
        message
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.next();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Waits (bounded) until a notification with `method` has arrived.
    pub(crate) fn wait_for(&mut self, method: &str) {
        while !self.notifications.iter().any(|m| m == method) {
            self.next();
        }
    }

    pub(crate) fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))["result"].clone()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_upstream_servers_tools_are_listed_called_and_checked_like_gadgets() {
    let policy = Policy::everything(
        "env = { GREETING = { value = \"hello\" } }\n[gadgets]\ndeny = [\"everything_toggle_*\"]\n",
    );
    // Listed beside the gadgets, named with the prefix, said to be the
    // server's; a denied one is not there.
    let out = policy.gadget(&["list"]);
    assert!(out.status.success(), "{}", said(&out));
    let table = said(&out);
    let row = table
        .lines()
        .find(|l| l.starts_with("everything_get_sum "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("mcp:everything"), "{row}");
    assert!(
        !table.contains("everything_toggle_simulated_logging"),
        "{table}"
    );

    let out = policy.gadget(&["describe", "everything_get_sum"]);
    assert!(
        said(&out).contains("Server: mcp:everything (") && said(&out).contains("timeout 2000 ms"),
        "{}",
        said(&out)
    );

    // Called through the one call path: schema checked by the host first.
    let out = policy.gadget(&["call", "everything_get_sum", "--params", r#"{"a":2,"b":5}"#]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("The sum of 2 and 5 is 7."),
        "{}",
        said(&out)
    );
    let out = policy.gadget(&["call", "everything_get_sum", "--params", r#"{"a":"x"}"#]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("is not of type \"number\""),
        "{}",
        said(&out)
    );
    let out = policy.gadget(&["call", "everything_toggle_simulated_logging"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));

    // Its environment is what the policy gives, nothing inherited.
    let out = policy
        .command()
        .env("SECRET_OF_THE_HOST", "do-not-pass")
        .args(["call", "everything_get_env"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    let env = said(&out);
    assert!(env.contains("\"GREETING\": \"hello\""), "{env}");
    assert!(!env.contains("SECRET_OF_THE_HOST"), "{env}");

    // Progress is forwarded into the call's report.
    let out = policy.gadget(&[
        "call",
        "--json",
        "everything_trigger_long_running_operation",
        "--params",
        r#"{"duration":0.4,"steps":4}"#,
    ]);
    assert!(out.status.success(), "{}", said(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["progress"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "1/4"),
        "{report}"
    );
}

#[test]
fn a_call_past_its_deadline_is_cancelled_and_the_server_serves_the_next() {
    let policy = Policy::everything("");
    let mut session = Session::start(&policy);
    let started = std::time::Instant::now();
    let result = session.call(
        "everything_trigger_long_running_operation",
        json!({"duration": 20, "steps": 20}),
    );
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("exceeded timeout of 2000ms"), "{result}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // The same server (same session) answers the next call at once.
    let result = session.call("everything_echo", json!({"message": "still here"}));
    assert_eq!(result["content"][0]["text"], "Echo: still here", "{result}");
    // ... and `gadget mcp` serves the upstream tools like its own, with
    // where they come from.
    let listed = session.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap();
    let echo = tools
        .iter()
        .find(|t| t["name"] == "everything_echo")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        echo["_meta"]["dev.gadget-host/provenance"]["plugin"], "mcp:everything",
        "{echo}"
    );
    assert!(tools.iter().any(|t| t["name"] == "Calculator"), "{listed}");
}

#[test]
fn an_upstream_servers_images_resources_and_links_reach_the_client_whole() {
    // What server-everything sends, byte for byte: its tiny PNG as the
    // package writes it.
    let tool = reference_server("server-everything")
        .with_file_name("tools")
        .join("get-tiny-image.js");
    let source = std::fs::read_to_string(&tool).unwrap();
    let sent = source
        .split_once("MCP_TINY_IMAGE = \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(base64, _)| base64)
        .unwrap_or_else(|| panic!("no image in {}", tool.display()));
    let policy = Policy::everything("");
    let mut session = Session::start(&policy);

    let result = session.call("everything_get_tiny_image", json!({}));
    let content = result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"));
    let kinds: Vec<&str> = content.iter().filter_map(|c| c["type"].as_str()).collect();
    assert_eq!(kinds, ["text", "image", "text"], "{result}");
    assert_eq!(content[1]["mimeType"], "image/png", "{result}");
    assert_eq!(
        content[1]["data"], sent,
        "the image's bytes changed on the way"
    );

    let result = session.call(
        "everything_get_resource_reference",
        json!({"resourceType": "Blob", "resourceId": 2}),
    );
    let resource = &result["content"][1];
    assert_eq!(resource["type"], "resource", "{result}");
    assert!(
        resource["resource"]["uri"]
            .as_str()
            .unwrap_or_default()
            .contains("2"),
        "{result}"
    );
    assert!(resource["resource"]["blob"].is_string(), "{result}");

    let result = session.call("everything_get_resource_links", json!({"count": 2}));
    let links = result["content"]
        .as_array()
        .map(|c| c.iter().filter(|c| c["type"] == "resource_link").count());
    assert_eq!(links, Some(2), "{result}");

    // A text-only model reads the parts in words.
    let out = policy.gadget(&["call", "everything_get_tiny_image"]);
    assert!(said(&out).contains("[image: image/png, "), "{}", said(&out));
}

#[test]
fn a_server_that_dies_mid_call_is_started_again_and_new_tools_appear() {
    let python = common::workspace().join(".tools/mcp/bin/python");
    let server = common::workspace().join("tests/mcp/crashing_server.py");
    let policy = Policy::new(&format!(
        "[mcp-servers.crashy]\ncommand = [{:?}, {:?}]\n",
        python, server
    ));
    let mut session = Session::start(&policy);
    let first = session.call("crashy_pid", json!({}));
    let first_pid = first["content"][0]["text"].as_str().unwrap().to_string();
    let crashed = session.call("crashy_crash", json!({}));
    assert_eq!(crashed["isError"], true, "{crashed}");
    assert!(
        crashed["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("MCP server 'crashy' ended during the call"),
        "{crashed}"
    );
    let again = session.call("crashy_pid", json!({}));
    let again_pid = again["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        !again_pid.is_empty() && again_pid != first_pid,
        "{first_pid} then {again}"
    );

    // Floods of logs and progress: the call ends, its report keeps at most
    // 1000 progress lines, and the server answers the next call.
    let flooded = session.request(
        "tools/call",
        json!({"name": "crashy_flood", "arguments": {"count": 5000}}),
    );
    assert_eq!(
        flooded["result"]["content"][0]["text"], "flooded",
        "{flooded}"
    );
    let again = session.call("crashy_pid", json!({}));
    assert_eq!(again["content"][0]["text"].as_str(), Some(again_pid));
    let out = policy.gadget(&[
        "call",
        "--json",
        "crashy_flood",
        "--params",
        r#"{"count":1500}"#,
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["progress"].as_array().unwrap().len(),
        1000,
        "{}",
        said(&out)
    );
    // Its log lines are the call's, up to the server's cap per 10 s.
    let logs = report["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 100, "{report}");
    assert!(
        logs[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("log line 0 "),
        "{report}"
    );

    // A tool the server adds while it runs (notifications/tools/list_changed)
    // is listed and callable without a restart.
    let names = |session: &mut Session| -> Vec<String> {
        session.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!names(&mut session).contains(&"crashy_grown".to_string()));
    let grew = session.call("crashy_grow", json!({}));
    assert_eq!(grew["content"][0]["text"], "added", "{grew}");
    // The client is told (bounded: within moments).
    session.wait_for("notifications/tools/list_changed");
    // Bounded: the new list arrives within moments.
    let started = std::time::Instant::now();
    while !names(&mut session).contains(&"crashy_grown".to_string()) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the new tool never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let grown = session.call("crashy_grown", json!({}));
    assert_eq!(grown["content"][0]["text"], "grown", "{grown}");
}

#[test]
fn a_filesystem_server_behind_a_deny_rule_reads_but_cannot_write() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "kept").unwrap();
    let policy = Policy::new(&format!(
        "[gadgets]\ndeny = [\"fs_write_file\", \"fs_edit_file\", \"fs_create_directory\", \"fs_move_file\"]\n\
         [mcp-servers.fs]\ncommand = [\"node\", {:?}, {:?}]\n",
        reference_server("server-filesystem"),
        root.path()
    ));
    let notes = root.path().join("notes.txt");
    let out = policy.gadget(&[
        "call",
        "fs_read_text_file",
        "--params",
        &json!({"path": notes}).to_string(),
    ]);
    assert!(
        out.status.success() && said(&out).contains("kept"),
        "{}",
        said(&out)
    );
    let out = policy.gadget(&[
        "call",
        "fs_write_file",
        "--params",
        &json!({"path": notes, "content": "overwritten"}).to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "kept");
    // An upstream error (outside its allowed directories) is the call's
    // error, not the host's.
    let out = policy.gadget(&[
        "call",
        "fs_read_text_file",
        "--params",
        r#"{"path": "/etc/hostname"}"#,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        said(&out).contains("outside allowed directories"),
        "{}",
        said(&out)
    );
}

/// server-everything over Streamable HTTP, on a port of its own; killed
/// when dropped.
struct HttpEverything {
    child: Child,
    port: u16,
}

impl HttpEverything {
    pub(crate) fn start() -> HttpEverything {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("node")
            .arg(reference_server("server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Bounded: node starts it in well under a second.
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "server-everything did not listen on {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        HttpEverything { child, port }
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn streamable_http_servers_are_upstreams_too_with_their_bearer_token() {
    // server-everything over Streamable HTTP: called, its progress kept,
    // its long call cancelled at the deadline.
    let everything = HttpEverything::start();
    let policy = Policy::new(&format!(
        "[mcp-servers.remote]\nurl = \"http://127.0.0.1:{}/mcp\"\ntimeout-ms = 1500\n",
        everything.port
    ));
    let out = policy.gadget(&["call", "remote_get_sum", "--params", r#"{"a":1,"b":2}"#]);
    assert!(
        said(&out).contains("The sum of 1 and 2 is 3."),
        "{}",
        said(&out)
    );
    let out = policy.gadget(&[
        "call",
        "--json",
        "remote_trigger_long_running_operation",
        "--params",
        r#"{"duration":0.4,"steps":4}"#,
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["progress"].as_array().unwrap().len() >= 2,
        "{report}"
    );
    let out = policy.gadget(&[
        "call",
        "remote_trigger_long_running_operation",
        "--params",
        r#"{"duration":20,"steps":20}"#,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        said(&out).contains("exceeded timeout of 1500ms"),
        "{}",
        said(&out)
    );

    // Another gadget-host behind a bearer token (`gadget serve`): the
    // token comes from the variable the policy names.
    let served = crate::serve::Server::start(&[], "upstream-token");
    let policy = Policy::new(&format!(
        "[mcp-servers.other]\nurl = {:?}\nbearer-token-env = \"OTHER_TOKEN\"\n",
        served.url()
    ));
    let add = [
        "call",
        "other_Calculator",
        "--params",
        r#"{"operation":"add","a":20,"b":22}"#,
    ];
    let out = policy
        .command()
        .env("OTHER_TOKEN", "upstream-token")
        .args(add)
        .output()
        .unwrap();
    assert!(
        out.status.success() && said(&out).contains("42"),
        "{}",
        said(&out)
    );
    // The wrong token: the server refuses, its tools are missing, and the
    // warning says which server.
    let out = policy
        .command()
        .env("OTHER_TOKEN", "wrong")
        .args(add)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("MCP server 'other' did not start"),
        "{}",
        said(&out)
    );
    // No token at all: the policy's variable is named.
    let out = policy
        .command()
        .env_remove("OTHER_TOKEN")
        .args(add)
        .output()
        .unwrap();
    assert!(
        !out.status.success() && said(&out).contains("has no OTHER_TOKEN"),
        "{}",
        said(&out)
    );
}

/// `tests/mcp/servers/modern_only.py`: a server that speaks only protocol
/// 2026-07-28 (no `initialize`; it refuses the old handshake).
pub(crate) struct ModernOnly {
    child: Child,
    pub(crate) port: u16,
    _dir: tempfile::TempDir,
}

impl ModernOnly {
    pub(crate) fn start() -> ModernOnly {
        ModernOnly::start_with(&[])
    }

    /// With `--oauth`: its own authorization server guards it.
    pub(crate) fn start_with(args: &[&str]) -> ModernOnly {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let child = Command::new("python3")
            .arg(common::workspace().join("tests/mcp/servers/modern_only.py"))
            .arg(&port_file)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Bounded: Python starts it in well under a second.
        let started = std::time::Instant::now();
        let port = loop {
            if let Some(port) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|p| p.trim().parse().ok())
            {
                break port;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "modern_only.py did not say where it listens"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        ModernOnly {
            child,
            port,
            _dir: dir,
        }
    }
}

impl Drop for ModernOnly {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_server_that_speaks_only_2026_07_28_is_reachable() {
    let modern = ModernOnly::start();
    let policy = Policy::new(&format!(
        "[mcp-servers.modern]\nurl = \"http://127.0.0.1:{}/mcp\"\n",
        modern.port
    ));
    let out = policy.gadget(&["call", "modern_echo", "--params", r#"{"text":"hi"}"#]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("echo: hi"), "{}", said(&out));
    // What it was sent: `server/discover`, never `initialize`, and every
    // request with the protocol version header.
    let out = policy.gadget(&["call", "modern_seen", "--params", "{}"]);
    let seen: Vec<(String, Option<String>)> =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(seen[0].0, "server/discover", "{seen:?}");
    assert!(
        seen.iter().all(|(method, _)| method != "initialize"),
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|(_, v)| v.as_deref() == Some("2026-07-28")),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|(method, _)| method == "tools/call"),
        "{seen:?}"
    );
}

#[test]
fn a_server_that_keeps_asking_is_answered_a_bounded_number_of_rounds_and_questions() {
    let modern = ModernOnly::start();
    let policy = Policy::new(&format!(
        "[mcp-servers.modern]\nurl = \"http://127.0.0.1:{}/mcp\"\n",
        modern.port
    ));
    let answers = policy.path().join("answers.txt");
    std::fs::write(&answers, "{\"confirmed\": true}\n".repeat(20)).unwrap();
    let response = policy.path().join("response.txt");
    std::fs::write(
        &response,
        "!!!GADGET_START:modern_pester:p\n!!!GADGET_END\n",
    )
    .unwrap();
    let out = policy.gadget(&[
        "run",
        "--answers",
        answers.to_str().unwrap(),
        response.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "{}", said(&out));
    let limit = gadget_mcp::upstream::MAX_INPUT_ROUNDS;
    assert!(
        said(&out).contains(&format!("still asked for input after {limit} rounds")),
        "{}",
        said(&out)
    );
    // Of the 40 questions a round asks, the first 16 are answered (what
    // one ask of a gadget may hold), in every one of the rounds.
    let out = policy.gadget(&["call", "modern_answered", "--params", "{}"]);
    let answered: Vec<usize> =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(
        answered,
        vec![gadget_host::ask::MAX_QUESTIONS_PER_ASK; limit],
        "{}",
        said(&out)
    );
}
