//! `[plugins.NAME]`: what the operator says about one plugin: its name's
//! prefix, and each door it is granted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::manifest::FileMode;

/// Longest gadget-name prefix, in bytes: prefixed names must still fit
/// the gadget-name limit with room for the name itself.
pub const MAX_PREFIX_BYTES: usize = 16;

/// `[plugins.NAME]`: what the operator says about one plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginPolicy {
    /// Prepended to each of its gadgets' names (to resolve a collision, or
    /// to say where a gadget comes from).
    pub prefix: Option<String>,
    /// Its `exclusive` gadgets run alone in the whole run (llmist's
    /// meaning). By default a plugin's own word holds only its own calls:
    /// a third-party plugin cannot stall every other tool by declaring
    /// itself exclusive.
    #[serde(default)]
    pub run_exclusive: bool,
    /// Origins it may send HTTP requests to, each whole or scoped to some
    /// methods and paths.
    #[serde(default)]
    pub http: Vec<HttpGrantSpec>,
    /// Internal addresses (or ranges) its granted names may resolve to.
    #[serde(default)]
    pub allow_addresses: Vec<String>,
    /// Directories it may open.
    #[serde(default)]
    pub files: Vec<FileGrant>,
    /// Environment variables of its instances, by name.
    #[serde(default)]
    pub config: BTreeMap<String, ConfigSource>,
    /// Secrets the host keeps and puts on its HTTP requests itself: the
    /// gadget's environment holds a placeholder, never the value.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretSpec>,
    /// Completions through the host's LLM providers (the `llm` import of
    /// gadget:plugin@0.2.0).
    pub llm: Option<LlmPolicy>,
    /// Load it only signed (`"signed"`) or as it comes (`"any"`), whatever
    /// `[trust] require` says for the others.
    pub require: Option<super::Require>,
    /// Its grants apply only while its component verifies as signed by
    /// this `[trust.signers]` entry (a new digest from the same signer
    /// keeps them; anything else loads with none).
    pub signer: Option<String>,
    /// The registry its grants are for (`oci://REGISTRY/REPOSITORY`, with
    /// a tag or digest to name just that): a plugin pulled from a
    /// registry gets this entry's grants only when it names its source (or
    /// a `signer`), and a plugin from anywhere else never does. A name
    /// claimed inside an artifact never earns another source's grants.
    pub source: Option<String>,
}

/// One `http` grant as the policy writes it: an origin
/// (`"https://a.example"`), or an origin with the methods and paths it is
/// for (`{ origin = "https://api.example", methods = ["GET"], paths =
/// ["/v1/public/*"] }`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum HttpGrantSpec {
    Origin(String),
    Scoped(ScopedHttpGrant),
}

/// An origin granted for some methods and paths only.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopedHttpGrant {
    pub origin: String,
    /// The methods it is for (any case; none listed: any).
    #[serde(default)]
    pub methods: Vec<String>,
    /// Globs over the request's path (`*` any run of characters, `?`
    /// one; none listed: any path).
    #[serde(default)]
    pub paths: Vec<String>,
}

impl HttpGrantSpec {
    /// The grant, parsed and checked.
    pub fn rule(&self) -> Result<crate::grants::OriginRule, String> {
        match self {
            HttpGrantSpec::Origin(origin) => crate::grants::OriginRule::parse(origin),
            HttpGrantSpec::Scoped(scoped) => crate::grants::OriginRule::parse(&scoped.origin)?
                .scoped(&scoped.methods, &scoped.paths),
        }
    }
}

impl PartialEq<&str> for HttpGrantSpec {
    /// A whole-origin grant compares with its text (`"https://a.example"`).
    fn eq(&self, other: &&str) -> bool {
        matches!(self, HttpGrantSpec::Origin(origin) if origin == other)
    }
}

impl From<&str> for HttpGrantSpec {
    fn from(origin: &str) -> HttpGrantSpec {
        HttpGrantSpec::Origin(origin.to_string())
    }
}

impl PluginPolicy {
    /// Whether it grants anything at all.
    pub fn grants_anything(&self) -> bool {
        !self.http.is_empty()
            || !self.files.is_empty()
            || !self.config.is_empty()
            || !self.secrets.is_empty()
            || self.llm.is_some()
    }

