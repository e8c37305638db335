//! Grants from manifests and policies, door by door.

use std::net::IpAddr;
use std::path::Path;

use super::*;
use crate::manifest::FileRequest;
use crate::manifest::{FileMode, Permissions};
use crate::policy::FileGrant;
use crate::policy::PluginPolicy;
use crate::resolve::resolve;

fn policy(text: &str) -> PluginPolicy {
    crate::policy::Policy::parse(text, Path::new("."))
        .unwrap()
        .plugins
        .remove("p")
        .unwrap()
}

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn origins_match_scheme_host_and_port() {
    let rule = OriginRule::parse("https://*.wikipedia.org").unwrap();
    assert!(rule.allows(true, "en.wikipedia.org", 443));
    assert!(rule.allows(true, "EN.Wikipedia.org", 443));
    assert!(!rule.allows(true, "wikipedia.org", 443));
    assert!(!rule.allows(true, "evilwikipedia.org", 443));
    assert!(!rule.allows(true, "é.wikipedia.orgé", 443));
    assert!(!rule.allows(true, "xé.wikipedia.or", 443));
    assert!(!rule.allows(false, "en.wikipedia.org", 80));
    assert!(!rule.allows(true, "en.wikipedia.org", 8443));
    let rule = OriginRule::parse("http://127.0.0.1:8080").unwrap();
    assert!(rule.allows(false, "127.0.0.1", 8080));
    assert!(!rule.allows(false, "127.0.0.1", 80));
    assert!(OriginRule::parse("api.example.com").is_err());
    assert!(OriginRule::parse("ftp://example.com").is_err());
    assert!(OriginRule::parse("https://example.com/path").is_err());
    assert!(OriginRule::parse("https://user@example.com").is_err());
}

#[test]
fn internal_addresses_are_recognised() {
    for internal in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "100.64.0.1",
        "::1",
        "fd00::1",
        "fe80::1",
        "::ffff:127.0.0.1",
    ] {
        assert!(is_internal(internal.parse().unwrap()), "{internal}");
    }
    for public in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
        assert!(!is_internal(public.parse().unwrap()), "{public}");
    }
}

#[test]
fn an_internal_address_needs_an_explicit_grant() {
    let rules = HttpRules {
        origins: vec![
            OriginRule::parse("http://localhost:8080").unwrap(),
            OriginRule::parse("http://127.0.0.1:8080").unwrap(),
        ],
        addresses: vec![IpRange::parse("10.0.0.0/8").unwrap()],
    };
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    let by_name = rules.check_origin("p", false, "localhost", 8080).unwrap();
    let refusal = rules
        .check_address("p", by_name, "localhost", loopback)
        .unwrap_err();
    assert!(refusal.to_string().contains("allow-addresses"), "{refusal}");
    let by_address = rules.check_origin("p", false, "127.0.0.1", 8080).unwrap();
    assert!(
        rules
            .check_address("p", by_address, "127.0.0.1", loopback)
            .is_ok()
    );
    assert!(
        rules
            .check_address("p", by_name, "localhost", "10.9.9.9".parse().unwrap())
            .is_ok()
    );
    assert!(
        rules
            .check_address("p", by_name, "localhost", "93.184.216.34".parse().unwrap())
            .is_ok()
    );
    let refusal = rules
        .check_origin("p", true, "localhost", 8080)
        .unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "p: HTTP to https://localhost:8080 is not granted (grant it with [plugins.p] http = [\"https://localhost:8080\"] or --grant p:http=https://localhost:8080)"
    );
}

