//! `gadget mcp` with real clients: the official Python MCP SDK
//! (`tests/mcp/client.py`, installed by scripts/setup-tests.sh) and rmcp's own
//! client over stdio, and raw JSON-RPC lines; `gadget serve` is in
//! [`crate::serve`].

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;

pub(crate) fn python() -> PathBuf {
    let python = common::workspace().join(".tools/mcp/bin/python");
    assert!(
        python.is_file(),
        "the MCP client is not installed: run ./scripts/setup-tests.sh"
    );
    python
}

pub(crate) fn client() -> PathBuf {
    common::workspace().join("tests/mcp/client.py")
}

/// A policy that denies one gadget (so the tests can see it absent).
pub(crate) fn policy(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("policy.toml");
    std::fs::write(&path, "[gadgets]\ndeny = [\"TextStats\"]\n").unwrap();
    path
}

/// What the client's scenario reported (see client.py).
pub(crate) fn check_scenario(report: &Value) {
    let tools = report["tools"].as_object().unwrap();
    assert!(tools.contains_key("Calculator"), "{report}");
    assert!(
        !tools.contains_key("TextStats"),
        "a denied gadget is not listed"
    );
    let calculator = &tools["Calculator"];
    assert_eq!(calculator["title"], "Calculator");
    assert_eq!(
        calculator["schema"]["required"],
        serde_json::json!(["operation", "a", "b"])
    );
    // The calculator's manifest declares its gadgets pure, and it may
    // touch nothing: read-only and idempotent to clients.
    assert_eq!(tools["Calculator"]["annotations"]["read_only_hint"], true);
    assert_eq!(tools["Calculator"]["annotations"]["idempotent_hint"], true);
    assert_eq!(tools["Calculator"]["annotations"]["open_world_hint"], false);

    assert_eq!(report["add"]["text"], "38");
    assert_eq!(report["add"]["is_error"], false);
    assert_eq!(report["add"]["structured"]["value"], 38.0);
    assert_eq!(report["invalid"]["is_error"], true);
    assert!(
        report["invalid"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Invalid parameters for 'Calculator':"),
        "{report}"
    );
    assert_eq!(report["gadget_error"]["is_error"], true);
    assert_eq!(
        report["gadget_error"]["text"],
        "division by zero: b must not be 0"
    );
    assert_eq!(report["unknown"]["is_error"], true);
    assert!(
        report["unknown"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Gadget 'NoSuchGadget' not found.")
    );
    assert_eq!(report["timeout"]["is_error"], true);
    assert_eq!(
        report["timeout"]["text"],
        "Gadget 'Sleep' execution exceeded timeout of 3000ms"
    );
    assert_eq!(report["progress"]["text"], "slept 2200 ms");
    let messages = report["progress"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{report}");
    assert!(messages[0].as_str().unwrap().ends_with("of 2200 ms"));
    // The abandoned call did not hold the session up.
    assert_eq!(report["cancel"]["after"], "42");
    assert!(
        report["cancel"]["elapsed"].as_f64().unwrap() < 2.0,
        "{report}"
    );
}

pub(crate) fn run_client(args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(client())
        .args(args)
        .output()
        .expect("run the MCP client");
    assert!(
        out.status.success(),
        "client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn a_python_mcp_client_over_stdio_lists_calls_and_cancels() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_client(&[
        "stdio",
        common::gadget_bin().to_str().unwrap(),
        common::shipped_plugins().to_str().unwrap(),
        policy(dir.path()).to_str().unwrap(),
    ]);
    check_scenario(&report);
}

/// What the ask scenario (client.py ask-*) reported: a person's answer is
/// the call's result; a refusal and a client that cannot ask are errors
/// that say so; the person saw the gadget's question.
pub(crate) fn check_ask(report: &Value) {
    check_answered_and_declined(report);
    let cannot = report["no_elicitation"]["text"].as_str().unwrap();
    assert_eq!(report["no_elicitation"]["is_error"], true, "{report}");
    assert!(
        cannot.contains("Which colour should the button be?") && cannot.contains("cannot ask"),
        "{report}"
    );
}

/// The ask scenario's first two calls: the person's answer is the result,
/// a refusal an error that says so; the person saw the gadget's question
/// twice (the third client cannot be asked).
pub(crate) fn check_answered_and_declined(report: &Value) {
    assert_eq!(report["answered"]["text"], "blue", "{report}");
    assert_eq!(report["answered"]["is_error"], false, "{report}");
    assert_eq!(report["declined"]["is_error"], true, "{report}");
    assert!(
        report["declined"]["text"]
            .as_str()
            .unwrap()
            .contains("declined to answer gadget 'AskUser'"),
        "{report}"
    );
    let shown = report["shown"].as_array().unwrap();
    assert_eq!(shown.len(), 2, "{report}");
    assert_eq!(shown[0], "AskUser asks: Which colour should the button be?");
}

#[test]
fn ask_human_elicits_over_stdio_with_a_server_request() {
    let report = run_client(&[
        "ask-stdio",
        common::gadget_bin().to_str().unwrap(),
        common::shipped_plugins().to_str().unwrap(),
    ]);
    check_ask(&report);
}

#[test]
fn schemas_are_native_tool_definitions() {
    let schemas = |format: &str| -> Value {
        let out = Command::new(common::gadget_bin())
            .arg("--plugins")
            .arg(common::shipped_plugins())
            .args(["schemas", "--format", format])
            .output()
            .unwrap();
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let openai = schemas("openai");
    let calculator = openai
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "Calculator")
        .unwrap();
    assert_eq!(calculator["type"], "function");
    assert_eq!(calculator["function"]["parameters"]["type"], "object");
    let anthropic = schemas("anthropic");
    assert!(
        anthropic
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "Calculator" && t["input_schema"]["required"].is_array())
    );
    let mcp = schemas("mcp");
    assert!(
        mcp.as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "Calculator" && t["inputSchema"]["type"] == "object")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcps_own_client_lists_and_calls_over_stdio() {
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;

    let mut command = tokio::process::Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .arg("mcp")
        .stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let calculator = tools
        .iter()
        .find(|t| t.name == "Calculator")
        .expect("Calculator listed");
    assert_eq!(calculator.input_schema["type"], "object");

    let arguments = |v: Value| v.as_object().unwrap().clone();
    let added = client
        .call_tool(
            CallToolRequestParams::new("Calculator").with_arguments(arguments(
                serde_json::json!({"operation": "add", "a": 2, "b": 3}),
            )),
        )
        .await
        .unwrap();
    assert_eq!(added.is_error, Some(false));
    assert_eq!(added.content[0].as_text().unwrap().text, "5");
    let invalid = client
        .call_tool(
            CallToolRequestParams::new("Calculator")
                .with_arguments(arguments(serde_json::json!({"operation": "pow"}))),
        )
        .await
        .unwrap();
    assert_eq!(invalid.is_error, Some(true));
    assert!(
        invalid.content[0]
            .as_text()
            .unwrap()
            .text
            .starts_with("Invalid parameters for 'Calculator'")
    );
    let failed = client
        .call_tool(
            CallToolRequestParams::new("Calculator").with_arguments(arguments(
                serde_json::json!({"operation": "divide", "a": 1, "b": 0}),
            )),
        )
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(
        failed.content[0].as_text().unwrap().text,
        "division by zero: b must not be 0"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_plugins_and_tells_the_client() {
    use rmcp::ServiceExt as _;
    use rmcp::service::NotificationContext;
    use rmcp::transport::TokioChildProcess;

    /// Records `notifications/tools/list_changed` and the URIs of
    /// `notifications/resources/updated`.
    struct Watcher(
        tokio::sync::mpsc::UnboundedSender<()>,
        tokio::sync::mpsc::UnboundedSender<String>,
    );
    impl rmcp::ClientHandler for Watcher {
        async fn on_tool_list_changed(&self, _context: NotificationContext<rmcp::RoleClient>) {
            let _ = self.0.send(());
        }
        async fn on_resource_updated(
            &self,
            params: rmcp::model::ResourceUpdatedNotificationParam,
            _context: NotificationContext<rmcp::RoleClient>,
        ) {
            let _ = self.1.send(params.uri);
        }
    }
    let copy_plugin = |name: &str, into: &std::path::Path| {
        let to = into.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(common::shipped_plugins().join(name)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml" || e == "wasm") {
                std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
            }
        }
    };
    let dir = tempfile::tempdir().unwrap();
    copy_plugin("calculator", dir.path());
    let mut command = tokio::process::Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(dir.path())
        .env("XDG_CACHE_HOME", dir.path())
        .arg("mcp")
        .stderr(Stdio::null());
    let transport = TokioChildProcess::new(command).unwrap();
    let pid = transport.id().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (updated_tx, mut updated) = tokio::sync::mpsc::unbounded_channel();
    let client = Watcher(tx, updated_tx).serve(transport).await.unwrap();
    // A resource a reload may bring: the session is told it may have
    // changed (resources/subscribe is what clients before 2026-07-28 use).
    #[allow(
        deprecated,
        reason = "resources/subscribe is what 2025-11-25 clients use"
    )]
    client
        .subscribe(rmcp::model::SubscribeRequestParams::new("test://watched"))
        .await
        .unwrap();
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.into_iter().map(|t| t.name.to_string()).collect()
    };
    let before = names(client.list_all_tools().await.unwrap());
    assert!(before.contains(&"Calculator".to_string()) && !before.contains(&"Sleep".to_string()));

    copy_plugin("datetime", dir.path());
    // SAFETY: kill(2) on the server's pid with SIGHUP, as an operator would.
    unsafe { libc::kill(pid as i32, libc::SIGHUP) };
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("tools/list_changed within 20 s")
        .unwrap();
    let uri = tokio::time::timeout(Duration::from_secs(20), updated.recv())
        .await
        .expect("resources/updated within 20 s");
    assert_eq!(uri.as_deref(), Some("test://watched"));
    let after = names(client.list_all_tools().await.unwrap());
    assert!(after.contains(&"Sleep".to_string()), "{after:?}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policys_agents_are_mcp_tools_too() {
    use crate::llm_server::{LlmServer, block, openai_reply};
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;

    let server = LlmServer::start(vec![
        openai_reply(
            &[(
                &block(
                    "Calculator:x",
                    &[("operation", "add"), ("a", "20"), ("b", "22")],
                ),
                0,
            )],
            (10, 10),
        ),
        openai_reply(&[("It is 42.", 0)], (10, 10)),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[llm]\nmodel = \"openai:m\"\nbase-url = \"{}/v1\"\napi-key-env = \"TEST_LLM_KEY\"\n[agents.Researcher]\ndescription = \"Does sums.\"\ngadgets = [\"Calculator\"]\n",
            server.url()
        ),
    )
    .unwrap();
    let mut command = tokio::process::Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .arg("--config")
        .arg(&policy)
        .env("XDG_CACHE_HOME", dir.path())
        .env("TEST_LLM_KEY", "k")
        .arg("mcp")
        .stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let researcher = tools
        .iter()
        .find(|t| t.name == "Researcher")
        .expect("the agent is listed");
    assert_eq!(
        researcher.input_schema["required"],
        serde_json::json!(["task"])
    );
    assert_eq!(
        researcher
            .annotations
            .as_ref()
            .and_then(|a| a.open_world_hint),
        Some(true)
    );
    let task = serde_json::json!({"task": "what is 20 + 22?"});
    let answer = client
        .call_tool(
            CallToolRequestParams::new("Researcher")
                .with_arguments(task.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(answer.is_error, Some(false), "{answer:?}");
    assert_eq!(answer.content[0].as_text().unwrap().text, "It is 42.");
    // Its arguments are validated like a gadget's.
    let invalid = client
        .call_tool(CallToolRequestParams::new("Researcher"))
        .await
        .unwrap();
    assert_eq!(invalid.is_error, Some(true));
    assert_eq!(server.requests().len(), 2);
    client.cancel().await.unwrap();
}

/// Raw JSON-RPC lines against `gadget mcp`: what a careless or hostile
/// client can send that rmcp alone would leave unanswered.
#[test]
fn every_stdio_request_is_answered_even_a_duplicate_or_an_oversized_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env("XDG_CACHE_HOME", dir.path())
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let stdout = server.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(message) = serde_json::from_str(&line) {
                let _ = tx.send(message);
            }
        }
    });
    let call = |id: u64, name: &str, arguments: Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
        .to_string()
    };
    let mut lines = vec![
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        // The same id twice while the first is still running.
        call(7, "Sleep", serde_json::json!({"ms": 800})),
        call(7, "Calculator", serde_json::json!({"operation": "add", "a": 1, "b": 2})),
    ];
    // One message just over the limit, its id before the cut.
    let pad = "a".repeat(gadget_mcp::stdio::MAX_STDIO_MESSAGE_BYTES);
    lines.push(call(9, "Calculator", serde_json::json!({"pad": pad})));
    lines.push(call(
        10,
        "Calculator",
        serde_json::json!({"operation": "multiply", "a": 6, "b": 7}),
    ));
    for line in lines {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    stdin.flush().unwrap();

    let mut answers: Vec<Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let answered = |answers: &Vec<Value>, id: u64| answers.iter().filter(|a| a["id"] == id).count();
    while ![(0, 1), (7, 2), (9, 1), (10, 1)]
        .iter()
        .all(|&(id, n)| answered(&answers, id) >= n)
    {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(message) if message.get("id").is_some() => answers.push(message),
            Ok(_) => {}
            Err(_) => panic!("not every request was answered within 30 s: {answers:#?}"),
        }
    }
    let of = |id: u64| -> Vec<&Value> { answers.iter().filter(|a| a["id"] == id).collect() };
    // The first request with id 7 ran to the end; the second was refused.
    let sevens = of(7);
    let refused: Vec<_> = sevens.iter().filter(|a| a.get("error").is_some()).collect();
    let finished: Vec<_> = sevens
        .iter()
        .filter(|a| a.get("result").is_some())
        .collect();
    assert_eq!((refused.len(), finished.len()), (1, 1), "{sevens:#?}");
    let refusal = refused[0]["error"]["message"].as_str().unwrap();
    assert!(refusal.contains("already in use"), "{refusal}");
    assert_eq!(finished[0]["result"]["isError"], false, "{sevens:#?}");
    // The oversized message is answered with the limit, by its id.
    let nine = of(9)[0]["error"]["message"].as_str().unwrap().to_string();
    assert!(nine.contains("MAX_STDIO_MESSAGE_BYTES"), "{nine}");
    // And the session goes on.
    let ten = &of(10)[0]["result"];
    assert!(
        ten["content"][0]["text"].as_str().unwrap().contains("42"),
        "{ten}"
    );
    drop(stdin);
    let _ = server.wait();
}

