//! The abort signal: raised once from outside (Ctrl-C, a client's
//! `notifications/cancelled`, a server's shutdown), read by the epoch
//! callback with [`AbortSignal::is_raised`] (one atomic load, no lock) and
//! awaited by everything else with [`AbortSignal::raised`], so nothing
//! sleeps in a loop to look at it.
//!
//! Plain `std`: the pure crate has no async runtime, and the signal needs
//! none (a flag, and the wakers of whoever waits).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// A flag raised once, which can be read at once and awaited. Clones
/// share it.
#[derive(Clone, Default)]
pub struct AbortSignal(Arc<Inner>);

#[derive(Default)]
struct Inner {
    raised: AtomicBool,
    /// Who waits, by the number their [`Raised`] drew: a waiter dropped
    /// before the signal takes its waker out.
    waiting: Mutex<Vec<(u64, Waker)>>,
    next: AtomicU64,
}

impl std::fmt::Debug for AbortSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AbortSignal")
            .field(&self.is_raised())
            .finish()
    }
}

impl AbortSignal {
    pub fn new() -> AbortSignal {
        AbortSignal::default()
    }

    /// Raises the signal and wakes everyone who awaits it.
    pub fn raise(&self) {
        if self.0.raised.swap(true, Ordering::AcqRel) {
            return;
        }
        let waiting = std::mem::take(&mut *self.lock());
        for (_, waker) in waiting {
            waker.wake();
        }
    }

    /// Whether the signal is up: one atomic load (the epoch callback reads
    /// it at every tick).
    pub fn is_raised(&self) -> bool {
        self.0.raised.load(Ordering::Acquire)
    }

    /// A future that is ready once the signal is up.
    pub fn raised(&self) -> Raised<'_> {
        Raised {
            signal: self,
            id: None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Waker)>> {
        self.0.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Waits for an [`AbortSignal`].
pub struct Raised<'a> {
    signal: &'a AbortSignal,
    id: Option<u64>,
}

impl Future for Raised<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.is_raised() {
            return Poll::Ready(());
        }
        let mut waiting = self.signal.lock();
        // Looked at again under the lock: `raise` takes the wakers under
        // it after setting the flag, so a waker added now is woken.
        if self.signal.is_raised() {
            return Poll::Ready(());
        }
        match self.id {
            Some(id) => {
                if let Some((_, waker)) = waiting.iter_mut().find(|(i, _)| *i == id) {
                    waker.clone_from(cx.waker());
                } else {
                    waiting.push((id, cx.waker().clone()));
                }
            }
            None => {
                let id = self.signal.0.next.fetch_add(1, Ordering::Relaxed);
                waiting.push((id, cx.waker().clone()));
                drop(waiting);
                self.id = Some(id);
            }
        }
        Poll::Pending
    }
}

impl Drop for Raised<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.signal.lock().retain(|(i, _)| *i != id);
        }
    }
}

/// Waits for `signal` when there is one; never ready without one.
pub async fn raised(signal: Option<&AbortSignal>) {
    match signal {
        Some(signal) => signal.raised().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Count(std::sync::atomic::AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiter_is_woken_once_when_the_signal_goes_up() {
        let signal = AbortSignal::new();
        let count = Arc::new(Count(Default::default()));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiting = std::pin::pin!(signal.raised());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        assert_eq!(signal.lock().len(), 1, "polled twice, registered once");
        signal.clone().raise();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(signal.is_raised());
        assert!(waiting.as_mut().poll(&mut cx).is_ready());
        signal.raise();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "raised once");
    }

    #[test]
    fn a_waiter_dropped_before_the_signal_leaves_nothing_behind() {
        let signal = AbortSignal::new();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        for _ in 0..100 {
            let mut waiting = std::pin::pin!(signal.raised());
            assert!(waiting.as_mut().poll(&mut cx).is_pending());
        }
        assert!(signal.lock().is_empty());
        assert!(!signal.is_raised());
    }

    #[test]
    fn waiting_on_no_signal_never_ends_and_on_one_ends_when_it_is_raised() {
        let signal = AbortSignal::new();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut one = std::pin::pin!(raised(Some(&signal)));
        assert!(one.as_mut().poll(&mut cx).is_pending());
        signal.raise();
        assert!(one.as_mut().poll(&mut cx).is_ready());
        let mut none = std::pin::pin!(raised(None));
        assert!(none.as_mut().poll(&mut cx).is_pending());
    }
}
