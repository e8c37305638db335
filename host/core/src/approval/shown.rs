//! What a person deciding on a call is shown: its parameters (every key,
//! those the rules name first, long values cut one by one) and what it may
//! touch, every text escaped and bounded.

use std::sync::Arc;

use serde_json::Value;

use crate::access::{Access, Declared};

/// Parameters' values shown to a person deciding, in bytes of escaped
/// JSON, shared among the keys: what fits a terminal screen or a dialog.
/// Every key is shown; a value longer than its share is cut on its own,
/// with a marker and its size (the decision is bound to the whole
/// parameters all the same).
pub const MAX_SHOWN_PARAMS_BYTES: usize = 4096;

/// The least of a value shown, however many keys share the budget, bytes.
pub const MIN_SHOWN_VALUE_BYTES: usize = 96;

/// Key names shown, in bytes: every key of any honest call; a flood of
/// keys is cut after this with a count.
pub const MAX_SHOWN_KEYS_BYTES: usize = 16 << 10;

/// One call waiting for a person: everything they need to decide.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub call_id: String,
    /// The name the call was made by (as served).
    pub gadget: String,
    /// The validated parameters the call will run with, exactly.
    pub params: Arc<Value>,
    /// What the call may touch (its effective grants).
    pub access: Access,
    /// Why it waits, in the operator's words.
    pub reasons: Vec<String>,
    /// What the tool's author says of its effects (shown as its claims
    /// for a tool outside the sandbox).
    pub declared: Declared,
    /// The parameters (JSON pointers) the matched rules look at: shown
    /// first, so no long value before them hides them.
    pub named: Vec<String>,
}

impl ApprovalRequest {
    /// The parameters as a person reads them, as compact JSON: every key,
    /// those the rules name first, then the rest in the caller's order;
    /// control characters escaped; a long value cut on its own with a
    /// marker and its size (`… [cut: 1048576 bytes in all]`).
    pub fn shown_params(&self) -> String {
        let Value::Object(map) = &*self.params else {
            return shown_value(&self.params.to_string(), MAX_SHOWN_PARAMS_BYTES);
        };
        let mut keys: Vec<&String> = Vec::with_capacity(map.len());
        for pointer in &self.named {
            let top = pointer.split('/').nth(1).unwrap_or_default();
            let top = top.replace("~1", "/").replace("~0", "~");
            if let Some((key, _)) = map.get_key_value(&top)
                && !keys.contains(&key)
            {
                keys.push(key);
            }
        }
        let named: Vec<&String> = keys.clone();
        keys.extend(map.keys().filter(|k| !named.contains(k)));
        let share = (MAX_SHOWN_PARAMS_BYTES / keys.len().max(1)).max(MIN_SHOWN_VALUE_BYTES);
        let mut out = String::from("{");
        let mut key_bytes = 0;
        for (i, key) in keys.iter().enumerate() {
            if key_bytes > MAX_SHOWN_KEYS_BYTES {
                out.push_str(&format!(" … [{} more keys]", keys.len() - i));
                break;
            }
            key_bytes += key.len();
            if i > 0 {
                out.push(',');
            }
            let name = Value::String((*key).clone()).to_string();
            out.push_str(&shown(&name, MIN_SHOWN_VALUE_BYTES));
            out.push(':');
            out.push_str(&shown_value(&map[key.as_str()].to_string(), share));
        }
        out.push('}');
        out
    }

