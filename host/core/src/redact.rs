//! Redaction of secret values from what a gadget hands the host.
//!
//! A plugin granted a secret (an API key read from the host's environment)
//! gets it as an environment variable of its instance. The host then
//! replaces every occurrence of that value with [`REDACTED`] in all the
//! gadget sends back (results, details, errors, logs, progress, updates,
//! captured output) before anything is stored, shown or sent to a model.
//! It catches the value as written, not an encoding of it (base64, split
//! across fields): redaction protects against accidents, not against a
//! gadget determined to leak what it was given.

use std::borrow::Cow;

use serde_json::Value;

use crate::content::{Content, Media, ResourceBody, ResourceContents, ResourceLink, Rich};

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// The secret values of one plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(mut secrets: Vec<String>) -> Redactor {
        secrets.retain(|s| !s.is_empty());
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }

    /// Like [`Redactor::text`], for an owned string.
    pub fn string(&self, text: String) -> String {
        match self.text(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        }
    }

    /// `text` with every secret replaced, then cut to `max_bytes`, in that
    /// order: a cut first could leave a secret's prefix that no longer
    /// matches, and the prefix would leak.
    pub fn bounded(&self, text: String, max_bytes: usize) -> String {
        crate::text::truncate(self.string(text), max_bytes)
    }

    /// Output captured up to a cap, redacted; when the capture was cut
    /// (`was_cut`), a tail that is the start of a secret (the rest of it
    /// fell past the cap) is replaced too.
    pub fn captured(&self, bytes: Vec<u8>, was_cut: bool) -> Vec<u8> {
        let mut bytes = self.bytes(bytes);
        if was_cut {
            let keep = self.partial_tail_start(&bytes);
            if keep < bytes.len() {
                bytes.truncate(keep);
                bytes.extend_from_slice(REDACTED.as_bytes());
            }
        }
        bytes
    }

    /// Where a trailing proper prefix of some secret starts (the length
    /// when there is none).
    fn partial_tail_start(&self, bytes: &[u8]) -> usize {
        let mut start = bytes.len();
        for secret in &self.secrets {
            let secret = secret.as_bytes();
            if let Some(k) = (1..secret.len())
                .rev()
                .find(|&k| bytes.ends_with(&secret[..k]))
            {
                start = start.min(bytes.len() - k);
            }
        }
        start
    }

    /// Bytes (captured output) with every secret replaced. Linear in the
    /// output's size (memchr's substring search), however hostile the
    /// output is.
    pub fn bytes(&self, bytes: Vec<u8>) -> Vec<u8> {
        let mut bytes = bytes;
        for secret in &self.secrets {
            let finder = memchr::memmem::Finder::new(secret.as_bytes());
            if finder.find(&bytes).is_none() {
                continue;
            }
            let mut out = Vec::with_capacity(bytes.len());
            let mut at = 0;
            for found in finder.find_iter(&bytes) {
                if found < at {
                    continue; // overlaps the occurrence just replaced
                }
                out.extend_from_slice(&bytes[at..found]);
                out.extend_from_slice(REDACTED.as_bytes());
                at = found + secret.len();
            }
            out.extend_from_slice(&bytes[at..]);
            bytes = out;
        }
        bytes
    }

    /// A result in parts with every secret replaced: in its texts, URIs
    /// and names, in its bytes (an image or a blob that holds a secret
    /// verbatim is changed rather than let out), and in its structured value.
    pub fn rich(&self, rich: Rich) -> Rich {
        if self.is_empty() {
            return rich;
        }
        let media = |m: Media| Media {
            mime_type: self.string(m.mime_type),
            data: self.bytes(m.data),
        };
        let option = |s: Option<String>| s.map(|s| self.string(s));
        let content = rich
            .content
            .into_iter()
            .map(|part| match part {
                Content::Text { text } => Content::Text {
                    text: self.string(text),
                },
                Content::Image(m) => Content::Image(media(m)),
                Content::Audio(m) => Content::Audio(media(m)),
                Content::Resource(r) => Content::Resource(ResourceContents {
                    uri: self.string(r.uri),
                    mime_type: option(r.mime_type),
                    body: match r.body {
                        ResourceBody::Text(text) => ResourceBody::Text(self.string(text)),
                        ResourceBody::Blob(bytes) => ResourceBody::Blob(self.bytes(bytes)),
                    },
                }),
                Content::ResourceLink(l) => Content::ResourceLink(ResourceLink {
                    uri: self.string(l.uri),
                    name: self.string(l.name),
                    title: option(l.title),
                    description: option(l.description),
                    mime_type: option(l.mime_type),
                }),
            })
            .collect();
        Rich {
            content,
            structured: rich.structured.map(|v| self.value(v)),
        }
    }

    /// A JSON value with every secret replaced in its strings and keys
    /// (after parsing, so an escaped occurrence is caught too).
    pub fn value(&self, value: Value) -> Value {
        if self.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.string(s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.string(k), self.value(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cut_never_leaves_part_of_a_secret() {
        let secret = "sk-0123456789abcdef";
        let redactor = Redactor::new(vec![secret.into()]);
        let text = format!("{}{secret} and more", "x".repeat(10));
        // Every cut that falls inside the secret: no prefix of it remains.
        for max in 0..text.len() {
            let cut = redactor.bounded(text.clone(), max);
            for k in 4..=secret.len() {
                assert!(!cut.contains(&secret[..k]), "max {max}: {cut}");
            }
        }
        // A capture cut at its cap in the middle of a secret.
        for keep in 11..10 + secret.len() {
            let captured = text.as_bytes()[..keep].to_vec();
            let out = String::from_utf8(redactor.captured(captured, true)).unwrap();
            assert!(out.ends_with(REDACTED), "{keep}: {out}");
            assert!(!out.contains("sk-0"), "{keep}: {out}");
        }
        // Not cut: a string that merely ends like a secret's start stays.
        let whole = redactor.captured(b"ends with sk".to_vec(), false);
        assert_eq!(whole, b"ends with sk");
    }

    #[test]
    fn every_occurrence_is_replaced() {
        let r = Redactor::new(vec!["s3cret".into(), "s3cret-long".into(), String::new()]);
        assert_eq!(
            r.text("key=s3cret-long and s3cret"),
            "key=[redacted] and [redacted]"
        );
        assert!(matches!(r.text("nothing here"), Cow::Borrowed(_)));
        let value = r.value(json!({"k": ["a s3cret", {"s3cret": 1}], "n": 2}));
        assert_eq!(
            value,
            json!({"k": ["a [redacted]", {"[redacted]": 1}], "n": 2})
        );
    }

    #[test]
    fn bytes_are_redacted_too() {
        let r = Redactor::new(vec!["key".into()]);
        assert_eq!(
            r.bytes(b"a key, a key!".to_vec()),
            b"a [redacted], a [redacted]!"
        );
        assert_eq!(r.bytes(b"ke".to_vec()), b"ke");
        let overlapping = Redactor::new(vec!["aa".into()]);
        assert_eq!(overlapping.bytes(b"aaa".to_vec()), b"[redacted]a");
        // A large output full of near-misses stays fast (linear search).
        let long = Redactor::new(vec![format!("{}b", "a".repeat(100))]);
        let started = std::time::Instant::now();
        assert_eq!(long.bytes(vec![b'a'; 16 << 20]).len(), 16 << 20);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn every_part_of_a_result_in_parts_is_redacted() {
        let r = Redactor::new(vec!["hunter2".into()]);
        let rich = Rich {
            content: vec![
                Content::Text {
                    text: "pw hunter2".into(),
                },
                Content::Image(Media {
                    mime_type: "image/png".into(),
                    data: b"\x89PNG hunter2".to_vec(),
                }),
                Content::Resource(ResourceContents {
                    uri: "file:///hunter2".into(),
                    mime_type: None,
                    body: ResourceBody::Blob(b"hunter2".to_vec()),
                }),
                Content::ResourceLink(ResourceLink {
                    uri: "x://y".into(),
                    name: "n".into(),
                    title: Some("hunter2".into()),
                    description: None,
                    mime_type: None,
                }),
            ],
            structured: Some(json!({"hunter2": ["hunter2"]})),
        };
        let shown = serde_json::to_string(&r.rich(rich)).unwrap();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            !shown.contains(&crate::content::base64(b"hunter2")),
            "{shown}"
        );
    }

    #[test]
    fn an_escaped_secret_is_caught_after_parsing() {
        let r = Redactor::new(vec!["a\"b".into()]);
        let parsed: Value = serde_json::from_str(r#"{"x": "a\"b"}"#).unwrap();
        assert_eq!(r.value(parsed), json!({"x": "[redacted]"}));
    }
}
