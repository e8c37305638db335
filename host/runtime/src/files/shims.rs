//! The guards in front of the WASI filesystem operations that create or
//! grow things (after wasmtime-wasi's own are linked, they shadow them):
//! each shim is written against [`FilesView`], the part of the call's
//! store the files door touches (its grants and log, and wasmtime-wasi's
//! filesystem view), taken from the store's data by the getter the linker
//! is given ([`FilesGetter`], as wasmtime's `WasiFilesystemCtxView` and
//! Spin's `link_bindings(add_to_linker, get_data)`): the door knows
//! nothing else of the store.

use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, LinkerInstance, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::p2::DynOutputStream;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self as fs, Descriptor, DescriptorFlags, ErrorCode, Filesize, HostDescriptor, OpenFlags,
    PathFlags,
};

use gadget_core::effect::FileOp;

use super::dirs::{CallFiles, GrantUse, QuotaStream, check_symlink_target};
use super::log::{CountedInput, Done, FileLog, StreamLog};

/// The WASI filesystem interfaces the guards shadow: the version
/// wasmtime-wasi links (guests importing any 0.2.x resolve to it).
pub(crate) const TYPES_INTERFACE: &str = "wasi:filesystem/types@0.2.12";
const PREOPENS_INTERFACE: &str = "wasi:filesystem/preopens@0.2.12";

/// What the files door's shims touch of a call's store.
pub(crate) struct FilesView<'a> {
    pub(crate) files: &'a mut CallFiles,
    pub(crate) fs: WasiFilesystemCtxView<'a>,
}

/// Takes the files door's part of a store's data.
pub(crate) type FilesGetter<T> = fn(&mut T) -> FilesView<'_>;

/// What a shadowed filesystem function returns to the guest.
pub(crate) type FsReturn<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// Turns what wasmtime-wasi's filesystem host returned into what the guest
/// gets (a trap stays a trap).
pub(crate) fn settle<T>(
    fs: &mut WasiFilesystemCtxView<'_>,
    result: wasmtime_wasi::p2::FsResult<T>,
) -> FsReturn<T> {
    match result {
        Ok(value) => Ok((Ok(value),)),
        Err(e) => Ok((Err(fs::Host::convert_error_code(fs, e)?),)),
    }
}

/// How an operation ended, for the log.
fn done_of<T>(result: &(Result<T, ErrorCode>,)) -> Done<'static> {
    match &result.0 {
        Ok(_) => Done::Ok,
        Err(code) => Done::Failed(*code),
    }
}

/// A file stream just opened, wrapped to charge its grant's quota when
/// the file is in a read-write grant, and to count its bytes when the
/// call is observed.
fn charged_stream(
    fs: &mut WasiFilesystemCtxView<'_>,
    opened: wasmtime_wasi::p2::FsResult<Resource<DynOutputStream>>,
    grant: Option<Arc<GrantUse>>,
    log: Option<StreamLog>,
) -> FsReturn<Resource<DynOutputStream>> {
    match opened {
        Ok(stream) => {
            if grant.is_some() || log.is_some() {
                let entry = fs.table.get_mut(&stream)?;
                let inner =
                    std::mem::replace(entry, Box::new(wasmtime_wasi::p2::pipe::SinkOutputStream));
                *entry = Box::new(QuotaStream { inner, grant, log });
            }
            Ok((Ok(stream),))
        }
        Err(e) => Ok((Err(fs::Host::convert_error_code(fs, e)?),)),
    }
}

/// Shadows the filesystem operations that create or grow things with the
/// guarded ones (after wasmtime-wasi's own are linked).
pub(crate) fn add_guards_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    files_view: FilesGetter<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut preopens = linker.instance(PREOPENS_INTERFACE)?;
    preopens.func_wrap("get-directories", move |mut store, (): ()| {
        get_directories(files_view(store.data_mut()))
    })?;
    let mut types = linker.instance(TYPES_INTERFACE)?;
    link_creating(&mut types, files_view)?;
    link_growing(&mut types, files_view)?;
    linker.allow_shadowing(false);
    Ok(())
}

