//! The `gadget` binary: see `gadget --help`.

/// Allocations at least this large are mapped on their own and returned
/// to the system when freed. glibc otherwise raises this threshold after
/// each large free (up to 32 MiB), so the multi-megabyte strings a hostile
/// gadget hands over (refused, then dropped) would be carved from the heap
/// and pin memory for the rest of a long session.
const MMAP_THRESHOLD_BYTES: libc::c_int = 1 << 20;

fn main() -> std::process::ExitCode {
    // SAFETY: mallopt only sets an allocator parameter; called before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
    gadget_host::cli::main()
}
