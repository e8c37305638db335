//! The `gadget` binary: see `gadget --help`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

/// mimalloc, not glibc's malloc, except in the compiling child process.
///
/// The executor hands every call's parameters to a runner thread and takes
/// its result back, so memory is routinely freed on another thread than
/// the one that allocated it. glibc then takes the owning arena's lock,
/// and with a call every few microseconds on each core that lock is
/// contended: futex waits and wakes were most of the system calls, and the
/// executor ran at about half the bare runtime's calls per second on two
/// cores. mimalloc frees to the owning thread's list without a lock, and
/// returns freed memory to the system on its own, so the multi-megabyte
/// strings a hostile gadget hands over do not pin memory for the rest of a
/// long session (tests/session_memory.rs).
///
/// The compiling child (`gadget __compile`) runs under `RLIMIT_DATA`, the
/// operator's compile memory budget, which mimalloc's arena commits (128
/// MiB and up) would exceed at once: its parent sets
/// [`SYSTEM_ALLOCATOR_ENV`](gadget_host::cli::SYSTEM_ALLOCATOR_ENV), and the
/// choice is made at the first allocation, before any memory exists that
/// the other allocator could be asked to free.
struct HostAllocator;

const UNDECIDED: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

static CHOSEN: AtomicU8 = AtomicU8::new(UNDECIDED);

impl HostAllocator {
    fn system(&self) -> bool {
        match CHOSEN.load(Ordering::Relaxed) {
            MIMALLOC => false,
            SYSTEM => true,
            _ => {
                // SAFETY: getenv reads the environment without allocating;
                // nothing modifies the environment this early.
                let system = unsafe {
                    !libc::getenv(gadget_host::cli::SYSTEM_ALLOCATOR_ENV.as_ptr()).is_null()
                };
                CHOSEN.store(if system { SYSTEM } else { MIMALLOC }, Ordering::Relaxed);
                system
            }
        }
    }
}

// SAFETY: every call goes to one allocator, the same for the whole life of
// the process (chosen before the first allocation), which upholds
// GlobalAlloc's contract itself.
unsafe impl GlobalAlloc for HostAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe {
            if self.system() {
                System.alloc(layout)
            } else {
                mimalloc::MiMalloc.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe {
            if self.system() {
                System.alloc_zeroed(layout)
            } else {
                mimalloc::MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from the same allocator (see above).
        unsafe {
            if self.system() {
                System.dealloc(ptr, layout)
            } else {
                mimalloc::MiMalloc.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from the same allocator (see above).
        unsafe {
            if self.system() {
                System.realloc(ptr, layout, new_size)
            } else {
                mimalloc::MiMalloc.realloc(ptr, layout, new_size)
            }
        }
    }
}

#[global_allocator]
static ALLOCATOR: HostAllocator = HostAllocator;

/// How long mimalloc keeps freed memory before it returns it to the
/// system, in milliseconds: short, so the resident memory of a long
/// session follows what it holds (about 95 MiB over the hostile session
/// test, against about 140 MiB with mimalloc's default of a second), at no
/// cost measurable in calls per second.
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// `mi_option_purge_delay` in mimalloc.h (15 since mimalloc 2.1, 3.x
/// included), which the bindings crate does not name.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> std::process::ExitCode {
    // SAFETY: sets one of mimalloc's options; harmless if the system
    // allocator was chosen.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
    gadget_host::cli::main()
}