type Store<'a, T> = StoreContextMut<'a, T>;

/// The operations that create entries: open (with `create`), mkdir,
/// symlink, link.
fn link_creating<T: Send + 'static>(
    types: &mut LinkerInstance<'_, T>,
    files_view: FilesGetter<T>,
) -> wasmtime::Result<()> {
    types.func_wrap_async(
        "[method]descriptor.open-at",
        move |mut store: Store<'_, T>, (fd, path_flags, path, open_flags, flags)| {
            Box::new(async move {
                let view = files_view(store.data_mut());
                open_at(view, fd, path_flags, path, open_flags, flags).await
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.create-directory-at",
        move |mut store: Store<'_, T>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(
                async move { create_directory_at(files_view(store.data_mut()), fd, path).await },
            )
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.symlink-at",
        move |mut store: Store<'_, T>,
              (fd, target, path): (Resource<Descriptor>, String, String)| {
            Box::new(
                async move { symlink_at(files_view(store.data_mut()), fd, target, path).await },
            )
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.link-at",
        move |mut store: Store<'_, T>,
              (fd, old_flags, old_path, new_fd, new_path): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let mut view = files_view(store.data_mut());
                if let Err(code) = view.files.charge_entry(&new_fd) {
                    return Ok((Err(code),));
                }
                let done = HostDescriptor::link_at(
                    &mut view.fs,
                    fd,
                    old_flags,
                    old_path,
                    new_fd,
                    new_path,
                )
                .await;
                settle(&mut view.fs, done)
            })
        },
    )?;
    Ok(())
}

/// The operations that grow files: write, set-size, write and append
/// streams.
fn link_growing<T: Send + 'static>(
    types: &mut LinkerInstance<'_, T>,
    files_view: FilesGetter<T>,
) -> wasmtime::Result<()> {
    types.func_wrap_async(
        "[method]descriptor.write",
        move |mut store: Store<'_, T>,
              (fd, buffer, offset): (Resource<Descriptor>, Vec<u8>, Filesize)| {
            Box::new(async move { write(files_view(store.data_mut()), fd, buffer, offset).await })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.set-size",
        move |mut store: Store<'_, T>, (fd, size): (Resource<Descriptor>, Filesize)| {
            Box::new(async move { set_size(files_view(store.data_mut()), fd, size).await })
        },
    )?;
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        move |mut store: Store<'_, T>, (fd, offset): (Resource<Descriptor>, Filesize)| {
            let mut view = files_view(store.data_mut());
            let grant = view.files.grant_of(&fd);
            let log = view.files.log.stream(fd.rep(), FileOp::Write);
            let opened = HostDescriptor::write_via_stream(&mut view.fs, fd, offset);
            charged_stream(&mut view.fs, opened, grant, log)
        },
    )?;
    types.func_wrap(
        "[method]descriptor.append-via-stream",
        move |mut store: Store<'_, T>, (fd,): (Resource<Descriptor>,)| {
            let mut view = files_view(store.data_mut());
            let grant = view.files.grant_of(&fd);
            let log = view.files.log.stream(fd.rep(), FileOp::Write);
            let opened = HostDescriptor::append_via_stream(&mut view.fs, fd);
            charged_stream(&mut view.fs, opened, grant, log)
        },
    )?;
    Ok(())
}

/// The preopened directories and their guest paths.
type Preopens = Vec<(Resource<Descriptor>, String)>;

/// The preopened directories, each tied to its read-write grant.
fn get_directories(mut view: FilesView<'_>) -> wasmtime::Result<(Preopens,)> {
    let directories =
        wasmtime_wasi::p2::bindings::filesystem::preopens::Host::get_directories(&mut view.fs)?;
    for (fd, guest) in &directories {
        view.files.log.preopened(fd.rep(), guest);
        if let Some(grant) = view.files.grants.get(guest).cloned() {
            view.files.descriptors.insert(fd.rep(), grant);
        }
    }
    Ok((directories,))
}

