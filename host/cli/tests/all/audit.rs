//! The audit journal with the real binary: each call and each HTTP request
//! (sent or refused) recorded with the plugin's digest, the same effects
//! live in `--json`, secrets kept out, and `gadget audit verify` naming the
//! first changed or removed line; `gadget audit show` filters.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::approvals::fed;
use crate::common;
use crate::gates::said;
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
        )
        + &block("NoSuchGadget:nope", &[("x", "1")]);
    let output = fed(
        gadget()
            .arg("--config")
            .arg(&policy)
            .args(["run", "-", "--json"])
            .stderr(Stdio::null()),
        &response,
    );
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
    // A call refused at the door is kept too (never its parameters).
    let refused_call = records
        .iter()
        .find(|r| r["event"] == "call_refused")
        .unwrap();
    assert_eq!(refused_call["gadget"], "NoSuchGadget");
    assert_eq!(refused_call["detail"]["kind"], "unknown-gadget");

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
    // Keyed by default: the changed line's own MAC gives it away first.
    assert!(
        said.contains("line 2: record 2 was not written with this key"),
        "{said}"
    );
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
    // For people: the request and its answer, or why it was refused.
    assert!(
        shown.contains("GET http://127.0.0.1:")
            && shown.contains("/hello: 200, 0 bytes out, 26 bytes in"),
        "{shown}"
    );
    assert!(shown.contains("REFUSED: "), "{shown}");
}

/// `gadget` over the probe plugin, its `SECRET_TOKEN` granted from the
/// environment.
fn probe() -> Command {
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(crate::capabilities::probe_plugin())
        .env_remove("GADGET_CONFIG")
        .env_remove("RUST_LOG")
        .env("AUDIT_SECRET", SECRET)
        .args(["--grant", "probe:config=SECRET_TOKEN=env:AUDIT_SECRET"]);
    command
}

#[test]
fn gadget_logs_reach_the_operator_with_v_and_on_a_servers_stderr() {
    let leak = "!!!GADGET_START:Leak:l1\n!!!ARG:key\nSECRET_TOKEN\n!!!GADGET_END\n";
    let run = |verbose: &[&str]| {
        let mut command = probe();
        command
            .args(verbose)
            .args(["run", "-"])
            .stderr(Stdio::null());
        String::from_utf8_lossy(&fed(&mut command, leak).stdout).into_owned()
    };
    let quiet = run(&[]);
    assert!(!quiet.contains("info Leak"), "{quiet}");
    let shown = run(&["-v"]);
    assert!(
        shown.contains(r#"info Leak (l1): log [redacted] {"v":"[redacted]"}"#),
        "{shown}"
    );
    assert!(!shown.contains(SECRET));

    // `gadget mcp --log-format json`: the entry on stderr, with the call
    // and the gadget, as JSON.
    let mut server = probe()
        .args(["--log-format", "json", "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Leak","arguments":{"key":"SECRET_TOKEN"}}}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = server.stdout.take().unwrap();
    let answered = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains(r#""id":1"#))
    });
    assert!(answered.join().unwrap(), "the call was answered");
    drop(stdin);
    let output = server.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let entry: Value = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["target"] == "gadget")
        .unwrap_or_else(|| panic!("no gadget log on stderr:\n{stderr}"));
    assert_eq!(entry["level"], "INFO", "{entry}");
    assert_eq!(entry["fields"]["message"], "log [redacted]", "{entry}");
    assert_eq!(entry["fields"]["call"], "mcp_1", "{entry}");
    assert_eq!(entry["fields"]["gadget"], "Leak", "{entry}");
    assert!(!stderr.contains(SECRET), "{stderr}");
}

