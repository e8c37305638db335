//! A call's time: its deadline on the epoch clock and the wall clock, the
//! grace period after it, and the abort signal (raised at the deadline or
//! from outside), as the epoch callback and the host imports read them.

use gadget_core::signal::AbortSignal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::UpdateDeadline;

use crate::epoch::EpochClock;

/// A busy gadget yields to the executor at least this often (ticks = ms),
/// so a loop in one gadget cannot starve the other calls on its thread.
pub const YIELD_INTERVAL_TICKS: u64 = 2;

/// One call's deadline and abort signal.
pub(crate) struct CallTime {
    pub(crate) clock: EpochClock,
    pub(crate) started_epoch: u64,
    pub(crate) deadline_epoch: u64,
    /// The same deadline on the wall clock. The epoch ticker can fall a
    /// tick or two behind on a loaded machine, while a completion or an
    /// HTTP request ends on a wall-clock timer: whether a call stopped at
    /// its deadline asks both.
    pub(crate) deadline: Instant,
    pub(crate) hard_deadline_epoch: u64,
    pub(crate) grace_ticks: u64,
    /// The abort signal the gadget reads through `cancelled`.
    pub(crate) aborted: bool,
    /// Cancellation from outside (the run); raises the abort signal.
    pub(crate) signal: Option<AbortSignal>,
    /// The epoch callback trapped the call at the hard deadline.
    pub(crate) timed_out: bool,
    /// Time spent waiting for answers (the `ask` import), which is not the
    /// gadget's: shared with the runtime's outer timer, which moves by it.
    pub(crate) pauses: Pauses,
}

/// The time a call spent waiting for answers: done waits, and the one in
/// progress.
#[derive(Clone, Default)]
pub(crate) struct Pauses(Arc<Mutex<PauseClock>>);

#[derive(Default)]
struct PauseClock {
    total: Duration,
    since: Option<Instant>,
}

impl Pauses {
    /// All the time paused so far, the wait in progress included.
    pub(crate) fn paused(&self) -> Duration {
        let clock = self.0.lock().unwrap_or_else(|p| p.into_inner());
        clock.total + clock.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    fn begin(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).since = Some(Instant::now());
    }

    fn end(&self) -> Duration {
        let mut clock = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let waited = clock.since.take().map_or(Duration::ZERO, |s| s.elapsed());
        clock.total += waited;
        waited
    }
}

impl CallTime {
    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.clock.now().saturating_sub(self.started_epoch)
    }

    /// Milliseconds until the deadline (0 once it has passed).
    pub(crate) fn time_left_ms(&self) -> u64 {
        self.deadline_epoch.saturating_sub(self.clock.now())
    }

    pub(crate) fn externally_cancelled(&self) -> bool {
        self.signal.as_ref().is_some_and(AbortSignal::is_raised)
    }

    /// The deadline has passed, on either clock.
    pub(crate) fn deadline_passed(&self) -> bool {
        self.clock.now() >= self.deadline_epoch || Instant::now() >= self.deadline
    }

    /// The call starts waiting for answers: its clocks stop.
    pub(crate) fn pause(&mut self) -> u64 {
        self.pauses.begin();
        self.clock.now()
    }

    /// The wait that began at epoch `from` ended: every deadline moves by
    /// it, so the gadget has as much time left as it had when it asked.
    pub(crate) fn resume(&mut self, from: u64) {
        let waited = self.pauses.end();
        let ticks = self.clock.now().saturating_sub(from);
        self.deadline_epoch += ticks;
        self.hard_deadline_epoch += ticks;
        self.deadline += waited;
    }

    /// Runs at every epoch deadline: raise the abort signal at the
    /// deadline, trap at deadline + grace, and otherwise yield so other
    /// calls get the thread.
    pub(crate) fn on_epoch_deadline(&mut self) -> UpdateDeadline {
        let now = self.clock.now();
        if self.externally_cancelled() && !self.aborted {
            self.aborted = true;
            self.hard_deadline_epoch = self.hard_deadline_epoch.min(now + self.grace_ticks);
        }
        if now >= self.hard_deadline_epoch {
            self.timed_out = true;
            return UpdateDeadline::Interrupt;
        }
        if now >= self.deadline_epoch {
            self.aborted = true;
        }
        let next = if now < self.deadline_epoch {
            self.deadline_epoch
        } else {
            self.hard_deadline_epoch
        };
        UpdateDeadline::Yield((next - now).clamp(1, YIELD_INTERVAL_TICKS))
    }
}
