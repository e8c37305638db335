//! `gadget keygen` and `gadget sign` with the real binary: a shipped
//! plugin's component signed in place still loads and runs; a detached
//! signature leaves the component as it was; the signatures verify
//! in-process, and a changed byte or another key does not.

use std::process::Command;

use gadget_host::runtime::provenance::{Signer, Verification, verify};

use crate::common;

fn gadget(args: &[&str], dir: &std::path::Path) -> (bool, String) {
    let out = Command::new(common::gadget_bin())
        .current_dir(dir)
        .env_remove("GADGET_CONFIG")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `gadget keygen` for each name: NAME.sec and NAME.pub in `dir`.
fn keygen(dir: &std::path::Path, names: &[&str]) {
    for name in names {
        let (secret, public) = (format!("{name}.sec"), format!("{name}.pub"));
        let (ok, said) = gadget(
            &["keygen", "--secret-key", &secret, "--public-key", &public],
            dir,
        );
        assert!(ok, "{said}");
    }
}

/// A copy of shipped plugin `name` (manifest and component) at `dir/at`;
/// its path and the shipped one's.
fn copy_plugin(
    dir: &std::path::Path,
    at: &str,
    name: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let plugin = dir.join(at);
    std::fs::create_dir_all(&plugin).unwrap();
    let shipped = common::shipped_plugins().join(name);
    for file in ["plugin.toml".to_string(), format!("{name}.wasm")] {
        std::fs::copy(shipped.join(&file), plugin.join(&file)).unwrap();
    }
    (plugin, shipped)
}

#[test]
fn a_signed_component_still_runs_and_its_signature_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (plugin, shipped) = copy_plugin(dir.path(), "calculator", "calculator");
    let original = std::fs::read(plugin.join("calculator.wasm")).unwrap();
    let (ok, said) = gadget(
        &[
            "keygen",
            "--secret-key",
            "acme.sec",
            "--public-key",
            "acme.pub",
        ],
        dir.path(),
    );
    assert!(ok, "{said}");
    assert!(
        said.contains("[trust.signers.NAME]") && said.contains("BEGIN PUBLIC KEY"),
        "{said}"
    );

    // Detached: the component is unchanged, the signature is beside it.
    let (ok, said) = gadget(
        &[
            "sign",
            "--key",
            "acme.sec",
            "--detached",
            "calculator/calculator.wasm",
        ],
        dir.path(),
    );
    assert!(ok, "{said}");
    let detached = std::fs::read(plugin.join("calculator.wasm.sig")).unwrap();
    assert_eq!(
        std::fs::read(plugin.join("calculator.wasm")).unwrap(),
        original
    );

    // Inside: signed in place, and it still loads and runs.
    let (ok, said) = gadget(
        &["sign", "--key", "acme.sec", "calculator/calculator.wasm"],
        dir.path(),
    );
    assert!(ok, "{said}");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode();
        assert_eq!(
            mode(&plugin.join("calculator.wasm")) & 0o777,
            mode(&shipped.join("calculator.wasm")) & 0o777,
            "signing in place keeps the file's mode"
        );
    }
    let (ok, said) = gadget(
        &[
            "--plugins",
            ".",
            "call",
            "Calculator",
            "--params",
            r#"{"operation":"add","a":2,"b":3}"#,
        ],
        dir.path(),
    );
    assert!(ok && said.contains('5'), "{said}");

    let signed = std::fs::read(plugin.join("calculator.wasm")).unwrap();
    let acme = Signer::new("acme", "acme.pub", dir.path()).unwrap();
    assert_eq!(
        verify(&signed, None, std::slice::from_ref(&acme)),
        Verification::Signed {
            by: vec!["acme".into()]
        }
    );
    assert_eq!(
        verify(&original, Some(&detached), std::slice::from_ref(&acme)),
        Verification::Signed {
            by: vec!["acme".into()]
        }
    );
    // One byte of code changed: no longer verified.
    let mut tampered = signed.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0x01;
    assert_eq!(
        verify(&tampered, None, std::slice::from_ref(&acme)),
        Verification::Unverified
    );
    // A second signer signs the same component: both verify.
    let (ok, _) = gadget(
        &["keygen", "--secret-key", "b.sec", "--public-key", "b.pub"],
        dir.path(),
    );
    assert!(ok);
    let (ok, said) = gadget(
        &["sign", "--key", "b.sec", "calculator/calculator.wasm"],
        dir.path(),
    );
    assert!(ok, "{said}");
    let twice = std::fs::read(plugin.join("calculator.wasm")).unwrap();
    let second = Signer::new("second", "b.pub", dir.path()).unwrap();
    assert_eq!(
        verify(&twice, None, &[acme, second]),
        Verification::Signed {
            by: vec!["acme".into(), "second".into()]
        }
    );
    // A key file that is not a key names the trust entry it is for.
    std::fs::write(dir.path().join("junk.pub"), "not a key").unwrap();
    let junk = Signer::new("junk", "junk.pub", dir.path()).unwrap_err();
    assert!(
        junk.to_string().contains("trust.signers.junk.key"),
        "{junk}"
    );
}

