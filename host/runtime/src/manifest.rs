//! `plugin.toml`: what a plugin's author says about it.
//!
//! Parsed strictly: unknown fields are an error (a typo must not silently
//! turn a limit off). What a manifest asks for (`[limits]`,
//! `[permissions]`) is a request; the operator's configuration decides what
//! is granted.
//!
//! ```toml
//! name = "text"
//! version = "0.1.0"
//! description = "Text toolkit"
//! component = "text.wasm"
//! sha256 = "…64 hex digits…"   # optional pin, enforced at load
//!
//! [limits]                      # optional, each field optional
//! timeout-ms = 5000
//! memory-mib = 64
//!
//! [permissions]                 # optional: what it asks the operator for
//! http = ["api.example.com"]    # hosts (`*.example.com`), origins, or "*"
//! config = ["API_KEY"]          # environment variables of its instance
//! files = ["/data", { path = "/out", mode = "rw" }]   # guest paths, or "*"
//! ```
//!
//! A request grants nothing by itself: the plugin gets what it asks for
//! AND what the operator's policy grants (see `grants`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use gadget_core::limits::RequestedLimits;

use crate::origins::HttpRequestRule;
use crate::requests::{check_config_key, check_guest_path};

/// The manifest's file name inside a plugin directory.
pub const MANIFEST_FILE: &str = "plugin.toml";

/// Longest plugin name accepted, in bytes.
pub const MAX_PLUGIN_NAME_BYTES: usize = 64;

/// Largest manifest read, in bytes: a manifest is a few hundred bytes; this
/// bounds what a hostile one can make the host parse.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 10;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Manifest {
    /// Lower-case letters, digits and `-`.
    pub name: String,
    /// Semantic version, `MAJOR.MINOR.PATCH`.
    pub version: String,
    pub description: String,
    /// Path of the component, relative to the plugin directory.
    pub component: PathBuf,
    /// Expected sha256 of the component (hex); a mismatch refuses the plugin.
    pub sha256: Option<String>,
    #[serde(default)]
    pub limits: RequestedLimits,
    #[serde(default)]
    pub permissions: Permissions,
    /// What its gadgets do to the world, for MCP clients (`readOnlyHint`,
    /// ...). Claims, not grants: what the grants imply wins.
    #[serde(default)]
    pub annotations: Annotations,
    /// `[tasks]`: which gadgets may run as MCP tasks.
    #[serde(default)]
    pub tasks: Tasks,
}

/// `[tasks]`: the gadgets long enough to run as MCP tasks (a handle at
/// once, the result polled), by name. `optional`: as a task when the
/// client supports tasks; `required`: only as a task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Tasks {
    #[serde(default)]
    pub optional: Vec<String>,
    #[serde(default)]
    pub required: Vec<String>,
}

impl Tasks {
    /// How a gadget of this plugin may run (names compare
    /// case-insensitively, as gadget names do).
    pub fn support(&self, gadget: &str) -> gadget_core::access::TaskSupport {
        use gadget_core::access::TaskSupport;
        let listed = |names: &[String]| names.iter().any(|n| n.eq_ignore_ascii_case(gadget));
        if listed(&self.required) {
            TaskSupport::Required
        } else if listed(&self.optional) {
            TaskSupport::Optional
        } else {
            TaskSupport::Forbidden
        }
    }
}

/// `[annotations]`: the plugin's own account of its gadgets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Annotations {
    /// They change nothing outside themselves.
    pub read_only: Option<bool>,
    /// They may destroy or overwrite something.
    pub destructive: Option<bool>,
    /// Calling twice with the same arguments does no more than once.
    pub idempotent: Option<bool>,
    /// They reach things outside the host (the network, other services).
    pub open_world: Option<bool>,
}

/// Capabilities a plugin asks for. A request is not a grant: the operator's
/// policy decides, and the plugin gets the intersection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Permissions {
    /// Where the plugin wants to reach over HTTP: a host (`api.example.com`),
    /// a wildcard host (`*.example.com`), an origin
    /// (`https://api.example.com:8443`), or `*` (wherever the operator grants).
    #[serde(default)]
    pub http: Vec<String>,
    /// Configuration keys (values or secrets) it wants as environment
    /// variables.
    #[serde(default)]
    pub config: Vec<String>,
    /// Directories it wants, by the path it will open them at (`/data`), or
    /// `*` (whichever the operator grants); read-only unless `mode = "rw"`.
    #[serde(default)]
    pub files: Vec<FileRequest>,
    /// Completions through the host's LLM (the `llm` import of
    /// gadget:plugin@0.2.0), which the operator grants with models and a
    /// budget.
    #[serde(default)]
    pub llm: bool,
}

/// One directory a manifest asks for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(untagged)]
pub enum FileRequest {
    /// `"/data"`: read-only.
    Path(String),
    /// `{ path = "/out", mode = "rw" }`.
    Full {
        path: String,
        #[serde(default)]
        mode: FileMode,
    },
}

