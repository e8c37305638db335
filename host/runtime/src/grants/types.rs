//! What each call of one plugin gets: directories, HTTP rules, config,
//! the LLM, and the redactor for its secrets.

use std::path::PathBuf;
use std::sync::Arc;

use gadget_core::call::{CallError, Outcome};
use gadget_core::redact::Redactor;

use super::llm::LlmGrant;
use super::opened::{OpenedDir, WriteQuota};
use super::secrets::BrokeredSecret;
use crate::manifest::FileMode;
use crate::origins::HttpRules;

/// What each call of one plugin gets: its grants, and the redactor for
/// the secrets among them.
#[derive(Debug, Default)]
pub struct CallGrants {
    /// The plugin's manifest name (in refusals).
    pub plugin: String,
    pub grants: Grants,
    pub redactor: Arc<Redactor>,
    /// The plugin's HTTP client, built by the HTTP import at its first
    /// request: its own connection pool and a resolver enforcing its
    /// address rules.
    pub(crate) client: std::sync::OnceLock<Result<reqwest::Client, String>>,
}

impl CallGrants {
    pub fn new(plugin: &str, grants: Grants) -> CallGrants {
        let redactor = Arc::new(Redactor::new(grants.secrets()));
        CallGrants {
            plugin: plugin.to_string(),
            grants,
            redactor,
            client: std::sync::OnceLock::new(),
        }
    }

    /// An outcome with the plugin's secrets replaced.
    pub fn redact_outcome(&self, outcome: Outcome) -> Outcome {
        let r = &self.redactor;
        if r.is_empty() {
            return outcome;
        }
        match outcome {
            Outcome::Result {
                result,
                details,
                rich,
            } => Outcome::Result {
                result: r.string(result),
                details: details.map(|d| r.value(d)),
                rich: rich.map(|rich| Box::new(r.rich(*rich))),
            },
            Outcome::Finish {
                result,
                details,
                rich,
            } => Outcome::Finish {
                result: r.string(result),
                details: details.map(|d| r.value(d)),
                rich: rich.map(|rich| Box::new(r.rich(*rich))),
            },
            Outcome::AskHuman { question } => Outcome::AskHuman {
                question: r.string(question),
            },
        }
    }

    /// An error with the plugin's secrets replaced in what the gadget wrote.
    pub fn redact_error(&self, error: CallError) -> CallError {
        let r = &self.redactor;
        match error {
            CallError::InvalidArguments { message } => CallError::InvalidArguments {
                message: r.string(message),
            },
            CallError::Failed { message } => CallError::Failed {
                message: r.string(message),
            },
            CallError::Crashed { gadget, reason } => CallError::Crashed {
                gadget,
                reason: r.string(reason),
            },
            other => other,
        }
    }
}

/// What a plugin's calls get.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grants {
    pub files: Vec<DirGrant>,
    pub http: HttpRules,
    pub config: Vec<ConfigGrant>,
    /// Secrets the host puts on the plugin's HTTP requests itself (its
    /// config holds their placeholders).
    pub brokered: Vec<BrokeredSecret>,
    /// Completions through the host's LLM, when asked for and granted.
    pub llm: Option<LlmGrant>,
}

/// A directory visible to the plugin's calls.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DirGrant {
    /// Canonical path on the host.
    pub host: PathBuf,
    /// Where the gadget opens it.
    pub guest: String,
    pub mode: FileMode,
    /// The directory itself, open since the grant was resolved: each call's
    /// preopen is made from it, never from the path again.
    #[serde(skip)]
    pub opened: Arc<OpenedDir>,
    /// What one call may write into it (read-write grants).
    pub quota: WriteQuota,
}

/// An environment variable of the plugin's instances.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigGrant {
    pub key: String,
    pub value: String,
    /// Read from the host's environment: never shown, redacted from output.
    pub secret: bool,
}

impl std::fmt::Debug for ConfigGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigGrant")
            .field("key", &self.key)
            .field(
                "value",
                &if self.secret {
                    "[redacted]"
                } else {
                    &self.value
                },
            )
            .finish()
    }
}

impl Grants {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.http.origins.is_empty()
            && self.config.is_empty()
            && self.llm.is_none()
    }

    /// The secret values to redact from what the plugin's calls emit
    /// (a brokered one can reach them only if an origin echoes it in a
    /// way the HTTP door does not recognise).
    pub fn secrets(&self) -> Vec<String> {
        let config = self.config.iter().filter(|c| c.secret).map(|c| &c.value);
        let config = config.map(|value| value.to_string());
        // A brokered value also as the query carries it.
        let brokered = self.brokered.iter().flat_map(|b| {
            let encoded = super::secrets::percent_encode(b.value());
            [b.value().to_string(), encoded]
        });
        let mut values: Vec<String> = config
            .chain(brokered)
            .filter(|value| !value.is_empty())
            .collect();
        values.dedup();
        values
    }

    /// "http: https://a.com; config: KEY; files: /data (ro)", or "none",
    /// for reports.
    pub fn describe(&self) -> String {
        if self.is_empty() {
            return "none".into();
        }
        let mut parts = Vec::new();
        if !self.http.origins.is_empty() {
            let origins: Vec<String> = self.http.origins.iter().map(|o| o.describe()).collect();
            parts.push(format!("http: {}", origins.join(", ")));
        }
        // A brokered secret's key holds its placeholder in the config: it
        // is listed once, as the secret it is.
        let keys: Vec<&str> = self
            .config
            .iter()
            .map(|c| c.key.as_str())
            .filter(|key| !self.brokered.iter().any(|b| b.key == *key))
            .collect();
        if !keys.is_empty() {
            parts.push(format!("config: {}", keys.join(", ")));
        }
        if !self.brokered.is_empty() {
            let secrets: Vec<String> = self.brokered.iter().map(|b| b.describe()).collect();
            parts.push(format!("secrets: {}", secrets.join("; ")));
        }
        if !self.files.is_empty() {
            let files: Vec<String> = self
                .files
                .iter()
                .map(|f| format!("{} ({}, from {})", f.guest, f.mode, f.host.display()))
                .collect();
            parts.push(format!("files: {}", files.join(", ")));
        }
        if let Some(llm) = &self.llm {
            let mut budget = String::new();
            if let Some(usd) = llm.max_usd_per_call {
                budget.push_str(&format!(", up to ${usd} per call"));
            }
            if let Some(usd) = llm.max_usd_per_run {
                budget.push_str(&format!(", up to ${usd} per run"));
            }
            parts.push(format!("llm: {}{budget}", llm.models.join(", ")));
        }
        parts.join("; ")
    }

    /// The grants as JSON for `describe --json` and `list --json` (secret
    /// values never appear; config shows keys only).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "http": self.http.origins.iter().map(|o| o.describe()).collect::<Vec<_>>(),
            "allow_addresses": self.http.addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "config": self.config.iter().map(|c| &c.key).collect::<Vec<_>>(),
            "secrets": self.brokered.iter().map(|b| serde_json::json!({
                "key": b.key,
                "origins": b.origins.origins.iter().map(|o| o.describe()).collect::<Vec<_>>(),
                "header": b.header.as_ref().map(|h| h.as_str()),
            })).collect::<Vec<_>>(),
            "files": self.files,
            "llm": self.llm,
        })
    }
}
