//! Compiling components in a child process under a memory limit.
//!
//! Cranelift's memory cannot be capped inside the host's own process, and
//! an adversarial component can make it take far more than any instance
//! limit says. So `gadget` compiles each component (on a cache miss) in a
//! child copy of itself, `gadget __compile`, with its data segment capped
//! by `RLIMIT_DATA` (not `RLIMIT_AS`: address-space reservations are not
//! memory) and its wall time by the loader's timeout. The child reads the
//! component on stdin and writes wasmtime's precompiled form on stdout;
//! the host loads that as it loads a cache entry.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gadget_runtime::loader::{COMPILE_TIMEOUT, ExternalCompiler};
use gadget_runtime::{Runtime, RuntimeConfig};

/// Set (to anything) in the environment of the compiling child process
/// (`gadget __compile`): the binary then allocates with the system's
/// allocator, whose use of memory `RLIMIT_DATA` bounds closely. mimalloc,
/// the binary's allocator otherwise, commits its arenas in 128 MiB to
/// 1 GiB steps, so under a budget of 64 MiB it could not compile even a
/// small component (see src/main.rs).
pub const SYSTEM_ALLOCATOR_ENV: &std::ffi::CStr = c"GADGET_SYSTEM_ALLOCATOR";

/// The hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "__compile";

/// The child: component bytes on stdin, precompiled bytes on stdout.
pub fn child() -> ExitCode {
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("error: reading the component: {e}");
        return ExitCode::FAILURE;
    }
    // No pooling: the child instantiates nothing, and its precompiled code
    // is what any engine of the same configuration accepts.
    let config = RuntimeConfig {
        pooling: false,
        ..RuntimeConfig::default()
    };
    let artifact = Runtime::new(&config)
        .map_err(|e| e.to_string())
        .and_then(|runtime| runtime.precompile(&bytes).map_err(|e| e.to_string()));
    match artifact {
        Ok(artifact) => match std::io::stdout().lock().write_all(&artifact) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: writing the compiled component: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A compiler that runs `gadget __compile` with `memory_bytes` of data.
pub fn in_child(memory_bytes: u64) -> Option<ExternalCompiler> {
    let exe = std::env::current_exe().ok()?;
    Some(ExternalCompiler(Arc::new(move |bytes: &[u8]| {
        compile_in_child(&exe, bytes, memory_bytes)
    })))
}

fn compile_in_child(
    exe: &std::path::Path,
    bytes: &[u8],
    memory_bytes: u64,
) -> Result<Vec<u8>, String> {
    let mut command = Command::new(exe);
    command
        .arg(SUBCOMMAND)
        .env_remove("RUST_LOG")
        .env(SYSTEM_ALLOCATOR_ENV.to_str().unwrap_or_default(), "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let limit = libc::rlimit {
        rlim_cur: memory_bytes as libc::rlim_t,
        rlim_max: memory_bytes as libc::rlim_t,
    };
    // SAFETY: between fork and exec the closure only calls setrlimit, which
    // is async-signal-safe, and touches no lock or allocation.
    unsafe {
        command.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start the compiler process: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).map(|_| out)
    });
    let mut stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = (&mut stderr).take(64 << 10).read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + COMPILE_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "compiling took longer than {} s; refusing it",
                    COMPILE_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for the compiler process: {e}")),
        }
    };
    let _ = writer.join();
    let artifact = reader
        .join()
        .map_err(|_| "the compiler's output was lost".to_string());
    let stderr = errors.join().unwrap_or_default();
    if !status.success() {
        let ran_out = stderr.contains("memory allocation") || stderr.contains("out of memory");
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        return Err(if ran_out {
            format!(
                "compiling needed more than its memory budget of {} MiB ([limits] compile-memory-mib in the policy file); refusing it",
                memory_bytes >> 20
            )
        } else {
            format!("compiling failed ({status}): {last}")
        });
    }
    artifact?.map_err(|e| format!("reading the compiled component: {e}"))
}