/// Opens (or creates) a file: a creation is charged to its grant.
async fn open_at(
    mut view: FilesView<'_>,
    fd: Resource<Descriptor>,
    path_flags: PathFlags,
    path: String,
    open_flags: OpenFlags,
    flags: DescriptorFlags,
) -> FsReturn<Resource<Descriptor>> {
    let grant = view.files.grant_of(&fd);
    let parent = fd.rep();
    let creates = open_flags.contains(OpenFlags::CREATE);
    let op = if creates {
        FileOp::Create
    } else {
        FileOp::Open
    };
    let logged = view.files.log.watched().then(|| path.clone());
    let logged = logged.as_deref().unwrap_or("");
    if let Some(grant) = &grant
        && creates
    {
        // Only a creation counts: opening what exists is free.
        let at = Resource::new_borrow(parent);
        let exists = HostDescriptor::stat_at(&mut view.fs, at, PathFlags::empty(), path.clone())
            .await
            .is_ok();
        if !exists && let Err(code) = grant.charge_entry() {
            let quota = Done::Failed(code);
            view.files.log.tell(op, parent, logged, None, None, quota);
            return Ok((Err(code),));
        }
    }
    let opened =
        HostDescriptor::open_at(&mut view.fs, fd, path_flags, path, open_flags, flags).await;
    if let (Ok(child), Some(grant)) = (&opened, grant) {
        view.files.descriptors.insert(child.rep(), grant);
    }
    let result = settle(&mut view.fs, opened)?;
    if view.files.log.watched() {
        if let Ok(child) = &result.0 {
            view.files.log.opened(parent, child.rep(), logged);
        }
        view.files
            .log
            .tell(op, parent, logged, None, None, done_of(&result));
    }
    Ok(result)
}

/// Writes bytes, charged to the file's grant first.
async fn write(
    mut view: FilesView<'_>,
    fd: Resource<Descriptor>,
    buffer: Vec<u8>,
    offset: Filesize,
) -> FsReturn<Filesize> {
    let (rep, bytes) = (fd.rep(), buffer.len() as u64);
    if let Some(grant) = view.files.grant_of(&fd)
        && let Err(code) = grant.charge_bytes(bytes)
    {
        let quota = Done::Failed(code);
        let log = &mut view.files.log;
        log.tell(FileOp::Write, rep, "", Some(bytes), None, quota);
        return Ok((Err(code),));
    }
    let written = HostDescriptor::write(&mut view.fs, fd, buffer, offset).await;
    let result = settle(&mut view.fs, written)?;
    let done = done_of(&result);
    let log = &mut view.files.log;
    log.tell(FileOp::Write, rep, "", Some(bytes), None, done);
    Ok(result)
}

/// Sets a file's size: growing it is writing its new bytes (even sparse).
async fn set_size(
    mut view: FilesView<'_>,
    fd: Resource<Descriptor>,
    size: Filesize,
) -> FsReturn<()> {
    if let Some(grant) = view.files.grant_of(&fd) {
        let current = HostDescriptor::stat(&mut view.fs, Resource::new_borrow(fd.rep()))
            .await
            .map(|s| s.size)
            .unwrap_or(0);
        if size > current
            && let Err(code) = grant.charge_bytes(size - current)
        {
            return Ok((Err(code),));
        }
    }
    let done = HostDescriptor::set_size(&mut view.fs, fd, size).await;
    settle(&mut view.fs, done)
}

/// Makes a directory, charged to its grant as an entry.
async fn create_directory_at(
    mut view: FilesView<'_>,
    fd: Resource<Descriptor>,
    path: String,
) -> FsReturn<()> {
    let rep = fd.rep();
    let logged = view.files.log.watched().then(|| path.clone());
    let logged = logged.as_deref().unwrap_or("");
    if let Err(code) = view.files.charge_entry(&fd) {
        let quota = Done::Failed(code);
        let log = &mut view.files.log;
        log.tell(FileOp::Mkdir, rep, logged, None, None, quota);
        return Ok((Err(code),));
    }
    let done = HostDescriptor::create_directory_at(&mut view.fs, fd, path).await;
    let result = settle(&mut view.fs, done)?;
    let done = done_of(&result);
    let log = &mut view.files.log;
    log.tell(FileOp::Mkdir, rep, logged, None, None, done);
    Ok(result)
}

