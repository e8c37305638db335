//! The oversized outputs of a session, kept for the viewer.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::limits::*;

/// The character limit for a context window (tokens) and a percentage:
/// `floor(window × percent / 100 × 4)`.
pub fn char_limit(context_window_tokens: u64, percent: u32) -> usize {
    (context_window_tokens * u64::from(percent) * CHARS_PER_TOKEN / 100) as usize
}

/// One stored output, with the counts the messages need.
#[derive(Debug, Clone)]
pub struct StoredOutput {
    pub id: String,
    pub gadget: String,
    pub content: String,
    pub char_count: usize,
    pub byte_size: usize,
    pub line_count: usize,
    pub max_line_chars: usize,
}

/// The oversized outputs of one session, by id.
#[derive(Debug, Default)]
pub struct OutputStore {
    outputs: HashMap<String, StoredOutput>,
    /// Ids in storing order, for the "Available IDs" list and eviction.
    order: Vec<String>,
}

impl OutputStore {
    /// Keeps `content` under `{gadget}_{8 hex digits of its SHA-256}`.
    pub fn store(&mut self, gadget: &str, mut content: String) -> &StoredOutput {
        if content.len() > MAX_STORED_OUTPUT_BYTES {
            let mut cut = MAX_STORED_OUTPUT_BYTES;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            content.truncate(cut);
        }
        let digest = Sha256::digest(content.as_bytes());
        let id = format!(
            "{gadget}_{:02x}{:02x}{:02x}{:02x}",
            digest[0], digest[1], digest[2], digest[3]
        );
        if self.outputs.contains_key(&id) {
            // The same output again (or, once in four billion, another
            // with the same prefix: the newer wins).
            self.order.retain(|other| other != &id);
            self.outputs.remove(&id);
        }
        let stored_bytes = |outputs: &HashMap<String, StoredOutput>| -> usize {
            outputs.values().map(|o| o.byte_size).sum()
        };
        while !self.order.is_empty()
            && (self.order.len() >= MAX_STORED_OUTPUTS
                || stored_bytes(&self.outputs) + content.len() > MAX_STORED_TOTAL_BYTES)
        {
            let oldest = self.order.remove(0);
            self.outputs.remove(&oldest);
        }
        let (mut line_count, mut max_line_chars) = (0, 0);
        for line in content.split('\n') {
            line_count += 1;
            max_line_chars = max_line_chars.max(line.chars().count());
        }
        let stored = StoredOutput {
            id: id.clone(),
            gadget: gadget.to_string(),
            char_count: content.chars().count(),
            byte_size: content.len(),
            line_count,
            max_line_chars,
            content,
        };
        self.order.push(id.clone());
        self.outputs.entry(id).insert_entry(stored).into_mut()
    }

    pub fn get(&self, id: &str) -> Option<&StoredOutput> {
        self.outputs.get(id)
    }

    /// Ids in storing order.
    pub fn ids(&self) -> &[String] {
        &self.order
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}