    /// Whether `reference` (an `oci://` reference as given) is the source
    /// this entry names: the same, or the same repository when the entry
    /// names no tag or digest.
    pub fn names_source(&self, reference: &str) -> bool {
        let Some(wanted) = &self.source else {
            return false;
        };
        let strip = |r: &str| r.trim().trim_start_matches("oci://").to_string();
        let (wanted, reference) = (strip(wanted), strip(reference));
        reference == wanted
            || reference
                .strip_prefix(&wanted)
                .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('@'))
                // A tag's colon, not a port's: the repository is all there.
                && !reference[wanted.len()..].contains('/')
    }

    /// The same, without a single grant: what a component that is not
    /// signed by the plugin's bound signer gets.
    pub fn ungranted(&self) -> PluginPolicy {
        PluginPolicy {
            prefix: self.prefix.clone(),
            run_exclusive: self.run_exclusive,
            require: self.require,
            signer: self.signer.clone(),
            source: self.source.clone(),
            ..PluginPolicy::default()
        }
    }
}

/// `llm = { models = ["openai:gpt-4o-mini"], max-usd-per-call = 0.05 }`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LlmPolicy {
    /// `provider:model` names the plugin may use; the first is its default.
    pub models: Vec<String>,
    /// What one call's completions may cost together, USD; absent: no cap.
    pub max_usd_per_call: Option<f64>,
    /// What all of the plugin's completions may cost together in one run
    /// (one `run`/`agent`/`call`, or one load in `mcp`/`serve`), USD.
    pub max_usd_per_run: Option<f64>,
}

/// `{ host = "./data", guest = "/data", mode = "ro" }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileGrant {
    /// The directory on the host (relative: to the policy file's directory).
    pub host: PathBuf,
    /// Where the gadget sees it; default `/` and the directory's name.
    pub guest: Option<String>,
    #[serde(default)]
    pub mode: FileMode,
    /// Bytes one call may write into it, MiB (read-write grants; default
    /// `DEFAULT_GRANT_WRITE_BYTES`).
    #[serde(rename = "write-quota-mib")]
    pub write_quota_mib: Option<u64>,
    /// Files, directories and links one call may create in it (default
    /// `DEFAULT_GRANT_ENTRIES`).
    #[serde(rename = "max-entries")]
    pub max_entries: Option<u64>,
    /// Grant it even though it is, holds or lies in the policy file's tree
    /// or the user's configuration and credential directories
    /// (`crate::sensitive`): only on purpose.
    #[serde(default)]
    pub sensitive: bool,
}

/// One brokered secret as the policy writes it (`[plugins.NAME.secrets.KEY]`;
/// checked in `secret`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// The host's environment variable holding the value (read at load).
    pub env: String,
    /// Where the value may be sent: origins, whole or for some methods
    /// and paths, as in `http`.
    pub origins: Vec<HttpGrantSpec>,
    /// The request header the host sets to the value on every request to
    /// those origins; absent: the value goes where the gadget's request
    /// carries the placeholder (a header or the query).
    pub header: Option<String>,
    /// The header's value, `{}` standing for the secret (`"Bearer {}"`);
    /// default `{}`.
    pub format: Option<String>,
}

impl SecretSpec {
    /// Its origins and header, parsed: all of them, or why not, starting
    /// with the field at fault (a secret is never bound to fewer origins
    /// or to no header than written).
    pub fn compiled(
        &self,
    ) -> Result<(Vec<crate::grants::OriginRule>, Option<http::HeaderName>), String> {
        let origins = self
            .origins
            .iter()
            .map(HttpGrantSpec::rule)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("origins: {e}"))?;
        let header = match &self.header {
            None => None,
            Some(header) => Some(
                http::HeaderName::from_bytes(header.as_bytes())
                    .map_err(|_| format!("header: '{header}' is not a header name"))?,
            ),
        };
        Ok((origins, header))
    }
}

/// `{ env = "VAR" }` (a secret, read from the host's environment at load,
/// that the gadget sees: the weaker form of `secrets`) or `{ value = "..." }`
/// (plain configuration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSource {
    pub env: Option<String>,
    pub value: Option<String>,
}
