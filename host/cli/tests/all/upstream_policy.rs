//! Upstream MCP servers' tools under the rest of the policy: sampling
//! kept to its grant, a server's question put to the person, the policy's
//! agents, argument rules, approvals and the journal, servers started only
//! when needed, and the host's bounds on what a server sends.

use std::process::Stdio;

use serde_json::{Value, json};

use crate::common;
use crate::upstream::{Policy, Session, reference_server, said};

#[test]
fn sampling_is_refused_unless_granted_and_then_kept_to_its_budget() {
    // Not granted: the host does not offer sampling, so server-everything
    // does not even list its sampling tool.
    let policy = Policy::everything("");
    let out = policy.gadget(&["-q", "list"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        !said(&out).contains("everything_trigger_sampling_request"),
        "{}",
        said(&out)
    );

    // Granted a model: answered through the host's provider.
    let llm = crate::llm_server::LlmServer::start(vec![crate::llm_server::openai_reply(
        &[("Paris.", 0)],
        (20, 3),
    )]);
    let granted = |grant: &str| {
        Policy::everything(&format!(
            "llm = {{ models = [\"openai:tiny\"], {grant} }}\n[llm]\nmodel = \"openai:tiny\"\nbase-url = \"{}/v1\"\napi-key-env = \"TEST_LLM_KEY\"\n[llm.models.\"openai:tiny\"]\ninput-per-mtok = 1.0\noutput-per-mtok = 2.0\n",
            llm.url()
        ))
    };
    let sample = |policy: &Policy, max_tokens: u32| {
        policy
            .command()
            .env("TEST_LLM_KEY", "sk-test")
            .args([
                "call",
                "everything_trigger_sampling_request",
                "--params",
                &json!({"prompt": "the capital of France?", "maxTokens": max_tokens}).to_string(),
            ])
            .output()
            .unwrap()
    };
    let policy = granted("max-usd-per-run = 0.01");
    let out = sample(&policy, 50);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("Paris."), "{}", said(&out));
    let asked = llm.requests();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].body.to_string().contains("the capital of France?"),
        "{:?}",
        asked[0].body
    );

    // A request that could cost more than one request may: refused before
    // anything is sent (4096 tokens out at $2 per million is over $0.0001).
    let policy = granted("max-usd-per-call = 0.0001");
    let out = sample(&policy, 4096);
    assert!(!out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("over the $0.0001 per request granted to MCP server 'everything'"),
        "{}",
        said(&out)
    );
    assert_eq!(llm.requests().len(), 1, "nothing more was sent");
}