#[test]
fn only_what_both_sides_say_is_granted() {
    let requested = Permissions {
        llm: false,
        http: vec!["api.example.com".into(), "*.wikipedia.org".into()],
        config: vec!["API_KEY".into(), "UNITS".into(), "MISSING".into()],
        files: vec![],
    };
    let granted = policy(
        r#"[plugins.p]
http = ["https://api.example.com", "https://en.wikipedia.org", "https://evil.example.net"]
config = { API_KEY = { env = "TEST_KEY" }, UNITS = { value = "metric" }, OTHER = { value = "x" } }
"#,
    );
    let env = |var: &str| (var == "TEST_KEY").then(|| "s3cret-value".to_string());
    let (grants, notes) = resolve("p", &requested, Some(&granted), &Default::default(), &env);
    let origins: Vec<&str> = grants
        .http
        .origins
        .iter()
        .map(|o| o.text.as_str())
        .collect();
    assert_eq!(
        origins,
        ["https://api.example.com", "https://en.wikipedia.org"]
    );
    assert_eq!(grants.config.len(), 2);
    assert_eq!(grants.secrets(), ["s3cret-value"]);
    let notes: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
    let notes = notes.join("\n");
    assert!(notes.contains("http https://evil.example.net is granted, but the manifest does not ask for it: not applied"), "{notes}");
    assert!(
        notes.contains("asks for config MISSING, not granted"),
        "{notes}"
    );
    assert!(
        notes.contains("config OTHER is granted, but the manifest does not ask for it"),
        "{notes}"
    );
    assert!(
        !format!("{grants:?}").contains("s3cret"),
        "a secret in Debug output"
    );
}

#[test]
fn directories_take_the_narrower_mode() {
    let dir = tempfile::tempdir().unwrap();
    let requested = Permissions {
        llm: false,
        files: vec![
            FileRequest::Path("/data".into()),
            FileRequest::Full {
                path: "/out".into(),
                mode: FileMode::ReadWrite,
            },
        ],
        ..Permissions::default()
    };
    let granted = PluginPolicy {
        files: vec![
            FileGrant {
                host: dir.path().to_path_buf(),
                guest: Some("/data".into()),
                mode: FileMode::ReadWrite,
                write_quota_mib: None,
                max_entries: None,
                sensitive: false,
            },
            FileGrant {
                host: dir.path().to_path_buf(),
                guest: Some("/elsewhere".into()),
                mode: FileMode::ReadOnly,
                write_quota_mib: None,
                max_entries: None,
                sensitive: false,
            },
        ],
        ..PluginPolicy::default()
    };
    let (grants, notes) = resolve(
        "p",
        &requested,
        Some(&granted),
        &Default::default(),
        &no_env,
    );
    assert_eq!(grants.files.len(), 1);
    assert_eq!(grants.files[0].guest, "/data");
    assert_eq!(grants.files[0].mode, FileMode::ReadOnly);
    let notes: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
    let notes = notes.join("\n");
    assert!(
        notes.contains("granted rw, but the manifest asks for ro: read-only"),
        "{notes}"
    );
    assert!(
        notes.contains("does not ask for /elsewhere: not applied"),
        "{notes}"
    );
    assert!(
        notes.contains("asks for files /out (rw), not granted"),
        "{notes}"
    );
}

#[test]
fn nothing_is_granted_without_a_policy() {
    let requested = Permissions {
        llm: false,
        http: vec!["*".into()],
        config: vec!["KEY".into()],
        files: vec![FileRequest::Path("*".into())],
    };
    let (grants, notes) = resolve("p", &requested, None, &Default::default(), &no_env);
    assert!(grants.is_empty());
    assert_eq!(notes.len(), 3, "{notes:?}");
}

#[test]
fn ranges_contain_their_addresses() {
    let range = IpRange::parse("10.0.0.0/8").unwrap();
    assert!(range.contains("10.255.0.1".parse().unwrap()));
    assert!(!range.contains("11.0.0.1".parse().unwrap()));
    assert!(range.contains("::ffff:10.0.0.1".parse().unwrap()));
    assert!(IpRange::parse("10.0.0.0/33").is_err());
    assert_eq!(IpRange::parse("::1").unwrap().to_string(), "::1");
}

