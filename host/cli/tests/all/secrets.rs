//! Brokered secrets through the real binary, against local HTTP servers
//! that record every request head: the value arrives only where the
//! operator bound it, the gadget and everything it emits hold only the
//! placeholder, and a placeholder sent anywhere else is refused before
//! anything is sent, and journaled.

use serde_json::Value;

use crate::capabilities::{error_message, run};
use crate::cli::{stderr, stdout};
use crate::http_grants::{TestServer, host_logs};

/// The value the host holds; the gadget must never see it.
const VALUE: &str = "tok-5ecret-8b1f";

/// How the placeholder the gadget sees for it begins (its end is random,
/// made afresh at each load: each `gadget call` has its own).
const PLACEHOLDER: &str = "gadget-secret-SECRET_TOKEN-";

/// A `probe` policy: HTTP to both servers, SECRET_TOKEN brokered to the
/// first (with `extra` lines in its table), the journal in `journal`.
fn policy(
    bound: &TestServer,
    other: &TestServer,
    extra: &str,
    journal: &std::path::Path,
) -> String {
    format!(
        "[audit]\nfile = \"{}\"\n[plugins.probe]\nhttp = [\"{}\", \"{}\"]\n[plugins.probe.secrets.SECRET_TOKEN]\nenv = \"PROBE_TOKEN\"\norigins = [\"{}\"]\n{extra}",
        journal.display(),
        bound.url(""),
        other.url(""),
        bound.url("")
    )
}

/// Calls a probe gadget under `policy`; the whole output must not hold
/// the value.
fn call(policy: &str, gadget: &str, params: Value) -> Value {
    let out = run(
        Some(policy),
        &[("PROBE_TOKEN", VALUE)],
        &["call", gadget, "--params", &params.to_string(), "--json"],
    );
    let (said, err) = (stdout(&out), stderr(&out));
    assert!(
        !said.contains(VALUE) && !err.contains(VALUE),
        "the secret reached the output of {gadget}:\n{said}\n{err}"
    );
    serde_json::from_str(&said).unwrap_or_else(|e| panic!("{e}: {said}\n{err}"))
}

/// The placeholder one load of the probe sees for SECRET_TOKEN.
fn placeholder(policy: &str) -> String {
    let env = call(policy, "Env", serde_json::json!({}));
    let result = env["result"].as_str().unwrap().to_string();
    let line = result
        .lines()
        .find_map(|l| l.strip_prefix("SECRET_TOKEN="))
        .unwrap_or_else(|| panic!("no SECRET_TOKEN in {result}"))
        .to_string();
    assert!(line.starts_with(PLACEHOLDER), "{line}");
    line
}

