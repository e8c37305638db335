//! Files the operator names (the policy, the lock, approvals and answers
//! files, signing keys, a JWKS file, the journal `audit` reads): read only
//! when they are regular files, and never past a named limit. A path to
//! `/dev/zero` would otherwise take memory without end, and a FIFO would
//! hang the host before it served anything.

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Why an operator's file was not read; each names the path.
#[derive(Debug, thiserror::Error)]
pub enum OperatorFileError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a regular file (a device, FIFO or directory is never read)", path.display())]
    NotRegular { path: PathBuf },
    #[error("{} is over {limit} bytes, the most this file may hold", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{} is not UTF-8 text", path.display())]
    NotText { path: PathBuf },
}

/// The bytes of the regular file at `path` (symlinks followed), at most
/// `limit` of them.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, OperatorFileError> {
    let io = |source| OperatorFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let not_regular = || OperatorFileError::NotRegular {
        path: path.to_path_buf(),
    };
    // Checked before opening (opening a FIFO waits for a writer) and again
    // on what was opened (the path may have changed in between).
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(not_regular());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(OperatorFileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_text(path: &Path, limit: u64) -> Result<String, OperatorFileError> {
    String::from_utf8(read(path, limit)?).map_err(|_| OperatorFileError::NotText {
        path: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_their_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.toml");
        std::fs::write(&file, "x = 1\n").unwrap();
        assert_eq!(read_text(&file, 6).unwrap(), "x = 1\n");
        let over = read_text(&file, 5).unwrap_err().to_string();
        assert!(over.contains("is over 5 bytes"), "{over}");
        let device = read(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(
            matches!(device, OperatorFileError::NotRegular { .. }),
            "{device}"
        );
        let directory = read(dir.path(), 1 << 20).unwrap_err();
        assert!(matches!(directory, OperatorFileError::NotRegular { .. }));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("lock");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            return; // no mkfifo here: nothing to test
        }
        let refused = read(&fifo, 1 << 20).unwrap_err();
        assert!(
            matches!(refused, OperatorFileError::NotRegular { .. }),
            "{refused}"
        );
    }
}