#[test]
fn a_scoped_grant_holds_a_request_to_its_methods_and_paths() {
    let scoped = OriginRule::parse("https://api.example")
        .unwrap()
        .scoped(&["get".into()], &["/v1/public/*".into()])
        .unwrap();
    let rules = HttpRules {
        origins: vec![OriginRule::parse("https://a.example").unwrap(), scoped],
        addresses: Vec::new(),
    };
    let check =
        |method: &str, path: &str| rules.check_request("p", method, true, "api.example", 443, path);
    assert_eq!(
        check("GET", "/v1/public/list").unwrap().describe(),
        "https://api.example (GET; /v1/public/*)"
    );
    assert!(
        check("GET", "/v1/public/%61").is_ok(),
        "an unreserved escape is decoded"
    );
    // Another origin's whole grant is its own.
    assert!(
        rules
            .check_request("p", "DELETE", true, "a.example", 443, "/x")
            .is_ok()
    );
    let post = check("POST", "/v1/public/list").unwrap_err().to_string();
    assert_eq!(
        post,
        "p: POST https://api.example/v1/public/list is outside its grant https://api.example (GET; /v1/public/*) (grant it with [plugins.p] http = [{ origin = \"https://api.example\", methods = [\"POST\"], paths = [\"/v1/public/list\"] }])"
    );
    // What a server reads, not how it is spelled: dot segments, escaped
    // dots, escaped slashes.
    for (path, read_as) in [
        ("/v1/private", "/v1/private"),
        ("/v1/public/../private", "/v1/private"),
        ("/v1/public/%2e%2e/private", "/v1/private"),
        ("/v1/public/%2E%2E/%2E%2E/admin", "/admin"),
    ] {
        let refused = check("GET", path).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("GET https://api.example{read_as} is outside")),
            "{path}: {refused}"
        );
    }
    for odd in [
        "/v1/public/..%2fprivate",
        "/v1/public/a%5Cb",
        "/v1/public/a\\b",
    ] {
        let refused = check("GET", odd).unwrap_err().to_string();
        assert!(refused.contains("escaped slash"), "{odd}: {refused}");
    }
    // Readings of servers and proxies other than the normal form's: each
    // refused, saying which.
    for (path, reading) in [
        ("/v1/public/..;/private", "before its ';' parameter"),
        (
            "/v1/public/..;jsessionid=1/private",
            "before its ';' parameter",
        ),
        ("/v1/public/.;/x", "before its ';' parameter"),
        ("/v1/public/%2e%2e;/private", "before its ';' parameter"),
        ("/v1/public/%252e%252e/private", "decoded again"),
        ("/v1/public/%25252e%25252e/private", "decoded again"),
        ("/v1/public/%252E./private", "decoded again"),
        ("/v1/public/%EF%BC%8E%EF%BC%8E/private", "look-alikes"),
        ("/v1/public/\u{FF0E}\u{FF0E}/private", "look-alikes"),
        ("/v1/public/%E2%80%A5/private", "look-alikes"),
        ("/v1/public/%C0%AE%C0%AE/private", "look-alikes"),
        ("/v1/public/%E0%80%AE./private", "look-alikes"),
    ] {
        let refused = check("GET", path).unwrap_err().to_string();
        assert!(refused.contains(reading), "{path}: {refused}");
    }
    // Names that merely hold such characters are names.
    for fine in [
        "/v1/public/a..;b",
        "/v1/public/file.v2;rev=3",
        "/v1/public/%252e%252ex",
        "/v1/public/caf\u{FF0E}",
    ] {
        assert!(check("GET", fine).is_ok(), "{fine}");
    }
}

