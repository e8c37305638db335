//! The gates the operator relies on, tried as an attacker would: the
//! host's own state out of every grant's reach, records in the cache that
//! count only under the host's seal, a lock that pins what a plugin asks
//! for, argument rules that see through spelling (and hold for each
//! request a call makes), grants that stay with the source they name, and
//! upstream servers that are bounded and end with the host.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use gadget_host::loader::{
    self, CacheOutcome, ComponentCache, LoadOptions, NoProgress, PluginSource,
};
use gadget_host::runtime::EpochMode;

use crate::cli::{stderr, stdout};
use crate::common;
use crate::http_grants::TestServer;

pub(crate) fn said(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// `gadget` with the shipped plugins, a policy written to `dir`, and
/// `args`; nothing of the machine's own configuration.
fn gadget(dir: &Path, policy: &str, args: &[&str]) -> Output {
    let config = dir.join("policy.toml");
    std::fs::write(&config, policy).unwrap();
    Command::new(common::gadget_bin())
        .current_dir(dir)
        .env_remove("GADGET_CONFIG")
        .env_remove("GADGET_PLUGINS")
        .env_remove("GADGET_CACHE_DIR")
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .arg("--config")
        .arg(&config)
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run gadget")
}

fn write_call(path: &str) -> String {
    json!({ "path": path, "content": "planted" }).to_string()
}

/// A gadget granted a directory that holds the cache, the journal or the
/// lock file could forge a signature's record, a history or a pin: the
/// grant is refused whatever it says, naming the state and how to move it,
/// and nothing is written there.
#[test]
fn the_hosts_own_state_is_never_inside_or_around_a_file_grant() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let state = root.join("state");
    let cache = state.join("cache");
    std::fs::create_dir_all(cache.join("oci")).unwrap();
    let grant = |host: &Path, extra: &str| {
        format!(
            "[plugins.files]\nfiles = [{{ host = \"{}\", guest = \"/data\", mode = \"rw\"{extra} }}]\n",
            host.display()
        )
    };
    let cache_arg = cache.to_str().unwrap();
    // Around the cache, and inside it (sensitive = true changes nothing).
    for (host, extra, target) in [
        (&state, "", "/data/cache/forged.verified"),
        (&cache.join("oci"), "", "/data/forged"),
        (&state, ", sensitive = true", "/data/cache/forged.verified"),
    ] {
        let out = gadget(
            &root,
            &grant(host, extra),
            &[
                "--cache-dir",
                cache_arg,
                "call",
                "WriteFile",
                "--params",
                &write_call(target),
            ],
        );
        let all = said(&out);
        assert!(!out.status.success(), "{all}");
        assert!(all.contains("the component cache"), "{all}");
        assert!(all.contains("--cache-dir DIR"), "{all}");
        assert!(all.contains(&cache.display().to_string()), "{all}");
        assert!(!cache.join("forged.verified").exists());
        assert!(!cache.join("oci/forged").exists());
    }
    // The journal's directory.
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let journal = logs.join("audit.jsonl");
    let out = gadget(
        &root,
        &grant(&logs, ""),
        &[
            "--cache-dir",
            cache_arg,
            "--audit",
            journal.to_str().unwrap(),
            "call",
            "WriteFile",
            "--params",
            &write_call("/data/audit.jsonl"),
        ],
    );
    let all = said(&out);
    assert!(all.contains("the audit journal"), "{all}");
    assert!(all.contains("--audit FILE"), "{all}");
    let text = std::fs::read_to_string(&journal).unwrap_or_default();
    assert!(!text.contains("planted"), "{text}");
    // The lock file's directory, under --locked.
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let lock_file = project.join("gadget.lock");
    let locked = |args: &[&str]| {
        let mut all = vec![
            "--cache-dir",
            cache_arg,
            "--lock-file",
            lock_file.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        gadget(&root, &grant(&project, ""), &all)
    };
    let out = locked(&["lock"]);
    assert!(out.status.success(), "{}", said(&out));
    let out = locked(&[
        "--locked",
        "call",
        "WriteFile",
        "--params",
        &write_call("/data/gadget.lock"),
    ]);
    let all = said(&out);
    assert!(all.contains("the lock file"), "{all}");
    assert!(all.contains("--lock-file FILE"), "{all}");
    assert!(
        !std::fs::read_to_string(&lock_file)
            .unwrap()
            .contains("planted")
    );
    // A directory beside the state is granted as ever.
    let beside = root.join("beside");
    std::fs::create_dir_all(&beside).unwrap();
    let out = gadget(
        &root,
        &grant(&beside, ""),
        &[
            "--cache-dir",
            cache_arg,
            "call",
            "WriteFile",
            "--params",
            &write_call("/data/ok.txt"),
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        std::fs::read_to_string(beside.join("ok.txt")).unwrap(),
        "planted"
    );
}

/// A compiled entry renamed to another component's name is a miss: the
/// component the loader read (and the lock checked) is the code that runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_compiled_entry_never_runs_under_another_digest() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::open(dir.path()).unwrap();
    let options = LoadOptions {
        cache: Some(cache.clone()),
        ..LoadOptions::default()
    };
    let runtime = common::runtime(EpochMode::Ticker);
    let load = |fixture: &str| {
        let (runtime, options) = (runtime.clone(), options.clone());
        let source = PluginSource::Wasm(common::fixture(fixture));
        async move {
            loader::load_plugin(&runtime, source, &options, &NoProgress)
                .await
                .unwrap()
        }
    };
    let (echo, _) = load("fixture-misbehave").await;
    let (probe, _) = load("fixture-probe").await;
    let echo_entry = cache.entry_path(runtime.engine(), &echo.artifact.sha256);
    let probe_entry = cache.entry_path(runtime.engine(), &probe.artifact.sha256);
    // The attacker's move: the probe's code under the echo's name.
    std::fs::rename(&probe_entry, &echo_entry).unwrap();
    let (again, gadgets) = load("fixture-misbehave").await;
    assert_eq!(again.artifact.cache, CacheOutcome::Miss);
    assert!(
        gadgets.iter().any(|g| g.card.spec.name == "Echo"),
        "the echo component's own gadgets: {:?}",
        gadgets
            .iter()
            .map(|g| &g.card.spec.name)
            .collect::<Vec<_>>()
    );
    let (hit, _) = load("fixture-misbehave").await;
    assert_eq!(hit.artifact.cache, CacheOutcome::Hit);
}

/// The probe fixture as a plugin directory of its own (its manifest can
/// be changed).
fn probe_copy(dir: &Path) -> PathBuf {
    let plugin = dir.join("probe");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::copy(
        common::workspace().join("tests/fixtures/probe/plugin.toml"),
        plugin.join("plugin.toml"),
    )
    .unwrap();
    std::fs::copy(common::fixture("fixture-probe"), plugin.join("probe.wasm")).unwrap();
    plugin
}

/// `--locked` pins the manifest as well as the component: a swapped
/// plugin.toml that asks for more is refused, naming both digests.
#[test]
fn the_lock_pins_the_manifest_that_asks_for_the_grants() {
    let root = tempfile::tempdir().unwrap();
    let plugins = root.path().join("plugins");
    let plugin = probe_copy(&plugins);
    // A second plugin that stays as locked.
    let calculator = plugins.join("calculator");
    std::fs::create_dir_all(&calculator).unwrap();
    for file in ["plugin.toml", "calculator.wasm"] {
        std::fs::copy(
            common::shipped_plugins().join("calculator").join(file),
            calculator.join(file),
        )
        .unwrap();
    }
    let run = |args: &[&str]| {
        Command::new(common::gadget_bin())
            .current_dir(root.path())
            .env_remove("GADGET_CONFIG")
            .env("XDG_CONFIG_HOME", root.path().join("xdg"))
            .arg("--plugins")
            .arg(&plugins)
            .arg("--cache-dir")
            .arg(root.path().join("cache"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&["lock"]);
    assert!(out.status.success(), "{}", said(&out));
    let lock = std::fs::read_to_string(root.path().join("gadget.lock")).unwrap();
    assert!(lock.contains("version = 2"), "{lock}");
    assert!(lock.contains("manifest-sha256 = "), "{lock}");
    let out = run(&["--locked", "list"]);
    assert!(out.status.success(), "{}", said(&out));
    // The same component, a manifest that asks for more.
    let manifest = plugin.join("plugin.toml");
    let before = std::fs::read(&manifest).unwrap();
    let widened = String::from_utf8(before.clone())
        .unwrap()
        .replace("http = [\"*\"]", "http = [\"*\"]\nllm = true");
    std::fs::write(&manifest, &widened).unwrap();
    // Without --strict the rest runs, and the command says how to stop.
    let out = run(&["--locked", "list"]);
    let all = said(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("add --strict to stop instead"), "{all}");
    let out = run(&["--locked", "--strict", "list"]);
    let all = said(&out);
    assert!(!out.status.success(), "{all}");
    let sha = gadget_host::runtime::cache::sha256_hex;
    assert!(all.contains("plugin.toml is sha256"), "{all}");
    assert!(all.contains(&sha(widened.as_bytes())), "{all}");
    assert!(all.contains(&sha(&before)), "{all}");
}

/// The web plugin follows redirects itself: a deny rule on its URL holds
/// for the redirect's hop at the HTTP door, and any spelling of a denied
/// URL is refused before the call runs.
#[test]
fn a_deny_rule_on_a_url_holds_for_every_spelling_and_every_hop() {
    let server = TestServer::start();
    let root = tempfile::tempdir().unwrap();
    let origin = server.url("");
    let policy = format!(
        "[plugins.web]\nhttp = [\"{origin}\"]\n\n[[rules]]\ngadget = \"FetchUrl\"\nparam = \"/url\"\nmatches = \"{origin}/page*\"\nkind = \"url\"\naction = \"deny\"\nreason = \"Not the page\"\n"
    );
    let fetch = |url: &str| {
        let out = gadget(
            root.path(),
            &policy,
            &[
                "call",
                "FetchUrl",
                "--json",
                "--params",
                &json!({ "url": url }).to_string(),
            ],
        );
        serde_json::from_str::<Value>(&stdout(&out))
            .unwrap_or_else(|e| panic!("{e}: {}", said(&out)))
    };
    // Spelled otherwise: refused before any request.
    for spelled in [
        server.url("/page").replace("http://", "HTTP://"),
        server.url("/%70age"),
        server.url("/x/../page"),
    ] {
        let call = fetch(&spelled);
        assert_eq!(call["ok"], false, "{spelled}: {call}");
        assert!(call.to_string().contains("Not the page"), "{call}");
    }
    assert!(server.hits().is_empty(), "{:?}", server.hits());
    // Reached through a redirect: the hop is refused at the door.
    let call = fetch(&server.url("/moved"));
    assert_eq!(call["ok"], false, "{call}");
    assert!(call.to_string().contains("Not the page"), "{call}");
    assert_eq!(server.hits(), ["/moved"]);
}

/// A stdio MCP server written here: it completes the handshake, starts a
/// child of its own (whose pid it writes to `pidfile`), and answers
/// `tools/list` only when `mode` is `answer`.
fn python_server(dir: &Path, mode: &str, pidfile: &Path) -> String {
    let script = dir.join("server.py");
    std::fs::write(
        &script,
        r#"import json, subprocess, sys
mode, pidfile = sys.argv[1], sys.argv[2]
# "-detached": the child leaves for a session (and group) of its own.
child = subprocess.Popen(["sleep", "120"], start_new_session=mode.endswith("-detached"))
with open(pidfile, "w") as f:
    f.write(str(child.pid))
def reply(id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        reply(message["id"], {"protocolVersion": message["params"]["protocolVersion"],
                              "capabilities": {"tools": {}},
                              "serverInfo": {"name": "quiet", "version": "0"}})
    elif method == "tools/list" and mode.startswith("answer"):
        reply(message["id"], {"tools": [{"name": "noop", "inputSchema": {"type": "object"}}]})
"#,
    )
    .unwrap();
    format!(
        "[mcp-servers.quiet]\ncommand = [\"python3\", {:?}, \"{mode}\", {:?}]\ntimeout-ms = 2000\n",
        script.display().to_string(),
        pidfile.display().to_string()
    )
}

/// Whether the process lives (a zombie does not count).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn wait_dead(pid: u32) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// A server that never answers its listing does not hang `gadget list`;
/// what it started ends with the host.
#[test]
fn an_upstream_server_that_never_lists_is_bounded_and_its_children_end_with_the_host() {
    let root = tempfile::tempdir().unwrap();
    let pidfile = root.path().join("child.pid");
    let policy = python_server(root.path(), "silent", &pidfile);
    let started = std::time::Instant::now();
    let out = gadget(root.path(), &policy, &["list"]);
    let took = started.elapsed();
    let all = said(&out);
    assert!(took < std::time::Duration::from_secs(20), "{took:?}: {all}");
    assert!(all.contains("tools/list got no answer"), "{all}");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_dead(pid), "the server's child {pid} outlived the host");
}

/// What an upstream server starts in a session of its own (out of its
/// process group) ends with the host all the same: it carries the
/// server's mark.
#[test]
fn a_detached_descendant_of_an_upstream_server_ends_with_the_host() {
    let root = tempfile::tempdir().unwrap();
    let pidfile = root.path().join("child.pid");
    let policy = python_server(root.path(), "answer-detached", &pidfile);
    let out = gadget(root.path(), &policy, &["list"]);
    assert!(said(&out).contains("quiet_noop"), "{}", said(&out));
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        wait_dead(pid),
        "the server's detached child {pid} outlived the host"
    );
}

/// `gadget mcp` ended by SIGTERM (no destructor runs) still ends the
/// upstream server's whole process group.
#[test]
fn sigterm_ends_the_upstream_servers_process_group() {
    use std::io::{BufRead, BufReader, Write};
    let root = tempfile::tempdir().unwrap();
    let pidfile = root.path().join("child.pid");
    let policy = python_server(root.path(), "answer", &pidfile);
    std::fs::write(root.path().join("policy.toml"), &policy).unwrap();
    let mut host = Command::new(common::gadget_bin())
        .current_dir(root.path())
        .env_remove("GADGET_CONFIG")
        .env("XDG_CONFIG_HOME", root.path().join("xdg"))
        .args(["--config", "policy.toml", "--plugins"])
        .arg(common::shipped_plugins())
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = host.stdin.take().unwrap();
    let mut lines = BufReader::new(host.stdout.take().unwrap()).lines();
    for line in [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    // Its listing includes the upstream tool: the server runs.
    let listed = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|line| line.contains("\"id\":1"))
        .expect("an answer to tools/list");
    assert!(listed.contains("quiet_noop"), "{listed}");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(host.id() as i32, libc::SIGTERM);
    }
    let _ = host.wait();
    assert!(wait_dead(pid), "the server's child {pid} outlived the host");
}

/// A policy entry for `plugin` granting it a directory, and maybe naming
/// its source.
fn granting(dir: &Path, source: Option<&str>) -> gadget_host::runtime::policy::PluginPolicy {
    use gadget_host::runtime::policy::{FileGrant, PluginPolicy};
    PluginPolicy {
        files: vec![FileGrant {
            host: dir.to_path_buf(),
            guest: Some("/data".into()),
            mode: gadget_host::manifest::FileMode::ReadOnly,
            write_quota_mib: None,
            max_entries: None,
            sensitive: false,
        }],
        source: source.map(str::to_string),
        ..PluginPolicy::default()
    }
}

fn granted_files(plugin: &gadget_host::loader::Plugin) -> usize {
    plugin.access.grants.grants.files.len()
}

/// A registry plugin whose manifest claims a name gets that name's grants
/// only when the policy names its source; an entry naming a source gives
/// nothing to a plugin from elsewhere; and a cached component that is not
/// the one its image manifest names is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_stay_with_the_source_the_policy_names() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let plugin_dir = probe_copy(&root.path().join("pulled"));
    let sha256 = gadget_host::runtime::cache::sha256_hex(
        &std::fs::read(plugin_dir.join("probe.wasm")).unwrap(),
    );
    let runtime = common::runtime(EpochMode::Ticker);
    let pulled = |reference: &str, component_sha256: &str| PluginSource::Oci {
        reference: reference.into(),
        local: plugin_dir.clone(),
        digest: format!("sha256:{}", "e".repeat(64)),
        component_sha256: component_sha256.into(),
    };
    let load = |source: PluginSource, policy: gadget_host::runtime::policy::PluginPolicy| {
        let runtime = runtime.clone();
        let options = LoadOptions {
            plugins: [("probe".to_string(), policy)].into(),
            ..LoadOptions::default()
        };
        async move { loader::load_plugin(&runtime, source, &options, &NoProgress).await }
    };
    let reference = "oci://127.0.0.1:5000/acme/probe:1.0";
    // The name alone: no grants, and a note that says which line would.
    let (plugin, _) = load(pulled(reference, &sha256), granting(&data, None))
        .await
        .unwrap();
    assert_eq!(granted_files(&plugin), 0);
    let notes: Vec<String> = plugin
        .report
        .grant_notes
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("source = \"oci://127.0.0.1:5000/acme/probe:1.0\"")),
        "{notes:?}"
    );
    // The source named (the repository, or the very reference): granted.
    for named in ["oci://127.0.0.1:5000/acme/probe", reference] {
        let (plugin, _) = load(pulled(reference, &sha256), granting(&data, Some(named)))
            .await
            .unwrap();
        assert_eq!(granted_files(&plugin), 1, "{named}");
    }
    // Another repository's, or another tag's: not granted.
    for other in [
        "oci://127.0.0.1:5000/acme/probe-evil",
        "oci://127.0.0.1:5000/acme/probe:2.0",
        "oci://127.0.0.1:5001/acme/probe",
    ] {
        let (plugin, _) = load(pulled(reference, &sha256), granting(&data, Some(other)))
            .await
            .unwrap();
        assert_eq!(granted_files(&plugin), 0, "{other}");
    }
    // An entry naming a registry gives nothing to a local plugin of the name.
    let (plugin, _) = load(
        PluginSource::Dir(plugin_dir.clone()),
        granting(&data, Some("oci://127.0.0.1:5000/acme/probe")),
    )
    .await
    .unwrap();
    assert_eq!(granted_files(&plugin), 0);
    // A local plugin with a plain entry is granted as ever.
    let (plugin, _) = load(PluginSource::Dir(plugin_dir.clone()), granting(&data, None))
        .await
        .unwrap();
    assert_eq!(granted_files(&plugin), 1);
    // The cache's component is not the one the image manifest names.
    let Err(error) = load(pulled(reference, &"0".repeat(64)), granting(&data, None)).await else {
        panic!("a component other than the one its manifest names was loaded");
    };
    assert!(error.to_string().contains("its image manifest"), "{error}");
}

