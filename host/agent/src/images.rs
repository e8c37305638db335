//! A gadget's images, as the model sees them.
//!
//! A result's image parts go to the model as images where the provider
//! takes them: Anthropic's `image` blocks (in a `tool_result` or a user
//! message), OpenAI's `image_url` parts with a `data:` URL (in a user
//! message: an OpenAI tool message carries text only, so a native call's
//! images follow its turn's tool messages in one user message). The
//! result's text names every image too, so nothing is lost on a model or
//! an image the provider does not take: a type outside the four both
//! providers document, or one over the size they accept, stays words.
//! Only the most recent images of a session are sent again with each
//! request; older ones are their words.

use gadget_core::content::{Media, base64};
use serde_json::{Value, json};

/// The image types both providers document for input.
pub const MODEL_IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Largest image sent to a model, bytes: Anthropic's documented limit per
/// image (OpenAI's is larger). A bigger one stays in words.
pub const MAX_IMAGE_BYTES_TO_MODEL: usize = 5 << 20;

/// Images one request carries at most, the most recent kept: every
/// request sends the whole conversation again, so a session that draws
/// many would resend them all (Anthropic refuses past 100 per request).
pub const MAX_IMAGES_PER_REQUEST: usize = 20;

/// Image bytes one request carries at most (6 MiB, 8 MiB as base64): half
/// of [`crate::agent::MAX_REQUEST_BYTES`], so a session's images never make
/// its next request too large to send; older images past it are words.
pub const MAX_IMAGE_BYTES_PER_REQUEST: usize = 6 << 20;

/// Input tokens counted for one image before the provider reports usage:
/// Anthropic's figure for an image at its largest unscaled size (about
/// 1.15 megapixels); smaller images cost less. Counting the base64 text
/// as text would overstate a 1 MiB PNG three hundredfold.
pub const IMAGE_TOKENS_ESTIMATE: u64 = 1600;

/// The images of a result a model can be sent.
pub fn for_the_model(images: &[Media]) -> Vec<Media> {
    images
        .iter()
        .filter(|m| {
            let base = m.mime_type.split(';').next().unwrap_or_default().trim();
            MODEL_IMAGE_TYPES
                .iter()
                .any(|t| t.eq_ignore_ascii_case(base))
                && m.data.len() <= MAX_IMAGE_BYTES_TO_MODEL
        })
        .cloned()
        .collect()
}

/// Keeps the most recent of the messages' images (given in conversation
/// order), at most [`MAX_IMAGES_PER_REQUEST`] of them and
/// [`MAX_IMAGE_BYTES_PER_REQUEST`] together; the rest are dropped (their
/// text still names them).
pub fn keep_latest<'a>(messages: impl DoubleEndedIterator<Item = &'a mut Vec<Media>>) {
    let (mut kept, mut bytes) = (0, 0);
    for images in messages.rev() {
        let mut keep = vec![false; images.len()];
        for (i, image) in images.iter().enumerate().rev() {
            if kept < MAX_IMAGES_PER_REQUEST
                && bytes + image.data.len() <= MAX_IMAGE_BYTES_PER_REQUEST
            {
                keep[i] = true;
                kept += 1;
                bytes += image.data.len();
            }
        }
        let mut flags = keep.into_iter();
        images.retain(|_| flags.next().unwrap_or(false));
    }
}

/// The media type as the providers want it: the type without parameters.
fn media_type(image: &Media) -> String {
    image
        .mime_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Anthropic's content blocks: the text, then each image.
pub fn anthropic_blocks(text: &str, images: &[Media]) -> Value {
    let mut blocks = vec![json!({"type": "text", "text": text})];
    blocks.extend(images.iter().map(|image| {
        json!({"type": "image", "source": {
            "type": "base64",
            "media_type": media_type(image),
            "data": base64(&image.data),
        }})
    }));
    Value::Array(blocks)
}

/// OpenAI's content parts: the text, then each image as a `data:` URL.
pub fn openai_parts(text: &str, images: &[Media]) -> Value {
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(images.iter().map(|image| {
        json!({"type": "image_url", "image_url": {
            "url": format!("data:{};base64,{}", media_type(image), base64(&image.data)),
        }})
    }));
    Value::Array(parts)
}

/// How a message's images appear in events and saved sessions: their type
/// and size (the bytes are the call's result, already in its events).
pub fn summaries<S: serde::Serializer>(images: &[Media], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq as _;
    let mut seq = s.serialize_seq(Some(images.len()))?;
    for image in images {
        seq.serialize_element(&json!({"mime_type": image.mime_type, "bytes": image.data.len()}))?;
    }
    seq.end()
}

/// The base64 bytes `images` add to a request.
pub fn request_bytes(images: &[Media]) -> usize {
    images.iter().map(|m| m.data.len().div_ceil(3) * 4).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(mime_type: &str, bytes: usize) -> Media {
        Media {
            mime_type: mime_type.into(),
            data: vec![7; bytes],
        }
    }

    #[test]
    fn only_types_and_sizes_the_providers_take_are_sent() {
        let kept = for_the_model(&[
            image("image/png", 10),
            image("image/svg+xml", 10),
            image("IMAGE/JPEG; q=1", 10),
            image("image/webp", MAX_IMAGE_BYTES_TO_MODEL + 1),
        ]);
        let types: Vec<&str> = kept.iter().map(|m| m.mime_type.as_str()).collect();
        assert_eq!(types, ["image/png", "IMAGE/JPEG; q=1"]);
        assert_eq!(
            openai_parts("t", &kept[1..])[1]["image_url"]["url"],
            "data:image/jpeg;base64,BwcHBwcHBwcHBw=="
        );
        assert_eq!(
            anthropic_blocks("t", &kept[..1])[1]["source"]["media_type"],
            "image/png"
        );
    }

    #[test]
    fn a_request_keeps_the_latest_images_only() {
        let mut messages: Vec<Vec<Media>> = (0..MAX_IMAGES_PER_REQUEST + 5)
            .map(|i| vec![image("image/png", i + 1)])
            .collect();
        messages[0].push(image("image/png", 1));
        keep_latest(messages.iter_mut());
        let kept: usize = messages.iter().map(Vec::len).sum();
        assert_eq!(kept, MAX_IMAGES_PER_REQUEST);
        assert!(messages[..5].iter().all(Vec::is_empty));
        assert!(messages[5..].iter().all(|m| m.len() == 1));

        // Two large images fit the byte cap; the older third does not, and
        // a small one before it still does.
        let big = MAX_IMAGE_BYTES_PER_REQUEST / 2 - 10;
        let mut messages = [
            vec![image("image/png", 10)],
            vec![image("image/png", big)],
            vec![image("image/png", big), image("image/png", big)],
        ];
        keep_latest(messages.iter_mut());
        let sizes: Vec<Vec<usize>> = messages
            .iter()
            .map(|m| m.iter().map(|i| i.data.len()).collect())
            .collect();
        assert_eq!(sizes, [vec![10], vec![], vec![big, big]]);
    }
}
