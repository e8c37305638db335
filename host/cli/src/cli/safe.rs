//! Text that came from a gadget, a plugin or a model, made safe to print:
//! every control character the CLI did not write itself is shown as an
//! escape (`\x1b`, `\r`, `\u{202e}`) instead of acting on the terminal.
//! That covers window-title and clipboard sequences (OSC), screen clearing
//! and cursor moves (CSI), a carriage return that overwrites a line, C1
//! controls, and the bidirectional overrides that make text read in
//! another order than it is ("Trojan Source"). Newlines and tabs stay:
//! results have lines, and views indent continuation lines so a gadget
//! cannot start a line of its own that looks like the host's.
//!
//! JSON output needs none of this: serde escapes control characters.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether printing `c` could act on a terminal or reorder what is shown.
fn is_unsafe(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        c if c.is_control() => true, // C0, DEL, C1
        // Bidirectional embeddings, overrides and isolates; line and
        // paragraph separators (a terminal may treat them as newlines).
        '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        '\u{2028}' | '\u{2029}' => true,
        _ => false,
    }
}

/// `text` with every unsafe character escaped; borrowed when there is none.
pub(super) fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_unsafe(c) {
            out.push(c);
        } else if c == '\r' {
            out.push_str("\\r");
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_are_shown_not_obeyed() {
        let evil = "\x1b]0;pwned\x07\x1b[2J\rok\u{9b}31m\u{202e}gnp.exe\ttab\nline";
        let shown = safe(evil);
        assert_eq!(
            shown,
            "\\x1b]0;pwned\\x07\\x1b[2J\\rok\\x9b31m\\u{202e}gnp.exe\ttab\nline"
        );
        assert!(!shown.chars().any(is_unsafe));
        assert!(matches!(safe("plain ✓ text\n"), Cow::Borrowed(_)));
    }
}
