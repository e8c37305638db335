//! The caller's identity on `gadget serve --auth-jwks`: JWT access tokens
//! minted here against an Ed25519 key made here, checked by the server
//! against a JWKS file. A good token's subject reaches the journal and
//! the per-client rate limits; an expired one, one signed by a foreign
//! key, one for another audience or issuer, and none at all are refused
//! with 401 and a `WWW-Authenticate` that says why and where the
//! protected-resource metadata is. The official Python client calls with
//! a token.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use serde_json::{Value, json};

use crate::mcp::{client, python};
use crate::serve::Server;

pub(crate) const AUDIENCE: &str = "https://gadgets.test/mcp";
pub(crate) const ISSUER: &str = "https://idp.test";

/// An Ed25519 key: what signs tokens, and its public half as a JWK.
pub(crate) struct Key {
    pkcs8: Vec<u8>,
    pub(crate) jwk: Value,
}

pub(crate) fn key(kid: &str) -> Key {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    Key {
        pkcs8: pkcs8.as_ref().to_vec(),
        jwk: json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"}),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A token for `sub` signed by `key` as `kid`, with `claims` over the
/// good defaults (this audience and issuer, valid for an hour).
pub(crate) fn token(key: &Key, kid: &str, sub: &str, claims: Value) -> String {
    let mut all =
        json!({"sub": sub, "aud": AUDIENCE, "iss": ISSUER, "exp": now() + 3600, "nbf": now() - 10});
    for (name, value) in claims.as_object().unwrap() {
        all[name] = value.clone();
    }
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_string());
    jsonwebtoken::encode(&header, &all, &EncodingKey::from_ed_der(&key.pkcs8)).unwrap()
}

/// A token for `sub` whose header is `header` whole (what the JWT
/// library cannot write, such as `crit`), signed by `key`.
fn token_with_header(key: &Key, header: Value, sub: &str) -> String {
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims =
        json!({"sub": sub, "aud": AUDIENCE, "iss": ISSUER, "exp": now() + 3600, "nbf": now() - 10});
    let signed = format!(
        "{}.{}",
        engine.encode(header.to_string()),
        engine.encode(claims.to_string())
    );
    let pair = Ed25519KeyPair::from_pkcs8(&key.pkcs8).unwrap();
    let signature = engine.encode(pair.sign(signed.as_bytes()).as_ref());
    format!("{signed}.{signature}")
}

/// A server checking tokens against `key`, with a per-client limit of
/// one AddDays call and a journal.
fn served(key: &Key, dir: &std::path::Path) -> Server {
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, json!({"keys": [key.jwk]}).to_string()).unwrap();
    let config = dir.join("policy.toml");
    std::fs::write(
        &config,
        "[[rate-limits]]\ngadget = \"AddDays\"\ncalls = 1\nper-seconds = 600\nscope = \"client\"\n\n\
         [[rules]]\ngadget = \"Calculator\"\nparam = \"\"\nmatches = \"*\"\naction = \"deny\"\nclient = \"mal*\"\nreason = \"not for you\"\n",
    )
    .unwrap();
    let journal = dir.join("audit.jsonl");
    Server::start_jwt(
        &config,
        &[
            "--auth-jwks",
            jwks.to_str().unwrap(),
            "--auth-audience",
            AUDIENCE,
            "--auth-issuer",
            ISSUER,
        ],
        &journal,
    )
}

fn call(
    server: &Server,
    token: Option<&str>,
    name: &str,
    arguments: &str,
) -> (u16, String, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    server.call_tool(bearer.as_deref(), name, arguments)
}