#[test]
fn a_brokered_secret_reaches_its_origin_only_and_the_gadget_holds_a_placeholder() {
    let (bound, other) = (TestServer::start(), TestServer::start());
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("audit.jsonl");
    let policy = policy(&bound, &other, "", &journal);
    let place = placeholder(&policy);
    assert_ne!(place, placeholder(&policy), "the same placeholder twice");

    // In a header and the query, to its origin: the value arrives there.
    let sent = call(
        &policy,
        "Send",
        serde_json::json!({
            "url": bound.url("/hello?key=${SECRET_TOKEN}&x=1"),
            "headers": [["authorization", "Bearer ${SECRET_TOKEN}"]],
        }),
    );
    assert_eq!(sent["result"], "200 hello from the test server", "{sent}");
    let head = bound.heads().pop().unwrap();
    assert!(
        head.starts_with(&format!("GET /hello?key={VALUE}&x=1 ")),
        "{head}"
    );
    assert!(
        head.contains(&format!("authorization: Bearer {VALUE}\r\n")),
        "{head}"
    );
    assert!(!head.contains(PLACEHOLDER), "{head}");

    // An origin that echoes the credential hands back the placeholder.
    let echoed = call(
        &policy,
        "Send",
        serde_json::json!({
            "url": bound.url("/echo"),
            "headers": [["authorization", "Bearer ${SECRET_TOKEN}"]],
        }),
    );
    let result = echoed["result"].as_str().unwrap();
    assert!(
        result.contains(&format!("authorization: Bearer {PLACEHOLDER}")),
        "{result}"
    );
    assert!(
        echoed["details"]["headers"]
            .to_string()
            .contains(&format!("x-echo: authorization: Bearer {PLACEHOLDER}")),
        "{echoed}"
    );
    assert!(bound.heads().pop().unwrap().contains(VALUE));

    // An origin that compresses its echo anyway (the host asked for
    // identity): the scrubber cannot read it, so the answer is refused.
    let compressed = call(
        &policy,
        "Send",
        serde_json::json!({
            "url": bound.url("/gzecho"),
            "headers": [["authorization", "Bearer ${SECRET_TOKEN}"]],
        }),
    );
    assert_eq!(compressed["ok"], false, "{compressed}");
    let said = host_logs(&compressed);
    assert!(
        said.contains("answered with Content-Encoding gzip, which the host cannot scrub"),
        "{said}"
    );
    let head = bound.heads().pop().unwrap();
    assert!(head.contains("accept-encoding: identity"), "{head}");

    // To any other origin, in a header, the query or the body: refused
    // before anything is sent, naming where it may go.
    for (method, url, headers, body) in [
        (
            "GET",
            other.url("/hello"),
            vec![["x-key", "${SECRET_TOKEN}"]],
            None,
        ),
        ("GET", other.url("/hello?k=${SECRET_TOKEN}"), vec![], None),
        (
            "POST",
            other.url("/hello"),
            vec![],
            Some("token=${SECRET_TOKEN}"),
        ),
    ] {
        let refused = call(
            &policy,
            "Send",
            serde_json::json!({ "method": method, "url": url, "headers": headers, "body": body }),
        );
        assert_eq!(refused["ok"], false, "{refused}");
        assert!(
            error_message(&refused).contains("the host refused the request"),
            "{refused}"
        );
        let said = host_logs(&refused);
        assert!(
            said.contains(
                "carries the placeholder of the secret SECRET_TOKEN, which may go only to"
            ) && said.contains("[plugins.probe.secrets.SECRET_TOKEN] origins"),
            "{said}"
        );
    }
    assert!(other.hits().is_empty(), "{:?}", other.heads());

    // Everything a gadget emits holds the placeholder at most.
    let leak = call(
        &policy,
        "Leak",
        serde_json::json!({ "key": "SECRET_TOKEN" }),
    );
    let result = leak["result"].as_str().unwrap();
    assert!(
        result.starts_with(&format!("result {PLACEHOLDER}")),
        "{leak}"
    );

    // The refusals are in the journal, naming the secret and never its value.
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(!text.contains(VALUE), "{text}");
    let refusals: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["event"] == "http" && r["detail"]["refused"].is_string())
        .collect();
    // Three requests refused before they left, one answer refused.
    assert_eq!(refusals.len(), 4, "{text}");
    for refusal in refusals {
        let why = refusal["detail"]["refused"].as_str().unwrap();
        assert!(
            why.contains("secret SECRET_TOKEN") || why.contains("carried a secret"),
            "{why}"
        );
    }
}