#[test]
fn a_scoped_grant_is_written_as_a_table_and_checked_when_read() {
    let policy: crate::policy::Policy = toml::from_str(
        r#"[plugins.web]
http = ["https://a.example", { origin = "https://api.example", methods = ["GET"], paths = ["/v1/*"] }]
"#,
    )
    .unwrap();
    let rules: Vec<String> = policy.plugins["web"]
        .http
        .iter()
        .map(|g| g.rule().unwrap().describe())
        .collect();
    assert_eq!(
        rules,
        ["https://a.example", "https://api.example (GET; /v1/*)"]
    );
    let refused = |methods: &[&str], paths: &[&str]| {
        let methods: Vec<String> = methods.iter().map(|m| m.to_string()).collect();
        let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        OriginRule::parse("https://api.example")
            .unwrap()
            .scoped(&methods, &paths)
            .unwrap_err()
    };
    assert!(refused(&["GE T"], &[]).contains("not an HTTP method"));
    assert!(refused(&[], &["v1/*"]).contains("not a path glob"));
    assert!(refused(&[], &["/v1?x=1"]).contains("not a path glob"));
    assert!(refused(&[], &vec!["/a"; MAX_GRANT_SCOPES + 1]).contains("at most"));
}

fn secret(origins: &[&str], header: Option<&str>, format: Option<&str>) -> BrokeredSecret {
    let origins = origins
        .iter()
        .map(|o| OriginRule::parse(o).unwrap())
        .collect();
    BrokeredSecret::new(
        "API_KEY",
        "v a&l=ue".into(),
        HttpRules {
            origins,
            addresses: Vec::new(),
        },
        header.map(|h| http::HeaderName::from_bytes(h.as_bytes()).unwrap()),
        format,
    )
}

fn brokered(
    secret: &BrokeredSecret,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
) -> Result<(http::Uri, http::HeaderMap, Brokered), String> {
    let mut uri: http::Uri = url.replace("$KEY", &secret.placeholder).parse().unwrap();
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.replace("$KEY", &secret.placeholder).parse().unwrap(),
        );
    }
    let method = http::Method::from_bytes(method.as_bytes()).unwrap();
    let done = broker_request(
        std::slice::from_ref(secret),
        "p",
        &method,
        &mut uri,
        &mut map,
    )?;
    Ok((uri, map, done))
}

