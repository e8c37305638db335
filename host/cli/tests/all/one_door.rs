//! One door into plugin code: a catalog request (a resource read, a
//! prompt) runs plugin code as a tool call does, so it passes the same
//! layers. Over `gadget mcp` with the official Rust client, the probe
//! plugin's resource read reaches the HTTP door: the journal records a
//! `resource_read` with the door's effect and its end; a rate limit on one
//! of the plugin's gadgets counts its reads too; the operator's deny rule
//! on `resource:` refuses a read before the plugin runs; a prompt is
//! journaled as `prompt`.

use std::process::Stdio;

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::Value;

use crate::capabilities::probe_plugin;
use crate::common;
use crate::http_grants::TestServer;

/// `gadget mcp` serving the probe under `policy`, journaling to
/// `journal`, and an MCP client of it.
async fn serve(
    dir: &std::path::Path,
    policy: &str,
    journal: &std::path::Path,
) -> rmcp::service::RunningService<RoleClient, ()> {
    let config = dir.join("policy.toml");
    std::fs::write(&config, policy).unwrap();
    let mut command = tokio::process::Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(probe_plugin())
        .arg("--config")
        .arg(&config)
        .arg("--audit")
        .arg(journal)
        .env("XDG_CACHE_HOME", dir)
        .env_remove("GADGET_CONFIG")
        .arg("mcp")
        .stderr(Stdio::null());
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

fn records(journal: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(journal)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn port_of(server: &TestServer) -> String {
    server.url("").rsplit(':').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_read_is_journaled_with_its_doors_and_counted_by_the_plugins_limit() {
    let site = TestServer::start();
    let port = port_of(&site);
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("audit.jsonl");
    // One call of the plugin's Fetch gadget an hour: its reads count too.
    let policy = format!(
        "[plugins.probe]\nhttp = [\"http://127.0.0.1:{port}\"]\n\n[[rate-limits]]\ngadget = \"Fetch\"\ncalls = 1\nper-seconds = 3600\n"
    );
    let client = serve(dir.path(), &policy, &journal).await;
    let uri = format!("probe://fetch/{port}");
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap();
    let text = serde_json::to_value(&read.contents[0]).unwrap();
    assert!(text["text"].as_str().unwrap().starts_with("404 "), "{text}");
    assert_eq!(site.hits(), ["/catalog"]);
    let again = client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap_err()
        .to_string();
    assert!(again.contains("rate-limits[1]"), "{again}");
    assert_eq!(site.hits().len(), 1, "the limited read reached the server");
    client.cancel().await.unwrap();

    let records = records(&journal);
    let kinds: Vec<&str> = records
        .iter()
        .filter(|r| r["call"] == records_call(&records, &uri))
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["resource_read", "http", "call_finished"],
        "{records:#?}"
    );
    let started = records
        .iter()
        .find(|r| r["event"] == "resource_read")
        .unwrap();
    assert_eq!(started["gadget"], format!("resource:{uri}"));
    assert_eq!(started["plugin"], "probe");
    assert!(started["digest"].as_str().is_some_and(|d| d.len() == 64));
    let finished: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "call_finished")
        .collect();
    assert_eq!(finished[0]["detail"]["outcome"], "result");
    assert_eq!(finished[1]["detail"]["error"]["kind"], "rate-limited");
}

/// The id of the first record that names `uri`.
fn records_call(records: &[Value], uri: &str) -> Value {
    records
        .iter()
        .find(|r| r["gadget"] == format!("resource:{uri}"))
        .map(|r| r["call"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_rules_refuse_a_read_before_the_plugin_runs_and_prompts_are_journaled() {
    let site = TestServer::start();
    let port = port_of(&site);
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("audit.jsonl");
    let policy = format!(
        "[plugins.probe]\nhttp = [\"http://127.0.0.1:{port}\"]\n\n[[rules]]\ngadget = \"resource:probe://*\"\nparam = \"/uri\"\nmatches = \"*\"\naction = \"deny\"\nreason = \"no probing\"\n"
    );
    let client = serve(dir.path(), &policy, &journal).await;
    let refused = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "probe://fetch/{port}"
        )))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("no probing"), "{refused}");
    // Named as the request it is, not as a gadget.
    assert!(
        refused.contains(&format!(
            "The request 'resource:probe://fetch/{port}' was not run"
        )),
        "{refused}"
    );
    assert!(site.hits().is_empty(), "a denied read reached the network");
    let prompt = client
        .get_prompt(GetPromptRequestParams::new("probe"))
        .await
        .unwrap();
    assert_eq!(prompt.messages.len(), 1);
    client.cancel().await.unwrap();

    let records = records(&journal);
    let events: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["event"].as_str().unwrap(),
                r["gadget"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(events.contains(&("prompt", "prompt:probe")), "{records:#?}");
    let denied = records
        .iter()
        .find(|r| r["event"] == "call_finished" && r["detail"]["error"]["kind"] == "not-approved")
        .unwrap_or_else(|| panic!("{records:#?}"));
    assert!(
        denied["detail"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no probing")
    );
}

/// `gadget test` runs a plugin's own cases under the operator's policy:
/// a case that reaches an origin a deny rule names is refused (the server
/// sees nothing), and a loaded plugin's `test_*.py` beside an `app.py` is
/// host code that runs only for a directory the user names.
#[test]
fn gadget_test_holds_the_operators_rules_and_runs_no_host_code_of_loaded_plugins() {
    let site = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    let plugin = plugins.join("probe");
    std::fs::create_dir_all(&plugin).unwrap();
    for file in ["plugin.toml", "probe.wasm"] {
        std::fs::copy(probe_plugin().join("probe").join(file), plugin.join(file)).unwrap();
    }
    std::fs::write(
        plugin.join("tests.toml"),
        format!(
            "[[case]]\ngadget = \"Fetch\"\nparams = {{ url = \"{}\" }}\ncontains = \"200\"\n",
            site.url("/hello")
        ),
    )
    .unwrap();
    // What a downloaded plugin could carry: host code that leaves a mark.
    let marker = dir.path().join("host-code-ran");
    std::fs::write(plugin.join("app.py"), "").unwrap();
    std::fs::write(
        plugin.join("test_mark.py"),
        format!(
            "import pathlib\npathlib.Path({:?}).write_text('ran')\n",
            marker.to_str().unwrap()
        ),
    )
    .unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.probe]\nhttp = [\"{}\"]\n\n[[rules]]\ngadget = \"Fetch\"\nparam = \"/url\"\nmatches = \"*\"\naction = \"deny\"\nreason = \"not this origin\"\n",
            site.url("")
        ),
    )
    .unwrap();
    let out = std::process::Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(&plugins)
        .arg("--config")
        .arg(&policy)
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("GADGET_CONFIG")
        .args(["test", "Fetch"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("not this origin"), "{stdout}");
    assert!(site.hits().is_empty(), "a denied case reached the network");
    assert!(
        !marker.exists(),
        "a loaded plugin's host code ran: {stdout}"
    );
    assert!(!stdout.contains("running host code"), "{stdout}");
}

/// Two copies of the probe, `probe-a` and `probe-b`, listing the same URI
/// template and prompt (their gadgets apart by prefix): between equal
/// claims neither serves them and the load says so; the plugin the policy
/// names (a stronger claim) serves them alone.
#[test]
fn a_resource_template_or_prompt_two_plugins_list_is_contested_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    for name in ["probe-a", "probe-b"] {
        let plugin = plugins.join(name);
        std::fs::create_dir_all(&plugin).unwrap();
        let manifest = std::fs::read_to_string(probe_plugin().join("probe/plugin.toml")).unwrap();
        std::fs::write(
            plugin.join("plugin.toml"),
            manifest.replace("name = \"probe\"", &format!("name = \"{name}\"")),
        )
        .unwrap();
        std::fs::copy(
            probe_plugin().join("probe/probe.wasm"),
            plugin.join("probe.wasm"),
        )
        .unwrap();
    }
    let list = |policy: &str| {
        let config = dir.path().join("policy.toml");
        std::fs::write(&config, policy).unwrap();
        let out = std::process::Command::new(common::gadget_bin())
            .arg("--plugins")
            .arg(&plugins)
            .arg("--config")
            .arg(&config)
            .env("XDG_CACHE_HOME", dir.path())
            .env_remove("GADGET_CONFIG")
            .arg("list")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Both named by the policy: equals, so neither serves either entry.
    let both = list("[plugins.probe-a]\nprefix = \"a_\"\n[plugins.probe-b]\nprefix = \"b_\"\n");
    for plugin in ["probe-a", "probe-b"] {
        assert!(
            both.contains(&format!(
                "resource template probe://fetch/{{port}} of plugin '{plugin}' is not served"
            )),
            "{both}"
        );
        assert!(
            both.contains(&format!(
                "prompt 'probe' of plugin '{plugin}' is not served"
            )),
            "{both}"
        );
    }
    // Only probe-b named (probe-a's gadgets prefixed by... nothing: its
    // names stay, b's take a prefix): b's claim is the stronger, a loses.
    let one = list("[plugins.probe-b]\nprefix = \"b_\"\n");
    assert!(
        one.contains("prompt 'probe' of plugin 'probe-a' is not served: plugin 'probe-b' lists it too and is named by the policy"),
        "{one}"
    );
    assert!(!one.contains("of plugin 'probe-b' is not served"), "{one}");
}

/// `gadget call --dry-run` starts nothing: a policy's stdio MCP server
/// (here, a command that leaves a mark) is not started by a dry run of a
/// WebAssembly gadget, nor of a name that could be the server's; a real
/// call of a gadget starts it no more.
#[test]
fn a_dry_run_starts_no_mcp_server() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let policy = format!(
        "[mcp-servers.fs]\ncommand = [\"sh\", \"-c\", \"touch {}; sleep 5\"]\n\n[[rules]]\ngadget = \"Calculator\"\nparam = \"/a\"\nmatches = \"666\"\naction = \"deny\"\n",
        marker.display()
    );
    let params = r#"{"operation":"add","a":1,"b":2}"#;
    let out = crate::capabilities::run(
        Some(&policy),
        &[],
        &["call", "--dry-run", "Calculator", "--params", params],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = crate::capabilities::run(
        Some(&policy),
        &[],
        &["call", "--dry-run", "fs_read", "--params", "{}"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--dry-run starts no MCP server"),
        "{stderr}"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!marker.exists(), "a dry run started the MCP server");
    // Nor does a real call of a WebAssembly gadget under the same rules
    // (checking that the rules name something served lists no server).
    let out = crate::capabilities::run(
        Some(&policy),
        &[],
        &["call", "Calculator", "--params", params],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("names no gadget"), "{stderr}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !marker.exists(),
        "a call of a gadget started the MCP server"
    );
}