#[test]
fn a_token_the_keys_verify_names_the_caller_and_any_other_is_refused_with_401() {
    let dir = tempfile::tempdir().unwrap();
    let signer = key("k1");
    let server = served(&signer, dir.path());
    let add = r#"{"operation":"add","a":2,"b":3}"#;

    let alice = token(&signer, "k1", "alice", json!({}));
    let (status, _, body) = call(&server, Some(&alice), "Calculator", add);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""text":"5""#), "{body}");

    // Each refused: 401, and a challenge that says why and where to look.
    let foreign = key("k1");
    let cases = [
        (None, "invalid_request", "a bearer access token is required"),
        (
            Some(token(&signer, "k1", "alice", json!({"exp": now() - 3600}))),
            "invalid_token",
            "the token has expired",
        ),
        (
            Some(token(&foreign, "k1", "alice", json!({}))),
            "invalid_token",
            "the token's signature does not verify",
        ),
        (
            Some(token(
                &signer,
                "k1",
                "alice",
                json!({"aud": "https://elsewhere.test/mcp"}),
            )),
            "invalid_token",
            "the token is not for this server (audience https://gadgets.test/mcp)",
        ),
        (
            Some(token(
                &signer,
                "k1",
                "alice",
                json!({"iss": "https://rogue.test"}),
            )),
            "invalid_token",
            "the token is not from the expected issuer (https://idp.test)",
        ),
        (
            Some(token(&signer, "k1", "alice", json!({"nbf": now() + 3600}))),
            "invalid_token",
            "the token is not valid yet (nbf)",
        ),
        (
            Some(token(&signer, "k9", "alice", json!({}))),
            "invalid_token",
            "no key 'k9' in the authorization server's keys",
        ),
        (
            Some("not.a.jwt".to_string()),
            "invalid_token",
            "the token is not a JWT",
        ),
        // An extension this server does not know, marked critical.
        (
            Some(token_with_header(
                &signer,
                json!({"alg": "EdDSA", "kid": "k1", "crit": ["exp-v2"], "exp-v2": 1}),
                "alice",
            )),
            "invalid_token",
            "marks parameters critical (exp-v2)",
        ),
        // Subjects that would read as someone else in a log.
        (
            Some(token(&signer, "k1", "\u{202E}ecila", json!({}))),
            "invalid_token",
            "bidirectional or zero-width characters",
        ),
        (
            Some(token(&signer, "k1", "ali\u{200B}ce", json!({}))),
            "invalid_token",
            "bidirectional or zero-width characters",
        ),
    ];
    for (token, error, why) in &cases {
        let (status, head, body) = call(&server, token.as_deref(), "Calculator", add);
        assert_eq!(status, 401, "{why}: {head}\n{body}");
        let challenge = head
            .lines()
            .find_map(|line| line.strip_prefix("www-authenticate: "))
            .unwrap_or_else(|| panic!("no challenge: {head}"));
        assert!(
            challenge.starts_with(
                "Bearer resource_metadata=\"https://gadgets.test/.well-known/oauth-protected-resource/mcp\""
            ),
            "{challenge}"
        );
        assert!(
            challenge.contains(&format!("error=\"{error}\"")),
            "{challenge}"
        );
        assert!(body.contains(why), "{why}: {body}");
    }

    // The same hand-made header without `crit` is accepted: the refusal
    // above is the `crit`, not the helper.
    let plain = token_with_header(&signer, json!({"alg": "EdDSA", "kid": "k1"}), "alice");
    let (status, _, body) = call(&server, Some(&plain), "Calculator", add);
    assert_eq!(status, 200, "{body}");

    // A rule naming a client holds for that caller only (alice's calls
    // above ran under it).
    let mallory = token(&signer, "k1", "mallory", json!({}));
    let (status, _, body) = call(&server, Some(&mallory), "Calculator", add);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""isError":true"#), "{body}");
    assert!(
        body.contains("not for you (rule 1 of the policy: Calculator"),
        "{body}"
    );
    assert!(body.contains("for client mal*)"), "{body}");

    // The metadata is served without a token.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let (status, _, body) = server.request("GET", path, &[], "");
        assert_eq!(status, 200, "{path}: {body}");
        let metadata: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(metadata["resource"], AUDIENCE);
        assert_eq!(metadata["authorization_servers"], json!([ISSUER]));
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }

    // Per-client limits count each subject apart: alice's second call is
    // refused whole (429), bob's first is not.
    let days = r#"{"date":"2026-01-30","days":2}"#;
    let bob = token(&signer, "k1", "bob", json!({}));
    assert_eq!(call(&server, Some(&alice), "AddDays", days).0, 200);
    let (status, _, body) = call(&server, Some(&alice), "AddDays", days);
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("for client 'alice'"), "{body}");
    // A call refused before any tool is reached is journaled with its caller too.
    let (status, _, body) = call(&server, Some(&bob), "NoSuchGadget", "{}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(call(&server, Some(&bob), "AddDays", days).0, 200);

    let metrics = server.request(
        "GET",
        "/metrics",
        &[("Authorization", &format!("Bearer {alice}"))],
        "",
    );
    assert!(
        metrics.2.contains(&format!(
            "gadget_requests_refused_total{{reason=\"unauthorized\"}} {}",
            cases.len()
        )),
        "{}",
        metrics.2
    );
    // The journal names who called (its writer takes the records of an
    // idle server within a few hundred milliseconds; generous here).
    let journal = dir.path().join("audit.jsonl");
    let started = std::time::Instant::now();
    let records: Vec<Value> = loop {
        let text = std::fs::read_to_string(&journal).unwrap_or_default();
        if text.matches("call_finished").count() >= 4
            || started.elapsed() > std::time::Duration::from_secs(10)
        {
            break text
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // (gadget, client) of each record of one kind.
    let who = |event: &str| -> Vec<(&str, &str)> {
        let of_kind = records.iter().filter(|r| r["event"] == event);
        of_kind
            .map(|r| {
                let client = r["client"].as_str().unwrap_or("-");
                (r["gadget"].as_str().unwrap(), client)
            })
            .collect()
    };
    assert_eq!(
        who("call_started"),
        [
            ("Calculator", "alice"),
            ("Calculator", "alice"),
            ("AddDays", "alice"),
            ("AddDays", "bob")
        ],
        "{records:#?}"
    );
    let refused = who("call_refused");
    assert_eq!(refused, [("NoSuchGadget", "bob")], "{records:#?}");
}

#[test]
fn the_python_client_calls_with_an_access_token() {
    let dir = tempfile::tempdir().unwrap();
    let signer = key("main");
    let server = served(&signer, dir.path());
    let carol = token(&signer, "main", "carol", json!({}));
    let out = std::process::Command::new(python())
        .arg(client())
        .args([
            "call",
            &server.url(),
            &carol,
            "Calculator",
            r#"{"operation": "multiply", "a": 6, "b": 7}"#,
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report, json!({"text": "42", "is_error": false}));
}

#[test]
fn one_way_to_authenticate_at_a_time_and_keys_that_check_nothing_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |args: &[&str]| {
        std::process::Command::new(crate::common::gadget_bin())
            .arg("--plugins")
            .arg(crate::common::shipped_plugins())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("TEST_TOKEN", "s3cret")
            .output()
            .unwrap()
    };
    let both = serve(&[
        "--auth-token-env",
        "TEST_TOKEN",
        "--auth-jwks",
        "keys.json",
        "--auth-audience",
        AUDIENCE,
    ]);
    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"));
    let no_audience = serve(&["--auth-jwks", "keys.json"]);
    assert_eq!(no_audience.status.code(), Some(2));
    // A JWKS holding no key the server can check with is a start-up error.
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).unwrap();
    let useless = serve(&[
        "--auth-jwks",
        jwks.to_str().unwrap(),
        "--auth-audience",
        AUDIENCE,
    ]);
    let stderr = String::from_utf8_lossy(&useless.stderr);
    assert_eq!(useless.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("it holds no key this server can check a signature with"),
        "{stderr}"
    );
}

/// One stateless JSON-RPC request of protocol 2026-07-28 as `token`'s
/// caller: the status and body.
pub(crate) fn modern(server: &Server, token: &str, method: &str, params: Value) -> (u16, String) {
    let mut params = params;
    // The client's own `_meta`, if it wrote one (other capabilities).
    if params.get("_meta").is_none() {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        });
    }
    // What the `Mcp-Name` header names: a tool, or a task.
    let name = params["name"]
        .as_str()
        .or(params["taskId"].as_str())
        .unwrap_or_default()
        .to_string();
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}).to_string();
    let bearer = format!("Bearer {token}");
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Authorization", bearer.as_str()),
    ];
    if !name.is_empty() {
        headers.push(("Mcp-Name", name.as_str()));
    }
    let (status, _, body) = server.request("POST", "/mcp", &headers, &body);
    (status, body)
}

