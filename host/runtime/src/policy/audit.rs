//! `[audit]` in the policy: where the audit journal is written and
//! whether it records parameter values. `[telemetry]`: where OpenTelemetry data is exported.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// `[audit]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AuditPolicy {
    /// The journal file (relative to the policy file); `--audit FILE`
    /// overrides it.
    pub file: Option<PathBuf>,
    /// Record parameter values (secrets redacted), not only their shape.
    #[serde(default)]
    pub record_params: bool,
    /// The environment variable holding the journal's key: each line then
    /// carries an HMAC-SHA256 with it, so only a holder of the key can
    /// write (or rewrite) a line that `gadget audit verify` accepts.
    /// Without it the journal is keyed all the same, with a key the host
    /// makes in its own state ([`crate::journal_key`]).
    pub key_env: Option<String>,
    /// A plain hash chain, keyed by nothing: only on request, since anyone
    /// who can write the file can then edit it and rehash.
    #[serde(default)]
    pub unkeyed: bool,
}

/// `[telemetry]`: OTLP export (HTTP/protobuf). The standard `OTEL_*`
/// variables override each setting; with neither, telemetry is off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TelemetryPolicy {
    /// The collector's OTLP/HTTP base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (`/v1/traces` and `/v1/metrics` are added).
    pub endpoint: Option<String>,
    /// `service.name`; default `gadget-host`.
    pub service_name: Option<String>,
    /// Headers sent with each export (a collector's credentials).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Export metrics too (default true).
    pub metrics: Option<bool>,
}
