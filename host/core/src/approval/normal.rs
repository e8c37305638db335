//! What a rule's parameter means: a URL or a path, as the schema's
//! `format` or the rule's `kind` says, and the normal forms its text is
//! matched in besides its spelling.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a parameter's text means, for matching its normal form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueKind {
    Url,
    Path,
}

impl ValueKind {
    /// What a JSON Schema `format` says a string is.
    pub(crate) fn of_format(format: &str) -> Option<ValueKind> {
        match format {
            "uri" | "url" | "iri" | "uri-reference" | "iri-reference" => Some(ValueKind::Url),
            "path" | "file-path" => Some(ValueKind::Path),
            _ => None,
        }
    }

    /// The other spellings of `text` a rule must see: its normal form
    /// (and a URL's without the lone `/` path the normal form adds), when
    /// they differ from it.
    pub(super) fn normal_forms(self, text: &str) -> Vec<String> {
        let mut forms = Vec::new();
        match self {
            ValueKind::Url => {
                if let Some(normal) = normal_url(text) {
                    if let Some(bare) = normal.strip_suffix('/')
                        && bare.matches('/').count() == 2
                    {
                        forms.push(bare.to_string());
                    }
                    forms.push(normal);
                }
            }
            ValueKind::Path => forms.push(normal_path(text)),
        }
        forms.retain(|form| form != text);
        forms
    }
}

/// The normal form of a URL: parsed (scheme and host case-folded, the
/// default port dropped, dot segments removed, `%2e` included), with the
/// escapes of unreserved characters (`%61` for `a`) decoded; `None` when
/// it is not an absolute URL.
pub fn normal_url(text: &str) -> Option<String> {
    let mut current = decode_unreserved(text.trim());
    // Decoding can uncover what parsing normalises (`%2e%2e` segments), and
    // parsing can escape again: a few rounds reach the fixed point.
    for _ in 0..3 {
        let parsed = url::Url::parse(&current).ok()?;
        let next = decode_unreserved(parsed.as_str());
        if next == current {
            break;
        }
        current = next;
    }
    Some(current)
}

