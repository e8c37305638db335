//! `[gadgets]` in the policy: which gadgets are served (allow and deny
//! patterns, from the file and from `--deny-gadget`), which wait for a
//! person, and the rule that refuses a name, in words that say where to
//! change it.

use std::path::PathBuf;

use serde::Deserialize;

use gadget_core::tool::glob_matches;

/// `[gadgets]`: names or globs (`*`, `?`), compared case-insensitively
/// with the name a gadget is served under. A gadget that is not allowed is
/// absent from the prompt and from every list, and refused when called.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GadgetRules {
    /// When present, only these.
    pub allow: Option<Vec<String>>,
    #[serde(default)]
    pub deny: Vec<String>,
    /// Every call of these waits for a person's approval.
    #[serde(default)]
    pub approve: Vec<String>,
    /// How long a call waits for approval before it is denied, ms;
    /// default 300000 (5 minutes).
    pub approval_timeout_ms: Option<u64>,
    /// Patterns made to wait with `--approve-gadget` for this run (also in
    /// `approve`).
    #[serde(skip)]
    pub approved_by_flag: Vec<String>,
    /// The policy file the rules were read from, for refusals to name.
    #[serde(skip)]
    pub file: Option<PathBuf>,
    /// Patterns denied with `--deny-gadget` for this run (also in `deny`).
    #[serde(skip)]
    pub denied_by_flag: Vec<String>,
}

impl GadgetRules {
    /// `Err` with the rule that refuses the gadget.
    pub fn check(&self, name: &str) -> Result<(), DenyRule> {
        if let Some(pattern) = self.deny.iter().find(|p| glob_matches(p, name)) {
            return Err(DenyRule::Denied {
                pattern: pattern.clone(),
                origin: if self.denied_by_flag.contains(pattern) {
                    RuleSource::Flag
                } else {
                    RuleSource::File(self.file.clone())
                },
            });
        }
        match &self.allow {
            Some(allow) if !allow.iter().any(|p| glob_matches(p, name)) => {
                Err(DenyRule::NotAllowed {
                    file: self.file.clone(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// Where a rule was written: so a refusal says where to change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSource {
    /// The policy file (its path, when it was read from one).
    File(Option<PathBuf>),
    /// `--deny-gadget` on this command line.
    Flag,
}

fn in_file(file: &Option<PathBuf>) -> String {
    file.as_ref()
        .map(|f| format!("{}: ", f.display()))
        .unwrap_or_default()
}

/// Why a loaded gadget is not served: the rule, as the sentence "gadget
/// 'X' is {rule}" completes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DenyRule {
    /// A `[gadgets] deny` pattern (or `--deny-gadget`) matches it.
    #[error("{}", match origin {
        RuleSource::Flag => format!("denied for this run (--deny-gadget \"{pattern}\")"),
        RuleSource::File(file) => format!("denied by the operator's policy ({}[gadgets] deny = \"{pattern}\")", in_file(file)),
    })]
    Denied { pattern: String, origin: RuleSource },
    /// A `[gadgets] allow` list is given and no pattern in it matches.
    #[error("not in the operator's [gadgets] allow list{}", file.as_ref().map(|f| format!(" ({})", f.display())).unwrap_or_default())]
    NotAllowed { file: Option<PathBuf> },
    /// More than one plugin serves the name (compared case-insensitively).
    #[error(
        "claimed by plugins {}: none of them serves it until the policy file tells them apart with [plugins.NAME] prefix = \"...\"",
        quoted_and(plugins)
    )]
    Contested { plugins: Vec<String> },
}

fn quoted_and(plugins: &[String]) -> String {
    let quoted: Vec<String> = plugins.iter().map(|p| format!("'{p}'")).collect();
    quoted.join(" and ")
}
