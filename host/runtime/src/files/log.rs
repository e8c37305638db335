//! What a call does in its granted directories, told to its observer as
//! [`Effect::File`]s (the audit journal's file records, `--json`'s
//! effects, the call's span events): each open and creation, read, write
//! (a stream's bytes told once, when it closes),
//! directory made, removal, rename and link, with the path as the gadget
//! sees it and as it is on the host, and every refusal.
//!
//! Every descriptor the call holds in a grant is known by its paths (from
//! the preopen down), so an operation on a descriptor names its file. The
//! guards in `dirs.rs` and the shims here report through [`FileLog`];
//! with no observer nothing is built. A call tells at most
//! [`MAX_FILE_EFFECTS_PER_CALL`]; the rest are counted, and the count is
//! told once when the call ends ([`Effect::Omitted`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use gadget_core::effect::{Door, Effect, FileOp};
use gadget_core::ledger::{CallEvent, CallObserver};
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::{DynInputStream, InputStream, Pollable, StreamResult};

/// The most file operations one call tells: as many as the journal keeps
/// of a call (a gadget making a million reads must not make a million
/// events).
pub const MAX_FILE_EFFECTS_PER_CALL: u64 = gadget_core::audit::MAX_RECORDS_PER_CALL;

/// One call's file operations, as its observer is told them.
#[derive(Default)]
pub(crate) struct FileLog {
    observer: Option<CallObserver>,
    /// Grant guest path to host path.
    roots: HashMap<String, PathBuf>,
    /// Every descriptor in a grant: its guest and host paths.
    paths: HashMap<u32, (String, PathBuf)>,
    /// Shared with the call's file streams, which tell their writes when
    /// they close.
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    told: AtomicU64,
    omitted: AtomicU64,
}

impl Counts {
    /// Whether one more may be told.
    fn admit(&self) -> bool {
        if self.told.fetch_add(1, Ordering::Relaxed) < MAX_FILE_EFFECTS_PER_CALL {
            return true;
        }
        self.omitted.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// What a file stream tells of its reads or writes when it closes.
pub(crate) struct StreamLog {
    observer: CallObserver,
    op: FileOp,
    path: String,
    host: String,
    counts: Arc<Counts>,
    pub(crate) bytes: u64,
}

impl Drop for StreamLog {
    fn drop(&mut self) {
        if self.bytes > 0 && self.counts.admit() {
            (self.observer)(&CallEvent::Effect(Effect::File {
                op: self.op,
                path: std::mem::take(&mut self.path),
                host: std::mem::take(&mut self.host),
                bytes: Some(self.bytes),
                to: None,
                refused: None,
                error: None,
            }));
        }
    }
}

impl std::fmt::Debug for FileLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileLog")
            .field("observed", &self.observer.is_some())
            .field("counts", &self.counts)
            .finish()
    }
}

/// What the operation came to.
pub(crate) enum Done<'a> {
    Ok,
    Refused(&'a str),
    Failed(ErrorCode),
}

impl FileLog {
    pub(crate) fn new(
        grants: &[crate::grants::DirGrant],
        observer: Option<CallObserver>,
    ) -> FileLog {
        FileLog {
            roots: if observer.is_some() {
                grants
                    .iter()
                    .map(|g| (g.guest.clone(), g.host.clone()))
                    .collect()
            } else {
                HashMap::new()
            },
            observer,
            paths: HashMap::new(),
            counts: Arc::default(),
        }
    }

    pub(crate) fn watched(&self) -> bool {
        self.observer.is_some()
    }

    /// What a stream on `fd` tells when it closes: `op` (`read`,
    /// `write`) and its bytes.
    pub(crate) fn stream(&self, fd: u32, op: FileOp) -> Option<StreamLog> {
        let observer = self.observer.clone()?;
        let (path, host) = self.paths.get(&fd)?;
        Some(StreamLog {
            observer,
            op,
            path: path.clone(),
            host: host.display().to_string(),
            counts: self.counts.clone(),
            bytes: 0,
        })
    }