/// `wasm` without its custom sections named `name` (a component's or a
/// module's top-level sections: id, LEB128 size, payload).
fn without_custom_section(wasm: &[u8], name: &str) -> Vec<u8> {
    fn leb128(bytes: &[u8], at: &mut usize) -> usize {
        let (mut value, mut shift) = (0usize, 0);
        loop {
            let byte = bytes[*at];
            *at += 1;
            value |= ((byte & 0x7f) as usize) << shift;
            if byte & 0x80 == 0 {
                return value;
            }
            shift += 7;
        }
    }
    let mut out = wasm[..8].to_vec();
    let mut at = 8;
    while at < wasm.len() {
        let start = at;
        let id = wasm[at];
        at += 1;
        let size = leb128(wasm, &mut at);
        let payload = at;
        at += size;
        if id == 0 {
            let mut name_at = payload;
            let len = leb128(wasm, &mut name_at);
            if &wasm[name_at..name_at + len] == name.as_bytes() {
                continue;
            }
        }
        out.extend_from_slice(&wasm[start..at]);
    }
    out
}

/// wasmsign2's own CLI, installed by the setup script.
fn wasmsign2(args: &[&str], dir: &std::path::Path) -> (bool, String) {
    let bin = common::workspace().join(".tools/wasmsign2/bin/wasmsign2");
    let out = Command::new(&bin)
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/setup-tests.sh)", bin.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn wasmsign2_and_gadget_check_each_others_signatures() {
    let dir = tempfile::tempdir().unwrap();
    let component = common::shipped_plugins().join("calculator/calculator.wasm");
    std::fs::copy(&component, dir.path().join("c.wasm")).unwrap();
    let (ok, said) = gadget(
        &["keygen", "--secret-key", "g.sec", "--public-key", "g.pub"],
        dir.path(),
    );
    assert!(ok, "{said}");

    // Signed by gadget, verified by wasmsign2.
    let (ok, said) = gadget(
        &["sign", "--key", "g.sec", "c.wasm", "-o", "by-gadget.wasm"],
        dir.path(),
    );
    assert!(ok, "{said}");
    let (ok, said) = wasmsign2(
        &["verify", "-K", "g.pub", "-i", "by-gadget.wasm"],
        dir.path(),
    );
    assert!(ok && said.contains("Signature is valid"), "{said}");
    // ... and its detached signature too.
    let (ok, said) = gadget(
        &["sign", "--key", "g.sec", "--detached", "c.wasm"],
        dir.path(),
    );
    assert!(ok, "{said}");
    let (ok, said) = wasmsign2(
        &["verify", "-K", "g.pub", "-i", "c.wasm", "-S", "c.wasm.sig"],
        dir.path(),
    );
    assert!(ok, "{said}");

    // Signed by wasmsign2 (its keys, its file), verified in-process.
    let (ok, said) = wasmsign2(&["keygen", "-k", "w.sec", "-K", "w.pub"], dir.path());
    assert!(ok, "{said}");
    let (ok, said) = wasmsign2(
        &[
            "sign",
            "-k",
            "w.sec",
            "-i",
            "c.wasm",
            "-o",
            "by-wasmsign2.wasm",
        ],
        dir.path(),
    );
    assert!(ok, "{said}");
    let signed = std::fs::read(dir.path().join("by-wasmsign2.wasm")).unwrap();
    let theirs = Signer::new("theirs", "w.pub", dir.path()).unwrap();
    let ours = Signer::new("ours", "g.pub", dir.path()).unwrap();
    assert_eq!(
        verify(&signed, None, &[theirs.clone(), ours]),
        Verification::Signed {
            by: vec!["theirs".into()]
        }
    );
    // A byte of code changed: both tools refuse it.
    let mut tampered = signed;
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0x01;
    std::fs::write(dir.path().join("tampered.wasm"), &tampered).unwrap();
    assert_eq!(
        verify(&tampered, None, std::slice::from_ref(&theirs)),
        Verification::Unverified
    );
    let (ok, _) = wasmsign2(
        &["verify", "-K", "w.pub", "-i", "tampered.wasm"],
        dir.path(),
    );
    assert!(!ok, "wasmsign2 accepted a changed component");
}

