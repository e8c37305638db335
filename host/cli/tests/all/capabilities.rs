//! Capabilities under the operator's policy, through the real `gadget`
//! binary: every door a plugin could use (files, environment, secrets,
//! gadget names) is shut unless the policy opens it, and opens only as far
//! as both the manifest and the policy say.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use crate::cli::{stderr, stdout};
use crate::common;

/// One compile cache for these tests: each plugin is compiled once.
fn cache_dir() -> &'static Path {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    CACHE.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// The probe fixture as a plugin directory (manifest + component).
pub(crate) fn probe_plugin() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let plugin = dir.path().join("probe");
        std::fs::create_dir(&plugin).unwrap();
        std::fs::copy(
            common::workspace().join("tests/fixtures/probe/plugin.toml"),
            plugin.join("plugin.toml"),
        )
        .unwrap();
        std::fs::copy(common::fixture("fixture-probe"), plugin.join("probe.wasm")).unwrap();
        dir
    })
    .path()
}

/// Runs `gadget` with the shipped plugins and the probe, a policy file
/// (or none), extra environment and arguments.
pub(crate) fn run(policy: Option<&str>, env: &[(&str, &str)], args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .arg("--plugins")
        .arg(probe_plugin())
        .arg("--cache-dir")
        .arg(cache_dir())
        // No policy from the machine running the tests.
        .env_remove("GADGET_CONFIG")
        .env("XDG_CONFIG_HOME", home.path())
        .stdin(Stdio::null());
    let policy_file = home.path().join("policy.toml");
    if let Some(policy) = policy {
        std::fs::write(&policy_file, policy).unwrap();
        command.arg("--config").arg(&policy_file);
    }
    command.envs(env.iter().copied()).args(args);
    command.output().expect("run gadget")
}

pub(crate) fn call_json(
    policy: Option<&str>,
    env: &[(&str, &str)],
    gadget: &str,
    params: &str,
) -> Value {
    let out = run(policy, env, &["call", gadget, "--params", params, "--json"]);
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)))
}

/// A directory to grant, a file beside it that must stay out of reach, and
/// a symlink inside that points at that file.
struct Tree {
    root: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("notes.txt"), "alpha\nTODO: beta\ngamma\n").unwrap();
        std::fs::create_dir(data.join("sub")).unwrap();
        std::fs::write(data.join("sub/more.txt"), "TODO: delta\n").unwrap();
        std::fs::write(root.path().join("outside.txt"), "the host's secret file\n").unwrap();
        std::os::unix::fs::symlink(root.path().join("outside.txt"), data.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(root.path(), data.join("up")).unwrap();
        Tree { root }
    }

    fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    fn policy(&self, mode: &str) -> String {
        format!(
            "[plugins.files]\nfiles = [{{ host = \"{}\", guest = \"/data\", mode = \"{mode}\" }}]\n",
            self.data().display()
        )
    }
}

