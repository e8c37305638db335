//! The journal's writer thread: it takes batches of record bodies in the
//! order they were made, gives each its number and its place in the chain
//! (the previous line's hash, and its MAC when the journal is keyed),
//! hashes the line and writes the batch. The chain's state lives here
//! alone, so nothing about it is locked.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};

/// Bytes of records gathered before they are handed to the writer.
pub(super) const BATCH_BYTES: usize = 64 << 10;

/// What the journal sends its writer.
pub(super) enum ToWriter {
    Batch(Vec<u8>),
    /// Answered once everything sent before it is written.
    Flushed(std::sync::mpsc::SyncSender<()>),
}

/// The chain as the writer thread keeps it.
pub(super) struct Chain {
    seq: u64,
    /// The previous line's hash, hex.
    prev: [u8; 64],
    /// A keyed journal's secret: each line then carries its HMAC.
    pub(super) key: Option<Vec<u8>>,
}

impl Chain {
    /// The chain going on after record `seq`, whose line's hash is `prev`
    /// (64 hex digits; anything else is no chain to go on from).
    pub(super) fn new(seq: u64, prev: &str) -> Option<Chain> {
        Some(Chain {
            seq,
            prev: prev.as_bytes().try_into().ok()?,
            key: None,
        })
    }

    /// Appends the line of record `body` (`{...}` without its braces) to
    /// `lines`: its number first, then its fields, then the previous
    /// line's hash (and, keyed, its MAC), the fields' order of [`gadget_core::audit::Record`].
    fn line(&mut self, body: &[u8], lines: &mut Vec<u8>) -> Result<(), &'static str> {
        use std::io::Write as _;
        let seq = self.seq + 1;
        let mut head = [0u8; 32];
        let head_len = {
            let mut cursor = std::io::Cursor::new(&mut head[..]);
            let _ = write!(cursor, "{{\"seq\":{seq},");
            cursor.position() as usize
        };
        let mut pieces: [&[u8]; 5] = [&head[..head_len], body, b",\"prev\":\"", &self.prev, b"\"}"];
        let mac = match &self.key {
            None => None,
            Some(key) => match gadget_core::audit::line_mac(key, &pieces) {
                Some(mac) => Some(format!("\",\"mac\":\"{mac}\"}}")),
                None => return Err("the journal's key cannot sign a line"),
            },
        };
        if let Some(mac) = &mac {
            pieces[4] = mac.as_bytes();
        }
        let mut hasher = Sha256::new();
        for piece in pieces {
            hasher.update(piece);
            lines.extend_from_slice(piece);
        }
        lines.push(b'\n');
        self.seq = seq;
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for (i, byte) in hasher.finalize().iter().enumerate() {
            self.prev[2 * i] = DIGITS[usize::from(byte >> 4)];
            self.prev[2 * i + 1] = DIGITS[usize::from(byte & 0xf)];
        }
        Ok(())
    }
}

/// The writer thread: batches in, lines out, until the journal is dropped.
pub(super) fn write_batches(
    inbox: std::sync::mpsc::Receiver<ToWriter>,
    mut chain: Chain,
    mut out: Box<dyn Write + Send>,
    failed: Arc<Mutex<Option<String>>>,
    failing: Arc<AtomicBool>,
) {
    let mut lines = Vec::with_capacity(BATCH_BYTES + BATCH_BYTES / 2);
    let fail = |why: String| {
        failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
        failing.store(true, Ordering::Relaxed);
    };
    for message in inbox {
        let batch = match message {
            ToWriter::Batch(batch) => batch,
            ToWriter::Flushed(done) => {
                let _ = done.send(());
                continue;
            }
        };
        if failing.load(Ordering::Relaxed) {
            continue;
        }
        lines.clear();
        for body in batch.split(|b| *b == b'\n').filter(|b| !b.is_empty()) {
            if let Err(why) = chain.line(body, &mut lines) {
                fail(why.to_string());
                break;
            }
        }
        if let Err(e) = out.write_all(&lines).and_then(|()| out.flush()) {
            fail(e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_goes_on_only_from_a_whole_hash() {
        assert!(Chain::new(0, gadget_core::audit::GENESIS).is_some());
        assert!(Chain::new(7, &gadget_core::audit::line_hash("{}")).is_some());
        for prev in ["", "abc", &"0".repeat(63), &"0".repeat(65)] {
            assert!(Chain::new(1, prev).is_none(), "{prev:?}");
        }
    }
}