    /// A grant's directory, as the call's preopen `fd`.
    pub(crate) fn preopened(&mut self, fd: u32, guest: &str) {
        if let Some(host) = self.roots.get(guest) {
            self.paths.insert(fd, (guest.to_string(), host.clone()));
        }
    }

    /// `child` was opened at `path` under `parent`.
    pub(crate) fn opened(&mut self, parent: u32, child: u32, path: &str) {
        if let Some(paths) = self.paths_at(parent, path) {
            self.paths.insert(child, paths);
        }
    }

    pub(super) fn paths_at(&self, fd: u32, path: &str) -> Option<(String, PathBuf)> {
        let (guest, host) = self.paths.get(&fd)?;
        if path.is_empty() || path == "." {
            return Some((guest.clone(), host.clone()));
        }
        Some((
            format!("{}/{path}", guest.trim_end_matches('/')),
            host.join(path),
        ))
    }

    /// Tells `op` on `path` under `fd` (the descriptor itself when
    /// `path` is empty).
    pub(crate) fn tell(
        &mut self,
        op: FileOp,
        fd: u32,
        path: &str,
        bytes: Option<u64>,
        to: Option<String>,
        done: Done<'_>,
    ) {
        let Some(observer) = &self.observer else {
            return;
        };
        let Some((path, host)) = self.paths_at(fd, path) else {
            return;
        };
        if !self.counts.admit() {
            return;
        }
        let (refused, error) = match done {
            Done::Ok => (None, None),
            Done::Refused(why) => (Some(why.to_string()), None),
            Done::Failed(code) => match refusal(code) {
                Some(why) => (Some(why.to_string()), None),
                None => (None, Some(error_name(code))),
            },
        };
        observer(&CallEvent::Effect(Effect::File {
            op,
            path,
            host: host.display().to_string(),
            bytes,
            to,
            refused,
            error,
        }));
    }
}

impl Drop for FileLog {
    fn drop(&mut self) {
        let omitted = self.counts.omitted.load(Ordering::Relaxed);
        if let Some(observer) = &self.observer
            && omitted > 0
        {
            observer(&CallEvent::Effect(Effect::Omitted {
                of: Door::File,
                count: omitted,
            }));
        }
    }
}

/// The codes that mean the host said no (not that the file system failed).
fn refusal(code: ErrorCode) -> Option<&'static str> {
    match code {
        ErrorCode::ReadOnly => Some("the grant is read-only"),
        ErrorCode::NotPermitted | ErrorCode::Access => Some("not permitted in the grant"),
        ErrorCode::Quota => Some("the grant's per-call quota is spent"),
        _ => None,
    }
}

/// `no-entry`, `exist`, ...: WASI's own names.
fn error_name(code: ErrorCode) -> String {
    code.name().to_string()
}

/// A file's read stream, counting what the gadget reads.
pub(super) struct CountedInput {
    pub(super) inner: DynInputStream,
    pub(super) log: StreamLog,
}

impl CountedInput {
    fn counted(&mut self, bytes: StreamResult<Bytes>) -> StreamResult<Bytes> {
        if let Ok(read) = &bytes {
            self.log.bytes = self.log.bytes.saturating_add(read.len() as u64);
        }
        bytes
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CountedInput {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for CountedInput {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        let read = self.inner.read(size);
        self.counted(read)
    }

    async fn blocking_read(&mut self, size: usize) -> StreamResult<Bytes> {
        let read = self.inner.blocking_read(size).await;
        self.counted(read)
    }

    fn skip(&mut self, nelem: usize) -> StreamResult<usize> {
        self.inner.skip(nelem)
    }

    async fn blocking_skip(&mut self, nelem: usize) -> StreamResult<usize> {
        self.inner.blocking_skip(nelem).await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_keep_wasis_names() {
        assert_eq!(error_name(ErrorCode::NoEntry), "no-entry");
        assert_eq!(error_name(ErrorCode::Exist), "exist");
        assert!(refusal(ErrorCode::ReadOnly).is_some());
        assert!(refusal(ErrorCode::NoEntry).is_none());
    }
}
