//! A result in parts (contract 0.3.0): text, images, sounds, embedded
//! resources and links to resources, plus the same result as JSON.
//!
//! Every front end reads the same parts: MCP serves them as they are;
//! the model's history and `gadget run` get [`model_text`], where a part
//! a text-only model cannot take is shown as what it is (its kind, type
//! and size) rather than as bytes. The result limit covers the sum of the
//! parts ([`Content::size_bytes`]).

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

/// What a part weighs against the result limit beyond its payload (its
/// kind and framing), so a flood of empty parts counts too: 65,536 of
/// them reach a 1 MiB limit.
pub const PART_OVERHEAD_BYTES: u64 = 16;

/// Bytes with their media type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Media {
    pub mime_type: String,
    /// Serialized as base64, as MCP carries it.
    #[serde(serialize_with = "as_base64")]
    pub data: Vec<u8>,
}

/// What a resource holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceBody {
    Text(String),
    #[serde(serialize_with = "as_base64")]
    Blob(Vec<u8>),
}

/// A resource's contents, named by its URI.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceContents {
    pub uri: String,
    pub mime_type: Option<String>,
    pub body: ResourceBody,
}

/// A pointer to a resource, rather than its contents.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceLink {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// One part of a result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text { text: String },
    Image(Media),
    Audio(Media),
    Resource(ResourceContents),
    ResourceLink(ResourceLink),
}

/// A result in parts, and the same result as JSON (MCP's
/// `structuredContent`), when the gadget gave them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rich {
    pub content: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
}

impl Content {
    /// What the part weighs against the result limit: its text or bytes,
    /// the names that travel with them, and [`PART_OVERHEAD_BYTES`].
    pub fn size_bytes(&self) -> u64 {
        let n = match self {
            Content::Text { text } => text.len(),
            Content::Image(m) | Content::Audio(m) => m.mime_type.len() + m.data.len(),
            Content::Resource(r) => {
                r.uri.len()
                    + r.mime_type.as_ref().map_or(0, String::len)
                    + match &r.body {
                        ResourceBody::Text(t) => t.len(),
                        ResourceBody::Blob(b) => b.len(),
                    }
            }
            Content::ResourceLink(l) => {
                l.uri.len()
                    + l.name.len()
                    + [&l.title, &l.description, &l.mime_type]
                        .iter()
                        .map(|s| s.as_ref().map_or(0, String::len))
                        .sum::<usize>()
            }
        };
        n as u64 + PART_OVERHEAD_BYTES
    }
}

impl Rich {
    /// The sum of the parts' sizes and the structured value's JSON.
    pub fn size_bytes(&self) -> u64 {
        self.content.iter().map(Content::size_bytes).sum::<u64>()
            + self
                .structured
                .as_ref()
                .map_or(0, |v| v.to_string().len() as u64)
    }

    /// Whether the parts are one text and nothing else (what a 0.1.0 or
    /// 0.2.0 gadget returns): then the text alone says it all.
    pub fn is_plain_text(&self) -> bool {
        self.structured.is_none() && matches!(self.content.as_slice(), [Content::Text { .. }])
    }
}

/// The result as a text-only model reads it: text parts as they are,
/// embedded text resources with their URI, and every other part described
/// by its kind, type and size, one per line. With no parts, the structured
/// value's JSON.
pub fn model_text(rich: &Rich) -> String {
    let mut out = String::new();
    for part in &rich.content {
        if !out.is_empty() {
            out.push('\n');
        }
        match part {
            Content::Text { text } => out.push_str(text),
            Content::Image(m) => {
                let _ = write!(out, "[image: {}, {} bytes]", m.mime_type, m.data.len());
            }
            Content::Audio(m) => {
                let _ = write!(out, "[audio: {}, {} bytes]", m.mime_type, m.data.len());
            }
            Content::Resource(r) => match &r.body {
                ResourceBody::Text(text) => {
                    let _ = write!(out, "[resource {}]\n{text}", r.uri);
                }
                ResourceBody::Blob(bytes) => {
                    let _ = write!(
                        out,
                        "[resource {}: {}, {} bytes]",
                        r.uri,
                        r.mime_type.as_deref().unwrap_or("application/octet-stream"),
                        bytes.len()
                    );
                }
            },
            Content::ResourceLink(l) => {
                let _ = write!(out, "[resource link: {} ({})]", l.uri, l.name);
            }
        }
    }
    if rich.content.is_empty()
        && let Some(value) = &rich.structured
    {
        out = value.to_string();
    }
    out
}

fn as_base64<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64(bytes))
}

/// Standard base64 with padding (RFC 4648), as MCP carries bytes. Small
/// enough to keep here rather than pull a crate into the pure core.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn the_model_reads_text_and_a_description_of_the_rest() {
        let rich = Rich {
            content: vec![
                Content::Text {
                    text: "Multiple content types test:".into(),
                },
                Content::Image(Media {
                    mime_type: "image/png".into(),
                    data: vec![0; 68],
                }),
                Content::Resource(ResourceContents {
                    uri: "test://r".into(),
                    mime_type: Some("application/json".into()),
                    body: ResourceBody::Text("{\"a\":1}".into()),
                }),
            ],
            structured: None,
        };
        assert_eq!(
            model_text(&rich),
            "Multiple content types test:\n[image: image/png, 68 bytes]\n[resource test://r]\n{\"a\":1}"
        );
        assert_eq!(
            rich.size_bytes(),
            28 + 9 + 68 + 8 + 16 + 7 + 3 * PART_OVERHEAD_BYTES
        );
        assert!(!rich.is_plain_text());
    }

    #[test]
    fn empty_parts_still_weigh() {
        let flood = Rich {
            content: vec![
                Content::Text {
                    text: String::new()
                };
                65_536
            ],
            structured: None,
        };
        assert_eq!(flood.size_bytes(), 1 << 20);
    }

    #[test]
    fn parts_serialize_as_tagged_json_with_base64_bytes() {
        let part = Content::Audio(Media {
            mime_type: "audio/wav".into(),
            data: b"RIFF".to_vec(),
        });
        assert_eq!(
            serde_json::to_value(&part).unwrap(),
            serde_json::json!({"type": "audio", "mime_type": "audio/wav", "data": "UklGRg=="})
        );
    }
}
