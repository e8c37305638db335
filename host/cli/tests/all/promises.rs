//! The docs' promises on the shipped path: the rules exactly as
//! `docs/policy.md` prints them, on the shipped gadgets, hold against
//! other spellings of the same URL or path, redirects and escapes; and a
//! rule whose pattern is plainly a URL holds on a gadget that declares no
//! format (the probe's `Fetch`), `gadget check` saying so.

use serde_json::{Value, json};

use crate::capabilities::{error_message, run};
use crate::cli::{stderr, stdout};
use crate::http_grants::TestServer;

/// `docs/policy.md`'s two rules, as printed there.
const DOCS_RULES: &str = r#"[[rules]]                            # on one parameter, by JSON pointer
gadget = "FetchUrl"                  # a name or glob
param = "/url"
matches = "http://*"                 # a glob (case-sensitive), or regex = "..." (unanchored)
action = "deny"                      # refused; the model reads the reason
reason = "Plain HTTP is not allowed: use https"

[[rules]]
gadget = "WriteFile"
param = "/path"
regex = "^/out/(secrets|keys)/"
action = "approve"                   # these calls wait for a person; the others run
reason = "It writes under /out/secrets or /out/keys"
"#;

fn call(policy: &str, args: &[&str], gadget: &str, params: Value) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    let params = params.to_string();
    all.extend(["call", gadget, "--params", &params, "--json"]);
    let out = run(Some(policy), &[], &all);
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)))
}

#[test]
fn the_docs_rules_hold_on_the_shipped_gadgets_whatever_the_spelling() {
    // The docs' deny rule, over the shipped FetchUrl: no spelling of a
    // plain-HTTP URL reaches the server.
    let site = TestServer::start();
    let origin = site.url("");
    let policy = format!("[plugins.web]\nhttp = [\"{origin}\"]\n\n{DOCS_RULES}");
    let hello = site.url("/hello");
    let rest = hello.strip_prefix("http://").unwrap();
    for url in [
        hello.clone(),
        format!("HTTP://{rest}"),
        format!("Http://{rest}"),
        format!("hTTp://{rest}"),
    ] {
        let refused = call(&policy, &[], "FetchUrl", json!({ "url": url }));
        assert_eq!(refused["ok"], false, "{url}: {refused}");
        assert!(
            error_message(&refused).contains("Plain HTTP is not allowed"),
            "{url}: {refused}"
        );
    }
    assert!(site.hits().is_empty(), "{:?}", site.hits());

    // The docs' approve rule, over the shipped WriteFile: other spellings
    // of a path under /out/secrets wait for a person too; with nobody to
    // ask, they are refused and nothing is written.
    let out_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(out_dir.path().join("secrets")).unwrap();
    let grant = format!("files:files={}:/out:rw", out_dir.path().display());
    for path in [
        "/out/secrets/a.txt",
        "/out//secrets/b.txt",
        "/out/./secrets/c.txt",
        "/out/x/../secrets/d.txt",
    ] {
        let held = call(
            &policy,
            &["--grant", &grant],
            "WriteFile",
            json!({ "path": path, "content": "x" }),
        );
        assert_eq!(held["ok"], false, "{path}: {held}");
        assert!(
            error_message(&held).contains("It writes under /out/secrets or /out/keys"),
            "{path}: {held}"
        );
    }
    let written: Vec<_> = std::fs::read_dir(out_dir.path().join("secrets"))
        .unwrap()
        .collect();
    assert!(written.is_empty(), "{written:?}");
    // Elsewhere under /out the same gadget writes.
    let fine = call(
        &policy,
        &["--grant", &grant],
        "WriteFile",
        json!({ "path": "/out/notes.txt", "content": "x" }),
    );
    assert_eq!(fine["ok"], true, "{fine}");
}

#[test]
fn a_rule_on_admin_holds_against_escapes_and_redirects() {
    let site = TestServer::start();
    let origin = site.url("");
    let policy = format!(
        "[plugins.web]\nhttp = [\"{origin}\"]\n\n[[rules]]\ngadget = \"FetchUrl\"\nparam = \"/url\"\nmatches = \"*/admin*\"\naction = \"deny\"\nreason = \"no admin pages\"\n"
    );
    for url in [
        site.url("/%61dmin/panel"),
        site.url("/x/../admin"),
        site.url("/to-admin"),
    ] {
        let refused = call(&policy, &[], "FetchUrl", json!({ "url": url }));
        assert_eq!(refused["ok"], false, "{url}: {refused}");
        let said = refused.to_string();
        assert!(said.contains("no admin pages"), "{url}: {said}");
    }
    // The redirect was asked for; its target never was.
    assert!(
        site.hits()
            .iter()
            .all(|hit| hit == "/to-admin" || !hit.contains("admin")),
        "{:?}",
        site.hits()
    );
    assert!(
        site.hits().iter().any(|hit| hit == "/to-admin"),
        "{:?}",
        site.hits()
    );
}

#[test]
fn a_url_pattern_holds_on_a_gadget_that_declares_no_format_and_check_says_so() {
    let site = TestServer::start();
    let origin = site.url("");
    // The probe's Fetch declares no format for its `url`.
    let policy = format!(
        "[plugins.probe]\nhttp = [\"{origin}\"]\n\n[[rules]]\ngadget = \"Fetch\"\nparam = \"/url\"\nmatches = \"http://*\"\naction = \"deny\"\nreason = \"use https\"\n"
    );
    let rest = site.url("/hello");
    let rest = rest.strip_prefix("http://").unwrap();
    let refused = call(
        &policy,
        &[],
        "Fetch",
        json!({ "url": format!("HTTP://{rest}") }),
    );
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(error_message(&refused).contains("use https"), "{refused}");
    assert!(site.hits().is_empty(), "{:?}", site.hits());

    let out = run(
        Some(&policy),
        &[],
        &[
            "check",
            crate::capabilities::probe_plugin()
                .join("probe")
                .to_str()
                .unwrap(),
        ],
    );
    let said = stdout(&out);
    assert!(
        said.contains("rule 1 (Fetch /url matches \"http://*\"): the pattern is a URL, so /url is matched as a URL"),
        "{said}\n{}",
        stderr(&out)
    );
}

/// Every file the operator names is read only when it is a regular file,
/// and within a limit: a device is refused at once (never read without
/// end), a FIFO refused without waiting for a writer.
#[test]
fn operator_files_that_are_not_files_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let fifo = fifo.to_str().unwrap();
    let calc = r#"{"operation": "add", "a": 1, "b": 2}"#;
    let approve = "[gadgets]\napprove = [\"Calculator\"]\n";
    for (policy, args, said) in [
        (
            None,
            vec!["--locked", "--lock-file", "/dev/zero", "list"],
            "/dev/zero is not a regular file",
        ),
        (
            None,
            vec!["--locked", "--lock-file", fifo, "list"],
            "is not a regular file",
        ),
        (
            Some(approve),
            vec![
                "call",
                "--approvals",
                "/dev/zero",
                "Calculator",
                "--params",
                calc,
            ],
            "/dev/zero is not a regular file",
        ),
        (
            Some(approve),
            vec!["call", "--approvals", fifo, "Calculator", "--params", calc],
            "is not a regular file",
        ),
    ] {
        let started = std::time::Instant::now();
        let out = run(policy, &[], &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{args:?}"
        );
    }
    // The policy file itself, named as a FIFO.
    let out = std::process::Command::new(crate::common::gadget_bin())
        .args(["--config", fifo, "list"])
        .env_remove("GADGET_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        stderr(&out)
    );
}