/// Two plugins serving one name: between equals neither serves it; a
/// plugin the policy names keeps it against one it does not, whichever
/// loads first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contested_name_goes_to_the_stronger_claim() {
    let root = tempfile::tempdir().unwrap();
    let first = probe_copy(&root.path().join("a"));
    let second = probe_copy(&root.path().join("b"));
    let manifest = second.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("name = \"probe\"", "name = \"squatter\""),
    )
    .unwrap();
    let runtime = common::runtime(EpochMode::Ticker);
    let load = |named: Option<&str>, order: [&PathBuf; 2]| {
        let runtime = runtime.clone();
        let options = LoadOptions {
            plugins: named
                .map(|n| (n.to_string(), Default::default()))
                .into_iter()
                .collect(),
            ..LoadOptions::default()
        };
        let sources = order.map(|p| PluginSource::Dir(p.clone())).to_vec();
        async move {
            loader::load_sources(runtime, sources, &options, std::sync::Arc::new(NoProgress)).await
        }
    };
    // Equals: neither serves it.
    let (registry, errors) = load(None, [&first, &second]).await;
    assert!(registry.get("Env").is_none());
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("neither may take it")),
        "{errors:?}"
    );
    // Named by the policy: it serves the name, in either order.
    for order in [[&first, &second], [&second, &first]] {
        let (registry, errors) = load(Some("probe"), order).await;
        let served = registry.get("Env").expect("served by the named plugin");
        assert_eq!(served.plugin.identity.name, "probe");
        assert!(
            errors.iter().any(|e| e.to_string().contains(
                "gadget 'Env' of plugin 'squatter' is not served: plugin 'probe' serves the name, and it is named by the policy"
            )),
            "{errors:?}"
        );
    }
}