/// File operations in granted directories (each with the guest and host
/// path, bytes written, refusals by a read-only grant), config reads (the
/// keys, never the values), and a flood of file operations held to the
/// per-call cap with one record of how many were left out.
#[test]
fn the_journal_records_file_operations_and_config_reads_within_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let (rw, ro) = (dir.path().join("rw"), dir.path().join("ro"));
    std::fs::create_dir_all(&rw).unwrap();
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::write(ro.join("given.txt"), "read me").unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.probe]\nfiles = [{{ host = \"{}\", guest = \"/data\", mode = \"rw\" }}, {{ host = \"{}\", guest = \"/given\", mode = \"ro\" }}]\n",
            rw.display(),
            ro.display()
        ),
    )
    .unwrap();
    let journal = dir.path().join("audit.jsonl");
    let script = "write /data/out.txt 8\nread /given/given.txt\nwrite /given/evil.txt 1\nrename /data/out.txt /data/moved.txt\ntouch-many /data 1200";
    let response = format!(
        "!!!GADGET_START:Fs:f1\n!!!ARG:script\n{script}\n!!!GADGET_END\n!!!GADGET_START:Leak:l1\n!!!ARG:key\nSECRET_TOKEN\n!!!GADGET_END\n"
    );
    let out = fed(
        probe()
            .arg("--config")
            .arg(&policy)
            .arg("--audit")
            .arg(&journal)
            .args(["run", "-", "--json"])
            .stderr(Stdio::null()),
        &response,
    );
    assert!(out.status.success());
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(!text.contains(SECRET), "a secret reached the journal");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let file = |op: &str, path: &str| {
        records
            .iter()
            .find(|r| {
                r["event"] == "file" && r["detail"]["op"] == op && r["detail"]["path"] == path
            })
            .unwrap_or_else(|| panic!("no {op} of {path} in\n{text}"))
    };
    let created = file("create", "/data/out.txt");
    assert_eq!(
        created["detail"]["host"],
        rw.join("out.txt").display().to_string()
    );
    assert_eq!(created["gadget"], "Fs");
    assert_eq!(file("write", "/data/out.txt")["detail"]["bytes"], 8);
    assert!(file("open", "/given/given.txt")["detail"]["refused"].is_null());
    assert_eq!(file("read", "/given/given.txt")["detail"]["bytes"], 7);
    let refused = file("create", "/given/evil.txt");
    assert!(refused["detail"]["refused"].is_string(), "{refused}");
    assert_eq!(
        file("rename", "/data/out.txt")["detail"]["to"],
        "/data/moved.txt"
    );
    // 1,200 creations and more: the cap, then one count.
    let of_fs = records
        .iter()
        .filter(|r| r["call"] == "f1" && r["event"] == "file")
        .count() as u64;
    // (Its config read shares the journal's cap of 1,000 records.)
    assert!((990..=1000).contains(&of_fs), "{of_fs} file records");
    let omitted = records
        .iter()
        .find(|r| r["call"] == "f1" && r["event"] == "omitted")
        .unwrap_or_else(|| panic!("no omitted record:\n{text}"));
    assert_eq!(omitted["detail"]["of"], "file");
    assert!(
        omitted["detail"]["count"].as_u64().unwrap() >= 200,
        "{omitted}"
    );
    // The probe's Leak read its config: the key, not the value.
    let config = records
        .iter()
        .find(|r| r["call"] == "l1" && r["event"] == "config")
        .unwrap_or_else(|| panic!("no config read:\n{text}"));
    assert_eq!(
        config["detail"]["keys"],
        serde_json::json!(["SECRET_TOKEN"])
    );
}

