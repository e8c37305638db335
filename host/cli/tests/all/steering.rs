//! A person steers a running `gadget agent` from its terminal, and an LLM
//! error after the retries is recovered as the policy's `[llm.on-error]`
//! says (a fallback model, then a given response) instead of ending the
//! session.

use serde_json::Value;

use crate::agent::{agent, agent_command, events, stderr, summary};
use crate::first_hour_again::answering_on_a_terminal;
use crate::llm_server::{LlmServer, Reply, block, openai_reply};

/// The first response: a Calculator call the person must approve, and a
/// two-second Sleep, during which the person types a message.
fn approve_then_sleep() -> Reply {
    let add = block(
        "Calculator:calc",
        &[("operation", "add"), ("a", "1"), ("b", "2")],
    );
    let nap = block("Sleep:nap", &[("ms", "2000")]);
    openai_reply(&[("Working.", 0), (&add, 0), (&nap, 0)], (50, 20))
}

#[test]
fn a_line_typed_while_the_agent_works_reaches_the_model_at_its_next_turn() {
    let server = LlmServer::start(vec![
        approve_then_sleep(),
        openai_reply(&[("3, in metric.", 0)], (90, 5)),
    ]);
    let (command, home) = agent_command(
        &server,
        None,
        &[
            "--model",
            "openai:gpt-4o-mini",
            "--approve-gadget",
            "Calculator",
            "Add one and two.",
        ],
    );
    // The approval prompt takes the first line; the second, typed while
    // Sleep runs, goes to the model.
    let shown = answering_on_a_terminal(
        command,
        &[
            ("tell the model at its next turn", ""),
            ("run it?", "y\n"),
            ("✓ Calculator (calc)", "Use metric units.\n"),
        ],
    );
    drop(home);
    assert!(
        shown.contains("↪ to the model: Use metric units."),
        "{shown}"
    );
    assert!(shown.contains("3, in metric."), "{shown}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{shown}");
    let messages = requests[1].body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user", "{last}");
    assert_eq!(last["content"], "Use metric units.", "{last}");
    // The approval's "y" was an answer, not a message to the model.
    assert!(
        !messages.iter().any(|m| m["content"] == "y"),
        "{messages:#?}"
    );
}

#[test]
fn an_llm_error_goes_to_the_fallback_model_then_to_the_given_response() {
    // The session's model is at a port where nothing listens; the
    // fallback, on the same provider, at the scripted server.
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = LlmServer::nowhere(unused.local_addr().unwrap().port());
    drop(unused);
    let backup = LlmServer::start(vec![openai_reply(&[("From the backup.", 0)], (30, 4))]);
    let policy = format!(
        "[llm.on-error]\nfallback = [{{ model = \"openai:backup-model\", base-url = \"{}/v1\", api-key-env = \"TEST_LLM_KEY\" }}]\n",
        backup.url()
    );
    let args = [
        "--model",
        "openai:gpt-4o-mini",
        "--max-retries",
        "0",
        "--json",
        "Hi.",
    ];
    let out = agent(&nowhere, Some(&policy), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = events(&out);
    assert_eq!(summary(&seen)["answer"], "From the backup.");
    let handled: Vec<&Value> = seen.iter().filter(|e| e["type"] == "llm_error").collect();
    assert_eq!(handled.len(), 1, "{seen:#?}");
    assert_eq!(handled[0]["action"], "fallback");
    assert_eq!(handled[0]["model"], "openai:backup-model");
    assert_eq!(backup.requests()[0].body["model"], "backup-model");

    // No fallback answers: the given response is the answer, and the
    // session ends as answered, not failed.
    let policy = format!("{policy}respond = \"The model is unreachable; try again later.\"\n");
    let dead_backup = LlmServer::start(vec![Reply::Status {
        status: 400,
        headers: Vec::new(),
        body: "{\"error\": {\"message\": \"no such model\"}}".into(),
    }]);
    let policy = policy.replace(&backup.url(), &dead_backup.url());
    let out = agent(&nowhere, Some(&policy), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let events = events(&out);
    let summary = summary(&events);
    assert_eq!(summary["stop"], "answered", "{summary}");
    assert_eq!(
        summary["answer"],
        "The model is unreachable; try again later."
    );
    let actions: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "llm_error")
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(actions, ["fallback", "recover"]);

    // Without [llm.on-error], the same failure ends the session (exit 2:
    // nothing listens).
    let out = agent(&nowhere, None, &args);
    assert!(!out.status.success(), "{}", stderr(&out));
}
