//! The audit journal's key when the operator names none: made by the host
//! once, kept in its own state (`journal.key` in the
//! [state directory](crate::policy::state_dir), 0600, out of every file
//! grant, as the compile cache's key is), so that a journal is keyed by
//! default and an edited, rehashed journal does not verify.

use std::path::PathBuf;

/// The key's file in the state directory.
pub const JOURNAL_KEY_FILE: &str = "journal.key";

/// Where this host keeps the journal's key (`None`: no state directory,
/// neither `$GADGET_STATE_DIR`, `$XDG_STATE_HOME` nor `$HOME` set).
pub fn journal_key_path() -> Option<PathBuf> {
    Some(crate::policy::state_dir()?.join(JOURNAL_KEY_FILE))
}

/// This host's journal key and where it is, made (with a private state
/// directory) when there is none yet.
pub fn journal_key() -> std::io::Result<(PathBuf, [u8; 32])> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = journal_key_path().ok_or_else(|| {
        std::io::Error::other(
            "no state directory for the journal's key: set GADGET_STATE_DIR (or HOME)",
        )
    })?;
    if let Some(dir) = path.parent()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let key = crate::cache::private_secret(&path)?;
    Ok((path, key))
}

/// This host's journal key, if it has made one (verifying never makes
/// one).
pub fn existing_journal_key() -> std::io::Result<Option<(PathBuf, [u8; 32])>> {
    let Some(path) = journal_key_path() else {
        return Ok(None);
    };
    Ok(crate::cache::read_private_secret(&path)?.map(|key| (path, key)))
}
