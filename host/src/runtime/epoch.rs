//! The engine's clock: the epoch counter, kept equal to the milliseconds
//! since the engine started.
//!
//! wasmtime checks the epoch at function entries and loop back-edges; every
//! store's deadline is "epoch N". One ticker thread per engine advances the
//! epoch from `Instant` (so missed wake-ups are caught up, never lost:
//! a 1 ms sleep that takes 1.1 ms still yields the right count), which
//! makes a deadline of `now + timeout_ms` fire within a tick of wall time.
//!
//! Tests can use [`EpochMode::Manual`] and advance the clock by hand, which
//! makes timeout tests deterministic.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
            }),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let thread = match mode {
            EpochMode::Manual => None,
            EpochMode::Ticker => {
                let clock = clock.clone();
                let stop = stop.clone();
                Some(
                    std::thread::Builder::new()
                        .name("gadget-epoch".into())
                        .spawn(move || tick(clock, stop))?,
                )
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
    let start = Instant::now();
    let mut published: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(EPOCH_TICK);
        let Some(engine) = clock.inner.engine.upgrade() else {
            return;
        };
        let target = start.elapsed().as_millis() as u64;
        // Catch up every tick the sleep overshot, so epoch == elapsed ms.
        while published < target {
            engine.increment_epoch();
            published += 1;
        }
        clock.inner.now.store(published, Ordering::Release);
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