#[test]
fn a_brokered_secret_is_put_in_headers_and_the_query_of_its_origin_only() {
    let s = secret(&["https://api.example"], None, None);
    assert!(s.placeholder.starts_with("gadget-secret-API_KEY-"));
    assert_ne!(
        s.placeholder,
        secret(&["https://api.example"], None, None).placeholder
    );
    assert!(!format!("{s:?}").contains("a&l"), "{s:?}");

    let (uri, headers, done) = brokered(
        &s,
        "GET",
        "https://api.example/v1?key=$KEY&x=1",
        &[
            ("x-key", "k=$KEY"),
            ("x-key", "second $KEY"),
            ("x-other", "plain"),
        ],
    )
    .unwrap();
    // Encoded as one query component, whatever the value holds.
    assert_eq!(
        uri.to_string(),
        "https://api.example/v1?key=v%20a%26l%3Due&x=1"
    );
    let values: Vec<&[u8]> = headers
        .get_all("x-key")
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    assert_eq!(values, [&b"k=v a&l=ue"[..], &b"second v a&l=ue"[..]]);
    assert!(headers.get("x-key").unwrap().is_sensitive());
    assert_eq!(headers["accept-encoding"], "identity");
    // Scrubbed from the response as sent and as the query encoded it.
    assert_eq!(
        done.carried,
        [
            ("v a&l=ue".to_string(), s.placeholder.clone()),
            ("v%20a%26l%3Due".to_string(), s.placeholder.clone())
        ]
    );
    assert_eq!(done.body_refusal(b"nothing here"), None);
    let why = done
        .body_refusal(format!("x={}", s.placeholder).as_bytes())
        .unwrap();
    assert!(why.contains("is in the body"), "{why}");

    // Not carried: nothing changes, nothing is scrubbed.
    let (_, headers, done) = brokered(&s, "GET", "https://api.example/v1", &[]).unwrap();
    assert!(done.carried.is_empty() && headers.is_empty());

    // Another origin (scheme, host or port), in the URL, a header or
    // the body: refused, naming where it may go.
    for url in [
        "http://api.example/?k=$KEY",
        "https://api.example:8443/?k=$KEY",
        "https://evil.example/$KEY",
        "https://$KEY.evil.example/",
    ] {
        let why = brokered(&s, "GET", url, &[]).unwrap_err();
        assert!(
            why.contains("carries the placeholder of the secret API_KEY, which may go only to https://api.example")
                && why.contains("[plugins.p.secrets.API_KEY] origins"),
            "{url}: {why}"
        );
    }
    assert!(
        brokered(
            &s,
            "GET",
            "https://evil.example/",
            &[("authorization", "$KEY")]
        )
        .is_err()
    );
    let (_, _, done) = brokered(&s, "POST", "https://evil.example/", &[]).unwrap();
    let why = done.body_refusal(s.placeholder.as_bytes()).unwrap();
    assert!(why.contains("its body carries the placeholder"), "{why}");

    // A subdomain a wildcard origin allows: the placeholder there stays
    // one (the value would go out in a DNS question), the query's is filled.
    let wild = secret(&["https://*.api.example"], None, None);
    let (uri, _, _) = brokered(&wild, "GET", "https://$KEY.api.example/?k=$KEY", &[]).unwrap();
    assert_eq!(
        uri.to_string(),
        format!("https://{}.api.example/?k=v%20a%26l%3Due", wild.placeholder)
    );

    // Its origin, in the path: the host does not put secrets there.
    let why = brokered(&s, "GET", "https://api.example/bot$KEY/x", &[]).unwrap_err();
    assert!(why.contains("is in the path"), "{why}");
}

#[test]
fn a_secret_with_a_header_is_set_there_by_the_host_and_nowhere_else() {
    let s = secret(
        &["https://api.example"],
        Some("Authorization"),
        Some("Bearer {}"),
    );
    // Set on every request to its origin, over what the gadget wrote.
    for written in [
        vec![],
        vec![("authorization", "Bearer $KEY")],
        vec![("authorization", "forged")],
    ] {
        let (_, headers, done) = brokered(&s, "GET", "https://api.example/", &written).unwrap();
        let values: Vec<_> = headers.get_all("authorization").iter().collect();
        assert_eq!(values, ["Bearer v a&l=ue"]);
        assert_eq!(done.carried.len(), 2);
    }
    let why = brokered(&s, "GET", "https://api.example/", &[("x-api-key", "$KEY")]).unwrap_err();
    assert!(why.contains("only in the authorization header"), "{why}");
    let why = brokered(&s, "GET", "https://api.example/?k=$KEY", &[]).unwrap_err();
    assert!(why.contains("is in the URL"), "{why}");
    // Other origins never get it.
    let (_, headers, done) = brokered(&s, "GET", "https://other.example/", &[]).unwrap();
    assert!(headers.get("authorization").is_none() && done.carried.is_empty());

    // A value no header may hold: refused, never sent broken.
    let mut bad = secret(&["https://api.example"], Some("Authorization"), None);
    bad = BrokeredSecret::new(
        "API_KEY",
        "line\nbreak".into(),
        bad.origins.clone(),
        bad.header.clone(),
        None,
    );
    let why = brokered(&bad, "GET", "https://api.example/", &[]).unwrap_err();
    assert!(why.contains("cannot be sent in a header"), "{why}");
}

