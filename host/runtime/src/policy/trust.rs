//! `[trust]`: the signers whose signatures count, and whether a plugin
//! must carry one to load.
//!
//! ```toml
//! [trust]
//! require = "signed"          # or "any" (the default)
//! [trust.signers.acme]
//! key = "keys/acme.pub"       # relative to the policy file, or an inline PEM key
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[trust]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TrustPolicy {
    #[serde(default)]
    pub require: Require,
    #[serde(default)]
    pub signers: BTreeMap<String, SignerSpec>,
}

/// Whether a plugin must be signed by one of the signers to load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Require {
    /// Signed or not; a signature that the signers' keys do not verify
    /// still refuses it when there are signers.
    #[default]
    Any,
    /// Signed by one of `[trust.signers]`, and unchanged since.
    Signed,
}

/// `[trust.signers.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignerSpec {
    /// A public key file (relative to the policy file) or an inline PEM key.
    pub key: String,
}