impl FileRequest {
    pub fn path(&self) -> &str {
        match self {
            FileRequest::Path(path) | FileRequest::Full { path, .. } => path,
        }
    }

    pub fn mode(&self) -> FileMode {
        match self {
            FileRequest::Path(_) => FileMode::ReadOnly,
            FileRequest::Full { mode, .. } => *mode,
        }
    }
}

/// Read-only (`ro`, the default) or read-write (`rw`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize,
)]
pub enum FileMode {
    #[default]
    #[serde(rename = "ro")]
    ReadOnly,
    #[serde(rename = "rw")]
    ReadWrite,
}

impl std::fmt::Display for FileMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileMode::ReadOnly => "ro",
            FileMode::ReadWrite => "rw",
        })
    }
}

impl Permissions {
    pub fn is_empty(&self) -> bool {
        self.http.is_empty() && self.config.is_empty() && self.files.is_empty() && !self.llm
    }

    /// "http: a.com, b.com; config: KEY; files: /data (ro)", or "none",
    /// for reports.
    pub fn describe(&self) -> String {
        if self.is_empty() {
            return "none".into();
        }
        let mut parts = Vec::new();
        if !self.http.is_empty() {
            parts.push(format!("http: {}", self.http.join(", ")));
        }
        if !self.config.is_empty() {
            parts.push(format!("config: {}", self.config.join(", ")));
        }
        if !self.files.is_empty() {
            let files: Vec<String> = self
                .files
                .iter()
                .map(|f| format!("{} ({})", f.path(), f.mode()))
                .collect();
            parts.push(format!("files: {}", files.join(", ")));
        }
        if self.llm {
            parts.push("llm".to_string());
        }
        parts.join("; ")
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_MANIFEST_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: &'static str,
        message: String,
    },
}

impl Manifest {
    /// Reads and checks `dir/plugin.toml`.
    pub fn from_dir(dir: &Path) -> Result<Manifest, ManifestError> {
        Manifest::from_dir_with_digest(dir).map(|(manifest, _)| manifest)
    }

    /// Reads and checks `dir/plugin.toml`; with the SHA-256 (hex) of the
    /// very bytes parsed, which the lock pins.
    pub fn from_dir_with_digest(dir: &Path) -> Result<(Manifest, String), ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let read_error = |source| ManifestError::Read {
            path: path.clone(),
            source,
        };
        let size = std::fs::metadata(&path).map_err(read_error)?.len();
        if size > MAX_MANIFEST_BYTES {
            return Err(ManifestError::TooLarge { path });
        }
        // Only a small regular file inside the plugin is read (not a FIFO
        // that would hang the load, nor a symlink out of the plugin).
        let bytes = crate::plugin_files::read_plugin_file(dir, &path, MAX_MANIFEST_BYTES).map_err(
            |message| ManifestError::Invalid {
                path: path.clone(),
                field: "file",
                message,
            },
        )?;
        let digest = crate::cache::sha256_hex(&bytes);
        let text = String::from_utf8(bytes).map_err(|_| ManifestError::Invalid {
            path: path.clone(),
            field: "file",
            message: "is not UTF-8 text".into(),
        })?;
        Ok((Manifest::parse(&text, &path)?, digest))
    }

    /// Parses and checks a manifest's text; `path` is for messages.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, ManifestError> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| ManifestError::Parse {
            path: path.to_path_buf(),
            message: e.message().to_string() + &span_note(text, e.span()),
        })?;
        let invalid = |field, message: String| ManifestError::Invalid {
            path: path.to_path_buf(),
            field,
            message,
        };
        check_plugin_name(&manifest.name).map_err(|m| invalid("name", m))?;
        let parts: Vec<&str> = manifest
            .version
            .split(['-', '+'])
            .next()
            .unwrap_or("")
            .split('.')
            .collect();
        if parts.len() != 3
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(invalid(
                "version",
                format!("'{}' is not a version like 1.2.3", manifest.version),
            ));
        }
        if manifest.description.trim().is_empty() {
            return Err(invalid("description", "must not be empty".into()));
        }
        if manifest.component.is_absolute()
            || manifest
                .component
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(invalid(
                "component",
                format!(
                    "'{}' must be a relative path inside the plugin directory",
                    manifest.component.display()
                ),
            ));
        }
        check_requests(&manifest.permissions).map_err(|message| invalid("permissions", message))?;
        if let Some(sha) = &manifest.sha256
            && (sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(invalid("sha256", format!("'{sha}' is not 64 hex digits")));
        }
        Ok(manifest)
    }
}

fn span_note(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else {
        return String::new();
    };
    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
    format!(" (line {line})")
}