/// `[trust]` at load: an unsigned plugin is refused when signatures are
/// required (unless its own `require = "any"`), a signed one loads and
/// says who signed it, and a changed byte or another signer's key is
/// refused even when signatures are not required; each refusal names the
/// plugin, its digest and what would allow it.
#[test]
fn trust_refuses_unsigned_tampered_and_unknown_signers_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let (_, shipped) = copy_plugin(dir.path(), "plugins/calculator", "calculator");
    keygen(dir.path(), &["acme", "other"]);
    let policy = |require: &str, extra: &str| {
        std::fs::write(
            dir.path().join("policy.toml"),
            format!("[trust]\nrequire = \"{require}\"\n[trust.signers.acme]\nkey = \"acme.pub\"\n{extra}"),
        )
        .unwrap();
    };
    let call = || {
        gadget(
            &[
                "--config",
                "policy.toml",
                "--plugins",
                "plugins",
                "call",
                "Calculator",
                "--params",
                r#"{"operation":"add","a":2,"b":3}"#,
            ],
            dir.path(),
        )
    };
    let component = "plugins/calculator/calculator.wasm";

    policy("signed", "");
    let (ok, said) = call();
    assert!(!ok, "{said}");
    assert!(
        said.contains("plugin calculator (sha256 ")
            && said.contains("not signed by a key in [trust.signers]")
            && said.contains("require = \"any\""),
        "{said}"
    );
    // Its own `require = "any"` lets it load unsigned.
    policy("signed", "[plugins.calculator]\nrequire = \"any\"\n");
    let (ok, said) = call();
    assert!(ok, "{said}");

    // Signed by acme: loads, and says so.
    policy("signed", "");
    let (ok, said) = gadget(&["sign", "--key", "acme.sec", component], dir.path());
    assert!(ok, "{said}");
    let (ok, said) = call();
    assert!(ok && said.contains('5'), "{said}");
    let (ok, said) = gadget(
        &[
            "--config",
            "policy.toml",
            "--plugins",
            "plugins",
            "describe",
            "Calculator",
        ],
        dir.path(),
    );
    assert!(
        ok && said.contains("Provenance: signed by acme, sha256 "),
        "{said}"
    );

    // One byte of code changed after signing: refused, signatures required or not.
    let signed = std::fs::read(dir.path().join(component)).unwrap();
    let mut tampered = signed.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0x01;
    std::fs::write(dir.path().join(component), &tampered).unwrap();
    policy("any", "");
    let (ok, said) = call();
    assert!(
        !ok && said.contains("no key in [trust.signers] verifies"),
        "{said}"
    );

    // Signed by a key the policy does not trust: refused too.
    std::fs::copy(shipped.join("calculator.wasm"), dir.path().join(component)).unwrap();
    let (ok, said) = gadget(&["sign", "--key", "other.sec", component], dir.path());
    assert!(ok, "{said}");
    let (ok, said) = call();
    assert!(
        !ok && said.contains("no key in [trust.signers] verifies"),
        "{said}"
    );

    // Signed by acme, its signature section then removed: unsigned, so
    // refused where signatures are required.
    std::fs::copy(shipped.join("calculator.wasm"), dir.path().join(component)).unwrap();
    let (ok, said) = gadget(&["sign", "--key", "acme.sec", component], dir.path());
    assert!(ok, "{said}");
    let signed = std::fs::read(dir.path().join(component)).unwrap();
    let stripped = without_custom_section(&signed, "signature");
    assert!(stripped.len() < signed.len());
    std::fs::write(dir.path().join(component), &stripped).unwrap();
    policy("signed", "");
    let (ok, said) = call();
    assert!(
        !ok && said.contains("not signed by a key in [trust.signers]"),
        "{said}"
    );

    // acme's signature intact, but the policy's key for acme swapped for
    // another: no trusted key verifies it, refused.
    std::fs::write(dir.path().join(component), &signed).unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "[trust.signers.acme]\nkey = \"other.pub\"\n",
    )
    .unwrap();
    let (ok, said) = call();
    assert!(
        !ok && said.contains("no key in [trust.signers] verifies"),
        "{said}"
    );

    // A signer whose key cannot be read refuses every plugin, naming it.
    std::fs::write(
        dir.path().join("policy.toml"),
        "[trust.signers.broken]\nkey = \"missing.pub\"\n",
    )
    .unwrap();
    let (ok, said) = call();
    assert!(!ok && said.contains("[trust] cannot be used"), "{said}");
}

