//! Captured stdout and stderr of a gadget: the first N bytes are kept, the
//! rest is counted and discarded.
//!
//! wasmtime-wasi's `MemoryOutputPipe` traps the guest when it is full; a
//! gadget that prints a lot of debug output should not lose its result for
//! that, so this pipe accepts every write and keeps only what fits.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

use gadget_core::call::Captured;

#[derive(Debug, Clone)]
pub struct CappedPipe {
    capacity: usize,
    state: Arc<Mutex<Captured>>,
}

impl CappedPipe {
    pub fn new(capacity: usize) -> CappedPipe {
        CappedPipe {
            capacity,
            state: Arc::new(Mutex::new(Captured::default())),
        }
    }

    /// What was captured so far.
    pub fn take(&self) -> Captured {
        std::mem::take(&mut *self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A copy of what was captured so far.
    pub fn snapshot(&self) -> Captured {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn accept(&self, buf: &[u8]) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.capacity.saturating_sub(state.bytes.len());
        let kept = room.min(buf.len());
        state.bytes.extend_from_slice(&buf[..kept]);
        state.dropped += (buf.len() - kept) as u64;
    }
}

impl AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.accept(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_and_counts_the_rest() {
        let pipe = CappedPipe::new(4);
        pipe.accept(b"abc");
        pipe.accept(b"defg");
        let captured = pipe.take();
        assert_eq!(captured.bytes, b"abcd");
        assert_eq!(captured.dropped, 3);
    }
}