/// The plugin name a free text makes (`gadget new`'s argument, a bare
/// component's file name): ASCII letters and digits lower-cased, every run
/// of anything else one `-`, then checked by [`check_plugin_name`].
/// `my-tool` stays `my-tool`; `My Tool` and `my__tool` become `my-tool`.
pub fn normalize_plugin_name(text: &str) -> Result<String, String> {
    let name = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    check_plugin_name(&name)?;
    Ok(name)
}

/// Plugin names: lower-case ASCII letters, digits and `-`, starting with a
/// letter. They name directories and cache entries, so they stay tame.
pub fn check_plugin_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_PLUGIN_NAME_BYTES
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{name}' must be 1 to {MAX_PLUGIN_NAME_BYTES} lower-case letters, digits or '-', starting with a letter"
        ))
    }
}

/// Checks what a manifest asks for (at manifest parse time).
pub fn check_requests(permissions: &Permissions) -> Result<(), String> {
    for http in &permissions.http {
        HttpRequestRule::parse(http).map_err(|e| format!("permissions.http: {e}"))?;
    }
    for key in &permissions.config {
        check_config_key(key).map_err(|e| format!("permissions.config: {e}"))?;
    }
    for file in &permissions.files {
        if file.path() != "*" {
            check_guest_path(file.path()).map_err(|e| format!("permissions.files: {e}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("p/plugin.toml"))
    }

    const MINIMAL: &str =
        "name = \"calc\"\nversion = \"0.1.0\"\ndescription = \"d\"\ncomponent = \"c.wasm\"\n";

    #[test]
    fn minimal_manifest_parses_with_defaults() {
        let m = parse(MINIMAL).unwrap();
        assert_eq!(m.name, "calc");
        assert_eq!(m.limits, RequestedLimits::default());
        assert!(m.permissions.is_empty());
    }

    #[test]
    fn unknown_fields_are_errors_everywhere() {
        for extra in [
            "colour = 1\n",
            "[limits]\ntimeout = 5\n",
            "[permissions]\nnetwork = []\n",
        ] {
            let err = parse(&format!("{MINIMAL}{extra}")).unwrap_err().to_string();
            assert!(err.contains("unknown field"), "{extra}: {err}");
        }
    }

    #[test]
    fn files_http_and_config_requests_parse_and_are_checked() {
        let m = parse(&format!(
            "{MINIMAL}[permissions]\nfiles = [\"/data\", {{ path = \"/out\", mode = \"rw\" }}, \"*\"]\nhttp = [\"*\", \"https://api.example.com:8443\", \"*.wikipedia.org\"]\nconfig = [\"API_KEY\"]\n"
        ))
        .unwrap();
        assert_eq!(m.permissions.files.len(), 3);
        assert_eq!(m.permissions.files[1].mode(), FileMode::ReadWrite);
        assert_eq!(
            m.permissions.describe(),
            "http: *, https://api.example.com:8443, *.wikipedia.org; config: API_KEY; files: /data (ro), /out (rw), * (ro)"
        );
        for bad in [
            "files = [\"data\"]",
            "files = [\"/a/../b\"]",
            "files = [\"/a\\u001b]2;title\"]",
            "http = [\"ftp://x.com\"]",
            "http = [\"bad host\"]",
            "config = [\"1KEY\"]",
        ] {
            let err = parse(&format!("{MINIMAL}[permissions]\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("permissions"), "{bad}: {err}");
        }
    }

    #[test]
    fn limits_and_permissions_parse() {
        let m = parse(&format!(
            "{MINIMAL}[limits]\ntimeout-ms = 10\nmemory-mib = 8\n[permissions]\nhttp = [\"a.com\"]\n"
        ))
        .unwrap();
        assert_eq!(m.limits.timeout_ms, Some(10));
        assert_eq!(m.limits.memory_mib, Some(8));
        assert_eq!(m.permissions.describe(), "http: a.com");
    }

    #[test]
    fn bad_values_name_the_field() {
        let cases = [
            ("name = \"Calc\"", "name"),
            ("version = \"one\"", "version"),
            ("component = \"../escape.wasm\"", "component"),
            ("sha256 = \"abc\"", "sha256"),
        ];
        for (line, field) in cases {
            let key = line.split(' ').next().unwrap();
            let text: String = MINIMAL
                .lines()
                .filter(|l| !l.starts_with(key))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                + line
                + "\n";
            let err = parse(&text).unwrap_err();
            assert!(
                matches!(&err, ManifestError::Invalid { field: f, .. } if *f == field),
                "{line}: {err}"
            );
        }
    }

    #[test]
    fn an_oversized_manifest_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(MANIFEST_FILE),
            " ".repeat(MAX_MANIFEST_BYTES as usize + 1),
        )
        .unwrap();
        assert!(matches!(
            Manifest::from_dir(dir.path()),
            Err(ManifestError::TooLarge { .. })
        ));
    }

    #[test]
    fn missing_fields_are_reported() {
        let err = parse("name = \"x\"").unwrap_err().to_string();
        assert!(err.contains("missing field"), "{err}");
    }
}
