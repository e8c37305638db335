//! `gadget parse`: the binary prints what the library parser makes of its
//! input (the parser itself is tested with its crate, gadget-core).

use gadget_host::parser::{ParseEvent, Parser};
use serde_json::Value;

use crate::common;

#[test]
fn gadget_parse_prints_the_parsers_events() {
    let file = common::workspace().join("tests/cases/parser/llmist-corpus/001-basic-single.txt");
    let input = std::fs::read_to_string(&file).unwrap();
    let mut parser = Parser::new();
    let mut events = parser.feed(&input);
    events.extend(parser.finish());
    let expected: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            ParseEvent::Call(call) => Some((call.name.clone(), call.invocation_id.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(expected.len(), 1);
    let mut child = std::process::Command::new(common::gadget_bin())
        .args(["parse", "--chunk", "5"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let printed: Vec<(String, String)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "gadget_call")
        .map(|e| {
            let call = &e["call"];
            (
                call["gadgetName"].as_str().unwrap_or_default().to_string(),
                call["invocationId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(printed, expected);

    let counted = std::process::Command::new(common::gadget_bin())
        .args(["parse", "--count"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&counted.stdout),
        "text events: 0, calls: 1, parse errors: 0\n"
    );
}
