use super::*;

/// Piped output: text is written as it comes, and another call's
/// event that comes while a line is being written waits for the line's
/// end (the demo printed "The two wai", a call's start, then "ts run
/// side by side"); segments keep their one newline.
#[test]
fn plain_text_is_never_cut_by_another_calls_event() {
    let mut view = View::Plain(PlainText::default());
    let mut out = Vec::new();
    let text = |content: &str| ExecEvent::Text {
        content: content.into(),
    };
    let progress = ExecEvent::Progress {
        id: "n".into(),
        gadget: "Sleep".into(),
        message: "waiting".into(),
    };
    let parsed = ExecEvent::CallParsed {
        id: "c".into(),
        gadget: "Calc".into(),
        dependencies: vec![],
        parameters_raw: String::new(),
        parse_error: None,
    };
    for event in [
        text("\n\nFirst line.\nThe two wai"),
        progress.clone(),
        text("ts run side by side.\n"),
        text("\n"),
        parsed,
        text("\nAfter the block"),
        progress,
        text(", done."),
    ] {
        view.event(&mut out, &event).unwrap();
    }
    if let View::Plain(text) = &mut view {
        text.end(&mut out).unwrap();
    }
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "First line.\nThe two waits run side by side.\n  … Sleep (n): waiting\nAfter the block, done.\n  … Sleep (n): waiting\n"
    );
}

#[test]
fn long_results_are_cut_for_people() {
    let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let cut = shown(text.trim_end());
    assert_eq!(cut.lines().count(), 1 + SHOWN_RESULT_LINES + 1);
    assert!(
        cut.ends_with("… 8 more lines (--json or --history show all)"),
        "{cut}"
    );
    let wide = shown(&"x".repeat(SHOWN_RESULT_CHARS + 10));
    assert_eq!(wide.chars().count(), SHOWN_RESULT_CHARS + 2);
    assert_eq!(shown("short"), "short");
}

/// A sub-agent's events are read as its own types, two levels deep.
#[test]
fn nested_events_are_shown_from_their_own_types() {
    use gadget_core::call::OutcomeKind;
    let finished = AgentEvent::Exec(ExecEvent::CallFinished {
        id: "c1".into(),
        gadget: "Calc".into(),
        outcome: OutcomeKind::Result,
        result: Some("  42".into()),
        error: None,
        details: None,
        stored_output: None,
        cost: 0.0,
        duration_ms: 1.0,
    });
    let inner = AgentEvent::Exec(ExecEvent::Nested {
        id: "r2".into(),
        gadget: "Helper".into(),
        event: Nested::new(finished),
    });
    let outer = ExecEvent::Nested {
        id: "r1".into(),
        gadget: "Researcher".into(),
        event: Nested::new(inner),
    };
    assert_eq!(
        plain_line(&outer).as_deref(),
        Some("  ↳ Researcher (r1): Helper (r2) ↳ Calc (c1) ✓ 42\n")
    );
    let request = ExecEvent::Nested {
        id: "r1".into(),
        gadget: "Researcher".into(),
        event: Nested::new(AgentEvent::Request {
            iteration: 2,
            provider: "openai".into(),
            model: "m".into(),
            system: None,
            messages: vec![],
            estimated_input_tokens: 0,
        }),
    };
    assert_eq!(
        plain_line(&request).as_deref(),
        Some("  ↳ Researcher (r1): asks openai:m (iteration 2)\n")
    );
    // In JSON, the loop's own event as its front end writes it.
    let json = serde_json::to_value(&request).unwrap();
    assert_eq!(json["event"]["type"], "llm_request");
    assert_eq!(json["event"]["iteration"], 2);
}
