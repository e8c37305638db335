//! The viewer against llmist's texts, mode by mode, and its limits.

use super::view::{Window, parse_window};
use super::*;
use serde_json::json;

fn limiter_with(content: &str, limit: usize) -> (OutputLimiter, String) {
    let mut limiter = OutputLimiter::new(limit);
    let (message, id) = limiter.limit("Big", content.to_string());
    let id = id.unwrap();
    (limiter, format!("{message}\u{0}{id}"))
}

fn numbered(n: usize) -> String {
    (1..=n)
        .map(|i| format!("line {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn short_results_pass_and_long_ones_are_stored_with_llmists_message() {
    let mut limiter = OutputLimiter::new(100);
    assert_eq!(
        limiter.limit("Big", "x".repeat(100)),
        ("x".repeat(100), None)
    );
    let text = numbered(400);
    let (message, stored) = limiter.limit("Big", text.clone());
    let id = &limiter.store.ids()[0];
    assert_eq!(stored.as_ref(), Some(id));
    assert!(id.starts_with("Big_") && id.len() == 12, "{id}");
    assert!(id[4..].bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        message,
        format!(
            "[Gadget \"Big\" returned too much data: {} bytes, 400 lines. Use GadgetOutputViewer with id \"{id}\" to read it.]",
            grouped(text.len())
        )
    );
    // The viewer's own output is never limited.
    assert_eq!(limiter.limit(VIEWER_NAME, text.clone()), (text, None));
}

#[test]
fn dense_output_gets_the_character_mode_hint() {
    let (_, both) = limiter_with(&"y".repeat(5_000), 1_000);
    let (message, _) = both.split_once('\u{0}').unwrap();
    assert!(
        message.ends_with(" This output is dense (1 line; longest line 5,000 chars). Try mode: \"character\", limit: \"1-2000\"."),
        "{message}"
    );
}

#[test]
fn the_limit_counts_characters_not_bytes() {
    let mut limiter = OutputLimiter::new(10);
    assert_eq!(limiter.limit("G", "é".repeat(10)).0, "é".repeat(10));
    assert!(
        limiter
            .limit("G", "é".repeat(11))
            .0
            .starts_with("[Gadget \"G\"")
    );
}

#[test]
fn limit_grammar_matches_llmist() {
    assert_eq!(parse_window("50-"), Some(Window::First(50)));
    assert_eq!(parse_window(" -25 "), Some(Window::Last(25)));
    assert_eq!(parse_window("10-20"), Some(Window::Range(10, 20)));
    assert_eq!(parse_window("5x-"), Some(Window::First(5)));
    assert_eq!(parse_window("0-"), None);
    assert_eq!(parse_window("20-10"), None);
    assert_eq!(parse_window("0-3"), None);
    assert_eq!(parse_window("-0"), None);
    assert_eq!(parse_window("abc"), None);
    assert_eq!(parse_window("1-2-3"), None);
}

#[test]
fn grouping_is_en_us() {
    assert_eq!(grouped(0), "0");
    assert_eq!(grouped(999), "999");
    assert_eq!(grouped(1_000), "1,000");
    assert_eq!(grouped(14_011), "14,011");
    assert_eq!(grouped(1_234_567), "1,234,567");
}

fn view_of(limiter: &OutputLimiter, params: Value) -> String {
    limiter.view(&params).unwrap_or_else(|e| format!("ERR {e}"))
}

#[test]
fn line_mode_headers() {
    let (limiter, both) = limiter_with(&numbered(400), 100);
    let id = both.split_once('\u{0}').unwrap().1;
    assert_eq!(
        view_of(&limiter, json!({"id": id, "limit": "5-"})),
        "[Mode: line | Showing 5 of 400 lines]\nline 1\nline 2\nline 3\nline 4\nline 5"
    );
    assert_eq!(
        view_of(&limiter, json!({"id": id, "limit": "-2"})),
        "[Mode: line | Showing 2 of 400 lines]\nline 399\nline 400"
    );
    assert_eq!(
        view_of(&limiter, json!({"id": id, "limit": "10-11"})),
        "[Mode: line | Showing 2 of 400 lines]\nline 10\nline 11"
    );
    // Over the size limit: whole lines, and a hint to paginate.
    let all = view_of(&limiter, json!({"id": id}));
    assert!(
        all.starts_with("[Mode: line | Showing 13 of 400 lines (truncated due to size limit)]\n[... 387 more lines. Use limit parameter to paginate, e.g., limit: \"14-213\"]\nline 1\n"),
        "{all}"
    );
    assert_eq!(
        view_of(
            &limiter,
            json!({"id": id, "patterns": [{"regex": "^nope$"}]})
        ),
        "No lines matched the filters. Original output had 400 lines."
    );
}

#[test]
fn patterns_filter_in_order_with_context() {
    let (limiter, both) = limiter_with(&numbered(30), 10);
    let id = both.split_once('\u{0}').unwrap().1;
    let limiter = OutputLimiter {
        char_limit: 10_000,
        ..limiter
    };
    let out = view_of(
        &limiter,
        json!({"id": id, "patterns": [
            {"regex": "^line (5|20)$", "before": 1, "after": 2},
            {"regex": "21", "include": false}
        ]}),
    );
    assert_eq!(
        out,
        "[Mode: line | Showing 7 of 30 lines]\nline 4\nline 5\nline 6\nline 7\nline 19\nline 20\nline 22",
        "context lines merge; the second pattern drops line 21"
    );
}

#[test]
fn character_mode_windows_and_next_chunk_hint() {
    let content: String = "abcdefghij".repeat(500); // 5,000 chars, one line
    let (limiter, both) = limiter_with(&content, 3_000);
    let id = both.split_once('\u{0}').unwrap().1;
    assert_eq!(
        view_of(
            &limiter,
            json!({"id": id, "mode": "character", "limit": "1-50"})
        ),
        format!(
            "[Mode: character | Showing chars 1-50 of 5,000]\n[Next chunk: mode: \"character\", limit: \"51-2050\"]\n{}",
            &content[..50]
        )
    );
    assert_eq!(
        view_of(
            &limiter,
            json!({"id": id, "mode": "character", "limit": "-5"})
        ),
        "[Mode: character | Showing chars 4,996-5,000 of 5,000]\nfghij"
    );
    let all = view_of(&limiter, json!({"id": id, "mode": "character"}));
    assert!(
        all.starts_with("[Mode: character | Showing chars 1-3,000 of 5,000 (truncated due to viewer size limit)]\n[Next chunk: mode: \"character\", limit: \"3001-5000\"]\n"),
        "{all}"
    );
    assert_eq!(
        view_of(
            &limiter,
            json!({"id": id, "mode": "character", "patterns": [{"regex": "a"}]})
        ),
        "Error: patterns are only supported in mode \"line\". Remove patterns or switch back to mode: \"line\"."
    );
    // A dense output in line mode: one partial line and the tip.
    let line = view_of(&limiter, json!({"id": id}));
    assert!(line.starts_with("[Mode: line | Showing 1 partial line of 1 line (the selected line exceeds the viewer size limit)]\n"), "{line}");
    assert!(line.ends_with("\n[Tip: This output is dense (1 line; longest line 5,000 chars). Try mode: \"character\", limit: \"1-2000\".]"), "{line}");
}

#[test]
fn unknown_ids_list_the_stored_ones() {
    let (limiter, both) = limiter_with(&numbered(50), 10);
    let id = both.split_once('\u{0}').unwrap().1;
    assert_eq!(
        view_of(&limiter, json!({"id": "nope_123"})),
        format!("Error: No stored output with id \"nope_123\". Available IDs: {id}")
    );
    let empty = OutputLimiter::new(10);
    assert_eq!(
        view_of(&empty, json!({"id": "x"})),
        "Error: No stored output with id \"x\". Available IDs: (none)"
    );
}

#[test]
fn bad_and_runaway_regexes_are_errors_not_hangs() {
    let (limiter, both) = limiter_with(&format!("{}!", "a".repeat(40)), 10);
    let id = both.split_once('\u{0}').unwrap().1;
    let bad = view_of(&limiter, json!({"id": id, "patterns": [{"regex": "("}]}));
    assert!(
        bad.starts_with("ERR Invalid regular expression: /(/"),
        "{bad}"
    );
    // Catastrophic backtracking (a backreference forces the
    // backtracking engine) hits the limit and says so.
    let runaway = view_of(
        &limiter,
        json!({"id": id, "patterns": [{"regex": "^(a|a)+\\1$"}]}),
    );
    assert!(runaway.starts_with("ERR Regular expression"), "{runaway}");
}

#[test]
fn ids_are_content_addressed() {
    let mut store = OutputStore::default();
    let a = store.store("G", "same".into()).id.clone();
    let b = store.store("G", "same".into()).id.clone();
    let c = store.store("G", "other".into()).id.clone();
    assert_eq!(a, b);
    assert_ne!(a, c);
    // sha256("same") starts 0967115f.
    assert_eq!(a, "G_0967115f");
    assert_eq!(store.ids(), [a, c]);
}

#[test]
fn a_stored_output_is_capped_at_a_character_boundary() {
    let mut store = OutputStore::default();
    // One byte short of the cap, then a two-byte character across it.
    let content = format!("{}é tail", "x".repeat(MAX_STORED_OUTPUT_BYTES - 1));
    let stored = store.store("G", content);
    assert_eq!(stored.byte_size, MAX_STORED_OUTPUT_BYTES - 1);
    assert!(stored.content.bytes().all(|b| b == b'x'));
}

#[test]
fn the_store_is_bounded() {
    let mut store = OutputStore::default();
    for i in 0..MAX_STORED_OUTPUTS + 5 {
        store.store("G", format!("output {i}"));
    }
    assert_eq!(store.len(), MAX_STORED_OUTPUTS);
    assert_eq!(
        store.get(&store.ids()[0]).unwrap().content,
        "output 5",
        "the oldest went first"
    );
}

#[test]
fn the_store_is_bounded_in_bytes_too() {
    let mut store = OutputStore::default();
    let big = MAX_STORED_OUTPUT_BYTES;
    for i in 0..6 {
        store.store("G", format!("{i}{}", "x".repeat(big - 1)));
    }
    let total: usize = store
        .ids()
        .iter()
        .map(|id| store.get(id).unwrap().byte_size)
        .sum();
    assert!(total <= MAX_STORED_TOTAL_BYTES, "{total}");
    assert_eq!(store.len(), MAX_STORED_TOTAL_BYTES / big);
    assert!(store.get(&store.ids()[0]).unwrap().content.starts_with('2'));
}
