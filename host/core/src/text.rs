//! Text bounded to a limit: cut at a character boundary, the cut marked
//! (what a model, a person or a record is shown of text that was longer).

/// Truncates at a character boundary, marking the cut.
pub fn truncate(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let dropped = text.len() - cut;
    text.truncate(cut);
    text.push_str(&format!("… [truncated {dropped} bytes]"));
    text
}