/// What the official TypeScript SDK's client (tests/mcp/servers/ts_client.mjs)
/// saw of the shipped gadgets.
pub(crate) fn run_ts_client(args: &[&str]) -> Value {
    let out = Command::new("node")
        .arg(common::workspace().join("tests/mcp/servers/ts_client.mjs"))
        .args(args)
        .output()
        .expect("run node (installed by scripts/setup-tests.sh)");
    assert!(
        out.status.success(),
        "TypeScript client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert!(
        report["tools"]
            .as_array()
            .unwrap()
            .contains(&"Calculator".into()),
        "{report}"
    );
    assert_eq!(
        report["calculator_schema"]["required"],
        serde_json::json!(["operation", "a", "b"])
    );
    assert_eq!(report["added"]["text"], "5", "{report}");
    assert_eq!(report["added"]["is_error"], false, "{report}");
    assert_eq!(report["refused"]["is_error"], true, "{report}");
    assert!(
        report["refused"]["text"]
            .as_str()
            .unwrap()
            .contains("Invalid parameters for 'Calculator'"),
        "{report}"
    );
    report
}

#[test]
fn the_typescript_sdks_client_lists_and_calls_over_stdio() {
    run_ts_client(&[
        "stdio",
        common::gadget_bin().to_str().unwrap(),
        common::shipped_plugins().to_str().unwrap(),
    ]);
}