#[test]
fn a_secret_with_a_header_goes_there_alone_and_a_misplaced_placeholder_is_refused() {
    let (bound, other) = (TestServer::start(), TestServer::start());
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("audit.jsonl");
    let policy = policy(
        &bound,
        &other,
        "header = \"Authorization\"\nformat = \"Bearer {}\"\n",
        &journal,
    );

    // The host sets the header on every request to the origin, over
    // whatever the gadget wrote there; other origins never get it.
    for headers in [vec![], vec![["authorization", "Bearer ${SECRET_TOKEN}"]]] {
        let sent = call(
            &policy,
            "Send",
            serde_json::json!({ "url": bound.url("/hello"), "headers": headers }),
        );
        assert_eq!(sent["result"], "200 hello from the test server", "{sent}");
        let head = bound.heads().pop().unwrap();
        assert!(
            head.contains(&format!("authorization: Bearer {VALUE}\r\n")),
            "{head}"
        );
        assert_eq!(head.matches("authorization").count(), 1, "{head}");
    }
    let plain = call(
        &policy,
        "Fetch",
        serde_json::json!({ "url": other.url("/hello") }),
    );
    assert_eq!(plain["ok"], true, "{plain}");
    assert!(
        !other
            .heads()
            .concat()
            .to_ascii_lowercase()
            .contains("authorization")
    );

    // The placeholder anywhere but the operator's header, even to the
    // bound origin: refused, saying where the secret goes.
    let before = bound.hits().len();
    for (url, headers) in [
        (bound.url("/hello"), vec![["x-api-key", "${SECRET_TOKEN}"]]),
        (bound.url("/hello?key=${SECRET_TOKEN}"), vec![]),
    ] {
        let refused = call(
            &policy,
            "Send",
            serde_json::json!({ "url": url, "headers": headers }),
        );
        assert_eq!(refused["ok"], false, "{refused}");
        assert!(
            host_logs(&refused)
                .contains("the host puts SECRET_TOKEN only in the authorization header"),
            "{}",
            host_logs(&refused)
        );
    }
    assert_eq!(bound.hits().len(), before, "a refused request was sent");
}

#[test]
fn a_secret_scoped_to_a_method_and_path_and_a_placeholder_in_the_path() {
    let (bound, other) = (TestServer::start(), TestServer::start());
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("audit.jsonl");
    // Bound to GET /hello on its origin: the whole origin is granted for
    // HTTP, the secret only there.
    let scoped = policy(&bound, &other, "", &journal).replace(
        &format!("origins = [\"{}\"]", bound.url("")),
        &format!(
            "origins = [{{ origin = \"{}\", methods = [\"GET\"], paths = [\"/hello\"] }}]",
            bound.url("")
        ),
    );
    let header = serde_json::json!([["authorization", "Bearer ${SECRET_TOKEN}"]]);
    let get = call(
        &scoped,
        "Send",
        serde_json::json!({ "url": bound.url("/hello"), "headers": header }),
    );
    assert_eq!(get["ok"], true, "{get}");
    let post = call(
        &scoped,
        "Send",
        serde_json::json!({ "method": "POST", "url": bound.url("/hello"), "headers": header }),
    );
    assert_eq!(post["ok"], false, "{post}");
    assert!(
        host_logs(&post).contains("which may go only to"),
        "{}",
        host_logs(&post)
    );
    let elsewhere = call(
        &scoped,
        "Send",
        serde_json::json!({ "url": bound.url("/page"), "headers": header }),
    );
    assert_eq!(elsewhere["ok"], false, "{elsewhere}");
    // Paths a server or a proxy reads as leaving /hello: refused with the
    // secret, each saying which reading.
    for (path, reading) in [
        ("/hello/..;/page", "before its ';' parameter"),
        ("/hello/%252e%252e/page", "decoded again"),
        ("/hello/%EF%BC%8E%EF%BC%8E/page", "look-alikes"),
        ("/hello/%E2%80%A5/page", "look-alikes"),
    ] {
        let refused = call(
            &scoped,
            "Send",
            serde_json::json!({ "url": bound.url(path), "headers": header }),
        );
        assert_eq!(refused["ok"], false, "{path}: {refused}");
        assert!(
            host_logs(&refused).contains(reading),
            "{path}: {}",
            host_logs(&refused)
        );
    }

    // In the path, where the host never puts a secret: refused.
    let whole = policy(&bound, &other, "", &journal);
    let in_path = call(
        &whole,
        "Send",
        serde_json::json!({ "url": bound.url("/bot${SECRET_TOKEN}/send") }),
    );
    assert_eq!(in_path["ok"], false, "{in_path}");
    assert!(
        host_logs(&in_path)
            .contains("is in the path; the host puts a secret only in a header or the query"),
        "{}",
        host_logs(&in_path)
    );
    assert_eq!(bound.hits(), ["/hello"], "a refused request was sent");
}

