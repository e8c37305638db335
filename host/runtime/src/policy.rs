//! The operator's policy file: what the person running the host allows,
//! over what any plugin's manifest asks for.
//!
//! Where it is found: `--config FILE`, else `$GADGET_CONFIG`, else
//! `$XDG_CONFIG_HOME/gadget-host/config.toml` (or
//! `~/.config/gadget-host/config.toml`) when it exists, else none: every
//! default applies and nothing is granted. TOML; unknown fields are an
//! error that names the line.
//!
//! ```toml
//! [limits]                 # ceilings over what any manifest asks for
//! max-timeout-ms = 300000
//! max-memory-mib = 1024
//! host-memory-mib = 8192   # linear memory of all running calls together
//!
//! [plugins.web]            # one plugin, by its manifest name
//! prefix = "web_"          # its gadgets are served as web_<Name>
//! ```
//!
//! Nothing in a model's output or a gadget's behaviour reaches this file:
//! it is read once, at startup, by the front end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use gadget_core::limits::{
    HARD_MAX_MEMORY_BYTES, HARD_MAX_TIMEOUT, LimitCeilings, MAX_LOG_BYTES, MAX_RESULT_BYTES,
    MAX_STDIO_BYTES,
};

use crate::loader::check_gadget_name;
use crate::manifest::MAX_MANIFEST_BYTES;

/// The environment variable naming the policy file.
pub const CONFIG_ENV: &str = "GADGET_CONFIG";

/// The policy file under the XDG configuration directory.
pub const CONFIG_RELATIVE_PATH: &str = "gadget-host/config.toml";

/// Memory one component's compilation may use, in bytes: compiling the
/// largest guests here (CPython, SpiderMonkey) peaks well under 1 GiB;
/// 4 GiB leaves room for any honest component and stops one built to make
/// the compiler exhaust the machine.
pub const DEFAULT_COMPILE_MEMORY_BYTES: u64 = 4 << 30;

/// Longest gadget-name prefix, in bytes: prefixed names must still fit
/// the gadget-name limit with room for the name itself.
pub const MAX_PREFIX_BYTES: usize = 16;

/// The policy, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Policy {
    #[serde(default)]
    pub limits: PolicyLimits,
    /// Per plugin, by its manifest name.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginPolicy>,
}

/// `[limits]`: the ceilings over what manifests ask for, and the host-wide
/// memory budget. Each absent field keeps the built-in default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyLimits {
    pub max_timeout_ms: Option<u64>,
    pub max_memory_mib: Option<u64>,
    pub max_result_kib: Option<u64>,
    pub max_log_kib: Option<u64>,
    pub max_stdio_kib: Option<u64>,
    /// Linear memory of every call running at once, MiB.
    pub host_memory_mib: Option<u64>,
    /// Memory the compiler may use for one component, MiB.
    pub compile_memory_mib: Option<u64>,
}

/// `[plugins.NAME]`: what the operator says about one plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginPolicy {
    /// Prepended to each of its gadgets' names (to resolve a collision, or
    /// to say where a gadget comes from).
    pub prefix: Option<String>,
}

