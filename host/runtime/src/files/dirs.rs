//! Granted directories: held open from load, guarded on every call.
//!
//! A grant is a *directory*, not a path. Re-opening a granted path on each
//! call would follow whatever sits there now: a gadget that can write the
//! parent of a granted directory (its own rw grant, or another plugin's)
//! could move the directory away and leave a symlink in its place, and from
//! the next call the grant would be wherever the link points. So each
//! granted directory is opened once, when its grant is resolved
//! ([`OpenedDir`](crate::grants::OpenedDir)), and every call's preopen is made from that handle
//! (`/proc/self/fd/N` names the open directory itself, wherever it now is).
//! Where the system cannot name a handle, the path is re-opened only while
//! it is still the same directory (device and inode) and not a symlink.
//!
//! Inside a call, the shims (`shims.rs`) put a guard in front of the
//! WASI filesystem operations that create or grow things:
//! - a symlink's target may not climb (`..`) or be absolute: a link a
//!   gadget plants must not lead a later reader (another gadget's call, or
//!   any program of the host's) out of the grant;
//! - each read-write grant has a quota per call of bytes written and of
//!   entries created ([`WriteQuota`](crate::grants::WriteQuota)); past it the gadget gets WASI's
//!   `quota` error and the call's log says which quota was spent.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::bindings::filesystem::types::{Descriptor, ErrorCode};
use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError, StreamResult};

use super::log::{FileLog, StreamLog};
use crate::grants::WriteQuota;

/// Grants that lie inside a directory some plugin may write, one note per
/// such grant, for the plugin that holds it: `grants` is each plugin's name
/// and directories. Held handles keep the grant from being re-pointed, but
/// the writer can still change what is in it, and the operator should know.
pub fn nested_grant_notes(grants: &[(&str, &[crate::grants::DirGrant])]) -> Vec<(usize, String)> {
    let mut notes = Vec::new();
    for (inner_plugin, (inner_name, inner)) in grants.iter().enumerate() {
        for dir in inner.iter() {
            let writers = grants.iter().flat_map(|(name, outer)| {
                outer
                    .iter()
                    .filter(|o| {
                        o.mode == crate::manifest::FileMode::ReadWrite
                            && o.host != dir.host
                            && dir.host.starts_with(&o.host)
                    })
                    .map(move |o| (name, o))
            });
            for (writer, outer) in writers {
                let whose = if writer == inner_name {
                    "its own read-write grant".to_string()
                } else {
                    format!("plugin {writer}'s read-write grant")
                };
                notes.push((
                    inner_plugin,
                    format!(
                        "files {} ({}) lies inside {} ({}): it is held open from load, so it cannot be re-pointed, but those calls can change what is in it; grant disjoint directories to keep them apart",
                        dir.guest,
                        dir.host.display(),
                        outer.host.display(),
                        whose
                    ),
                ));
            }
        }
    }
    notes
}

/// One read-write grant's use during one call. Shared with the file
/// streams the call opens (they outlive any one host call).
#[derive(Debug)]
pub(super) struct GrantUse {
    guest: String,
    quota: WriteQuota,
    written: AtomicU64,
    created: AtomicU64,
    reported: AtomicBool,
    notes: crate::notes::Notes,
}

impl GrantUse {
    pub(super) fn charge_bytes(&self, bytes: u64) -> Result<(), ErrorCode> {
        let before = self.written.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > self.quota.bytes {
            self.written.fetch_sub(bytes, Ordering::Relaxed);
            self.report(format!(
                "files {}: the call's write quota of {} bytes is spent: further writes fail (raise it with write-quota-mib on the grant)",
                self.guest, self.quota.bytes
            ));
            return Err(ErrorCode::Quota);
        }
        Ok(())
    }

    fn remaining_bytes(&self) -> u64 {
        self.quota
            .bytes
            .saturating_sub(self.written.load(Ordering::Relaxed))
    }

    pub(super) fn charge_entry(&self) -> Result<(), ErrorCode> {
        let before = self.created.fetch_add(1, Ordering::Relaxed);
        if before >= self.quota.entries {
            self.created.fetch_sub(1, Ordering::Relaxed);
            self.report(format!(
                "files {}: the call's quota of {} created files and directories is spent: further creations fail (raise it with max-entries on the grant)",
                self.guest, self.quota.entries
            ));
            return Err(ErrorCode::Quota);
        }
        Ok(())
    }

    fn report(&self, note: String) {
        if !self.reported.swap(true, Ordering::Relaxed) {
            self.notes.refused("", &note);
        }
    }
}

/// The filesystem side of one call: which grant each open descriptor
/// belongs to, and each read-write grant's use.
#[derive(Debug, Default)]
pub(crate) struct CallFiles {
    /// By guest path, for the read-write grants only.
    pub(super) grants: HashMap<String, Arc<GrantUse>>,
    /// Descriptor (resource index) to its read-write grant.
    pub(super) descriptors: HashMap<u32, Arc<GrantUse>>,
    /// The call's notes (shown in its log when it ends).
    notes: crate::notes::Notes,
    /// What the call's observer is told of its file operations.
    pub(crate) log: FileLog,
}

