//! The journal's writer thread: it takes batches of record bodies, puts
//! each batch's records in the order they were made, gives each its number and its place in the chain
//! (the previous line's hash, and its MAC when the journal is keyed),
//! hashes the line and writes the batch. The chain's state lives here
//! alone, so nothing about it is locked.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};

use super::pending::{FLUSH_INTERVAL, Pending, SHARD_BYTES, ToWriter, in_order};

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
        let seq = self.seq + 1;
        let mut number = [0u8; 20];
        let digits = decimal(seq, &mut number);
        let mut pieces: [&[u8]; 7] = [
            b"{\"seq\":",
            digits,
            b",",
            body,
            b",\"prev\":\"",
            &self.prev,
            b"\"}",
        ];
        let mac = match &self.key {
            None => None,
            Some(key) => match gadget_core::audit::line_mac(key, &pieces) {
                Some(mac) => Some(format!("\",\"mac\":\"{mac}\"}}")),
                None => return Err("the journal's key cannot sign a line"),
            },
        };
        if let Some(mac) = &mac {
            pieces[6] = mac.as_bytes();
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

/// `n` in decimal, written into the end of `digits` (the formatter
/// machinery costs more than the rest of a line's head).
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[start..];
        }
    }
}

/// The writer thread: batches in, lines out, until the journal is
/// dropped; when none comes for [`FLUSH_INTERVAL`], it takes the pending
/// records itself, so an idle host's last calls reach the file too.
pub(super) fn write_batches(
    inbox: std::sync::mpsc::Receiver<ToWriter>,
    mut chain: Chain,
    mut out: Box<dyn Write + Send>,
    failed: Arc<Mutex<Option<String>>>,
    failing: Arc<AtomicBool>,
    pending: Arc<Pending>,
) {
    let spare = pending.spare();
    let mut lines = Vec::with_capacity(4 * SHARD_BYTES);
    let fail = |why: String| {
        failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
        failing.store(true, Ordering::Relaxed);
    };
    loop {
        let message = match inbox.recv_timeout(FLUSH_INTERVAL) {
            Ok(message) => message,
            // Nothing handed over for a while: take what waits (it comes
            // back through the inbox, in order with everything else).
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                pending.hand_over();
                continue;
            }
            // The journal is closed and everything sent is written.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        };
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
        for (_, body) in in_order(&batch) {
            if let Err(why) = chain.line(body, &mut lines) {
                fail(why.to_string());
                break;
            }
        }
        if let Err(e) = out.write_all(&lines).and_then(|()| out.flush()) {
            fail(e.to_string());
        }
        spare.give_back(batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 99, 1_000_001, u64::MAX] {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes());
        }
    }

    #[test]
    fn a_chain_goes_on_only_from_a_whole_hash() {
        assert!(Chain::new(0, gadget_core::audit::GENESIS).is_some());
        assert!(Chain::new(7, &gadget_core::audit::line_hash("{}")).is_some());
        for prev in ["", "abc", &"0".repeat(63), &"0".repeat(65)] {
            assert!(Chain::new(1, prev).is_none(), "{prev:?}");
        }
    }
}