/// `[plugins.web] signer = "acme"`: its grants apply while its component
/// is signed by acme, a new build signed by acme keeps them, and an
/// unsigned build or one signed by another key loads with no grants and
/// says why.
#[test]
fn grants_bound_to_a_signer_follow_the_signer_not_the_name() {
    let server = crate::http_grants::TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (plugin, shipped) = copy_plugin(dir.path(), "plugins/web", "web");
    let original = std::fs::read(shipped.join("web.wasm")).unwrap();
    keygen(dir.path(), &["acme", "other"]);
    std::fs::write(
        dir.path().join("policy.toml"),
        format!(
            "[trust.signers.acme]\nkey = \"acme.pub\"\n[trust.signers.other]\nkey = \"other.pub\"\n[plugins.web]\nsigner = \"acme\"\nhttp = [\"{}\"]\n",
            server.url("").trim_end_matches('/')
        ),
    )
    .unwrap();
    let component = plugin.join("web.wasm");
    let fetch = || {
        gadget(
            &[
                "--config",
                "policy.toml",
                "--plugins",
                "plugins",
                "call",
                "FetchUrl",
                "--params",
                &format!(r#"{{"url":"{}"}}"#, server.url("/hello")),
            ],
            dir.path(),
        )
    };
    let sign = |key: &str| {
        let (ok, said) = gadget(&["sign", "--key", key, "plugins/web/web.wasm"], dir.path());
        assert!(ok, "{said}");
    };

    // Unsigned: loaded, with no grants, and the operator is told why.
    std::fs::write(&component, &original).unwrap();
    let (ok, said) = fetch();
    assert!(!ok, "{said}");
    assert!(
        said.contains("apply only to a component signed by acme, and this one is unsigned"),
        "{said}"
    );
    // Signed by acme: granted.
    sign("acme.sec");
    let (ok, said) = fetch();
    assert!(ok && said.contains("hello from the test server"), "{said}");
    // A new build (another digest), signed by acme: still granted.
    let mut rebuilt = original.clone();
    rebuilt.extend_from_slice(&[0x00, 0x06, 0x05, b'b', b'u', b'i', b'l', b'd']);
    std::fs::write(&component, &rebuilt).unwrap();
    sign("acme.sec");
    let (ok, said) = fetch();
    assert!(ok && said.contains("hello from the test server"), "{said}");
    // The same name signed by another trusted signer: no grants.
    std::fs::write(&component, &original).unwrap();
    sign("other.sec");
    let (ok, said) = fetch();
    assert!(!ok, "{said}");
    assert!(said.contains("this one is signed by other"), "{said}");
}

/// `gadget lock` pins each plugin's digest and verified signers;
/// `--locked` refuses a changed component or a changed signer, naming
/// both; MCP clients see the provenance in `tools/list`.
#[test]
fn locked_refuses_a_changed_component_or_signer_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let (_, shipped) = copy_plugin(dir.path(), "plugins/calculator", "calculator");
    keygen(dir.path(), &["acme"]);
    let component = "plugins/calculator/calculator.wasm";
    let (ok, said) = gadget(&["sign", "--key", "acme.sec", component], dir.path());
    assert!(ok, "{said}");
    std::fs::write(
        dir.path().join("policy.toml"),
        "[trust.signers.acme]\nkey = \"acme.pub\"\n",
    )
    .unwrap();
    let with = |config: &str, args: &[&str]| {
        let base = ["--config", config, "--plugins", "plugins"];
        gadget(&[&base[..], args].concat(), dir.path())
    };
    let (ok, said) = with("policy.toml", &["lock"]);
    assert!(ok && said.contains("locked calculator sha256 "), "{said}");
    let lock = std::fs::read_to_string(dir.path().join("gadget.lock")).unwrap();
    assert!(lock.contains("signed-by = [\"acme\"]"), "{lock}");
    let add = [
        "call",
        "Calculator",
        "--params",
        r#"{"operation":"add","a":2,"b":3}"#,
    ];
    let (ok, said) = with("policy.toml", &[&["--locked"][..], &add].concat());
    assert!(ok && said.contains('5'), "{said}");

    // tools/list carries the provenance for MCP clients.
    let listed = tools_list(
        dir.path(),
        &["--config", "policy.toml", "--plugins", "plugins"],
    );
    let meta = &listed["result"]["tools"][0]["_meta"]["dev.gadget-host/provenance"];
    assert_eq!(meta["signature"], "signed by acme", "{listed}");
    assert_eq!(meta["source"], "plugins/calculator", "{listed}");
    assert_eq!(meta["sha256"].as_str().unwrap().len(), 64, "{listed}");

    // The same signer, a new build (another digest): refused, both named.
    let locked_digest = lock
        .lines()
        .find_map(|l| l.strip_prefix("sha256 = \""))
        .unwrap()
        .trim_end_matches('"')
        .to_string();
    std::fs::copy(shipped.join("calculator.wasm"), dir.path().join(component)).unwrap();
    let mut rebuilt = std::fs::read(dir.path().join(component)).unwrap();
    // A custom section: the code is the same, the bytes are not.
    rebuilt.extend_from_slice(&[0x00, 0x06, 0x05, b'b', b'u', b'i', b'l', b'd']);
    std::fs::write(dir.path().join(component), &rebuilt).unwrap();
    let (ok, said) = gadget(&["sign", "--key", "acme.sec", component], dir.path());
    assert!(ok, "{said}");
    let (ok, said) = with("policy.toml", &[&["--locked"][..], &add].concat());
    assert!(!ok, "{said}");
    assert!(
        said.contains(&format!("the lock file pins sha256 {locked_digest}"))
            && said.contains("plugin 'calculator' is sha256 "),
        "{said}"
    );
    // Accepted once locked again.
    let (ok, said) = with("policy.toml", &["lock"]);
    assert!(ok, "{said}");
    let (ok, said) = with("policy.toml", &[&["--locked"][..], &add].concat());
    assert!(ok, "{said}");

    // The same bytes, no longer verified as acme's (a policy without
    // [trust]): refused, both named.
    std::fs::write(dir.path().join("open.toml"), "").unwrap();
    let (ok, said) = with("open.toml", &[&["--locked"][..], &add].concat());
    assert!(!ok, "{said}");
    assert!(
        said.contains("is not signed by a trusted signer, but the lock file pins signed by acme"),
        "{said}"
    );
    // A plugin the lock does not know: refused, with what to do.
    copy_plugin(dir.path(), "plugins/text", "text");
    let (ok, said) = with("policy.toml", &[&["--locked"][..], &add].concat());
    assert!(ok, "{said}");
    assert!(
        said.contains("plugin 'text'") && said.contains("not in the lock file"),
        "{said}"
    );
}

/// `gadget mcp`'s answer to `tools/list`, over stdio.
fn tools_list(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(common::gadget_bin())
        .current_dir(dir)
        .env_remove("GADGET_CONFIG")
        .args(args)
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for message in [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let listed = loop {
        let line = lines.next().expect("an answer").unwrap();
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 1 {
            break message;
        }
    };
    drop(stdin);
    let _ = child.wait();
    listed
}
