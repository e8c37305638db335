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

#[test]
fn a_signed_component_still_runs_and_its_signature_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("calculator");
    std::fs::create_dir(&plugin).unwrap();
    let shipped = common::shipped_plugins().join("calculator");
    for file in ["plugin.toml", "calculator.wasm"] {
        std::fs::copy(shipped.join(file), plugin.join(file)).unwrap();
    }
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
