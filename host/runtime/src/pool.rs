//! The pooling allocator's configuration: how many instances, of what
//! size, and what stays resident between calls.

/// Instances the pooling allocator holds at once: the most calls (plus
/// plugin loads) in flight. A call past it fails with an explicit
/// "too many calls in flight" error rather than waiting.
pub const POOL_CONCURRENT_INSTANCES: u32 = 1_000;

/// The pooling allocator's configuration (public so benchmarks can give
/// a bare-wasmtime baseline the same allocator).
pub fn pooling_config() -> wasmtime::PoolingAllocationConfig {
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    let n = POOL_CONCURRENT_INSTANCES;
    // A component instance holds several core instances (CPython's holds
    // dozens), a few memories and tables, and one async stack.
    pool.total_component_instances(n)
        .total_core_instances(n * 16)
        .total_memories(n * 2)
        .total_tables(n * 4)
        .total_stacks(n)
        .table_elements(gadget_core::limits::DEFAULT_TABLE_ELEMENTS)
        .max_memory_size(gadget_core::limits::HARD_MAX_MEMORY_BYTES as usize)
        // Reset only the pages a call dirtied (Linux 6.7+, PAGEMAP_SCAN)
        // and keep them mapped, instead of `madvise` over the whole slot.
        .pagemap_scan(wasmtime::Enabled::Auto)
        .linear_memory_keep_resident(POOL_KEEP_RESIDENT_BYTES)
        .table_keep_resident(POOL_KEEP_RESIDENT_BYTES)
        // Return freed pages to the kernel in batches, not one call at a time.
        .decommit_batch_size(POOL_DECOMMIT_BATCH);
    pool
}

/// Bytes of each pooled memory and table kept resident between calls
/// (dirty pages found by PAGEMAP_SCAN are reset in place): a small Rust
/// gadget's working set.
pub const POOL_KEEP_RESIDENT_BYTES: usize = 64 << 10;

/// Slots decommitted together.
pub const POOL_DECOMMIT_BATCH: usize = 1;
