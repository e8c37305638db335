//! The audit journal with the real binary: each call and each HTTP request
//! (sent or refused) recorded with the plugin's digest, the same effects
//! live in `--json`, secrets kept out, and `gadget audit verify` naming the
//! first changed or removed line; `gadget audit show` filters.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common;
use crate::http_grants::TestServer;
use crate::llm_server::block;

const SECRET: &str = "hunter2-audit-secret";

fn gadget() -> Command {
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env("AUDIT_SECRET", SECRET);
    command
}

#[test]
fn the_journal_records_calls_and_requests_and_verify_names_a_broken_line() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("audit.jsonl");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[audit]\nfile = \"audit.jsonl\"\nrecord-params = true\n[plugins.web]\nhttp = [\"{}\"]\n[plugins.text]\nconfig = {{ KEY = {{ env = \"AUDIT_SECRET\" }} }}\n",
            server.url("").trim_end_matches('/')
        ),
    )
    .unwrap();
    let response = block("FetchUrl:ok", &[("url", &server.url("/hello"))])
        + &block("FetchUrl:refused", &[("url", "http://127.0.0.1:9/nowhere")])
        + &block(
            "TextStats:leak",
            &[("text", &format!("the key is {SECRET}"))],
        );
    let mut child = gadget()
        .arg("--config")
        .arg(&policy)
        .args(["run", "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(response.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // The same effects, live.
    let live: Vec<&Value> = events.iter().filter(|e| e["type"] == "effect").collect();
    assert_eq!(live.len(), 2, "{events:#?}");

    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(
        !text.contains(SECRET),
        "a secret reached the journal:\n{text}"
    );
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let http: Vec<&Value> = records.iter().filter(|r| r["event"] == "http").collect();
    assert_eq!(http.len(), 2, "{text}");
    let sent = http.iter().find(|r| r["call"] == "ok").unwrap();
    assert_eq!(sent["detail"]["status"], 200);
    assert_eq!(sent["detail"]["path"], "/hello");
    assert_eq!(sent["detail"]["bytes_in"], 26);
    assert_eq!(sent["plugin"], "web");
    assert_eq!(sent["digest"].as_str().unwrap().len(), 64);
    let refused = http.iter().find(|r| r["call"] == "refused").unwrap();
    assert!(
        refused["detail"]["refused"]
            .as_str()
            .unwrap()
            .contains("not granted"),
        "{refused}"
    );
    let leak = records
        .iter()
        .find(|r| r["call"] == "leak" && r["event"] == "call_started")
        .unwrap();
    assert_eq!(leak["detail"]["params"]["text"], "the key is [redacted]");

    let verify = |path: &std::path::Path| {
        let out = gadget()
            .args(["audit", "verify"])
            .arg(path)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, said) = verify(&journal);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains(&format!("{} records, the chain holds", records.len())),
        "{said}"
    );

    // A changed line, then a removed one: each named.
    let lines: Vec<&str> = text.lines().collect();
    let changed = dir.path().join("changed.jsonl");
    let mut edited = lines.clone();
    let forged = lines[1].replace("\"seq\":2,", "\"seq\":2,\"note\":\"x\",");
    let forged = forged.replacen("\"event\":\"", "\"event\":\"x", 1);
    edited[1] = &forged;
    std::fs::write(&changed, edited.join("\n")).unwrap();
    let (code, said) = verify(&changed);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("line 2: record 2 was changed"), "{said}");
    let removed = dir.path().join("removed.jsonl");
    let mut shorter = lines.clone();
    shorter.remove(2);
    std::fs::write(&removed, shorter.join("\n")).unwrap();
    let (code, said) = verify(&removed);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("line 3: record 4 follows record 2"), "{said}");

    // `show`, filtered.
    let shown = gadget()
        .args(["audit", "show"])
        .arg(&journal)
        .args(["--gadget", "fetchurl", "--event", "http"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(shown.lines().count(), 2, "{shown}");
    assert!(
        shown.lines().all(|l| l.contains(" http FetchUrl (")),
        "{shown}"
    );
}
