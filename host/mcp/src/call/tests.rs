use super::*;
use crate::ask::MAX_QUESTION_BYTES;
use crate::metrics::Metrics;
use rmcp::model::ElicitRequestParams;
use std::sync::Mutex;

fn server() -> GadgetServer {
    GadgetServer::new(
        Arc::new(gadget_core::tool::Toolbox::new()),
        Arc::new(Metrics::new()),
    )
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[test]
fn an_answer_to_no_question_is_refused_and_runs_nothing() {
    let accept = serde_json::json!({"action": "accept", "content": {"answer": "yes"}});
    for state in [
        None,
        Some("not json"),
        Some(r#"{"gadget":"AskUser","call":"mcp_1"}"#),
    ] {
        // No tool of that name is served: whatever the state says.
        let result = server().answered("AskUser", state, &accept, Instant::now());
        assert_eq!(result.is_error, Some(true));
        assert!(
            text(&result).contains("no question this server asked"),
            "{}",
            text(&result)
        );
    }
}

#[test]
fn an_answer_counts_only_for_the_tool_that_asked() {
    // A served tool (the built-in viewer, served as any tool is).
    let limiter = Arc::new(Mutex::new(gadget_core::viewer::OutputLimiter::new(100)));
    let mut tools = gadget_core::tool::Toolbox::new();
    let _ = tools.insert(Arc::new(gadget_core::viewer::OutputViewer::new(limiter)));
    let server = GadgetServer::new(Arc::new(tools), Arc::new(Metrics::new()));
    let accept = serde_json::json!({"action": "accept", "content": {"answer": "yes"}});
    let other = r#"{"gadget":"AskUser","call":"mcp_1"}"#;
    let result = server.answered("GadgetOutputViewer", Some(other), &accept, Instant::now());
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("carries an answer to a question of 'AskUser'"),
        "{}",
        text(&result)
    );
    let own = r#"{"gadget":"GadgetOutputViewer","call":"mcp_2"}"#;
    let result = server.answered("gadgetoutputviewer", Some(own), &accept, Instant::now());
    assert_eq!(
        (text(&result), result.is_error),
        ("yes".into(), Some(false))
    );
}

#[test]
fn a_reply_becomes_the_result_or_says_why_not() {
    let reply = |v: Value| answer_result("AskUser", serde_json::from_value(v).unwrap());
    let ok = reply(serde_json::json!({"action": "accept", "content": {"answer": "blue"}}));
    assert_eq!((text(&ok), ok.is_error), ("blue".into(), Some(false)));
    // A client that sent other fields: the person's words are kept whole.
    let other = reply(serde_json::json!({"action": "accept", "content": {"colour": "red"}}));
    assert_eq!(text(&other), r#"{"colour":"red"}"#);
    let declined = reply(serde_json::json!({"action": "decline"}));
    assert_eq!(declined.is_error, Some(true));
    assert!(text(&declined).contains("declined"));
    let cancelled = reply(serde_json::json!({"action": "cancel"}));
    assert!(text(&cancelled).contains("dismissed"));
}

#[test]
fn a_long_question_is_cut_for_the_dialog() {
    let question = "why? ".repeat(10_000);
    let ElicitRequestParams::FormElicitationParams { message, .. } =
        elicitation("AskUser", &question)
    else {
        panic!("a form");
    };
    assert!(
        message.len() <= MAX_QUESTION_BYTES + 64,
        "{}",
        message.len()
    );
}
