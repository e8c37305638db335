//! The llmist conformance corpus (`tests/cases/parser/llmist-corpus`) and
//! our own cases, run through the parser whole and in many chunkings; and
//! every chunking of random block-format input against feeding it whole.
//! Here, with the parser's crate, so `cargo test -p gadget-core` runs them
//! without building anything else (the `gadget parse` binary's test is in
//! the CLI's tests).

use std::path::{Path, PathBuf};

use gadget_core::parser::{ParseEvent, ParserBuilder};
use serde_json::{Value, json};

/// The repository's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Case {
    name: String,
    input: String,
    markers: (String, String, String),
    calls: Vec<Value>,
    text: String,
}

fn corpus() -> PathBuf {
    workspace().join("tests/cases/parser/llmist-corpus")
}

/// The shared corpus, then our own cases for the reference's rules it
/// does not cover (`tests/cases/parser/ours`, expectations printed by
/// llmist's own parser).
fn load_cases() -> Vec<Case> {
    let ours = workspace().join("tests/cases/parser/ours");
    let mut cases = Vec::new();
    for dir in [corpus(), ours] {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|f| f.strip_suffix(".txt").map(str::to_string))
            .collect();
        names.sort();
        cases.extend(names.into_iter().map(|name| load_case(&dir, name)));
    }
    cases
}

fn load_case(dir: &Path, name: String) -> Case {
    let input = std::fs::read_to_string(dir.join(format!("{name}.txt"))).unwrap();
    let mut markers = (
        gadget_core::parser::DEFAULT_START.to_string(),
        gadget_core::parser::DEFAULT_END.to_string(),
        gadget_core::parser::DEFAULT_ARG.to_string(),
    );
    if let Ok(args) = std::fs::read_to_string(dir.join(format!("{name}.args"))) {
        let lines: Vec<&str> = args.lines().collect();
        for pair in lines.chunks(2) {
            match pair {
                ["--start", v] => markers.0 = v.to_string(),
                ["--end", v] => markers.1 = v.to_string(),
                ["--arg", v] => markers.2 = v.to_string(),
                other => panic!("{name}.args: unexpected {other:?}"),
            }
        }
    }
    let ours = dir.join(format!("{name}.ours.jsonl"));
    let expected = if ours.is_file() {
        ours
    } else {
        dir.join(format!("{name}.expected.jsonl"))
    };
    let (mut calls, mut text) = (Vec::new(), String::new());
    for line in std::fs::read_to_string(expected)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('{'))
    {
        let event: Value = serde_json::from_str(line).unwrap();
        match event["type"].as_str() {
            Some("gadget_call") => calls.push(normalize_call(&event["call"])),
            Some("text") => text.push_str(event["content"].as_str().unwrap()),
            _ => {}
        }
    }
    Case {
        name,
        input,
        markers,
        calls,
        text,
    }
}

/// The compared fields, numbers as doubles (as the conformance checker does).
fn normalize_call(call: &Value) -> Value {
    fn numbers(v: &Value) -> Value {
        match v {
            Value::Number(n) => json!(n.as_f64().unwrap()),
            Value::Array(items) => Value::Array(items.iter().map(numbers).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), numbers(v))).collect())
            }
            other => other.clone(),
        }
    }
    let keys = [
        "gadgetName",
        "invocationId",
        "dependencies",
        "parametersRaw",
        "parameters",
        "parseError",
    ];
    Value::Object(
        keys.iter()
            .map(|k| (k.to_string(), numbers(call.get(*k).unwrap_or(&Value::Null))))
            .collect(),
    )
}

/// Feeds `input` in chunks of `size` bytes (moved to char boundaries; 0 = whole).
fn run(case: &Case, size: usize) -> (Vec<Value>, String) {
    let (start, end, arg) = &case.markers;
    let mut parser = ParserBuilder::new()
        .start_marker(start)
        .end_marker(end)
        .arg_marker(arg)
        .build()
        .unwrap();
    let mut events = Vec::new();
    let mut rest = case.input.as_str();
    while !rest.is_empty() {
        let mut cut = if size == 0 {
            rest.len()
        } else {
            size.min(rest.len())
        };
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        events.extend(parser.feed(&rest[..cut]));
        rest = &rest[cut..];
    }
    events.extend(parser.finish());
    let (mut calls, mut text) = (Vec::new(), String::new());
    for event in events {
        match event {
            ParseEvent::Text(t) => text.push_str(&t),
            ParseEvent::Call(c) => calls.push(normalize_call(&json!({
                "gadgetName": c.name,
                "invocationId": c.invocation_id,
                "dependencies": c.dependencies,
                "parametersRaw": c.parameters_raw,
                "parameters": c.parameters(),
                "parseError": c.parse_error,
            }))),
            ParseEvent::ArgumentDelta { .. } => unreachable!("partial arguments are off"),
        }
    }
    (calls, text)
}

