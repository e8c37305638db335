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
    // A cut text keeps what it was cut from unless given back: a 20 MiB
    // error message cut to 64 KiB would hold its 20 MiB for as long as the
    // call's report lives (the journal, the response, a kept task).
    text.shrink_to_fit();
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_text_gives_back_what_it_was_cut_from() {
        let cut = truncate("é".repeat(10 << 20), 1_001);
        assert!(cut.starts_with(&"é".repeat(500)), "{}", &cut[..10]);
        assert!(cut.ends_with("… [truncated 20970520 bytes]"), "{cut}");
        assert!(cut.capacity() < 4 << 10, "{}", cut.capacity());
        assert_eq!(truncate("short".into(), 10), "short");
    }
}