/// Makes a symlink whose target stays inside the grant, charged as an
/// entry.
async fn symlink_at(
    mut view: FilesView<'_>,
    fd: Resource<Descriptor>,
    target: String,
    path: String,
) -> FsReturn<()> {
    if let Err(reason) = check_symlink_target(&target) {
        view.files
            .refused("files: a symlink was refused: ", &reason);
        let refused = Done::Refused(&reason);
        let log = &mut view.files.log;
        log.tell(FileOp::Symlink, fd.rep(), &path, None, None, refused);
        return Ok((Err(ErrorCode::NotPermitted),));
    }
    if let Err(code) = view.files.charge_entry(&fd) {
        return Ok((Err(code),));
    }
    let done = HostDescriptor::symlink_at(&mut view.fs, fd, target, path).await;
    settle(&mut view.fs, done)
}

/// The result the guest gets, told as `op` first.
fn told<R>(
    log: &mut FileLog,
    result: (Result<R, ErrorCode>,),
    tell: impl FnOnce(&mut FileLog, Done<'_>),
) -> (Result<R, ErrorCode>,) {
    if log.watched() {
        let done = match &result.0 {
            Ok(_) => Done::Ok,
            Err(code) => Done::Failed(*code),
        };
        tell(log, done);
    }
    result
}

/// Shadows the operations the guards leave alone and that
/// the journal records: reads, removals and renames.
pub(crate) fn add_logged_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    files_view: FilesGetter<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(TYPES_INTERFACE)?;
    types.func_wrap(
        "[method]descriptor.read-via-stream",
        move |mut store: StoreContextMut<'_, T>, (fd, offset): (Resource<Descriptor>, Filesize)| {
            let FilesView {
                files,
                fs: mut view,
            } = files_view(store.data_mut());
            let log = files.log.stream(fd.rep(), FileOp::Read);
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
        move |mut store: StoreContextMut<'_, T>,
              (fd, length, offset): (Resource<Descriptor>, Filesize, Filesize)| {
            Box::new(async move {
                let FilesView { files, mut fs } = files_view(store.data_mut());
                let rep = fd.rep();
                let read = HostDescriptor::read(&mut fs, fd, length, offset).await;
                let result = settle(&mut fs, read)?;
                let bytes = result.0.as_ref().ok().map(|(data, _)| data.len() as u64);
                Ok(told(&mut files.log, result, |log, done| {
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
            move |mut store: StoreContextMut<'_, T>, (fd, path): (Resource<Descriptor>, String)| {
                Box::new(async move {
                    let FilesView { files, mut fs } = files_view(store.data_mut());
                    let rep = fd.rep();
                    let logged = files.log.watched().then(|| path.clone());
                    let removed = if directory {
                        HostDescriptor::remove_directory_at(&mut fs, fd, path).await
                    } else {
                        HostDescriptor::unlink_file_at(&mut fs, fd, path).await
                    };
                    let result = settle(&mut fs, removed)?;
                    Ok(told(&mut files.log, result, |log, done| {
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
        move |mut store: StoreContextMut<'_, T>,
              (fd, old_path, new_fd, new_path): (
            Resource<Descriptor>,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let FilesView { files, mut fs } = files_view(store.data_mut());
                let (rep, new_rep) = (fd.rep(), new_fd.rep());
                let logged = files
                    .log
                    .watched()
                    .then(|| (old_path.clone(), new_path.clone()));
                let renamed =
                    HostDescriptor::rename_at(&mut fs, fd, old_path, new_fd, new_path).await;
                let result = settle(&mut fs, renamed)?;
                Ok(told(&mut files.log, result, |log, done| {
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
