//! What a request or a grant may name: config keys and guest paths,
//! checked wherever they are read (manifests, policies, grants).

use std::path::Path;

/// An environment variable name: letters, digits and `_`, not starting
/// with a digit.
pub fn check_config_key(key: &str) -> Result<(), String> {
    let valid = !key.is_empty()
        && key.len() <= 128
        && !key.as_bytes()[0].is_ascii_digit()
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "'{key}' is not a configuration key (letters, digits and '_', like API_KEY)"
        ))
    }
}

/// A guest path: absolute, no `.` or `..` components.
pub fn check_guest_path(path: &str) -> Result<(), String> {
    let valid = path.starts_with('/')
        && path.len() <= 256
        && path
            .split('/')
            .skip(1)
            .all(|part| part != "." && part != ".." && !part.chars().any(char::is_control))
        && (path == "/" || !path.ends_with('/'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "'{path}' is not a guest path (absolute, like /data, without '.' or '..')"
        ))
    }
}

/// The default guest path of a granted directory: `/` and its name.
pub fn default_guest_path(host: &Path) -> String {
    match host.file_name() {
        Some(name) => format!("/{}", name.to_string_lossy()),
        None => "/".into(),
    }
}