/// Why the policy file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: over the {MAX_MANIFEST_BYTES}-byte limit for a policy file", path.display())]
    TooLarge { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

impl Policy {
    /// The policy file to read: `explicit` (`--config`), else
    /// `$GADGET_CONFIG`, else the XDG path when that file exists.
    pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(path) = explicit {
            return Some(path.to_path_buf());
        }
        if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(path));
        }
        let config_home = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
        let path = config_home.join(CONFIG_RELATIVE_PATH);
        path.is_file().then_some(path)
    }

    /// Reads and checks a policy file.
    pub fn from_file(path: &Path) -> Result<Policy, PolicyError> {
        let read_error = |source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        };
        let metadata = std::fs::metadata(path).map_err(read_error)?;
        if !metadata.is_file() {
            return Err(PolicyError::Invalid {
                path: path.to_path_buf(),
                message: "not a regular file".into(),
            });
        }
        if metadata.len() > MAX_MANIFEST_BYTES {
            return Err(PolicyError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        Policy::parse(&text).map_err(|message| PolicyError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses and checks a policy's text.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let policy: Policy = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            match line {
                Some(line) => format!("{} (line {line})", e.message()),
                None => e.message().to_string(),
            }
        })?;
        for (plugin, grants) in &policy.plugins {
            if let Some(prefix) = &grants.prefix {
                // A prefix must keep every name a valid gadget name.
                if prefix.len() > MAX_PREFIX_BYTES {
                    return Err(format!(
                        "plugins.{plugin}.prefix: '{prefix}' is over {MAX_PREFIX_BYTES} bytes"
                    ));
                }
                check_gadget_name(prefix).map_err(|e| format!("plugins.{plugin}.prefix: {e}"))?;
            }
        }
        let limits = &policy.limits;
        let over = |what: &str, value: Option<u64>, unit: u64, hard: u64| match value {
            Some(v) if v.saturating_mul(unit) > hard => Err(format!(
                "limits.{what}: {v} is over the host's hard maximum of {}",
                hard / unit
            )),
            Some(0) => Err(format!("limits.{what}: must be more than 0")),
            _ => Ok(()),
        };
        over(
            "max-timeout-ms",
            limits.max_timeout_ms,
            1,
            HARD_MAX_TIMEOUT.as_millis() as u64,
        )?;
        over(
            "max-memory-mib",
            limits.max_memory_mib,
            1 << 20,
            HARD_MAX_MEMORY_BYTES,
        )?;
        over(
            "max-result-kib",
            limits.max_result_kib,
            1 << 10,
            MAX_RESULT_BYTES,
        )?;
        over("max-log-kib", limits.max_log_kib, 1 << 10, MAX_LOG_BYTES)?;
        over(
            "max-stdio-kib",
            limits.max_stdio_kib,
            1 << 10,
            MAX_STDIO_BYTES,
        )?;
        over("host-memory-mib", limits.host_memory_mib, 1, u64::MAX)?;
        over("compile-memory-mib", limits.compile_memory_mib, 1, u64::MAX)?;
        Ok(policy)
    }

    /// The ceilings this policy sets (the defaults where it says nothing).
    pub fn ceilings(&self) -> LimitCeilings {
        let defaults = LimitCeilings::default();
        let limits = &self.limits;
        LimitCeilings {
            timeout: limits
                .max_timeout_ms
                .map_or(defaults.timeout, Duration::from_millis),
            memory_bytes: limits
                .max_memory_mib
                .map_or(defaults.memory_bytes, |mib| mib << 20),
            result_bytes: limits
                .max_result_kib
                .map_or(defaults.result_bytes, |kib| kib << 10),
            log_bytes: limits
                .max_log_kib
                .map_or(defaults.log_bytes, |kib| kib << 10),
            stdio_bytes: limits
                .max_stdio_kib
                .map_or(defaults.stdio_bytes, |kib| kib << 10),
        }
    }

    /// Memory for compiling one component, bytes (the policy's, else
    /// [`DEFAULT_COMPILE_MEMORY_BYTES`]).
    pub fn compile_memory_bytes(&self) -> u64 {
        self.limits
            .compile_memory_mib
            .map_or(DEFAULT_COMPILE_MEMORY_BYTES, |mib| mib << 20)
    }

    /// The host-wide memory budget in bytes, if the policy sets one.
    pub fn host_memory_bytes(&self) -> Option<u64> {
        self.limits.host_memory_mib.map(|mib| mib << 20)
    }

    /// The prefix the operator gives a plugin's gadget names.
    pub fn prefix(&self, plugin: &str) -> Option<&str> {
        self.plugins.get(plugin)?.prefix.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_policy_keeps_every_default() {
        let policy = Policy::parse("").unwrap();
        assert_eq!(policy, Policy::default());
        assert_eq!(policy.ceilings(), LimitCeilings::default());
        assert_eq!(policy.host_memory_bytes(), None);
    }

    #[test]
    fn limits_and_prefixes_are_read() {
        let policy = Policy::parse(
            "[limits]\nmax-timeout-ms = 5000\nmax-memory-mib = 64\nhost-memory-mib = 512\n\n[plugins.web]\nprefix = \"web_\"\n",
        )
        .unwrap();
        let ceilings = policy.ceilings();
        assert_eq!(ceilings.timeout, Duration::from_secs(5));
        assert_eq!(ceilings.memory_bytes, 64 << 20);
        assert_eq!(policy.host_memory_bytes(), Some(512 << 20));
        assert_eq!(policy.prefix("web"), Some("web_"));
        assert_eq!(policy.prefix("other"), None);
    }

    #[test]
    fn unknown_fields_are_errors_that_name_the_line() {
        let error =
            Policy::parse("[limits]\nmax-timeout-ms = 5\nmax-memry-mib = 64\n").unwrap_err();
        assert!(error.contains("unknown field `max-memry-mib`"), "{error}");
        assert!(error.ends_with("(line 3)"), "{error}");
        let error = Policy::parse("[plugin.web]\nprefix = \"w_\"\n").unwrap_err();
        assert!(error.contains("unknown field `plugin`"), "{error}");
    }

    #[test]
    fn values_past_the_hard_maximum_or_bad_prefixes_are_refused() {
        let error = Policy::parse("[limits]\nmax-memory-mib = 8192\n").unwrap_err();
        assert!(
            error.contains("over the host's hard maximum of 4096"),
            "{error}"
        );
        let error = Policy::parse("[limits]\nmax-timeout-ms = 0\n").unwrap_err();
        assert!(error.contains("must be more than 0"), "{error}");
        let error = Policy::parse("[plugins.x]\nprefix = \"bad-prefix\"\n").unwrap_err();
        assert!(error.contains("plugins.x.prefix"), "{error}");
        let long = format!(
            "[plugins.x]\nprefix = \"{}\"\n",
            "p".repeat(MAX_PREFIX_BYTES + 1)
        );
        let error = Policy::parse(&long).unwrap_err();
        assert!(error.contains("is over 16 bytes"), "{error}");
    }
}
