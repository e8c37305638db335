//! The engine's clock: the epoch counter, one tick per millisecond while
//! calls run.
//!
//! wasmtime checks the epoch at function entries and loop back-edges; every
//! store's deadline is "epoch N". One ticker thread per engine advances the
//! epoch from `Instant` (so missed wake-ups are caught up, never lost:
//! a 1 ms sleep that takes 1.1 ms still yields the right count), which
//! makes a deadline of `now + timeout_ms` fire within a tick of wall time.
//!
//! While no call is running the ticker parks instead of waking 1,000 times
//! a second, so an idle host costs no CPU. Deadlines are relative to the
//! epoch when a call starts, so the epoch standing still while nothing runs
//! changes no deadline; it just means the epoch counts milliseconds of
//! activity, not milliseconds since start.
//!
//! Tests can use [`EpochMode::Manual`] and advance the clock by hand, which
//! makes timeout tests deterministic.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wasmtime::{Engine, EngineWeak};

/// How often the ticker wakes. One millisecond is the epoch's unit, so a
/// deadline fires at most about one tick late; the wake-up costs a few
/// microseconds, well under 1% of a core (measured by the `runtime` bench).
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Who advances the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EpochMode {
    /// A background thread, from wall time (production).
    #[default]
    Ticker,
    /// Only [`EpochClock::advance`]: for deterministic tests. Outer
    /// wall-time timeouts are off in this mode, since time is whatever the
    /// test says it is.
    Manual,
}

/// The epoch as the host reads it. Cloned into every store's data so the
/// deadline callback and `call-info` can read "now" without the engine.
#[derive(Debug, Clone)]
pub struct EpochClock {
    inner: Arc<ClockInner>,
}

struct ClockInner {
    /// Mirrors the engine's epoch: ticks (ms) since start.
    now: AtomicU64,
    mode: EpochMode,
    engine: EngineWeak,
    /// Calls in flight; the ticker parks at zero.
    active: AtomicUsize,
    /// The ticker thread, to wake it when a call starts.
    ticker: std::sync::OnceLock<std::thread::Thread>,
}

impl std::fmt::Debug for ClockInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClockInner")
            .field("now", &self.now)
            .field("mode", &self.mode)
            .finish()
    }
}

impl EpochClock {
    /// The epoch now, in ticks (milliseconds) since the engine started.
    pub fn now(&self) -> u64 {
        self.inner.now.load(Ordering::Acquire)
    }

    pub fn mode(&self) -> EpochMode {
        self.inner.mode
    }

    /// Marks a call as running until the guard drops: the ticker runs
    /// while any call does.
    pub fn activity(&self) -> ActivityGuard {
        if self.inner.active.fetch_add(1, Ordering::AcqRel) == 0
            && let Some(thread) = self.inner.ticker.get()
        {
            thread.unpark();
        }
        ActivityGuard {
            clock: self.clone(),
        }
    }

    /// Advances the clock by `ticks` milliseconds: the manual mode's only
    /// way forward; in ticker mode it adds to wall time (tests only).
    pub fn advance(&self, ticks: u64) {
        if let Some(engine) = self.inner.engine.upgrade() {
            for _ in 0..ticks {
                engine.increment_epoch();
            }
        }
        self.inner.now.fetch_add(ticks, Ordering::AcqRel);
    }
}

/// Keeps the ticker running while a call is in flight.
#[derive(Debug)]
pub struct ActivityGuard {
    clock: EpochClock,
}

impl Drop for ActivityGuard {
    fn drop(&mut self) {
        self.clock.inner.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Owns the ticker thread; stops it when dropped.
#[derive(Debug)]
pub struct EpochTicker {
    clock: EpochClock,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub fn start(engine: &Engine, mode: EpochMode) -> std::io::Result<EpochTicker> {
        let clock = EpochClock {
            inner: Arc::new(ClockInner {
                now: AtomicU64::new(0),
                mode,
                engine: engine.weak(),
                active: AtomicUsize::new(0),
                ticker: std::sync::OnceLock::new(),
            }),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let thread = match mode {
            EpochMode::Manual => None,
            EpochMode::Ticker => {
                let ticking = clock.clone();
                let stop = stop.clone();
                let handle = std::thread::Builder::new()
                    .name("gadget-epoch".into())
                    .spawn(move || tick(ticking, stop))?;
                let _ = clock.inner.ticker.set(handle.thread().clone());
                Some(handle)
            }
        };
        Ok(EpochTicker {
            clock,
            stop,
            thread,
        })
    }

    pub fn clock(&self) -> &EpochClock {
        &self.clock
    }
}

fn tick(clock: EpochClock, stop: Arc<AtomicBool>) {
    // Ticks are counted from `resumed` (the last time the ticker woke from
    // idle), starting at the count published then.
    let mut resumed = Instant::now();
    let mut base: u64 = 0;
    let mut published: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        if clock.inner.active.load(Ordering::Acquire) == 0 {
            // Idle: sleep until a call starts (or the ticker is stopped).
            std::thread::park_timeout(IDLE_RECHECK);
            resumed = Instant::now();
            base = published;
            continue;
        }
        std::thread::sleep(EPOCH_TICK);
        let Some(engine) = clock.inner.engine.upgrade() else {
            return;
        };
        let target = base + resumed.elapsed().as_millis() as u64;
        // Catch up every tick the sleep overshot.
        while published < target {
            engine.increment_epoch();
            published += 1;
        }
        clock.inner.now.store(published, Ordering::Release);
    }
}

/// An idle ticker also wakes this often, as a backstop; it costs nothing
/// measurable and bounds the damage of any missed wake-up.
const IDLE_RECHECK: Duration = Duration::from_millis(500);

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