/// A second process writing the same journal would fork its chain: it is
/// refused with a clear error.
#[test]
fn a_keyed_journal_verifies_only_with_its_key_and_has_one_writer() {
    let root = tempfile::tempdir().unwrap();
    let journal = root.path().join("audit.jsonl");
    let policy = format!(
        "[audit]\nfile = {:?}\nkey-env = \"JOURNAL_KEY\"\n",
        journal.display().to_string()
    );
    let config = root.path().join("policy.toml");
    std::fs::write(&config, &policy).unwrap();
    let run = |key: Option<&str>, args: &[&str]| {
        let mut command = Command::new(common::gadget_bin());
        command
            .current_dir(root.path())
            .env_remove("GADGET_CONFIG")
            .env_remove("JOURNAL_KEY")
            .arg("--config")
            .arg(&config)
            .arg("--plugins")
            .arg(common::shipped_plugins())
            .args(args)
            .stdin(Stdio::null());
        if let Some(key) = key {
            command.env("JOURNAL_KEY", key);
        }
        command.output().unwrap()
    };
    let calc = [
        "call",
        "Calculator",
        "--params",
        r#"{"operation": "add", "a": 1, "b": 2}"#,
    ];
    // No key in the environment: no unkeyed journal, an error instead.
    let out = run(None, &calc);
    assert!(!out.status.success());
    assert!(
        said(&out).contains("JOURNAL_KEY is not set"),
        "{}",
        said(&out)
    );
    for _ in 0..2 {
        let out = run(Some("the-operators-secret"), &calc);
        assert!(out.status.success(), "{}", said(&out));
    }
    let verify = |key: Option<&str>| run(key, &["audit", "verify", journal.to_str().unwrap()]);
    let out = verify(Some("the-operators-secret"));
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out)
            .contains("keyed with $JOURNAL_KEY: every line was written by a holder of the key"),
        "{}",
        said(&out)
    );
    // Another key: not verified. No key (no policy naming one, and a host
    // that has made none of its own): refused, not checked as a plain
    // chain.
    assert!(!verify(Some("another-secret")).status.success());
    let out = Command::new(common::gadget_bin())
        .env_remove("GADGET_CONFIG")
        .env("XDG_CONFIG_HOME", root.path().join("xdg"))
        .env("GADGET_STATE_DIR", root.path().join("no-state"))
        .args(["audit", "verify", journal.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        said(&out).contains("the journal is keyed"),
        "{}",
        said(&out)
    );
    // Edited and rehashed, as an unkeyed chain could be: the MAC fails.
    edit_last_outcome(&journal);
    let out = verify(Some("the-operators-secret"));
    assert!(!out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("not written with this key"),
        "{}",
        said(&out)
    );
}

/// Rewrites the journal's last record (its outcome), as someone who can
/// write the file could.
fn edit_last_outcome(journal: &Path) {
    let text = std::fs::read_to_string(journal).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let last = lines.len() - 1;
    lines[last] = lines[last].replace("\"result\"", "\"error\"");
    std::fs::write(journal, lines.join("\n") + "\n").unwrap();
}

/// Without `key-env` the journal is keyed all the same, with a key the
/// host makes in its own state: an edited journal does not verify, and
/// `audit verify` says which mode a journal is in and what it proves.
#[test]
fn a_journal_is_keyed_by_default_with_the_hosts_own_key() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let run = |policy: &str, state: &Path, args: &[&str]| {
        let config = root.path().join("policy.toml");
        std::fs::write(&config, policy).unwrap();
        Command::new(common::gadget_bin())
            .current_dir(root.path())
            .env_remove("GADGET_CONFIG")
            .env("GADGET_STATE_DIR", state)
            .arg("--config")
            .arg(&config)
            .arg("--plugins")
            .arg(common::shipped_plugins())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let calc = [
        "call",
        "Calculator",
        "--params",
        r#"{"operation": "add", "a": 1, "b": 2}"#,
    ];
    let journal = root.path().join("audit.jsonl");
    let keyed = format!("[audit]\nfile = {:?}\n", journal.display().to_string());
    for _ in 0..2 {
        let out = run(&keyed, &state, &calc);
        assert!(out.status.success(), "{}", said(&out));
    }
    let key = state.join("journal.key");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let verify = |state: &Path| {
        run(
            &keyed,
            state,
            &["audit", "verify", journal.to_str().unwrap()],
        )
    };
    let out = verify(&state);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("keyed with this host's key") && said(&out).contains("journal.key"),
        "{}",
        said(&out)
    );
    // Another host (no key of its own): refused, not read as a plain chain.
    let out = verify(&root.path().join("elsewhere"));
    assert!(!out.status.success());
    assert!(
        said(&out).contains("the journal is keyed"),
        "{}",
        said(&out)
    );
    // Edited, as a plain chain could be edited and rehashed: refused.
    edit_last_outcome(&journal);
    let out = verify(&state);
    assert!(!out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("not written with this key"),
        "{}",
        said(&out)
    );

    // Unkeyed only on request, and verify says what that proves.
    let plain = root.path().join("plain.jsonl");
    let unkeyed = format!(
        "[audit]\nfile = {:?}\nunkeyed = true\n",
        plain.display().to_string()
    );
    let out = run(&unkeyed, &state, &calc);
    assert!(out.status.success(), "{}", said(&out));
    let out = run(
        &unkeyed,
        &state,
        &["audit", "verify", plain.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("unkeyed: ") && said(&out).contains("anyone who can write the file"),
        "{}",
        said(&out)
    );
}