    /// What the call may touch, one line (`nothing` when it may touch
    /// nothing outside itself; a tool outside the sandbox said as such,
    /// with its author's annotations as claims).
    pub fn shown_access(&self) -> String {
        let access = &self.access;
        if let Some(what) = &access.outside {
            let d = &self.declared;
            let claims: Vec<&str> = [
                d.read_only
                    .map(|r| if r { "read-only" } else { "not read-only" }),
                d.destructive
                    .map(|r| if r { "destructive" } else { "not destructive" }),
                d.idempotent
                    .map(|r| if r { "idempotent" } else { "not idempotent" }),
                d.open_world
                    .map(|r| if r { "open-world" } else { "closed-world" }),
            ]
            .into_iter()
            .flatten()
            .collect();
            let claims = if claims.is_empty() {
                "it claims nothing of its effects".to_string()
            } else {
                format!("its server claims (unchecked): {}", claims.join(", "))
            };
            return shown(
                &format!(
                    "{what}: a process outside the sandbox, bounded by no grant of this host; {claims}"
                ),
                MAX_SHOWN_PARAMS_BYTES,
            );
        }
        let mut parts = Vec::new();
        for file in &access.files {
            parts.push(format!(
                "files {} ({})",
                file.path,
                if file.writable {
                    "read-write"
                } else {
                    "read-only"
                }
            ));
        }
        if !access.http.is_empty() {
            parts.push(format!("http {}", access.http.join(", ")));
        }
        if !access.config.is_empty() {
            parts.push(format!("config {}", access.config.join(", ")));
        }
        if !access.llm.is_empty() {
            parts.push(format!("llm {}", access.llm.join(", ")));
        }
        if parts.is_empty() {
            "nothing outside itself".to_string()
        } else {
            shown(&parts.join("; "), MAX_SHOWN_PARAMS_BYTES)
        }
    }
}

/// One value for a person's eyes, cut at `max` bytes with a marker and
/// its whole size.
fn shown_value(text: &str, max: usize) -> String {
    if text.len() <= max {
        return shown(text, usize::MAX);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{} … [cut: {} bytes in all]",
        shown(&text[..cut], usize::MAX),
        text.len()
    )
}

/// `text` for a person's eyes: control characters (escape sequences,
/// carriage returns a hostile model could use to redraw a prompt) shown
/// escaped, cut at `max` bytes with a note of what was left out.
pub fn shown(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 32);
    for (at, c) in text.char_indices() {
        if out.len() >= max {
            out.push_str(&format!(" … ({} more bytes)", text.len() - at));
            break;
        }
        if c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use serde_json::json;

    #[test]
    fn what_a_person_is_shown_is_bounded_and_escaped() {
        let shown_text = shown("a\u{1b}[2Jb\rc\u{202e}d", 100);
        assert_eq!(shown_text, "a\\u{1b}[2Jb\\u{d}c\\u{202e}d");
        let long = shown(&"x".repeat(10_000), 100);
        assert!(
            long.len() < 140 && long.ends_with("(9900 more bytes)"),
            "{long}"
        );
    }

    #[test]
    fn every_key_is_shown_and_long_values_are_cut_one_by_one() {
        let request = |params: Value, named: Vec<String>| ApprovalRequest {
            call_id: "c".into(),
            gadget: "FetchUrl".into(),
            params: Arc::new(params),
            access: Access::default(),
            reasons: Vec::new(),
            declared: Default::default(),
            named,
        };
        // A long first value no longer hides the destination.
        let shown = request(
            json!({"body": "x".repeat(100_000), "url": "https://evil.example/"}),
            vec!["/url".into()],
        )
        .shown_params();
        assert!(
            shown.starts_with(r#"{"url":"https://evil.example/","body":"xxx"#),
            "{shown}"
        );
        assert!(shown.contains("[cut: 100002 bytes in all]"), "{shown}");
        assert!(
            shown.len() < MAX_SHOWN_PARAMS_BYTES + 200,
            "{}",
            shown.len()
        );
        // Without a rule naming one: the caller's order, every key.
        let many: serde_json::Map<String, Value> = (0..50)
            .map(|i| (format!("k{i}"), json!("y".repeat(1000))))
            .collect();
        let shown = request(Value::Object(many), Vec::new()).shown_params();
        for i in 0..50 {
            assert!(shown.contains(&format!("\"k{i}\":")), "k{i}: {shown}");
        }
        // A tool outside the sandbox is said to be one, its claims as claims.
        let mut upstream = request(json!({}), Vec::new());
        upstream.access.outside = Some("a tool of the MCP server 'fs' (npx fs)".into());
        upstream.declared.read_only = Some(true);
        let access = upstream.shown_access();
        assert!(access.contains("outside the sandbox"), "{access}");
        assert!(access.contains("claims (unchecked): read-only"), "{access}");
        assert!(!access.contains("nothing outside itself"), "{access}");
    }
}
