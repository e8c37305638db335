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
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemView as _;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self as fs, Descriptor, ErrorCode, Filesize, HostDescriptor,
};
use wasmtime_wasi::p2::{DynInputStream, InputStream, Pollable, StreamResult};

use super::shims::{TYPES_INTERFACE, settle};
use crate::CallState;

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

    fn paths_at(&self, fd: u32, path: &str) -> Option<(String, PathBuf)> {
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

/// The result the guest gets, told as `op` first.
fn told<T>(
    state: &mut CallState,
    result: (Result<T, ErrorCode>,),
    tell: impl FnOnce(&mut FileLog, Done<'_>),
) -> (Result<T, ErrorCode>,) {
    if state.files.log.watched() {
        let done = match &result.0 {
            Ok(_) => Done::Ok,
            Err(code) => Done::Failed(*code),
        };
        tell(&mut state.files.log, done);
    }
    result
}

/// A file's read stream, counting what the gadget reads.
struct CountedInput {
    inner: DynInputStream,
    log: StreamLog,
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

/// Shadows the operations the guards in `dirs.rs` leave alone and that
/// the journal records: reads, removals and renames.
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(TYPES_INTERFACE)?;
    types.func_wrap(
        "[method]descriptor.read-via-stream",
        |mut store, (fd, offset): (Resource<Descriptor>, Filesize)| {
            let state = store.data_mut();
            let log = state.files.log.stream(fd.rep(), FileOp::Read);
            let mut view = state.filesystem();
            match HostDescriptor::read_via_stream(&mut view, fd, offset) {
                Ok(stream) => {
                    if let Some(log) = log {
                        let entry = view.table.get_mut(&stream)?;
                        let inner = std::mem::replace(
                            entry,
                            Box::new(wasmtime_wasi::p2::pipe::ClosedInputStream),
                        );
                        *entry = Box::new(CountedInput { inner, log });
                    }
                    Ok((Ok(stream),))
                }
                Err(e) => Ok((Err(fs::Host::convert_error_code(&mut view, e)?),)),
            }
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.read",
        |mut store, (fd, length, offset): (Resource<Descriptor>, Filesize, Filesize)| {
            Box::new(async move {
                let state = store.data_mut();
                let rep = fd.rep();
                let read = HostDescriptor::read(&mut state.filesystem(), fd, length, offset).await;
                let result = settle(&mut state.filesystem(), read)?;
                let bytes = result.0.as_ref().ok().map(|(data, _)| data.len() as u64);
                Ok(told(state, result, |log, done| {
                    log.tell(FileOp::Read, rep, "", bytes, None, done)
                }))
            })
        },
    )?;
    for (name, directory) in [
        ("[method]descriptor.unlink-file-at", false),
        ("[method]descriptor.remove-directory-at", true),
    ] {
        types.func_wrap_async(
            name,
            move |mut store, (fd, path): (Resource<Descriptor>, String)| {
                Box::new(async move {
                    let state = store.data_mut();
                    let rep = fd.rep();
                    let logged = state.files.log.watched().then(|| path.clone());
                    let removed = if directory {
                        HostDescriptor::remove_directory_at(&mut state.filesystem(), fd, path).await
                    } else {
                        HostDescriptor::unlink_file_at(&mut state.filesystem(), fd, path).await
                    };
                    let result = settle(&mut state.filesystem(), removed)?;
                    Ok(told(state, result, |log, done| {
                        log.tell(
                            FileOp::Remove,
                            rep,
                            logged.as_deref().unwrap_or(""),
                            None,
                            None,
                            done,
                        )
                    }))
                })
            },
        )?;
    }
    types.func_wrap_async(
        "[method]descriptor.rename-at",
        |mut store,
         (fd, old_path, new_fd, new_path): (
            Resource<Descriptor>,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let state = store.data_mut();
                let (rep, new_rep) = (fd.rep(), new_fd.rep());
                let logged = state
                    .files
                    .log
                    .watched()
                    .then(|| (old_path.clone(), new_path.clone()));
                let renamed = HostDescriptor::rename_at(
                    &mut state.filesystem(),
                    fd,
                    old_path,
                    new_fd,
                    new_path,
                )
                .await;
                let result = settle(&mut state.filesystem(), renamed)?;
                Ok(told(state, result, |log, done| {
                    let (old, new) = logged.unwrap_or_default();
                    let to = log.paths_at(new_rep, &new).map(|(guest, _)| guest);
                    log.tell(FileOp::Rename, rep, &old, None, to, done)
                }))
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
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
