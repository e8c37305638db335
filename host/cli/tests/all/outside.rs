//! A gadget author who never cloned this repository: a copy of the binary
//! in a directory of its own, a fresh home, work done outside the checkout.
//! `gadget new` writes a plugin that names nothing of this machine,
//! `gadget build` finds its SDKs in the binary and its toolchains where
//! the docs say, and the plugins a user keeps are found without flags.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

/// A copy of `gadget` with a fresh home, run in `work`.
struct Author {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    home: PathBuf,
    work: PathBuf,
}

impl Author {
    fn new() -> Author {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        for d in [&bin, &home, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::copy(common::gadget_bin(), bin.join("gadget")).unwrap();
        Author {
            _dir: dir,
            bin,
            home,
            work,
        }
    }

    /// `gadget ARGS` as the author runs it, with `env` besides: PATH holds
    /// the copy, the author's Rust (their own install, which a fresh home
    /// does not move) and the system's tools; nothing of gadget-host's.
    fn gadget(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let real_home = PathBuf::from(std::env::var_os("HOME").unwrap());
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| real_home.join(".cargo"));
        let rustup_home = std::env::var_os("RUSTUP_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| real_home.join(".rustup"));
        let path = std::env::join_paths([
            self.bin.clone(),
            cargo_home.join("bin"),
            PathBuf::from("/usr/bin"),
            PathBuf::from("/bin"),
        ])
        .unwrap();
        let mut command = Command::new(self.bin.join("gadget"));
        command
            .args(args)
            .current_dir(&self.work)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("CARGO_HOME", cargo_home)
            .env("RUSTUP_HOME", rustup_home);
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    }
}

fn ok(output: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{text}");
    text
}

#[test]
fn an_author_outside_the_checkout_makes_builds_tests_and_calls_a_rust_plugin() {
    let author = Author::new();
    let checkout = common::workspace().canonicalize().unwrap();
    ok(&author.gadget(&["new", "hello", "--lang", "rust"], &[]));
    let plugin = author.work.join("hello");
    // The plugin carries its SDK and names no path of this machine.
    for file in [
        "Cargo.toml",
        "gadget-sdk/Cargo.toml",
        "gadget-sdk/src/lib.rs",
    ] {
        let text = std::fs::read_to_string(plugin.join(file)).unwrap();
        assert!(
            !text.contains(checkout.to_str().unwrap()),
            "{file} names the checkout:\n{text}"
        );
    }
    assert!(
        plugin
            .join("gadget-sdk/wit/gadget@0.3.0/gadget.wit")
            .is_file()
    );
    ok(&author.gadget(&["build", "hello"], &[]));
    let tested = ok(&author.gadget(&["test", "hello"], &[]));
    assert!(tested.contains("2 passed, 0 failed"), "{tested}");
    let called = ok(&author.gadget(
        &[
            "--plugins",
            "hello",
            "call",
            "Hello",
            "--params",
            r#"{"text": "one two"}"#,
        ],
        &[],
    ));
    assert!(called.contains("2 words"), "{called}");

    // The plugins a user keeps are found without --plugins.
    let kept = author.home.join(".local/share/gadget-host/plugins/hello");
    std::fs::create_dir_all(&kept).unwrap();
    for file in ["plugin.toml", "hello.wasm"] {
        std::fs::copy(plugin.join(file), kept.join(file)).unwrap();
    }
    let listed = ok(&author.gadget(&["list"], &[]));
    assert!(listed.contains("Hello"), "{listed}");
}

#[test]
fn an_author_outside_the_checkout_builds_go_with_the_sdk_the_binary_carries() {
    let author = Author::new();
    ok(&author.gadget(&["new", "hello-go", "--lang", "go"], &[]));
    // The toolchain where GADGET_TOOLS_DIR says (here: the one this
    // checkout's setup installed, so the test needs no network).
    let tools = common::workspace().join(".tools");
    let built = ok(&author.gadget(&["build", "hello-go"], &[("GADGET_TOOLS_DIR", &tools)]));
    assert!(built.contains("(Go,"), "{built}");
    let tested = ok(&author.gadget(&["test", "hello-go"], &[]));
    assert!(tested.contains("passed, 0 failed"), "{tested}");
}

#[test]
fn the_binary_remembers_no_path_of_the_checkout_it_was_built_in() {
    let checkout = common::workspace().canonicalize().unwrap();
    let binary = std::fs::read(common::gadget_bin()).unwrap();
    // Where the host's own sources are: what `env!("CARGO_MANIFEST_DIR")`
    // joined to `../../plugins`, `../../sdk` or `../../.tools` would leave.
    let needle = format!("{}/host/", checkout.display());
    assert!(
        !binary
            .windows(needle.len())
            .any(|window| window == needle.as_bytes()),
        "the binary holds {needle}"
    );
}

#[test]
fn gadget_test_with_no_arguments_skips_what_the_policy_does_not_grant_and_passes() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "").unwrap();
    let output = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .arg("--config")
        .arg(&policy)
        .arg("test")
        .env("XDG_CACHE_HOME", dir.path())
        .output()
        .unwrap();
    let text = ok(&output);
    // The files plugin is granted no directory: its gadgets are skipped,
    // each naming what would let it run.
    let skipped = text
        .lines()
        .find(|l| l.contains("ReadFile skipped:"))
        .unwrap_or_else(|| panic!("ReadFile is not skipped:\n{text}"));
    assert!(skipped.contains("asks for files"), "{skipped}");
    assert!(skipped.contains("grant it with"), "{skipped}");
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains(" passed, 0 failed, ") && summary.ends_with(" skipped"),
        "{summary}"
    );
}
