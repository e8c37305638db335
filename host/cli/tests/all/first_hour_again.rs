//! The first hour, second pass: what a new user meets in the demo, the
//! agent, serve's logs, the image build and writing a gadget.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

/// One stateless (2026-07-28) `tools/call` of Calculator, as a client sends it.
fn call_calculator(port: u16) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Calculator","arguments":{"operation":"add","a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: Calculator\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(
        answer.contains("\"3\"") || answer.contains(": 3"),
        "{answer}"
    );
}

/// `gadget serve` at its default level, with `format`, through three
/// calls and a SIGTERM: what it wrote to stderr.
fn serve_log(format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr");
    let mut child = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .args(["--log-format", format, "serve", "--listen", "127.0.0.1:0"])
        .args(["--auth-token-env", "TEST_TOKEN"])
        .env("TEST_TOKEN", "s3cret")
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let port: u16 = loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(port) = said
            .split("http://127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split('/').next()?.parse().ok())
        {
            break port;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{said}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for _ in 0..3 {
        call_calculator(port);
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn serve_logs_its_start_and_stop_not_each_call() {
    let text = serve_log("text");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("serving "), "{text}");
    assert!(lines.last().unwrap().contains("stopped"), "{text}");
    // Start, drain, stop: nothing per call.
    assert_eq!(lines.len(), 3, "{text}");
    assert!(!text.contains("serve_inner"), "{text}");

    let json = serve_log("json");
    assert!(json.lines().count() >= 3, "{json}");
    for line in json.lines() {
        let record: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a plain line among the JSON ({e}): {line}"));
        assert!(record["fields"]["message"].is_string(), "{line}");
    }
    assert!(json.contains("serving "), "{json}");
    assert!(!json.contains("serve_inner"), "{json}");
}

/// Removes the directories it names when the test ends, however it ends.
struct Removed(Vec<std::path::PathBuf>);

impl Drop for Removed {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// What the Dockerfile invites: plugins made by `gadget new` copied into
/// the checkout's plugins/, a Python one and a Rust one (with its own
/// `[workspace]`). Cargo at the root still works (it took every folder of
/// plugins/ as a member), and the guest build skips what is not a member.
#[test]
fn any_plugin_copied_into_plugins_leaves_cargo_working() {
    let root = common::workspace();
    let tag = std::process::id();
    let python = root.join(format!("plugins/copied-python-{tag}"));
    let rust = root.join(format!("plugins/copied-rust-{tag}"));
    let _removed = Removed(vec![python.clone(), rust.clone()]);
    for (dir, lang) in [(&python, "python"), (&rust, "rust")] {
        let out = Command::new(common::gadget_bin())
            .args(["new", "copied", "--lang", lang, "--dir"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let metadata = Command::new("cargo")
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        metadata.status.success(),
        "{}",
        String::from_utf8_lossy(&metadata.stderr)
    );
    let members: serde_json::Value = serde_json::from_slice(&metadata.stdout).unwrap();
    let names: Vec<&str> = members["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"gadget-plugin-calculator"), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("copied")), "{names:?}");
}
