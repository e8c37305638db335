//! The processes of stdio MCP servers, and their ending: each server runs
//! in a process group of its own and carries a mark in its environment
//! that everything it starts inherits; ending a server kills its group,
//! then every process of this user's that still carries its mark (what
//! moved to a session or group of its own, such as a daemon). What
//! survives: a descendant that clears its environment *and* leaves the
//! group, and everything when the host itself is killed with SIGKILL (no
//! code of its runs then).

use std::sync::Mutex;

/// The environment variable that marks a stdio server and everything it
/// starts: a descendant that moves to a session or group of its own keeps
/// its environment, and so the mark the host ends it by.
pub const SERVER_MARK_VAR: &str = "GADGET_MCP_SERVER_MARK";

/// The largest `/proc/PID/environ` read while looking for marks: far
/// more than any environment holds.
const MAX_ENVIRON_BYTES: u64 = 1 << 20;

/// A mark no other server of any host process shares: this process's id
/// and a count.
pub(crate) fn server_mark() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// A stdio server's process group (its leader's pid) and its mark: while
/// it lives, it is listed for [`end_every_server`]; dropped, the whole
/// group and every process that carries the mark are killed.
pub(crate) struct ProcessGroup {
    pid: u32,
    mark: String,
}

/// The process groups (and marks) of the stdio servers running now.
fn live_groups() -> &'static Mutex<Vec<(u32, String)>> {
    static GROUPS: std::sync::OnceLock<Mutex<Vec<(u32, String)>>> = std::sync::OnceLock::new();
    GROUPS.get_or_init(|| Mutex::new(Vec::new()))
}

impl ProcessGroup {
    pub(crate) fn new(pid: u32, mark: String) -> ProcessGroup {
        live_groups()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((pid, mark.clone()));
        ProcessGroup { pid, mark }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        live_groups()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(pid, _)| *pid != self.pid);
        end_server(self.pid, &self.mark);
    }
}

/// Kills a server's process group, then every process still carrying its
/// mark (two passes: one may have started another as the first ran).
fn end_server(pid: u32, mark: &str) {
    kill_group(pid);
    for _ in 0..2 {
        if kill_marked(mark) == 0 {
            break;
        }
    }
}

/// Kills every process of this user's whose environment holds `mark`;
/// how many were found. Linux only (`/proc`); elsewhere the group alone
/// is ended.
fn kill_marked(mark: &str) -> usize {
    #[cfg(target_os = "linux")]
    {
        use std::io::Read as _;
        let needle = format!("{SERVER_MARK_VAR}={mark}");
        let own = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        let mut found = 0;
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            if pid <= 1 || pid as u32 == own {
                continue;
            }
            // Another user's process cannot be read, nor be ours to end.
            let Ok(file) = std::fs::File::open(entry.path().join("environ")) else {
                continue;
            };
            let mut environ = Vec::new();
            if file
                .take(MAX_ENVIRON_BYTES)
                .read_to_end(&mut environ)
                .is_err()
            {
                continue;
            }
            if environ
                .split(|&b| b == 0)
                .any(|var| var == needle.as_bytes())
            {
                found += 1;
                // SAFETY: kill has no memory preconditions; a process gone
                // meanwhile is an error it returns, not a fault.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        found
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = mark;
        0
    }
}

fn kill_group(pid: u32) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(pid)
        && pid > 1
    {
        // SAFETY: killpg has no memory preconditions; a group that is gone
        // already is an error it returns, not a fault.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
}

/// Kills every stdio server this process started, its process group and
/// every process carrying its mark (what they started, in whatever
/// session): for a front end that ends on a signal, where no destructor
/// runs.
pub fn end_every_server() {
    let groups = std::mem::take(&mut *live_groups().lock().unwrap_or_else(|p| p.into_inner()));
    for (pid, mark) in groups {
        end_server(pid, &mark);
    }
}