/// `%XX` escapes of unreserved characters (RFC 3986: letters, digits,
/// `-._~`) decoded; every other escape kept.
fn decode_unreserved(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
            && (byte.is_ascii_alphanumeric() || b"-._~".contains(&byte))
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    // Only ASCII bytes replaced ASCII escapes: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// A path lexically cleaned: repeated `/` and `.` segments removed, `..`
/// taking the segment before it (never above the root); `.` for nothing.
pub fn normal_path(text: &str) -> String {
    let rooted = text.starts_with('/');
    let mut segments: Vec<&str> = Vec::new();
    for segment in text.split('/') {
        match segment {
            "" | "." => {}
            ".." => match segments.last() {
                Some(&last) if last != ".." => {
                    segments.pop();
                }
                _ if rooted => {}
                _ => segments.push(".."),
            },
            other => segments.push(other),
        }
    }
    let joined = segments.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// The `format` the schema gives the value at `pointer`, as a kind (an
/// array's items' when the pointer ends at the array).
pub(super) fn kind_in_schema(schema: &Value, pointer: &str) -> Option<ValueKind> {
    let mut at = schema;
    for token in pointer.split('/').skip(1) {
        let token: std::borrow::Cow<'_, str> = if token.contains('~') {
            token.replace("~1", "/").replace("~0", "~").into()
        } else {
            token.into()
        };
        at = match at.get("properties").and_then(|p| p.get(token.as_ref())) {
            Some(next) => next,
            None => at.get("items")?,
        };
    }
    let format = at
        .get("format")
        .or_else(|| at.get("items").and_then(|i| i.get("format")))?;
    ValueKind::of_format(format.as_str()?)
}

#[cfg(test)]
mod tests {
    use super::super::tests::rule;
    use super::super::*;
    use serde_json::json;

    /// The docs' own rules, passed by other spellings of the same URL or
    /// path: each is caught by its normal form.
    #[test]
    fn rules_on_urls_and_paths_match_what_a_value_means_not_how_it_is_spelled() {
        let mut url_rule = rule("FetchUrl", "/url", Some("http://*"), None, RuleAction::Deny);
        url_rule.kind = Some(ValueKind::Url);
        let admin = rule(
            "FetchUrl",
            "/url",
            Some("https://intranet.example/admin*"),
            None,
            RuleAction::Deny,
        );
        let write = rule(
            "WriteFile",
            "/path",
            None,
            Some("^/out/(secrets|keys)/"),
            RuleAction::Approve,
        );
        let rules = Rules::new(Vec::new(), vec![url_rule, admin, write], None).unwrap();
        // The URL kind said by the rule (first), or by the schema's format.
        let schema = json!({"type": "object", "properties": {
            "url": {"type": "string", "format": "uri"},
            "path": {"type": "string", "format": "path"},
        }});
        let denied = |url: &str| {
            matches!(
                rules.check("FetchUrl", &json!({ "url": url }), Some(&schema)),
                Admission::Deny { .. }
            )
        };
        for spelled in [
            "http://example.com",
            "HTTP://example.com",
            "Http://example.com/x",
            " http://example.com",
            "https://INTRANET.example/admin/users",
            "https://intranet.example:443/admin",
            "https://intranet.example/%61dmin/users",
            "https://intranet.example/x/../admin",
            "https://intranet.example/./admin",
            "https://intranet.example/x/%2e%2e/admin",
        ] {
            assert!(denied(spelled), "{spelled} passed a deny rule");
        }
        for fine in ["https://example.com", "https://intranet.example/public"] {
            assert!(!denied(fine), "{fine}");
        }
        // Without the schema's format, a rule with no kind whose pattern
        // is plainly a URL is matched as one all the same...
        assert!(matches!(
            rules.check(
                "FetchUrl",
                &json!({"url": "https://intranet.example/%61dmin"}),
                None
            ),
            Admission::Deny { .. }
        ));
        // ...and a pattern that says nothing of what it is compares text.
        let vague = rule("Fetch", "/url", Some("*/admin*"), None, RuleAction::Deny);
        let vague = Rules::new(Vec::new(), vec![vague], None).unwrap();
        let escaped = json!({"url": "https://intranet.example/%61dmin"});
        assert_eq!(vague.check("Fetch", &escaped, None), Admission::Run);
        assert!(matches!(
            vague.check("Fetch", &escaped, Some(&schema)),
            Admission::Deny { .. }
        ));
        let asked = |path: &str| {
            matches!(
                rules.check("WriteFile", &json!({ "path": path }), Some(&schema)),
                Admission::Ask { .. }
            )
        };
        for spelled in [
            "/out/secrets/a",
            "//out/secrets/a",
            "/out//secrets/a",
            "/./out/secrets/a",
            "/out/x/../secrets/a",
            "/../out/keys/k",
        ] {
            assert!(asked(spelled), "{spelled} passed an approve rule");
        }
        assert!(!asked("/out/public/a"));
        assert_eq!(normal_path("a/./b//../c/"), "a/c");
        assert_eq!(normal_path("../a"), "../a");
        assert_eq!(normal_path(""), ".");
    }

    #[test]
    fn a_deny_rule_on_a_url_holds_for_each_request_the_call_makes() {
        let mut pages = rule(
            "FetchUrl",
            "/url",
            Some("http://127.0.0.1:*/page*"),
            None,
            RuleAction::Deny,
        );
        pages.kind = Some(ValueKind::Url);
        let approve = rule("FetchUrl", "/url", Some("*"), None, RuleAction::Approve);
        let rules = Arc::new(Rules::new(Vec::new(), vec![pages, approve], None).unwrap());
        let denials = rules
            .request_denials("FetchUrl", None, &crate::client::ClientId::Local)
            .expect("a URL deny rule");
        assert!(denials.refusal("http://127.0.0.1:8080/page").is_some());
        assert!(
            denials
                .refusal("HTTP://127.0.0.1:8080/%70age?x=1")
                .is_some()
        );
        assert!(denials.refusal("http://127.0.0.1:8080/moved").is_none());
        // Other gadgets, and approve rules, hold nothing at the door.
        assert!(
            rules
                .request_denials("Calculator", None, &crate::client::ClientId::Local)
                .is_none()
        );
    }
}
