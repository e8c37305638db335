//! The abort signal of a response's running calls.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Raises the abort signal of every call of the response running now
/// (Ctrl-C, a server's shutdown). Calls not started yet are not affected;
/// to stop reading, end the chunk stream.
#[derive(Clone, Default)]
pub struct AbortHandle {
    current: Arc<Mutex<Arc<AtomicBool>>>,
}

impl AbortHandle {
    /// Raises the abort signal of the running response's calls.
    pub fn abort(&self) {
        self.current().store(true, Ordering::Relaxed);
    }

    pub(crate) fn current(&self) -> Arc<AtomicBool> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A fresh signal for a new response.
    pub(crate) fn renew(&self) -> Arc<AtomicBool> {
        let fresh = Arc::new(AtomicBool::new(false));
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        fresh
    }
}
