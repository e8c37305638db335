//! The parser against llmist's behaviour, case by case, and its limits.

use super::body::{POINTER_CHECK_MAX_ARGUMENTS, build_parameters};
use super::coerce::{coerce_by, expected_at, js_number};
use super::*;
use serde_json::{Value, json};

fn parse_all(parser: &mut Parser, input: &str) -> Vec<ParseEvent> {
    let mut events = parser.feed(input);
    events.extend(parser.finish());
    events
}

fn calls(events: &[ParseEvent]) -> Vec<&GadgetCall> {
    events
        .iter()
        .filter_map(|e| match e {
            ParseEvent::Call(c) => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn markers_are_validated() {
    assert_eq!(
        ParserBuilder::new().start_marker("").build().unwrap_err(),
        ConfigError::Empty("start")
    );
    assert!(matches!(
        ParserBuilder::new()
            .end_marker("!!!ARG:")
            .build()
            .unwrap_err(),
        ConfigError::Same("end", "arg", _)
    ));
}

#[test]
fn auto_ids_continue_across_responses_of_a_session() {
    let mut first = Parser::new();
    let events = parse_all(
        &mut first,
        "!!!GADGET_START:A\n!!!GADGET_END\n!!!GADGET_START:B:b1\n!!!GADGET_END",
    );
    assert_eq!(calls(&events)[0].invocation_id, "gadget_1");
    let mut second = Parser::new().with_session(first.session().clone());
    let events = parse_all(&mut second, "!!!GADGET_START:C\n!!!GADGET_END");
    assert_eq!(calls(&events)[0].invocation_id, "gadget_2");
    // A new session starts again at 1.
    let events = parse_all(&mut Parser::new(), "!!!GADGET_START:C\n!!!GADGET_END");
    assert_eq!(calls(&events)[0].invocation_id, "gadget_1");
}

#[test]
fn past_the_pointer_check_limit_the_parameters_are_built_to_find_errors() {
    // More arguments than the shape check takes: the same errors, found the slow way.
    let many = POINTER_CHECK_MAX_ARGUMENTS + 6;
    let mut body: String = (0..many).map(|i| format!("!!!ARG:k{i}/v\n{i}\n")).collect();
    let call = GadgetCall::new("G", "g", Vec::new(), &body);
    assert_eq!(call.parse_error, None);
    assert_eq!(call.parameters().unwrap().len(), many);
    body.push_str("!!!ARG:k3/v/deeper\nx\n");
    let call = GadgetCall::new("G", "g", Vec::new(), &body);
    assert!(
        call.parse_error
            .as_deref()
            .unwrap()
            .contains("below the number value at 'k3/v'"),
        "{:?}",
        call.parse_error
    );
}

#[test]
fn a_fence_followed_by_multibyte_text_is_no_language_tag() {
    // Found by the fuzzer: `to` then a 2-byte character must not be cut at byte 4.
    assert_eq!(
        strip_fences("```to\u{5c0}ml\nx\n```"),
        "```to\u{5c0}ml\nx\n```"
    );
    assert_eq!(strip_fences("```TOML\n!!!ARG:x\n1\n```"), "!!!ARG:x\n1");
}

#[test]
fn a_text_segment_past_the_cap_comes_in_pieces_at_the_same_places_for_every_chunking() {
    let input = format!("{}é{}", "a".repeat(150), "b".repeat(120));
    let mut expected = None;
    for chunk in [0usize, 1, 7, 64] {
        let mut parser = ParserBuilder::new().max_block_bytes(100).build().unwrap();
        let mut events = Vec::new();
        let mut rest = input.as_str();
        while !rest.is_empty() {
            let mut cut = if chunk == 0 {
                rest.len()
            } else {
                chunk.min(rest.len())
            };
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            events.extend(parser.feed(&rest[..cut]));
            assert!(parser.buffered() <= 100 + DEFAULT_START.len() + chunk.max(input.len()));
            rest = &rest[cut..];
        }
        events.extend(parser.finish());
        let texts: Vec<String> = events
            .into_iter()
            .map(|e| match e {
                ParseEvent::Text(t) => t,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(texts.len() >= 3, "{texts:?}");
        assert!(texts.iter().all(|t| t.len() <= 100));
        assert_eq!(texts.concat(), input);
        match &expected {
            None => expected = Some(texts),
            Some(first) => assert_eq!(first, &texts, "chunk {chunk}"),
        }
    }
}

#[test]
fn an_oversized_block_is_an_error_and_the_next_block_still_parses() {
    let big = "x".repeat(1000);
    let input = format!(
        "before\n!!!GADGET_START:Big:b1\n!!!ARG:v\n{big}\n!!!GADGET_END\nmid\n!!!GADGET_START:Small:s1\n!!!ARG:v\n1\n!!!GADGET_END"
    );
    for chunk in [0usize, 1, 7, 64] {
        let mut parser = ParserBuilder::new().max_block_bytes(100).build().unwrap();
        let mut events = Vec::new();
        if chunk == 0 {
            events.extend(parser.feed(&input));
        } else {
            for piece in input.as_bytes().chunks(chunk) {
                events.extend(parser.feed(std::str::from_utf8(piece).unwrap()));
            }
        }
        events.extend(parser.finish());
        let calls = calls(&events);
        assert_eq!(calls.len(), 2, "chunk {chunk}: {events:?}");
        assert_eq!(calls[0].invocation_id, "b1");
        assert!(
            calls[0]
                .parse_error
                .as_deref()
                .unwrap()
                .contains("100-byte limit")
        );
        assert_eq!(
            calls[1].parameters(),
            Some(json!({ "v": 1 }).as_object().unwrap().clone())
        );
        let text: String = events
            .iter()
            .filter_map(|e| {
                if let ParseEvent::Text(t) = e {
                    Some(t.as_str())
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(text, "before\n\nmid\n", "chunk {chunk}");
    }
}

#[test]
fn coercion_follows_llmist() {
    for (input, expected) in [
        ("42", json!(42)),
        (" 42 ", json!(42)),
        ("007", json!(7)),
        ("-0", json!(0)),
        ("1.0", json!(1)),
        ("1.5", json!(1.5)),
        ("true", json!(true)),
        ("false", json!(false)),
        ("True", json!("True")),
        ("1e3", json!("1e3")),
        ("0x10", json!("0x10")),
        ("+5", json!("+5")),
        (".5", json!(".5")),
        ("5.", json!("5.")),
        ("NaN", json!("NaN")),
        ("   ", json!("   ")),
        ("null", json!("null")),
        ("42\n", json!("42\n")),
        ("١٢", json!("١٢")),
    ] {
        assert_eq!(coerce(input), expected, "{input:?}");
    }
    assert_eq!(
        coerce(&"9".repeat(401)),
        json!("9".repeat(401)),
        "Infinity stays a string"
    );
}

#[test]
fn schema_aware_coercion_follows_llmists_executor() {
    let schema = json!({
        "type": "object",
        "properties": {
            "n": { "type": "number" },
            "s": { "type": "string" },
            "b": { "type": "boolean" },
            "opt": { "anyOf": [{ "type": "integer" }, { "type": "null" }] },
            "either": { "type": ["number", "string"] },
            "mode": { "enum": ["a", "b"] },
            "items": { "type": "array", "items": { "type": "object", "properties": { "qty": { "type": "number" } } } }
        }
    });
    let args = [
        ("n", "1e3"),
        ("s", "42"),
        ("b", "true"),
        ("opt", " 0x10 "),
        ("either", "7"),
        ("mode", "1"),
        ("items/0/qty", ".5"),
        ("unknown", "12"),
    ];
    let params = Value::Object(coerce_with_schema(args, &schema).unwrap());
    assert_eq!(
        params,
        json!({ "n": 1000, "s": "42", "b": true, "opt": 16, "either": 7, "mode": "1", "items": [{ "qty": 0.5 }], "unknown": 12 })
    );
    // Worked out once per schema, the same result.
    let coercions = Coercions::of(&schema);
    let by_coercions = coerce_by(args, |p| coercions.expected(&schema, p)).unwrap();
    assert_eq!(Value::Object(by_coercions), params);
    for (name, _) in args.iter().filter(|(p, _)| !p.contains('/')) {
        assert_eq!(
            coercions.expected(&schema, name),
            expected_at(&schema, name),
            "{name}"
        );
    }
    // A string field keeps its raw text, untrimmed; multi-line never becomes a number.
    let args = [("s", "  x \n"), ("n", "4\n2")];
    let params = coerce_with_schema(args, &schema).unwrap();
    assert_eq!(params["s"], json!("  x \n"));
    assert_eq!(params["n"], json!("4\n2"));
}

#[test]
fn js_number_accepts_what_javascript_accepts() {
    for (text, expected) in [
        ("1e3", Some(1000.0)),
        ("+5", Some(5.0)),
        (".5", Some(0.5)),
        ("5.", Some(5.0)),
        ("0x10", Some(16.0)),
        ("0b101", Some(5.0)),
        ("-2.5e-1", Some(-0.25)),
    ] {
        assert_eq!(js_number(text), expected, "{text}");
    }
    for text in [
        "", "inf", "Infinity", "NaN", "1_000", "1,5", "e5", ".", "0x", "-0x10", "1e", "١",
    ] {
        assert_eq!(js_number(text), None, "{text}");
    }
}

#[test]
fn js_trim_differs_from_rust_trim_where_javascript_does() {
    assert_eq!(js_trim("\u{FEFF} a \u{A0}"), "a");
    assert_eq!(js_trim("\u{85}a"), "\u{85}a");
}

#[test]
fn fences_are_stripped_only_when_they_wrap_everything() {
    assert_eq!(strip_fences("```toml\n!!!ARG:a\n1\n```"), "!!!ARG:a\n1");
    assert_eq!(
        strip_fences("!!!ARG:a\n```\ncode\n```"),
        "!!!ARG:a\n```\ncode\n```"
    );
}

#[test]
fn writing_below_a_scalar_is_a_parse_error_not_a_panic() {
    let events = parse_all(
        &mut Parser::new(),
        "!!!GADGET_START:A\n!!!ARG:a\nx\n!!!ARG:a/b\ny\n!!!GADGET_END",
    );
    let call = calls(&events)[0];
    assert!(call.parameters().is_none());
    assert!(
        call.parse_error
            .as_deref()
            .unwrap()
            .contains("below the string value"),
        "{call:?}"
    );
    assert_eq!(call.arguments().len(), 2, "raw arguments are kept");
}

proptest::proptest! {
    /// The shape check finds exactly the error building the parameters
    /// finds (or none), for pointers full of arrays, gaps, bad indices,
    /// scalars written over and below.
    #[test]
    fn pointer_check_agrees_with_building(
        arguments in proptest::collection::vec(
            (
                proptest::collection::vec(
                    proptest::sample::select(vec!["a", "b", "0", "1", "2", "00", "-1", "x", ""]),
                    1..4,
                ),
                proptest::sample::select(vec!["s", "1", "true", "a\nb", " 2 "]),
            ),
            0..8,
        )
    ) {
        let body: String = arguments
            .iter()
            .map(|(segments, value)| format!("!!!ARG:{}\n{value}\n", segments.join("/")))
            .collect();
        let call = GadgetCall::new("G", "g", Vec::new(), &body);
        let built = build_parameters(call.arguments(), coerce).err();
        proptest::prop_assert_eq!(&call.parse_error, &built, "{}", body);
    }
}
