//! OAuth with an upstream server (`tests/mcp/servers/modern_only.py
//! --oauth`, whose authorization page wants a person): without a person
//! the refusal names `gadget login`; `gadget login` prints where to
//! approve and takes the authorization response on its loopback listener;
//! the tokens are kept, private, and later runs use them (refreshed when
//! the server stops accepting one); `--forget` ends
//! that. (The suite's client leg covers the rest: discovery variants,
//! registration kinds, scopes, `iss`, a mismatched resource or issuer.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::upstream::{ModernOnly, Policy, said};

/// A GET as a browser sends it (no redirects followed): the status line,
/// the Location header if any, and the body.
fn get(url: &str) -> (String, Option<String>, String) {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let location = head
        .lines()
        .find_map(|l| l.strip_prefix("Location: ").map(str::to_string));
    (
        head.lines().next().unwrap_or("").to_string(),
        location,
        body.to_string(),
    )
}

#[test]
fn a_server_that_wants_a_person_is_authorized_by_gadget_login_and_its_tokens_are_kept() {
    let server = ModernOnly::start_with(&["--oauth"]);
    let base = format!("http://127.0.0.1:{}", server.port);
    let policy = Policy::new(&format!("[mcp-servers.modern]\nurl = \"{base}/mcp\"\n"));
    let echo = ["call", "modern_echo", "--params", r#"{"text":"hi"}"#];

    // No person at hand (stderr is not a terminal): refused, saying how.
    let out = policy.gadget(&echo);
    assert!(!out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("gadget login modern"), "{}", said(&out));

    // `gadget login`: the address to approve at is printed; approving
    // there sends the browser to the host's loopback listener.
    let mut login = policy
        .command()
        .args(["login", "modern"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(login.stderr.take().unwrap());
    let started = Instant::now();
    let authorization_url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "gadget login ended without printing where to approve"
        );
        if let Some(url) = line.trim().strip_prefix(&format!("{base}/authorize?")) {
            break format!("{base}/authorize?{url}");
        }
        assert!(started.elapsed() < Duration::from_secs(60));
    };
    let (status, _, page) = get(&authorization_url);
    assert!(status.contains("200"), "{status}");
    let approve = page.split("approve: ").nth(1).unwrap().trim();
    let (status, back, _) = get(&format!("{base}{approve}"));
    assert!(status.contains("302"), "{status}");
    let back = back.unwrap();
    assert!(back.starts_with("http://127.0.0.1:"), "{back}");
    let (status, _, page) = get(&back);
    assert!(status.contains("200"), "{status}");
    assert!(page.contains("authorization response"), "{page}");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let status = login.wait().unwrap();
    assert!(status.success(), "{rest}");
    assert!(rest.contains("4 tools"), "{rest}");

    // Kept, private to the user.
    let kept: Vec<_> = std::fs::read_dir(policy.path().join("state/oauth"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&kept[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");

    // A later run uses them: no person needed.
    let out = policy.gadget(&echo);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("echo: hi"), "{}", said(&out));

    // A token the server stops accepting is refreshed, still with no
    // person (the refresh token was kept with it).
    let (status, _, _) = get(&format!("{base}/revoke"));
    assert!(status.contains("200"), "{status}");
    let out = policy.gadget(&echo);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("echo: hi"), "{}", said(&out));

    // --forget removes them: refused again.
    let out = policy.gadget(&["login", "modern", "--forget"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(!kept[0].exists());
    let out = policy.gadget(&echo);
    assert!(said(&out).contains("gadget login modern"), "{}", said(&out));
}

#[test]
fn oauth_is_refused_where_it_cannot_apply() {
    for (body, expected) in [
        (
            "[mcp-servers.s]\ncommand = [\"true\"]\noauth = { scopes = [\"a\"] }\n",
            "OAuth is for a url server",
        ),
        (
            "[mcp-servers.s]\nurl = \"http://127.0.0.1:9/mcp\"\noauth = { client-secret-env = \"S\" }\n",
            "a secret belongs to a client-id",
        ),
        (
            "[mcp-servers.s]\nurl = \"http://127.0.0.1:9/mcp\"\noauth = { client-metadata-url = \"http://x/m.json\" }\n",
            "is not an https:// URL",
        ),
    ] {
        let out = Policy::new(body).gadget(&["list"]);
        assert!(!out.status.success(), "{}", said(&out));
        assert!(said(&out).contains(expected), "{}", said(&out));
    }
    // `gadget login` of a server with a fixed token says why not.
    let policy = Policy::new(
        "[mcp-servers.s]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer-token-env = \"HOME\"\n",
    );
    let out = policy.gadget(&["login", "s"]);
    assert!(!out.status.success());
    assert!(
        said(&out).contains("not authorized with OAuth"),
        "{}",
        said(&out)
    );
}
