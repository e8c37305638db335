//! The `llm` import of gadget:plugin@0.2.0 through the real binary: the
//! shipped `Summarize` gadget completing against the scripted
//! OpenAI-compatible server of the agent tests, under the operator's
//! grant and budget; and a 0.1.0 component served beside 0.2.0 ones.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use crate::llm_server::{LlmServer, Reply, block, openai_reply};

/// `[llm]` pointing at `server`, priced at $1 in and $2 out per million
/// tokens, and `grant` for the summarize plugin.
fn policy(server: &LlmServer, grant: &str, extra: &str) -> String {
    format!(
        "{extra}\n[llm]\nmodel = \"openai:tiny\"\nbase-url = \"{}/v1\"\napi-key-env = \"TEST_LLM_KEY\"\n[llm.models.\"openai:tiny\"]\ninput-per-mtok = 1.0\noutput-per-mtok = 2.0\n[plugins.summarize]\n{grant}\n",
        server.url()
    )
}

fn gadget(policy: Option<&str>, plugins: &[&std::path::Path], args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(common::gadget_bin());
    for dir in plugins {
        command.arg("--plugins").arg(dir);
    }
    command
        .env_remove("GADGET_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env("TEST_LLM_KEY", "sk-test")
        .stdin(Stdio::null());
    if let Some(policy) = policy {
        let file = home.path().join("policy.toml");
        std::fs::write(&file, policy).unwrap();
        command.arg("--config").arg(file);
    }
    command.args(args).output().expect("run gadget")
}

fn summarize(policy: Option<&str>, text: &str) -> Value {
    let params = json!({"text": text, "max_words": 10}).to_string();
    let out = gadget(
        policy,
        &[&common::shipped_plugins()],
        &["call", "Summarize", "--params", &params, "--json"],
    );
    serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn error_message(call: &Value) -> String {
    call["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_completion_is_costed_into_the_call_that_made_it() {
    // Usage a request of this size can have (at most 177 tokens in, 36 out).
    let server = LlmServer::start(vec![openai_reply(
        &[("A short ", 0), ("summary.", 0)],
        (100, 30),
    )]);
    let call = summarize(
        Some(&policy(
            &server,
            "llm = { models = [\"openai:tiny\"], max-usd-per-call = 0.05 }",
            "",
        )),
        "A long text about many things.",
    );
    assert_eq!(call["ok"], true, "{call}");
    assert_eq!(call["result"], "A short summary.");
    // 100 in at $1/M + 30 out at $2/M = $0.00016, added by the host.
    let cost = call["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.00016).abs() < 1e-12, "{call}");
    assert_eq!(call["details"]["output_tokens"], 30);
    let logs = call["logs"].to_string();
    assert!(logs.contains("llm completion (openai:tiny)"), "{logs}");
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.body["model"], "tiny");
    assert_eq!(request.body["messages"][0]["role"], "system");
    assert_eq!(
        request.body["messages"][1]["content"],
        "A long text about many things."
    );
    assert_eq!(request.body["max_tokens"], 36);
}

#[test]
fn without_a_grant_or_for_another_model_the_import_is_denied() {
    let server = LlmServer::start(vec![]);
    let call = summarize(Some(&policy(&server, "", "")), "text");
    assert_eq!(call["ok"], false, "{call}");
    assert!(error_message(&call).contains("has no LLM grant"), "{call}");
    let call = summarize(
        Some(&policy(
            &server,
            "llm = { models = [\"anthropic:other\"] }",
            "",
        )),
        "text",
    );
    // The gadget asks for no model, so it gets the first granted one; the
    // backend has no Anthropic key, and says so.
    assert!(error_message(&call).contains("ANTHROPIC_API_KEY"), "{call}");
    assert!(server.requests().is_empty());
}

#[test]
fn a_completion_over_the_budget_is_refused_before_it_is_sent() {
    let server = LlmServer::start(vec![]);
    let call = summarize(
        Some(&policy(
            &server,
            "llm = { models = [\"openai:tiny\"], max-usd-per-call = 0.00001 }",
            "",
        )),
        "A text that will not be summarised.",
    );
    assert_eq!(call["ok"], false, "{call}");
    assert!(
        error_message(&call).contains("LLM budget exceeded"),
        "{call}"
    );
    assert!(
        error_message(&call).contains("of the call's $0.00001 (max-usd-per-call) is left"),
        "{call}"
    );
    assert!(server.requests().is_empty(), "nothing was sent");
    assert_eq!(call["cost_usd"], 0.0);
}

#[test]
fn a_completion_in_flight_ends_at_the_call_deadline() {
    // The server takes 30 s to start answering; the operator caps calls at
    // 700 ms. (The bound below is generous: other tests share the cores.)
    let slow = Reply::Events {
        events: vec![(Duration::from_secs(30), "data: [DONE]\n\n".into())],
        broken: false,
    };
    let server = LlmServer::start(vec![slow]);
    let started = Instant::now();
    let call = summarize(
        Some(&policy(
            &server,
            "llm = { models = [\"openai:tiny\"] }",
            "[limits]\nmax-timeout-ms = 700",
        )),
        "text",
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(call["ok"], false, "{call}");
    assert_eq!(call["error"]["kind"], "timeout", "{call}");
}

#[test]
fn components_of_both_contract_versions_run_in_one_response() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("legacy");
    std::fs::create_dir(&plugin).unwrap();
    std::fs::copy(
        common::fixture("fixture-legacy-v0-1-0"),
        plugin.join("legacy.wasm"),
    )
    .unwrap();
    std::fs::write(
        plugin.join("plugin.toml"),
        "name = \"legacy\"\nversion = \"0.1.0\"\ndescription = \"a 0.1.0 component\"\ncomponent = \"legacy.wasm\"\n",
    )
    .unwrap();
    let check = gadget(None, &[], &["check", plugin.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&check.stdout).contains("exports gadget:plugin/gadget@0.1.0"),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let response = dir.path().join("response.txt");
    std::fs::write(
        &response,
        block("LegacyEcho:old", &[("text", "hi")])
            + &block(
                "Calculator:new",
                &[("operation", "add"), ("a", "1"), ("b", "2")],
            ),
    )
    .unwrap();
    let out = gadget(
        None,
        &[&common::shipped_plugins(), dir.path()],
        &["run", "--json", response.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let finished: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "call_finished")
        .collect();
    let result = |id: &str| finished.iter().find(|e| e["id"] == id).unwrap()["result"].clone();
    assert_eq!(result("old"), "0.1.0 says {\"text\":\"hi\"}");
    assert_eq!(result("new"), "3");
}

/// `gadget agent --json` with `policy` against `server`.
fn agent_with(server: &LlmServer, policy: &str, task: &str) -> (Output, Vec<Value>) {
    let policy = format!(
        "{policy}\n[llm]\nmodel = \"openai:m\"\nbase-url = \"{}/v1\"\napi-key-env = \"TEST_LLM_KEY\"\n[llm.models.\"openai:m\"]\ninput-per-mtok = 1.0\noutput-per-mtok = 1.0\n",
        server.url()
    );
    let out = gadget(
        Some(&policy),
        &[&common::shipped_plugins()],
        &["agent", task, "--json"],
    );
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out, events)
}

#[test]
fn a_sub_agent_calls_its_gadgets_answers_and_its_costs_roll_up() {
    let server = LlmServer::start(vec![
        // The user's loop delegates.
        openai_reply(
            &[(
                &block("Researcher:r1", &[("task", "add 3 and 4, then 1 and 1")]),
                0,
            )],
            (100, 10),
        ),
        // The sub-agent's first response: two calls.
        openai_reply(
            &[(
                &(block(
                    "Calculator:x",
                    &[("operation", "add"), ("a", "3"), ("b", "4")],
                ) + &block(
                    "Calculator:y",
                    &[("operation", "add"), ("a", "1"), ("b", "1")],
                )),
                0,
            )],
            (200, 20),
        ),
        // Its answer.
        openai_reply(&[("7 and 2", 0)], (300, 5)),
        // The user's loop answers.
        openai_reply(&[("The researcher says 7 and 2.", 0)], (400, 10)),
    ]);
    let (out, events) = agent_with(
        &server,
        "[agents.Researcher]\ndescription = \"Does sums with the calculator.\"\ngadgets = [\"Calc*\"]\nsystem = \"You research sums.\"\n",
        "What are 3+4 and 1+1?",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let researcher = events
        .iter()
        .find(|e| e["type"] == "call_finished" && e["id"] == "r1")
        .expect("the sub-agent's call ended");
    assert_eq!(researcher["result"], "7 and 2");
    // Its own LLM tokens (200+20 and 300+5 at $1 per million) are its cost.
    let cost = researcher["cost"].as_f64().unwrap();
    assert!((cost - 525e-6).abs() < 1e-12, "{researcher}");
    // Its calls appear nested under it.
    let nested: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["type"] == "nested" && e["id"] == "r1" && e["event"]["type"] == "call_finished"
        })
        .collect();
    assert_eq!(nested.len(), 2, "{events:#?}");
    assert_eq!(nested[0]["event"]["gadget"], "Calculator");
    // The sub-agent saw only its gadgets, and its own system text.
    let requests = server.requests();
    let system = requests[1].body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(system, "You research sums.");
    let gadgets = requests[1].body["messages"][1]["content"].as_str().unwrap();
    assert!(gadgets.contains("GADGET: Calculator") && !gadgets.contains("GADGET: Sleep"));
    assert_eq!(
        requests[1].body["messages"][2]["content"],
        "add 3 and 4, then 1 and 1"
    );
    let summary = events
        .iter()
        .find(|e| e["type"] == "agent_summary")
        .unwrap();
    assert_eq!(summary["answer"], "The researcher says 7 and 2.");
    let total = summary["total_cost"].as_f64().unwrap();
    assert!((total - (525e-6 + 520e-6)).abs() < 1e-12, "{summary}");
}

#[test]
fn an_agent_that_calls_itself_stops_at_the_depth_limit() {
    let again = || {
        openai_reply(
            &[(&block("Looper:deeper", &[("task", "go deeper")]), 0)],
            (1, 1),
        )
    };
    let server = LlmServer::start(vec![
        again(), // the user's loop
        again(), // depth 1
        again(), // depth 2
        again(), // depth 3: its call of depth 4 is refused
        openai_reply(&[("stopped at the bottom", 0)], (1, 1)),
        openai_reply(&[("depth 2 done", 0)], (1, 1)),
        openai_reply(&[("depth 1 done", 0)], (1, 1)),
        openai_reply(&[("all done", 0)], (1, 1)),
    ]);
    let (out, events) = agent_with(
        &server,
        "[agents.Looper]\ndescription = \"Delegates to itself.\"\ngadgets = [\"Looper\"]\n",
        "loop",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 8);
    let refused = requests[4].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        refused.starts_with("Result (deeper): Error: agent 'Looper' would run at depth 4, past the limit of 3 nested agents"),
        "{refused}"
    );
    let summary = events
        .iter()
        .find(|e| e["type"] == "agent_summary")
        .unwrap();
    assert_eq!(summary["answer"], "all done");
}

/// An SDK example's `Headline` completes through the host, with the
/// operator's grant, and its cost is the call's.
fn sdk_example_completes(example: &str, plugin: &str) {
    let server = LlmServer::start(vec![openai_reply(
        &[("A Fine ", 0), ("Headline", 0)],
        (100, 20),
    )]);
    let dir = crate::languages::built(&common::workspace().join("examples").join(example));
    let policy = format!(
        "[llm]\nmodel = \"openai:tiny\"\nbase-url = \"{}/v1\"\napi-key-env = \"TEST_LLM_KEY\"\n[llm.models.\"openai:tiny\"]\ninput-per-mtok = 1.0\noutput-per-mtok = 2.0\n[plugins.{plugin}]\nllm = {{ models = [\"openai:tiny\"] }}\n",
        server.url()
    );
    let out = gadget(
        Some(&policy),
        &[&dir],
        &[
            "call",
            "Headline",
            "--params",
            r#"{"text": "Rain is expected on Tuesday."}"#,
            "--json",
        ],
    );
    let call: Value =
        serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap_or_else(|e| {
            panic!(
                "{example}: {e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(call["ok"], true, "{example}: {call}");
    assert_eq!(call["result"], "A Fine Headline", "{example}");
    let cost = call["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.00014).abs() < 1e-12, "{example}: {call}");
    let request = &server.requests()[0];
    assert_eq!(
        request.body["messages"][0]["content"],
        "Write one short headline for the text. Reply with the headline only.",
        "{example}"
    );
    assert_eq!(
        request.body["messages"][1]["content"],
        "Rain is expected on Tuesday."
    );
    assert_eq!(request.body["max_tokens"], 40, "{example}");

    // Without the grant the gadget fails with the SDK's words for a denial.
    let out = gadget(
        None,
        &[&dir],
        &["call", "Headline", "--params", r#"{"text": "x"}"#, "--json"],
    );
    let call: Value = serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!(call["ok"], false, "{example}: {call}");
    assert!(
        error_message(&call).contains("LLM denied"),
        "{example}: {call}"
    );
}

#[test]
fn a_python_gadget_completes_through_the_sdk() {
    sdk_example_completes("python-gadget", "python-words");
}

#[test]
fn a_javascript_gadget_completes_through_the_sdk() {
    sdk_example_completes("js-gadget", "js-slug");
}

#[test]
fn a_go_gadget_completes_through_the_sdk() {
    sdk_example_completes("go-gadget", "go-roman");
}

#[test]
fn a_c_gadget_completes_through_the_sdk() {
    sdk_example_completes("c-gadget", "c-cipher");
}

#[test]
fn ctrl_c_reaches_a_sub_agent_in_flight() {
    use std::io::{BufRead, BufReader};
    let server = LlmServer::start(vec![
        openai_reply(
            &[(&block("Researcher:r1", &[("task", "think long")]), 0)],
            (1, 1),
        ),
        // The sub-agent's model starts, then stalls.
        Reply::Events {
            events: vec![
                (
                    Duration::ZERO,
                    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hmm\"}}]}\n\n"
                        .into(),
                ),
                (Duration::from_secs(30), "data: [DONE]\n\n".into()),
            ],
            broken: false,
        },
    ]);
    let home = tempfile::tempdir().unwrap();
    let policy = home.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[llm]\nmodel = \"openai:m\"\nbase-url = \"{}/v1\"\napi-key-env = \"TEST_LLM_KEY\"\n[agents.Researcher]\ndescription = \"Thinks.\"\ngadgets = [\"Calculator\"]\n",
            server.url()
        ),
    )
    .unwrap();
    let mut child = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .arg("--config")
        .arg(&policy)
        .env("XDG_CACHE_HOME", home.path())
        .env("TEST_LLM_KEY", "k")
        .args(["agent", "go", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    for _ in 0..500 {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains("\"nested\"") && line.contains("\"llm_request\"") {
            break;
        }
    }
    assert!(seen.contains("llm_request"), "{seen}");
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    // SAFETY: kill(2) on the child's pid with SIGINT, as Ctrl-C would.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let researcher: Value = rest
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "call_finished" && e["id"] == "r1")
        .expect("the sub-agent's call ended");
    assert_eq!(researcher["error"]["kind"], "cancelled", "{researcher}");
}

/// A backend whose completions never answer (the call's deadline ends them).
struct NeverAnswers;

impl gadget_host::runtime::llm::LlmBackend for NeverAnswers {
    fn price(&self, _: &str) -> Option<gadget_host::runtime::llm::LlmPrice> {
        Some(gadget_host::runtime::llm::LlmPrice {
            input_per_mtok: 1.0,
            output_per_mtok: 2.0,
        })
    }

    fn complete(
        &self,
        _: gadget_host::runtime::llm::LlmRequest,
    ) -> gadget_host::tool::BoxFuture<'static, Result<gadget_host::runtime::llm::LlmAnswer, String>>
    {
        Box::pin(std::future::pending())
    }
}

/// A completion cut at the call's deadline is the call's timeout even when
/// the epoch clock lags the wall clock (a ticker thread starved on a
/// loaded machine: here a manual clock that never moves). It was reported
/// as a cancellation, because only the epoch clock was asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_cut_at_the_deadline_is_a_timeout_when_the_epoch_clock_lags() {
    use gadget_host::loader::{self, LoadOptions, NoProgress};
    use gadget_host::runtime::{EpochMode, policy::Policy};

    let runtime = common::runtime(EpochMode::Manual);
    runtime.set_llm_backend(std::sync::Arc::new(NeverAnswers));
    let policy = Policy::parse(
        "[limits]\nmax-timeout-ms = 300\n[plugins.summarize]\nllm = { models = [\"openai:tiny\"] }\n",
        &common::workspace(),
    )
    .unwrap();
    let (registry, errors) = loader::load_dirs(
        runtime,
        &[common::shipped_plugins()],
        &LoadOptions::from_policy(&policy, None),
        std::sync::Arc::new(NoProgress),
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    let started = Instant::now();
    let report = registry
        .call(
            "Summarize",
            json!({"text": "text", "max_words": 10}),
            "s1",
            None,
        )
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    let error = report.outcome.expect_err("the completion never answers");
    assert_eq!(error.kind(), "timeout", "{error:?}");
}

/// `gadget call` goes through the one call path, so a policy's agent is
/// callable like any gadget (and `schemas`, `list` and `describe` show it).
#[test]
fn gadget_call_runs_a_sub_agent_through_the_one_call_path() {
    let server = LlmServer::start(vec![
        openai_reply(
            &[(
                &block(
                    "Calculator:x",
                    &[("operation", "add"), ("a", "3"), ("b", "4")],
                ),
                0,
            )],
            (200, 20),
        ),
        openai_reply(&[("7", 0)], (300, 5)),
    ]);
    let policy = format!(
        "[agents.Researcher]\ndescription = \"Does sums.\"\ngadgets = [\"Calc*\"]\n[llm]\nmodel = \"openai:m\"\nbase-url = \"{}/v1\"\napi-key-env = \"TEST_LLM_KEY\"\n[llm.models.\"openai:m\"]\ninput-per-mtok = 1.0\noutput-per-mtok = 1.0\n",
        server.url()
    );
    let out = gadget(
        Some(&policy),
        &[&common::shipped_plugins()],
        &[
            "call",
            "researcher",
            "--params",
            r#"{"task": "add 3 and 4"}"#,
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let call: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&call["gadget"], &call["result"]),
        (&json!("Researcher"), &json!("7"))
    );
    let cost = call["cost_usd"].as_f64().unwrap();
    assert!((cost - 525e-6).abs() < 1e-12, "{call}");
    // Its parameters are validated like a gadget's.
    let out = gadget(
        Some(&policy),
        &[&common::shipped_plugins()],
        &["call", "Researcher", "--params", "{}", "--json"],
    );
    assert_eq!(out.status.code(), Some(2));
    let refused: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(refused["error"]["kind"], "invalid-parameters", "{refused}");
    // And a tool a client can be given, like any gadget.
    let out = gadget(
        Some(&policy),
        &[&common::shipped_plugins()],
        &["schemas", "--format", "openai"],
    );
    let schemas: Value = serde_json::from_slice(&out.stdout).unwrap();
    let researcher = schemas
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "Researcher")
        .expect("the agent's schema");
    assert_eq!(
        researcher["function"]["parameters"]["required"],
        json!(["task"])
    );
    // `list` and `describe` show it too, with what it may touch.
    let out = gadget(Some(&policy), &[&common::shipped_plugins()], &["list"]);
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = list
        .lines()
        .find(|l| l.starts_with("Researcher"))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(
        row.contains("(agent)") && row.contains("Does sums."),
        "{row}"
    );
    let out = gadget(
        Some(&policy),
        &[&common::shipped_plugins()],
        &["describe", "researcher"],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("Agent: completes with openai:m"), "{text}");
    assert!(text.contains("task"), "{text}");
}