/// A task belongs to the caller that created it: another authenticated
/// caller who learns its id is told it does not exist when it reads,
/// cancels or answers it, and the task runs on; its owner sees it.
#[test]
fn a_task_answers_only_the_caller_that_created_it() {
    let dir = tempfile::tempdir().unwrap();
    let signer = key("k1");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, json!({"keys": [signer.jwk]}).to_string()).unwrap();
    let config = dir.path().join("policy.toml");
    std::fs::write(&config, "").unwrap();
    let plugins = crate::content::conformance_plugins(dir.path());
    let server = Server::start_jwt_plugins(
        &plugins,
        &config,
        &[
            "--auth-jwks",
            jwks.to_str().unwrap(),
            "--auth-audience",
            AUDIENCE,
            "--auth-issuer",
            ISSUER,
        ],
        &dir.path().join("audit.jsonl"),
    );
    let alice = token(&signer, "k1", "alice", json!({}));
    let mallory = token(&signer, "k1", "mallory", json!({}));
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 5, "label": "x"}});
    let (status, created) = modern(&server, &alice, "tools/call", call);
    assert_eq!(status, 200, "{created}");
    let id = created
        .split("\"taskId\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no task in {created}"))
        .to_string();
    let get = json!({"taskId": id});
    for method in ["tasks/get", "tasks/cancel"] {
        let (_, theirs) = modern(&server, &mallory, method, get.clone());
        assert!(theirs.contains("no task '"), "{method}: {theirs}");
        assert!(theirs.contains("-32602"), "{method}: {theirs}");
    }
    let update = json!({"taskId": id, "inputResponses": {}});
    let (_, theirs) = modern(&server, &mallory, "tasks/update", update);
    assert!(theirs.contains("no task '"), "{theirs}");
    let (status, own) = modern(&server, &alice, "tasks/get", get);
    assert_eq!(status, 200, "{own}");
    assert!(
        own.contains("\"working\""),
        "mallory's cancel reached it: {own}"
    );
}
