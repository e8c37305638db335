//! The abort signal of a response's running calls.

use std::sync::Arc;
use std::sync::Mutex;

use gadget_core::signal::AbortSignal;

/// Stops the response running now (Ctrl-C, SIGTERM, a server's
/// shutdown): the executor reads no more of it, skips every call not
/// started yet, and raises the abort signal of the running ones.
#[derive(Clone, Default)]
pub struct AbortHandle {
    current: Arc<Mutex<AbortSignal>>,
    /// Wakes the executor's loop for an abort from outside (stop-on-error
    /// raises the calls' signal too, but is no interruption of the
    /// response).
    wake: Arc<tokio::sync::Notify>,
}

impl AbortHandle {
    /// Stops the running response: its calls not started are skipped, its
    /// running calls get the abort signal.
    pub fn abort(&self) {
        self.current().raise();
        self.wake.notify_one();
    }

    /// What [`Self::abort`] wakes (a stale wake-up with the signal down is
    /// ignored).
    pub(crate) fn woken(&self) -> Arc<tokio::sync::Notify> {
        self.wake.clone()
    }

    pub(crate) fn current(&self) -> AbortSignal {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A fresh signal for a new response.
    pub(crate) fn renew(&self) -> AbortSignal {
        let fresh = AbortSignal::new();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        fresh
    }
}