impl CallFiles {
    pub(crate) fn new(
        grants: &[crate::grants::DirGrant],
        notes: crate::notes::Notes,
        observer: Option<gadget_core::ledger::CallObserver>,
    ) -> CallFiles {
        let log = FileLog::new(grants, observer);
        let grants = grants
            .iter()
            .filter(|g| g.mode == crate::manifest::FileMode::ReadWrite)
            .map(|g| {
                (
                    g.guest.clone(),
                    Arc::new(GrantUse {
                        guest: g.guest.clone(),
                        quota: g.quota,
                        written: AtomicU64::new(0),
                        created: AtomicU64::new(0),
                        reported: AtomicBool::new(false),
                        notes: notes.clone(),
                    }),
                )
            })
            .collect();
        CallFiles {
            grants,
            descriptors: HashMap::new(),
            notes,
            log,
        }
    }

    pub(super) fn refused(&self, what: &str, reason: &str) {
        self.notes.refused(what, reason);
    }

    pub(super) fn grant_of(&self, fd: &Resource<Descriptor>) -> Option<Arc<GrantUse>> {
        self.descriptors.get(&fd.rep()).cloned()
    }

    /// Charges one created entry to the grant `fd` is in (nothing to
    /// charge outside a read-write grant).
    pub(super) fn charge_entry(&self, fd: &Resource<Descriptor>) -> Result<(), ErrorCode> {
        match self.descriptors.get(&fd.rep()) {
            Some(grant) => grant.charge_entry(),
            None => Ok(()),
        }
    }
}

/// Why a symlink target is refused, if it is: absolute, or climbing.
pub fn check_symlink_target(target: &str) -> Result<(), String> {
    if target.is_empty() {
        return Err("an empty symlink target".into());
    }
    if target.starts_with('/') || target.starts_with('\\') {
        return Err(format!("the symlink target {target:?} is absolute"));
    }
    if target.split(['/', '\\']).any(|part| part == "..") {
        return Err(format!(
            "the symlink target {target:?} climbs with `..`: a link may point down into the grant, never up"
        ));
    }
    Ok(())
}

/// A file stream that charges what it writes to its grant's quota (a
/// read-write grant), and counts it for the call's observer.
pub(super) struct QuotaStream {
    pub(super) inner: DynOutputStream,
    pub(super) grant: Option<Arc<GrantUse>>,
    pub(super) log: Option<StreamLog>,
}

impl QuotaStream {
    fn charge(&mut self, bytes: u64) -> StreamResult<()> {
        if let Some(grant) = &self.grant {
            grant.charge_bytes(bytes).map_err(|_| quota_error())?;
        }
        if let Some(log) = &mut self.log {
            log.bytes = log.bytes.saturating_add(bytes);
        }
        Ok(())
    }
}

fn quota_error() -> StreamError {
    StreamError::LastOperationFailed(std::io::Error::from(std::io::ErrorKind::QuotaExceeded).into())
}

#[wasmtime_wasi::async_trait]
impl Pollable for QuotaStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for QuotaStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.charge(bytes.len() as u64)?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        let permitted = self.inner.check_write()?;
        let Some(grant) = &self.grant else {
            return Ok(permitted);
        };
        let remaining = grant.remaining_bytes();
        if remaining == 0 && permitted > 0 {
            // Zero would mean "wait", and the guest would wait forever.
            let _ = grant.charge_bytes(1);
            return Err(quota_error());
        }
        Ok(permitted.min(usize::try_from(remaining).unwrap_or(usize::MAX)))
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        self.charge(nelem as u64)?;
        self.inner.write_zeroes(nelem)
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::OpenedDir;

    #[test]
    fn symlink_targets_may_point_down_never_up_or_out() {
        for fine in ["a", "a/b", "./a", "a/./b", "...", "a..b/c"] {
            assert!(check_symlink_target(fine).is_ok(), "{fine}");
        }
        for refused in [
            "",
            "/etc",
            "..",
            "../x",
            "a/../../x",
            "a/..",
            "\\etc",
            "a\\..\\b",
        ] {
            assert!(check_symlink_target(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn a_held_directory_stays_itself_when_its_path_is_re_pointed() {
        let root = tempfile::tempdir().unwrap();
        let granted = root.path().join("granted");
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir(&granted).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(granted.join("mine"), "granted").unwrap();
        std::fs::write(elsewhere.join("theirs"), "not granted").unwrap();
        let opened = OpenedDir::open(&granted.canonicalize().unwrap()).unwrap();

        // The attack: move the granted directory away, leave a relative
        // symlink to somewhere else in its place.
        std::fs::rename(&granted, root.path().join("moved")).unwrap();
        std::os::unix::fs::symlink("elsewhere", &granted).unwrap();

        match opened.call_path() {
            Ok(path) => {
                assert!(path.join("mine").exists(), "{}", path.display());
                assert!(!path.join("theirs").exists(), "{}", path.display());
            }
            Err(message) => assert!(message.contains("moved or replaced"), "{message}"),
        }
        let elsewhere_opened = OpenedDir::open(&elsewhere).unwrap();
        assert!(!opened.same_directory(&elsewhere_opened));
    }
}
