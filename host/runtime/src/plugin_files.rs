//! Reading a plugin's own files (its manifest, its component) without
//! being led out of its directory or made to block.

use std::io::Read;
use std::path::Path;

/// Reads a file of a plugin: it must resolve (symlinks followed) to a
/// regular file inside `root`, the plugin's directory, and be at most
/// `max_bytes`. A symlink out of the plugin, a device (`/dev/zero`), a FIFO
/// or a socket is refused before it is opened, and the open itself cannot
/// block (`O_NONBLOCK`) or follow a symlink swapped in meanwhile.
pub fn read_plugin_file(root: &Path, path: &Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    let root = root
        .canonicalize()
        .map_err(|e| format!("cannot resolve the plugin directory: {e}"))?;
    let resolved = path
        .canonicalize()
        .map_err(|e| format!("cannot read: {e}"))?;
    if !resolved.starts_with(&root) {
        return Err(format!(
            "resolves to {}, outside the plugin directory {}; a plugin may only use its own files",
            resolved.display(),
            root.display()
        ));
    }
    let regular = |metadata: &std::fs::Metadata| -> Result<(), String> {
        if !metadata.is_file() {
            return Err(
                "is not a regular file (a directory, device, FIFO or socket); refusing to read it"
                    .into(),
            );
        }
        if metadata.len() > max_bytes {
            return Err(format!(
                "is {} bytes, over the {max_bytes}-byte limit",
                metadata.len()
            ));
        }
        Ok(())
    };
    regular(&std::fs::metadata(&resolved).map_err(|e| format!("cannot read: {e}"))?)?;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&resolved)
        .map_err(|e| format!("cannot read: {e}"))?;
    regular(&file.metadata().map_err(|e| format!("cannot read: {e}"))?)?;
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!(
            "grew past the {max_bytes}-byte limit while being read"
        ));
    }
    Ok(bytes)
}