#[test]
fn an_upstream_servers_question_goes_to_the_person_who_answers_the_call() {
    let policy = Policy::everything("");
    std::fs::write(
        policy.path().join("response.txt"),
        "!!!GADGET_START:everything_trigger_elicitation_request:e1\n!!!GADGET_END\n",
    )
    .unwrap();
    // The person's answer (here scripted) fills the server's form.
    std::fs::write(
        policy.path().join("answers.txt"),
        "{\"name\": \"Ada\", \"integer\": 7}\n",
    )
    .unwrap();
    let out = policy.gadget(&["run", "--json", "--answers", "answers.txt", "response.txt"]);
    assert!(out.status.success(), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("User provided the requested information")
            && text.contains("Name: Ada")
            && text.contains("Favorite Integer: 7"),
        "{text}"
    );
    // Under `gadget mcp`, the client's person is asked (elicitation).
    let mut session = Session::start_answering(&policy, Some(r#"{"name": "Grace"}"#));
    let result = session.call("everything_trigger_elicitation_request", json!({}));
    let text = result.to_string();
    assert!(text.contains("Name: Grace"), "{text}");
    assert!(
        session.asked.iter().any(|q| q.contains("everything asks:")),
        "{:?}",
        session.asked
    );
    drop(session);
    // No one to ask (no answers, no terminal): declined, and the call ends.
    let out = policy
        .command()
        .args(["run", "--json", "response.txt"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        said(&out).contains("User declined to provide the requested information"),
        "{}",
        said(&out)
    );
}

#[test]
fn the_policys_agents_may_call_upstream_tools() {
    use crate::llm_server::{LlmServer, block, openai_reply};
    // The agent's model calls the upstream tool, then answers.
    let call = block("everything_get_sum:s1", &[("a", "40"), ("b", "2")]);
    let llm = LlmServer::start(vec![
        openai_reply(&[(call.as_str(), 0)], (10, 10)),
        openai_reply(&[("It is 42.", 0)], (10, 3)),
    ]);
    let policy = Policy::everything(&format!(
        "[llm]\nmodel = \"openai:m\"\nbase-url = \"{}/v1\"\napi-key-env = \"TEST_LLM_KEY\"\n\
         [agents.Adder]\ndescription = \"Adds with the upstream server.\"\ngadgets = [\"everything_get_*\"]\n",
        llm.url()
    ));
    let out = policy
        .command()
        .env("TEST_LLM_KEY", "k")
        .args(["call", "Adder", "--params", r#"{"task": "40 + 2?"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("It is 42."), "{}", said(&out));
    // The second request carried the upstream tool's result.
    let second = llm.requests()[1].body.to_string();
    assert!(second.contains("The sum of 40 and 2 is 42."), "{second}");
}

#[test]
fn argument_rules_approvals_and_the_journal_hold_for_upstream_tools() {
    let policy = Policy::everything(
        "[gadgets]\napprove = [\"everything_get_sum\"]\n\
         [[rules]]\ngadget = \"everything_echo\"\nparam = \"/message\"\nmatches = \"*secret*\"\naction = \"deny\"\nreason = \"No secrets upstream\"\n",
    );
    // A deny rule on an argument: refused before the server hears of it.
    let out = policy.gadget(&[
        "--audit",
        "journal.jsonl",
        "call",
        "everything_echo",
        "--params",
        r#"{"message": "my secret"}"#,
    ]);
    assert!(!out.status.success());
    assert!(said(&out).contains("No secrets upstream"), "{}", said(&out));
    // Allowed, and journalled with the server it went to.
    let out = policy.gadget(&[
        "--audit",
        "journal.jsonl",
        "call",
        "everything_echo",
        "--params",
        r#"{"message": "hello"}"#,
    ]);
    assert!(out.status.success(), "{}", said(&out));
    let journal = std::fs::read_to_string(policy.path().join("journal.jsonl")).unwrap();
    let started: Vec<Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["event"] == "call_started")
        .collect();
    let last = started.last().unwrap_or_else(|| panic!("{journal}"));
    assert_eq!(last["gadget"], "everything_echo", "{last}");
    assert_eq!(last["plugin"], "mcp:everything", "{last}");
    assert!(last.get("digest").is_none(), "{last}");
    assert!(
        last["detail"]["source"]
            .as_str()
            .unwrap()
            .contains("server-everything"),
        "{last}"
    );
    // A tool that needs approval, with no one to approve: not run.
    let out = policy
        .command()
        .args([
            "call",
            "everything_get_sum",
            "--params",
            r#"{"a": 1, "b": 2}"#,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("needs a person's approval"),
        "{}",
        said(&out)
    );
}

#[test]
fn a_server_starts_only_when_its_tools_are_needed() {
    // The server's command leaves a mark in the working directory when it
    // starts.
    let policy = Policy::new(&format!(
        "[mcp-servers.everything]\ncommand = [\"sh\", \"-c\", \"touch started && exec node \\\"$0\\\" stdio\", {:?}]\nenv = {{ PATH = {{ env = \"PATH\" }} }}\n",
        reference_server("server-everything")
    ));
    let mark = policy.path().join("started");
    // A command that calls only a gadget never starts it.
    let out = policy.gadget(&[
        "call",
        "Calculator",
        "--params",
        r#"{"operation": "add", "a": 1, "b": 1}"#,
    ]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(!mark.exists(), "the server started for a gadget's call");
    // A name with its prefix starts it.
    let out = policy.gadget(&[
        "call",
        "everything_echo",
        "--params",
        r#"{"message": "hi"}"#,
    ]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(mark.exists());
    // So does a listing.
    std::fs::remove_file(&mark).unwrap();
    let out = policy.gadget(&["list"]);
    assert!(said(&out).contains("everything_echo"), "{}", said(&out));
    assert!(mark.exists());
}

#[test]
fn a_servers_huge_result_and_tool_flood_are_cut_to_the_host_bounds() {
    let python = common::workspace().join(".tools/mcp/bin/python");
    let server = common::workspace().join("tests/mcp/crashing_server.py");
    let policy = Policy::new(&format!(
        "[mcp-servers.crashy]\ncommand = [{:?}, {:?}]\n",
        python, server
    ));
    let mut session = Session::start(&policy);
    // 2 MiB of text: at most 1 MiB (MAX_RESULT_BYTES) reaches the client,
    // saying it was cut.
    let result = session.call("crashy_big", json!({}));
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.len() < (1 << 20) + 100, "{} bytes", text.len());
    assert!(
        text.contains("[truncated"),
        "{}",
        &text[text.len().saturating_sub(80)..]
    );
    // 300 more tools: the server's list is served up to 256 (MAX_TOOLS).
    let swarmed = session.call("crashy_swarm", json!({}));
    assert_eq!(swarmed["content"][0]["text"], "swarmed", "{swarmed}");
    session.wait_for("notifications/tools/list_changed");
    let listed = session.request("tools/list", json!({}));
    let served = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("crashy_"))
        .count();
    assert_eq!(served, 256, "{listed}");
}

/// An upstream tool the operator denies is refused under `gadget call`
/// naming the rule, as a denied gadget is, not as a name nobody serves.
#[test]
fn a_denied_upstream_tool_names_the_rule_that_denies_it() {
    let policy = Policy::everything("[gadgets]\ndeny = [\"everything_ec*\"]\n");
    let out = policy.gadget(&[
        "call",
        "everything_echo",
        "--params",
        r#"{"message": "hello"}"#,
    ]);
    assert!(!out.status.success());
    assert!(
        said(&out).contains("gadget 'everything_echo' is denied by the operator's policy")
            && said(&out).contains("[gadgets] deny = \"everything_ec*\""),
        "{}",
        said(&out)
    );
    // A name nobody serves is still unknown.
    let out = policy.gadget(&["call", "everything_nothing", "--params", "{}"]);
    assert!(!said(&out).contains("denied"), "{}", said(&out));
}