pub(crate) fn error_message(call: &Value) -> String {
    call["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_granted_directory_is_readable_and_nothing_outside_it_is() {
    let tree = Tree::new();
    let policy = tree.policy("ro");
    let read = call_json(
        Some(&policy),
        &[],
        "ReadFile",
        r#"{"path": "/data/notes.txt"}"#,
    );
    assert_eq!(read["ok"], true, "{read}");
    assert!(read["result"].as_str().unwrap().contains("TODO: beta"));

    let grep = call_json(
        Some(&policy),
        &[],
        "Grep",
        r#"{"pattern": "TODO", "path": "/data"}"#,
    );
    assert_eq!(grep["ok"], true, "{grep}");
    let found = grep["result"].as_str().unwrap();
    assert!(found.contains("/data/notes.txt:2: TODO: beta"), "{found}");
    assert!(
        found.contains("/data/sub/more.txt:1: TODO: delta"),
        "{found}"
    );
    assert!(!found.contains("secret"), "{found}");

    let list = call_json(Some(&policy), &[], "ListDir", r#"{"path": "/data"}"#);
    assert_eq!(list["ok"], true, "{list}");

    // `..`, an absolute path elsewhere, and symlinks out of the directory.
    for escape in [
        "/data/../outside.txt",
        "/outside.txt",
        "/data/link.txt",
        "/data/up/outside.txt",
        "/etc/passwd",
    ] {
        let read = call_json(
            Some(&policy),
            &[],
            "ReadFile",
            &format!(r#"{{"path": "{escape}"}}"#),
        );
        assert_eq!(read["ok"], false, "{escape} was read: {read}");
        assert!(
            !read.to_string().contains("the host's secret file"),
            "{escape}: {read}"
        );
    }
}

#[test]
fn a_read_only_grant_refuses_writes_and_a_read_write_grant_allows_them() {
    let tree = Tree::new();
    let write = r#"{"path": "/data/new.txt", "content": "written by a gadget"}"#;
    let refused = call_json(Some(&tree.policy("ro")), &[], "WriteFile", write);
    assert_eq!(refused["ok"], false, "{refused}");
    let message = error_message(&refused);
    assert!(message.contains("cannot write /data/new.txt"), "{message}");
    assert!(message.contains("read-only"), "{message}");
    assert!(!tree.data().join("new.txt").exists());

    let written = call_json(Some(&tree.policy("rw")), &[], "WriteFile", write);
    assert_eq!(written["ok"], true, "{written}");
    assert_eq!(
        std::fs::read_to_string(tree.data().join("new.txt")).unwrap(),
        "written by a gadget"
    );
}

#[test]
fn without_a_grant_there_are_no_files_and_a_call_says_why() {
    let tree = Tree::new();
    let _ = &tree;
    let out = run(
        None,
        &[],
        &[
            "call",
            "ReadFile",
            "--params",
            r#"{"path": "/data/notes.txt"}"#,
        ],
    );
    assert!(!out.status.success());
    let err = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        err.contains(
            "plugin 'files' is granted none of what it asks for: asks for files * (rw), not granted"
        ),
        "{err}"
    );
    assert!(err.contains("--grant files:files=DIR:/PATH"), "{err}");
}

#[test]
fn a_grant_from_the_command_line_works_like_one_from_the_file() {
    let tree = Tree::new();
    let grant = format!("files:files={}:/data", tree.data().display());
    let out = run(
        None,
        &[],
        &[
            "--grant",
            &grant,
            "call",
            "ReadFile",
            "--params",
            r#"{"path": "/data/notes.txt"}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("TODO: beta"));
}

#[test]
fn only_granted_config_is_in_the_environment() {
    let policy = "[plugins.probe]\nconfig = { SECRET_TOKEN = { env = \"PROBE_SECRET\" }, UNITS = { value = \"metric\" }, NOT_ASKED = { value = \"x\" } }\n";
    let env = [
        ("PROBE_SECRET", "tok-4f9a2c81e6"),
        ("HOST_ONLY_VARIABLE", "must-not-be-seen"),
    ];
    let listed = call_json(Some(policy), &env, "Env", "{}");
    assert_eq!(listed["ok"], true, "{listed}");
    let vars = listed["result"].as_str().unwrap();
    // The secret's value is redacted even from the gadget's own listing.
    assert_eq!(vars, "SECRET_TOKEN=[redacted]\nUNITS=metric", "{vars}");

    let out = run(Some(policy), &env, &["describe", "Env"]);
    let text = stdout(&out);
    assert!(
        text.contains("Permissions granted: config: SECRET_TOKEN, UNITS"),
        "{text}"
    );
    assert!(
        text.contains(
            "config NOT_ASKED is granted, but the manifest does not ask for it: not applied"
        ),
        "{text}"
    );
    assert!(!text.contains("tok-4f9a2c81e6"), "{text}");

    // Nothing granted: an empty environment.
    let listed = call_json(None, &env, "Env", "{}");
    assert_eq!(listed["result"], "", "{listed}");
}

#[test]
fn a_secret_never_leaves_through_any_channel() {
    let secret = "tok-4f9a2c81e6";
    let policy = "[plugins.probe]\nconfig = { SECRET_TOKEN = { env = \"PROBE_SECRET\" } }\n";
    let env = [("PROBE_SECRET", secret)];
    for gadget in ["Leak", "LeakInError"] {
        let out = run(
            Some(policy),
            &env,
            &[
                "call",
                gadget,
                "--params",
                r#"{"key": "SECRET_TOKEN"}"#,
                "--json",
            ],
        );
        let everything = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            !everything.contains(secret),
            "{gadget} leaked: {everything}"
        );
        assert!(everything.contains("[redacted]"), "{gadget}: {everything}");
    }
    let leak = call_json(Some(policy), &env, "Leak", r#"{"key": "SECRET_TOKEN"}"#);
    assert_eq!(leak["result"], "result [redacted]");
    assert_eq!(leak["details"]["v"], "[redacted]");
    assert_eq!(leak["logs"][0]["message"], "log [redacted]");
    assert_eq!(leak["logs"][0]["fields"]["v"], "[redacted]");
    assert_eq!(leak["progress"][0], "progress [redacted]");
    assert_eq!(leak["updates"][0]["partial"], "update [redacted]");
    assert_eq!(leak["stdout"], "stdout [redacted]\n");
    assert_eq!(leak["stderr"], "stderr [redacted]\n");

    // The same through `gadget run`'s events.
    let response = "!!!GADGET_START:Leak:l1\n!!!ARG:key\nSECRET_TOKEN\n!!!GADGET_END\n";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("response.txt");
    std::fs::write(&file, response).unwrap();
    let out = run(
        Some(policy),
        &env,
        &["run", "--json", file.to_str().unwrap()],
    );
    let events = stdout(&out);
    assert!(events.contains("result [redacted]"), "{events}");
    assert!(!events.contains(secret), "{events}");
}

#[test]
fn a_denied_gadget_is_absent_from_lists_and_prompts_and_refused_when_called() {
    let policy = "[gadgets]\ndeny = [\"Env\", \"leak*\"]\n";
    let out = run(Some(policy), &[], &["list", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let names: Vec<&str> = list.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert!(
        !names
            .iter()
            .any(|n| ["Env", "Leak", "LeakInError"].contains(n)),
        "{names:?}"
    );
    assert!(names.contains(&"Calculator"), "{names:?}");

    let out = run(Some(policy), &[], &["prompt"]);
    assert!(!stdout(&out).contains("Env"), "{}", stdout(&out));

    let out = run(Some(policy), &[], &["call", "env", "--params", "{}"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("gadget 'Env' is denied by the operator's policy (")
            && err.contains("policy.toml: [gadgets] deny = \"Env\")"),
        "{err}"
    );

    // A model that calls it reads that it does not exist.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("response.txt");
    std::fs::write(&file, "!!!GADGET_START:Env:e1\n!!!GADGET_END\n").unwrap();
    let out = run(Some(policy), &[], &["run", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("Gadget 'Env' not found"),
        "{}",
        stdout(&out)
    );

    // `--deny-gadget` does the same for one run; an allow list keeps only
    // what it names.
    let out = run(None, &[], &["--deny-gadget", "calc*", "list", "--json"]);
    assert!(!stdout(&out).contains("\"Calculator\""));
    let out = run(
        Some("[gadgets]\nallow = [\"Calculator\"]\n"),
        &[],
        &["list", "--json"],
    );
    let list: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
}

#[test]
fn a_policy_file_with_an_unknown_field_is_refused_with_its_line() {
    let out = run(
        Some("[plugins.files]\nfiles = []\nhttp-hosts = [\"x\"]\n"),
        &[],
        &["list"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("unknown field `http-hosts`"), "{err}");
    assert!(err.contains("(line 3: http-hosts = [\"x\"])"), "{err}");
}

#[test]
fn check_and_list_show_requested_and_granted() {
    let tree = Tree::new();
    let policy = tree.policy("ro");
    let out = run(
        Some(&policy),
        &[],
        &[
            "check",
            common::shipped_plugins().join("files").to_str().unwrap(),
        ],
    );
    let text = stdout(&out);
    assert!(
        text.contains("✓ permissions: asks for files: * (rw); granted files: /data (ro, from"),
        "{text}"
    );
    let out = run(Some(&policy), &[], &["list", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let read = list.iter().find(|g| g["name"] == "ReadFile").unwrap();
    assert_eq!(read["granted_permissions"]["files"][0]["guest"], "/data");
    assert_eq!(read["granted_permissions"]["files"][0]["mode"], "ro");
    assert_eq!(read["requested_permissions"]["files"][0]["path"], "*");
}

/// The probe's `Fs` gadget run once with this script; its result lines and
/// the call's log messages.
fn fs_script(policy: &str, script: &str) -> (Vec<String>, String) {
    let report = call_json(
        Some(policy),
        &[],
        "Fs",
        &serde_json::json!({ "script": script }).to_string(),
    );
    let result = report["result"].as_str().unwrap_or_default();
    (
        result.lines().map(str::to_string).collect(),
        report["logs"].to_string(),
    )
}

/// A grant is the directory it named at load, not whatever its path names
/// later: a gadget that can write the parent of another grant moves that
/// directory away and leaves a symlink (relative or absolute) in its
/// place; the next call still sees the granted directory. Links that climb
/// out of a grant cannot be planted, and nested grants are reported.
#[test]
fn a_grant_cannot_be_re_pointed_and_links_cannot_climb_out() {
    let root = tempfile::tempdir().unwrap();
    let outer = root.path().join("outer");
    let inner = outer.join("inner");
    let secret = root.path().join("secret");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(inner.join("granted.txt"), "granted").unwrap();
    std::fs::write(secret.join("key.txt"), "SECRET KEY").unwrap();
    let policy = format!(
        "[plugins.probe]\nfiles = [{{ host = \"{}\", guest = \"/outer\", mode = \"rw\" }}, {{ host = \"{}\", guest = \"/inner\", mode = \"rw\" }}]\n",
        outer.display(),
        inner.display()
    );
    // The nested grant is reported at load.
    let out = run(Some(&policy), &[], &["list"]);
    assert!(
        stderr(&out).contains("lies inside") || stdout(&out).contains("lies inside"),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );

    for target in ["../../secret", "../secret", "/etc", "a/../../x"] {
        let (lines, logs) = fs_script(&policy, &format!("symlink {target} /outer/link"));
        assert!(lines[0].starts_with("error"), "{target}: {lines:?}");
        assert!(logs.contains("a symlink was refused"), "{target}: {logs}");
    }
    let (lines, _) = fs_script(&policy, "mkdir /outer/sub\nsymlink sub /outer/down");
    assert_eq!(lines, ["ok made", "ok linked"]);

    // The attack, inside one long-running host: between two calls, the
    // inner grant is moved away and a symlink to the secret directory put
    // where it was (from the host side here, as another plugin's gadget or
    // any process of the user's could). The next call still sees the
    // directory that was granted.
    let runtime = common::runtime(gadget_host::runtime::EpochMode::Ticker);
    let options = gadget_host::loader::LoadOptions::from_policy(
        &gadget_host::runtime::policy::Policy::parse(&policy, root.path()).unwrap(),
        None,
    );
    let (registry, errors) =
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(gadget_host::loader::load_sources(
                runtime,
                vec![gadget_host::loader::PluginSource::Dir(
                    probe_plugin().join("probe"),
                )],
                &options,
                std::sync::Arc::new(gadget_host::loader::NoProgress),
            ));
    assert!(errors.is_empty(), "{errors:?}");
    let script = |script: &str| -> Vec<String> {
        let report = tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(registry.call("Fs", serde_json::json!({ "script": script }), "fs", None))
            .unwrap();
        match report.outcome.unwrap() {
            gadget_host::runtime::Outcome::Result { result, .. } => {
                result.lines().map(str::to_string).collect()
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(script("list /inner"), ["ok granted.txt"]);
    std::fs::rename(&inner, outer.join("moved")).unwrap();
    std::os::unix::fs::symlink("../secret", &inner).unwrap();
    let lines = script("list /inner\nread /inner/key.txt\nread /inner/granted.txt");
    assert_eq!(lines[0], "ok granted.txt", "{lines:?}");
    assert!(lines[1].starts_with("error"), "{lines:?}");
    assert_eq!(lines[2], "ok granted", "{lines:?}");
}

/// A read-write grant has a quota per call of bytes written and entries
/// created; past it writes fail with WASI's quota error and the call's log
/// says which quota was spent. The next call starts with a full quota.
#[test]
fn read_write_grants_have_a_write_quota_per_call() {
    let root = tempfile::tempdir().unwrap();
    let policy = format!(
        "[plugins.probe]\nfiles = [{{ host = \"{}\", guest = \"/data\", mode = \"rw\", write-quota-mib = 2, max-entries = 50 }}]\n",
        root.path().display()
    );
    let (lines, logs) = fs_script(&policy, "write /data/a 1048576\nwrite /data/b 4194304");
    assert_eq!(lines[0], "ok wrote 1048576", "{lines:?}");
    assert!(lines[1].starts_with("error"), "{lines:?}");
    assert!(
        logs.contains("write quota of 2097152 bytes is spent"),
        "{logs}"
    );
    let written: u64 = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(written <= 2 << 20, "{written} bytes written");

    let (lines, logs) = fs_script(&policy, "mkdir /data/many\ntouch-many /data/many 100");
    assert_eq!(lines[0], "ok made", "{lines:?}");
    assert!(lines[1].starts_with("error after 49:"), "{lines:?}");
    assert!(logs.contains("quota of 50 created files"), "{logs}");
    let (lines, _) = fs_script(&policy, "write /data/c 1048576");
    assert_eq!(lines, ["ok wrote 1048576"]);
}

/// A policy section or `--grant` for a plugin that is not loaded is
/// reported, not ignored.
#[test]
fn a_grant_for_a_plugin_that_is_not_loaded_is_reported() {
    // In the policy file: a warning naming the file; the command goes on.
    let out = run(
        Some("[plugins.probbe]\nhttp = [\"https://example.com\"]\n"),
        &[],
        &["list"],
    );
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(err.contains("warning: policy file "), "{err}");
    assert!(
        err.contains("[plugins.probbe] names no loaded plugin, so it grants nothing"),
        "{err}"
    );
    assert!(err.contains("loaded: ") && err.contains("probe"), "{err}");
    // On the command line: an error, exit 2.
    let out = run(None, &[], &["--grant", "fles:files=/tmp:/data", "list"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("error: --grant fles:...: no plugin named 'fles' is loaded"),
        "{err}"
    );
    // A gadget's name where the plugin's belongs: the plugin is named.
    let out = run(None, &[], &["--grant", "ReadFile:files=/tmp:/data", "list"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("'ReadFile' is a gadget of plugin 'files': name the plugin"),
        "{err}"
    );
}