#[test]
fn check_and_describe_show_the_secret_and_an_origin_it_can_never_reach() {
    let (bound, other) = (TestServer::start(), TestServer::start());
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("audit.jsonl");
    // HTTP to the other server only: the secret's origin is out of reach.
    let policy = policy(&bound, &other, "header = \"Authorization\"\n", &journal)
        .replace(&format!("\"{}\", ", bound.url("")), "");
    let out = run(
        Some(&policy),
        &[("PROBE_TOKEN", VALUE)],
        &["describe", "Env", "--json"],
    );
    let said = stdout(&out);
    assert!(!said.contains(VALUE), "{said}");
    let described: Value = serde_json::from_str(&said).unwrap_or_else(|e| panic!("{e}: {said}"));
    let text = described.to_string();
    assert!(text.contains("SECRET_TOKEN"), "{text}");
    // Listed once, as the secret it is, not also as a config key.
    let out = run(
        Some(&policy),
        &[("PROBE_TOKEN", VALUE)],
        &["describe", "Env"],
    );
    let shown = stdout(&out);
    let granted = shown
        .lines()
        .find(|l| l.contains("Permissions granted"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(granted.matches("SECRET_TOKEN").count(), 1, "{granted}");
    assert!(
        text.contains(&format!(
            "secret SECRET_TOKEN may go to {}, which the plugin's HTTP grants do not reach",
            bound.url("")
        )),
        "{text}"
    );

    // Config and a secret for one key: the policy is refused, saying why.
    let both =
        format!("{policy}[plugins.probe.config]\nSECRET_TOKEN = {{ env = \"PROBE_TOKEN\" }}\n");
    let out = run(Some(&both), &[("PROBE_TOKEN", VALUE)], &["list"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("SECRET_TOKEN is also in plugins.probe.config"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_request_that_fails_never_shows_the_secret_it_carried() {
    // Reserved characters: in the query the value goes percent-encoded,
    // a form no redactor would recognise; messages show the gadget's URL.
    let value = "k/y+v=l&2";
    let encoded = "k%2Fy%2Bv%3Dl%262";
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("audit.jsonl");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let echo = TestServer::start();
    let policy = format!(
        "[audit]\nfile = \"{}\"\n[plugins.probe]\nhttp = [\"{origin}\", \"{1}\"]\n[plugins.probe.secrets.SECRET_TOKEN]\nenv = \"PROBE_TOKEN\"\norigins = [\"{origin}\", \"{1}\"]\n",
        journal.display(),
        echo.url("")
    );
    // An origin that echoes the URL hands back the placeholder, not the
    // encoded value for the gadget to decode.
    let params = serde_json::json!({ "url": echo.url("/echo?key=${SECRET_TOKEN}") });
    let out = run(
        Some(&policy),
        &[("PROBE_TOKEN", value)],
        &["call", "Send", "--params", &params.to_string(), "--json"],
    );
    let echoed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let result = echoed["result"].as_str().unwrap();
    assert!(
        result.starts_with(&format!("200 GET /echo?key={PLACEHOLDER}")),
        "{result}"
    );
    assert!(echo.heads()[0].contains(encoded), "{:?}", echo.heads());

    let params = serde_json::json!({ "url": format!("{origin}/x?key=${{SECRET_TOKEN}}") });
    let out = run(
        Some(&policy),
        &[("PROBE_TOKEN", value)],
        &["call", "Send", "--params", &params.to_string(), "--json"],
    );
    let said = format!("{}{}", stdout(&out), stderr(&out));
    let failed: Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {said}"));
    assert_eq!(failed["ok"], false, "{failed}");
    assert!(
        host_logs(&failed).contains(PLACEHOLDER),
        "{}",
        host_logs(&failed)
    );
    let text = std::fs::read_to_string(&journal).unwrap();
    for shown in [&said, &text] {
        assert!(
            !shown.contains(value) && !shown.contains(encoded),
            "{shown}"
        );
    }
}
