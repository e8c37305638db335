//! The `gadget` binary: see `gadget --help`.

/// mimalloc, not glibc's malloc. The executor hands every call's
/// parameters to a runner thread and takes its result back, so memory is
/// routinely freed on another thread than the one that allocated it. glibc
/// then takes the owning arena's lock, and with a call every few
/// microseconds on each core that lock is contended: futex waits and wakes
/// were most of the system calls, and the executor ran at about half the
/// bare runtime's calls per second on two cores. mimalloc frees to the
/// owning thread's list without a lock. It also returns freed memory to
/// the system on its own (large blocks at once, the rest after a short
/// delay), so the multi-megabyte strings a hostile gadget hands over do
/// not pin memory for the rest of a long session (tests/session_memory.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    gadget_host::cli::main()
}
