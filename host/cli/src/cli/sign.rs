//! `gadget keygen` and `gadget sign`: Ed25519 keys and signatures inside
//! components, in the format `wasmsign2` writes and verifies (so either
//! tool checks what the other made).

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use gadget_runtime::provenance::{self, DETACHED_SUFFIX};

/// `gadget keygen`.
pub fn keygen(secret: &Path, public: &Path) -> Result<ExitCode> {
    let pem = provenance::keygen(secret, public)?;
    println!(
        "secret key: {} (keep it private: it signs as you)\npublic key: {}\n\nTo trust it, in the policy:\n\n[trust.signers.NAME]\nkey = \"{}\"\n\nor inline:\n\n[trust.signers.NAME]\nkey = \"\"\"\n{}\"\"\"",
        secret.display(),
        public.display(),
        public.display(),
        pem.trim_end()
    );
    Ok(ExitCode::SUCCESS)
}

/// `gadget sign`: the signature is added inside the component (in place,
/// or written to `output`), or written beside it as `COMPONENT.sig`.
pub fn sign(
    key: &Path,
    component: &Path,
    output: Option<&Path>,
    detached: bool,
) -> Result<ExitCode> {
    let (signed, signature) = provenance::sign(component, key)?;
    let (target, bytes) = if detached {
        let beside = PathBuf::from(format!("{}{DETACHED_SUFFIX}", component.display()));
        (output.map_or(beside, Path::to_path_buf), signature)
    } else {
        (output.unwrap_or(component).to_path_buf(), signed)
    };
    replace(&target, &bytes)?;
    let what = if detached {
        "signature"
    } else {
        "signed component"
    };
    println!("{what} written to {}", target.display());
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to `path` all at once (a reader never sees half a file).
fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temporary = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("writing beside {}", path.display()))?;
    temporary
        .write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    // A component signed in place keeps its mode (a temporary file's is
    // 0600); a new file gets the usual 0644.
    let mode = std::fs::metadata(path).map_or_else(
        |_| std::fs::Permissions::from_mode(0o644),
        |m| m.permissions(),
    );
    std::fs::set_permissions(temporary.path(), mode)
        .with_context(|| format!("writing {}", path.display()))?;
    temporary
        .persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
