//! A granted directory as the host holds it: opened once, when its grant
//! is resolved, so a call's preopen is made from the handle and never from
//! the path again (see `files/dirs.rs` for why), and what one call may
//! write into it.

use std::path::{Path, PathBuf};

/// A granted directory, open since its grant was resolved.
#[derive(Debug)]
pub struct OpenedDir {
    handle: std::fs::File,
    device: u64,
    inode: u64,
    canonical: PathBuf,
    /// `/proc/self/fd/N` reaches the handle (Linux with /proc mounted).
    by_handle: bool,
}

impl OpenedDir {
    /// Opens a canonical directory path (no symlink in it).
    pub fn open(canonical: &Path) -> std::io::Result<OpenedDir> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let handle = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(canonical)?;
        let metadata = handle.metadata()?;
        let (device, inode) = (metadata.dev(), metadata.ino());
        let by_handle = std::fs::metadata(handle_path(&handle))
            .is_ok_and(|m| (m.dev(), m.ino()) == (device, inode));
        Ok(OpenedDir {
            handle,
            device,
            inode,
            canonical: canonical.to_path_buf(),
            by_handle,
        })
    }

    /// The path a call's preopen opens: the held directory itself, or its
    /// canonical path while that still names the same directory.
    pub fn call_path(&self) -> Result<PathBuf, String> {
        use std::os::unix::fs::MetadataExt;
        if self.by_handle {
            return Ok(handle_path(&self.handle));
        }
        match std::fs::symlink_metadata(&self.canonical) {
            Ok(m) if m.is_dir() && (m.dev(), m.ino()) == (self.device, self.inode) => {
                Ok(self.canonical.clone())
            }
            _ => Err(format!(
                "the granted directory {} was moved or replaced since it was granted: refused (restart the host to grant what is there now)",
                self.canonical.display()
            )),
        }
    }

    /// Whether two handles are the same directory.
    pub fn same_directory(&self, other: &OpenedDir) -> bool {
        (self.device, self.inode) == (other.device, other.inode)
    }
}

impl PartialEq for OpenedDir {
    fn eq(&self, other: &OpenedDir) -> bool {
        self.same_directory(other)
    }
}

impl Eq for OpenedDir {}

fn handle_path(handle: &std::fs::File) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd()))
}

/// What one call may write into one read-write grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct WriteQuota {
    /// Bytes written (by any means: writes, streams, growing a file).
    pub bytes: u64,
    /// Files, directories and links created.
    pub entries: u64,
}

impl Default for WriteQuota {
    fn default() -> WriteQuota {
        WriteQuota {
            bytes: gadget_core::limits::DEFAULT_GRANT_WRITE_BYTES,
            entries: gadget_core::limits::DEFAULT_GRANT_ENTRIES,
        }
    }
}