fn matches(expected: &[Value], got: &[Value]) -> bool {
    expected.len() == got.len()
        && expected.iter().zip(got).all(|(e, g)| {
            e.as_object()
                .unwrap()
                .iter()
                .all(|(k, v)| match (k.as_str(), v) {
                    ("parseError", Value::String(s)) if s == "*" => {
                        g[k].as_str().is_some_and(|m| !m.is_empty())
                    }
                    _ => &g[k] == v,
                })
        })
}

#[test]
fn the_llmist_corpus_passes_whole_and_in_every_chunk_size() {
    let cases = load_cases();
    assert!(cases.len() >= 67, "corpus has only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        for size in [0, 1, 2, 3, 7, 13, 64, 4096] {
            let (calls, text) = run(case, size);
            if !matches(&case.calls, &calls) || text != case.text {
                failures.push(format!(
                    "{} (chunk {size}):\n  expected calls {}\n  got      {}\n  expected text {:?}\n  got           {:?}",
                    case.name,
                    serde_json::to_string(&case.calls).unwrap(),
                    serde_json::to_string(&calls).unwrap(),
                    case.text,
                    text
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

mod chunk_invariance {
    //! Every chunking of a block-format input gives the same events as
    //! feeding it whole (text compared as its concatenation).

    use gadget_core::parser::{ParseEvent, Parser, ParserBuilder, js_trim, strip_fences};
    use proptest::prelude::*;

    fn piece() -> impl Strategy<Value = String> {
        let text = prop_oneof![
            "[a-z \\n]{0,20}",
            "[\\u{0}-\\u{7f}]{0,12}",
            Just("héllo wörld ✓ 🎉\r\n".to_string()),
            Just("\r\n\r\n".to_string()),
            Just("   \n\t".to_string()),
        ];
        let value = prop_oneof![
            "[0-9]{1,5}",
            "[a-z ]{0,10}",
            Just("multi\nline\n\nvalue".to_string()),
            Just("true".to_string()),
            Just("é✓\r".to_string())
        ];
        let pointer = prop_oneof![
            "[a-z]{1,4}",
            Just("items/0".to_string()),
            Just("items/1/name".to_string()),
            Just("a/b".to_string())
        ];
        let header = prop_oneof![
            "[A-Za-z]{1,6}",
            "[A-Za-z]{1,6}:[a-z0-9_]{0,4}",
            "[A-Za-z]{1,4}:[a-z]{1,3}:[a-z, ]{0,8}"
        ];
        let block = (
            header,
            prop::collection::vec((pointer, value), 0..4),
            prop_oneof![Just(0u8), Just(1), Just(2)],
        )
            .prop_map(|(header, args, ending)| {
                let mut block = format!("!!!GADGET_START:{header}\n");
                for (pointer, value) in args {
                    block.push_str(&format!("!!!ARG:{pointer}\n{value}\n"));
                }
                match ending {
                    0 => block.push_str("!!!GADGET_END"),
                    1 => block.push_str("!!!GADGET_END\n"),
                    _ => {} // implicitly terminated by what follows, or by the end
                }
                block
            });
        prop_oneof![
            text,
            block,
            Just("!!!GADGET_".to_string()),
            Just("!!!ARG:x\n".to_string()),
            // With `@@` as the argument marker: markers that overlap themselves.
            Just("!!!ARG:@@@ y\n@\n@@@@@\n".to_string())
        ]
    }

    /// llmist's argument split, written plainly: the reference for the
    /// parser's one-pass marker scan.
    fn reference_arguments(raw: &str, arg: &str) -> Vec<(String, String)> {
        strip_fences(raw)
            .split(arg)
            .skip(1)
            .filter_map(|part| {
                let (pointer, value) = match part.split_once('\n') {
                    Some((pointer, value)) => (pointer, value.strip_suffix('\n').unwrap_or(value)),
                    None => (part, ""),
                };
                let pointer = js_trim(pointer);
                (!pointer.is_empty()).then(|| (pointer.to_string(), value.to_string()))
            })
            .collect()
    }

    /// Feeds `input` cut at `cuts` (taken modulo its length, moved to
    /// character boundaries), then finishes.
    fn feed_cut(parser: &mut Parser, input: &str, cuts: &[usize]) -> Vec<ParseEvent> {
        let mut events = Vec::new();
        let mut last = 0;
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        points.sort_unstable();
        points.push(input.len());
        for mut point in points {
            while !input.is_char_boundary(point) {
                point += 1;
            }
            if point > last {
                events.extend(parser.feed(&input[last..point]));
                last = point;
            }
        }
        events.extend(parser.finish());
        events
    }

    fn feed_all(parser: &mut Parser, input: &str, cuts: &[usize]) -> (Vec<String>, String) {
        feed_all_with(parser, "!!!ARG:", input, cuts)
    }

    fn feed_all_with(
        parser: &mut Parser,
        arg: &str,
        input: &str,
        cuts: &[usize],
    ) -> (Vec<String>, String) {
        let events = feed_cut(parser, input, cuts);
        let mut calls = Vec::new();
        let mut text = String::new();
        for event in events {
            match event {
                ParseEvent::Text(t) => text.push_str(&t),
                ParseEvent::Call(c) => {
                    let arguments: Vec<(String, String)> = c
                        .arguments()
                        .map(|(p, v)| (p.to_string(), v.to_string()))
                        .collect();
                    assert_eq!(
                        arguments,
                        reference_arguments(&c.parameters_raw, arg),
                        "{c:?}"
                    );
                    calls.push(format!("{c:?}"))
                }
                ParseEvent::ArgumentDelta { .. } => {}
            }
        }
        (calls, text)
    }

    /// Feeds with text deltas and partial arguments on; checks that each
    /// argument's deltas start its final raw value (up to trailing
    /// whitespace the call trims) and name the call they belong to.
    fn feed_live(input: &str, cuts: &[usize]) -> (Vec<String>, String) {
        let mut parser = ParserBuilder::new()
            .text_deltas(true)
            .partial_arguments(true)
            .build()
            .unwrap();
        let events = feed_cut(&mut parser, input, cuts);
        let (mut calls, mut text) = (Vec::new(), String::new());
        let mut shown: Vec<(String, String, String, String)> = Vec::new();
        for event in events {
            match event {
                ParseEvent::Text(t) => {
                    assert!(!t.is_empty());
                    text.push_str(&t)
                }
                ParseEvent::ArgumentDelta {
                    gadget_name,
                    invocation_id,
                    pointer,
                    delta,
                } => match shown.iter_mut().find(|(_, _, p, _)| *p == pointer) {
                    Some((_, _, _, value)) => value.push_str(&delta),
                    None => shown.push((gadget_name, invocation_id, pointer, delta)),
                },
                ParseEvent::Call(c) => {
                    for (name, id, pointer, value) in shown.drain(..) {
                        assert_eq!((&name, &id), (&c.name, &c.invocation_id));
                        let finals: Vec<&str> = c
                            .arguments()
                            .filter(|(p, _)| *p == pointer)
                            .map(|(_, v)| v)
                            .collect();
                        if let [final_value] = finals[..] {
                            assert!(
                                final_value.starts_with(value.trim_end()),
                                "deltas {value:?} do not start {final_value:?} in {c:?}"
                            );
                        }
                    }
                    calls.push(format!("{c:?}"));
                }
            }
        }
        (calls, text)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn live_display_events_agree_with_whole_text(pieces in prop::collection::vec(piece(), 0..12), cuts in prop::collection::vec(any::<usize>(), 0..40)) {
            let input: String = pieces.concat();
            let whole = feed_all(&mut Parser::new(), &input, &[]);
            prop_assert_eq!(&whole, &feed_live(&input, &cuts));
            let bytewise: Vec<usize> = (0..input.len()).collect();
            prop_assert_eq!(&whole, &feed_live(&input, &bytewise));
        }

        #[test]
        fn any_chunking_gives_the_same_events(pieces in prop::collection::vec(piece(), 0..12), cuts in prop::collection::vec(any::<usize>(), 0..40)) {
            let input: String = pieces.concat();
            let whole = feed_all(&mut Parser::new(), &input, &[]);
            let chunked = feed_all(&mut Parser::new(), &input, &cuts);
            prop_assert_eq!(&whole, &chunked);
            let bytewise: Vec<usize> = (0..input.len()).collect();
            prop_assert_eq!(&whole, &feed_all(&mut Parser::new(), &input, &bytewise));
        }

        #[test]
        fn custom_markers_are_chunk_invariant_too(pieces in prop::collection::vec(piece(), 0..10), cuts in prop::collection::vec(any::<usize>(), 0..30)) {
            let input = pieces.concat().replace("!!!GADGET_START:", "<<T:").replace("!!!GADGET_END", "<<E").replace("!!!ARG:", "@@");
            let build = || ParserBuilder::new().start_marker("<<T:").end_marker("<<E").arg_marker("@@").build().unwrap();
            prop_assert_eq!(feed_all_with(&mut build(), "@@", &input, &[]), feed_all_with(&mut build(), "@@", &input, &cuts));
        }

        /// Small caps make blocks, headers and text segments overflow: the
        /// overflow happens at the same places for every chunking (the
        /// fuzzer found a header overflow that did not, before).
        #[test]
        fn block_caps_fire_the_same_for_every_chunking(pieces in prop::collection::vec(piece(), 0..12), cuts in prop::collection::vec(any::<usize>(), 0..40), cap in 16usize..200) {
            let input: String = pieces.concat();
            let build = || ParserBuilder::new().max_block_bytes(cap).build().unwrap();
            let whole = feed_all(&mut build(), &input, &[]);
            prop_assert_eq!(&whole, &feed_all(&mut build(), &input, &cuts));
            let bytewise: Vec<usize> = (0..input.len()).collect();
            prop_assert_eq!(&whole, &feed_all(&mut build(), &input, &bytewise));
        }

        #[test]
        fn arbitrary_text_never_panics(input in "\\PC{0,200}", cuts in prop::collection::vec(any::<usize>(), 0..20)) {
            let whole = feed_all(&mut Parser::new(), &input, &[]);
            prop_assert_eq!(whole, feed_all(&mut Parser::new(), &input, &cuts));
        }
    }
}
