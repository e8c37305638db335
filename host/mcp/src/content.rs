//! A gadget's result as MCP content: each part of a result in parts
//! (contract 0.3.0) as the content block of its kind, bytes in base64; a
//! plain result as one text block.

use rmcp::model::{ContentBlock, Resource, ResourceContents};

use gadget_core::content::{Content, ResourceBody, Rich, base64};

/// The content blocks of a result: its parts when it has them, else its text.
pub fn blocks(text: String, rich: Option<&Rich>) -> Vec<ContentBlock> {
    match rich {
        Some(rich) if !rich.content.is_empty() => rich.content.iter().map(block).collect(),
        _ => vec![ContentBlock::text(text)],
    }
}

pub(crate) fn block(part: &Content) -> ContentBlock {
    match part {
        Content::Text { text } => ContentBlock::text(text.clone()),
        Content::Image(m) => ContentBlock::image(base64(&m.data), m.mime_type.clone()),
        Content::Audio(m) => ContentBlock::audio(base64(&m.data), m.mime_type.clone()),
        Content::Resource(r) => ContentBlock::resource(match &r.body {
            ResourceBody::Text(text) => ResourceContents::TextResourceContents {
                uri: r.uri.clone(),
                mime_type: r.mime_type.clone(),
                text: text.clone(),
                meta: None,
            },
            ResourceBody::Blob(bytes) => ResourceContents::BlobResourceContents {
                uri: r.uri.clone(),
                mime_type: r.mime_type.clone(),
                blob: base64(bytes),
                meta: None,
            },
        }),
        Content::ResourceLink(l) => {
            let mut link = Resource::new(l.uri.clone(), l.name.clone());
            link.title = l.title.clone();
            link.description = l.description.clone();
            link.mime_type = l.mime_type.clone();
            ContentBlock::resource_link(link)
        }
    }
}
