//! What one call's memory may grow to: its own limit (per instance, the
//! sum over all its memories), and the host-wide budget all live instances
//! share, which calls wait for room in before they start.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use wasmtime::ResourceLimiter;

/// A call is admitted (instantiated) only when at least this much of the
/// budget is free: the first memory of a small gadget fits in it; a call
/// that needs more and cannot get it fails with a clear error.
pub const ADMISSION_HEADROOM: u64 = 16 << 20;

/// Linear memory in use by all live instances, against the host's budget.
/// Instances grow into it (the limiter refuses growth past it) and give it
/// back when their store is dropped; calls wait for room to start.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    pub(crate) limit: u64,
    pub(crate) used: std::sync::atomic::AtomicU64,
    pub(crate) freed: tokio::sync::Notify,
}

impl MemoryBudget {
    pub(crate) fn try_take(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    pub(crate) fn give_back(&self, bytes: u64) {
        if bytes > 0 {
            self.used.fetch_sub(bytes, Ordering::AcqRel);
            self.freed.notify_waiters();
        }
    }

    /// Waits until a call could start (admission control).
    pub(crate) async fn room_to_start(&self) {
        let headroom = ADMISSION_HEADROOM.min(self.limit);
        loop {
            let freed = self.freed.notified();
            if self.used.load(Ordering::Acquire) + headroom <= self.limit {
                return;
            }
            freed.await;
        }
    }
}

/// Memory, table and instance limits for one store. Memory is limited per
/// instance (the sum over all its memories), not per memory, so a component
/// with several memories cannot multiply its allowance.
pub(crate) struct CallLimiter {
    pub(crate) memory_limit: u64,
    pub(crate) memory_total: u64,
    /// Set when a growth was refused: the trap that usually follows (the
    /// guest's allocator aborts) is then reported as a memory-limit error.
    pub(crate) memory_refused: bool,
    /// The host-wide budget this instance's memory is taken from.
    pub(crate) budget: Arc<MemoryBudget>,
    /// Set when a growth within the call's own limit was refused because
    /// the host's budget was spent by other calls.
    pub(crate) budget_refused: bool,
    pub(crate) table_elements: usize,
    pub(crate) instances: usize,
}

impl Drop for CallLimiter {
    fn drop(&mut self) {
        self.budget.give_back(self.memory_total);
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current) as u64;
        if self.memory_total.saturating_add(growth) > self.memory_limit {
            self.memory_refused = true;
            return Ok(false);
        }
        if !self.budget.try_take(growth) {
            self.budget_refused = true;
            return Ok(false);
        }
        self.memory_total += growth;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= self.table_elements)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        gadget_core::limits::DEFAULT_TABLES
    }

    fn memories(&self) -> usize {
        gadget_core::limits::DEFAULT_MEMORIES
    }
}