#[test]
fn the_scrubber_finds_a_value_split_across_chunks_and_never_grows_a_placeholder() {
    let carried = [("SECRET".to_string(), "<P-SECRET-P>".to_string())];
    let mut scrubber = Scrubber::new(&carried).unwrap();
    let mut out = Vec::new();
    for chunk in [&b"a SEC"[..], b"RET b SE", b"CR", b"ETSECRET", b" c SECRE"] {
        out.extend(scrubber.chunk(chunk));
    }
    out.extend(scrubber.finish());
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "a <P-SECRET-P> b <P-SECRET-P><P-SECRET-P> c SECRE"
    );
    // Byte by byte, as a slow origin sends it.
    let text = b"xSECRETySECRETSECRET";
    let mut out = Vec::new();
    for byte in text {
        out.extend(scrubber.chunk(std::slice::from_ref(byte)));
    }
    out.extend(scrubber.finish());
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "x<P-SECRET-P>y<P-SECRET-P><P-SECRET-P>"
    );
    let header = scrubber.header(&http::HeaderValue::from_static("Bearer SECRET"));
    assert_eq!(header, "Bearer <P-SECRET-P>");
    assert!(Scrubber::new(&[(String::new(), "p".into())]).is_none());
}

#[test]
fn a_secret_the_manifest_asks_for_is_its_placeholder_and_is_redacted() {
    let text = "[plugins.p]\nhttp = [\"https://a.example\"]\n[plugins.p.secrets.KEY]\nenv = \"VAR\"\norigins = [\"https://a.example\", \"https://b.example\"]\n[plugins.p.secrets.UNASKED]\nenv = \"VAR\"\norigins = [\"https://a.example\"]\n";
    let granted = policy(text);
    let requested = Permissions {
        config: vec!["KEY".into()],
        http: vec!["*".into()],
        ..Permissions::default()
    };
    let env = |var: &str| (var == "VAR").then(|| "the value".to_string());
    let (grants, notes) = resolve("p", &requested, Some(&granted), &Default::default(), &env);
    assert_eq!(grants.brokered.len(), 1);
    assert_eq!(grants.config[0].key, "KEY");
    assert!(grants.config[0].value.starts_with("gadget-secret-KEY-"));
    assert!(!grants.config[0].secret);
    assert_eq!(grants.secrets(), ["the value", "the%20value"]);
    assert!(!grants.describe().contains("the value"));
    assert!(!grants.to_json().to_string().contains("the value"));
    let notes: Vec<String> = notes.iter().map(ToString::to_string).collect();
    assert!(
        notes.iter().any(|n| n.contains(
            "secret KEY may go to https://b.example, which the plugin's HTTP grants do not reach"
        )),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("secret UNASKED is granted, but")),
        "{notes:?}"
    );

    // Its variable unset (or empty): not applied, said.
    let (grants, notes) = resolve(
        "p",
        &requested,
        Some(&granted),
        &Default::default(),
        &no_env,
    );
    assert!(grants.brokered.is_empty() && grants.config.is_empty());
    assert!(
        notes
            .iter()
            .any(|n| matches!(n, crate::resolve::GrantNote::EnvNotSet { .. }))
    );
}

#[test]
fn a_secret_that_cannot_be_bound_as_written_is_not_granted_at_all() {
    // A policy built in code, past the checks the file reader makes: a
    // header that is no header must not become "no header" (the value
    // would then go wherever the placeholder is).
    let mut granted = PluginPolicy::default();
    granted.secrets.insert(
        "KEY".into(),
        crate::policy::SecretSpec {
            env: "VAR".into(),
            origins: vec!["https://a.example".into()],
            header: Some("bad header".into()),
            format: None,
        },
    );
    let requested = Permissions {
        config: vec!["KEY".into()],
        ..Permissions::default()
    };
    let env = |_: &str| Some("the value".to_string());
    let (grants, notes) = resolve("p", &requested, Some(&granted), &Default::default(), &env);
    assert!(grants.brokered.is_empty() && grants.config.is_empty());
    let notes: Vec<String> = notes.iter().map(ToString::to_string).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("'bad header' is not a header name")),
        "{notes:?}"
    );
}
