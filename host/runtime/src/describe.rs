//! The JSON forms of loaded gadgets and call reports (`gadget list
//! --json`, `gadget describe --json`, `gadget call --json`), as
//! `Serialize` types so that every front end (the CLI, the MCP server,
//! server mode) writes the same shapes from the same code.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use gadget_core::call::{CallReport, FailureKind, Outcome};
use gadget_core::ledger::{LogEntry, Update};

use crate::WasmGadget;
use crate::manifest::Permissions;

/// One gadget in `gadget list --json`.
#[derive(Debug, Clone, Serialize)]
pub struct GadgetSummary<'a> {
    pub name: &'a str,
    pub label: Option<&'a str>,
    pub description: &'a str,
    pub plugin: &'a str,
    pub timeout_ms: u64,
    pub exclusive: bool,
    pub max_concurrent: Option<u32>,
    /// What the plugin asks for.
    pub requested_permissions: &'a Permissions,
    /// What its calls get (config by key only).
    pub granted_permissions: Value,
    /// Requests not granted and grants not applied.
    pub permission_notes: &'a [crate::resolve::GrantNote],
    /// Whether models and clients are offered it: false while its plugin
    /// lacks a grant it asks for (`permission_notes` says which).
    pub available: bool,
    /// Where its plugin was loaded from (a path or an `oci://` reference).
    pub source: &'a str,
    /// SHA-256 of its component, hex.
    pub sha256: &'a str,
    /// What its signatures say (`signed by acme`, `unsigned`, `not checked`).
    pub signature: &'a str,
}

impl<'a> From<&'a WasmGadget> for GadgetSummary<'a> {
    fn from(g: &'a WasmGadget) -> Self {
        GadgetSummary {
            name: &g.card.spec.name,
            label: g.card.spec.label.as_deref(),
            description: &g.card.spec.description,
            plugin: &g.plugin.identity.name,
            timeout_ms: g.limits.timeout.as_millis() as u64,
            exclusive: g.card.spec.exclusive,
            max_concurrent: g.card.spec.max_concurrent,
            requested_permissions: &g.plugin.access.requested,
            granted_permissions: g.plugin.access.grants.grants.to_json(),
            permission_notes: &g.plugin.report.grant_notes,
            available: g.plugin.is_available(),
            source: &g.plugin.origin.source,
            sha256: &g.plugin.origin.digest,
            signature: &g.plugin.origin.signature,
        }
    }
}

/// One gadget in full, `gadget describe --json`.
#[derive(Debug, Clone, Serialize)]
pub struct GadgetDescription<'a> {
    pub name: &'a str,
    pub label: Option<&'a str>,
    pub description: &'a str,
    pub parameters_schema: Option<&'a Value>,
    pub examples: Vec<ExampleJson<'a>>,
    pub exclusive: bool,
    pub max_concurrent: Option<u32>,
    pub limits: LimitsJson,
    pub plugin: PluginJson<'a>,
    /// Whether models and clients are offered it (see [`GadgetSummary`]).
    pub available: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExampleJson<'a> {
    /// The parameters as JSON (`null` if they were not valid JSON, which
    /// loading refuses).
    pub params: Value,
    pub output: Option<&'a str>,
    pub comment: Option<&'a str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LimitsJson {
    pub timeout_ms: u64,
    pub grace_ms: u64,
    pub memory_bytes: u64,
    pub result_bytes: u64,
    pub log_bytes: u64,
    pub stdio_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PluginJson<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub description: &'a str,
    pub path: &'a std::path::Path,
    /// Where it was loaded from, as the operator named it (a path or an
    /// `oci://` reference; `path` is then its place in the cache).
    pub source: &'a str,
    /// What its signatures say (`signed by acme`, `unsigned`, `not checked`).
    pub signature: &'a str,
    pub component: &'a PathBuf,
    pub sha256: &'a str,
    /// What its signatures say (`signed by acme`, `unsigned`), when the
    /// policy has a `[trust]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
    pub requested_permissions: &'a Permissions,
    /// What its calls get: the requests AND the operator's grants (config
    /// by key only: values never appear).
    pub granted_permissions: Value,
    /// Requests not granted and grants not applied.
    pub permission_notes: &'a [crate::resolve::GrantNote],
}

impl<'a> From<&'a WasmGadget> for GadgetDescription<'a> {
    fn from(g: &'a WasmGadget) -> Self {
        let limits = &g.limits;
        GadgetDescription {
            name: &g.card.spec.name,
            label: g.card.spec.label.as_deref(),
            description: &g.card.spec.description,
            parameters_schema: g.card.schema.schema(),
            examples: g
                .card
                .spec
                .examples
                .iter()
                .map(|e| ExampleJson {
                    params: serde_json::from_str(&e.params).unwrap_or(Value::Null),
                    output: e.output.as_deref(),
                    comment: e.comment.as_deref(),
                })
                .collect(),
            exclusive: g.card.spec.exclusive,
            max_concurrent: g.card.spec.max_concurrent,
            limits: LimitsJson {
                timeout_ms: limits.timeout.as_millis() as u64,
                grace_ms: limits.grace.as_millis() as u64,
                memory_bytes: limits.memory_bytes,
                result_bytes: limits.result_bytes,
                log_bytes: limits.log_bytes,
                stdio_bytes: limits.stdio_bytes,
            },
            plugin: PluginJson {
                name: &g.plugin.identity.name,
                version: &g.plugin.identity.version,
                description: &g.plugin.identity.description,
                path: g.plugin.artifact.source.path(),
                source: &g.plugin.origin.source,
                signature: &g.plugin.origin.signature,
                component: &g.plugin.artifact.component_path,
                sha256: &g.plugin.artifact.sha256,
                provenance: g.plugin.artifact.provenance.as_ref().map(|p| p.describe()),
                requested_permissions: &g.plugin.access.requested,
                granted_permissions: g.plugin.access.grants.grants.to_json(),
                permission_notes: &g.plugin.report.grant_notes,
            },
            available: g.plugin.is_available(),
        }
    }
}

/// A failure in JSON: its kind and the text the model sees.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorJson {
    pub kind: FailureKind,
    pub message: String,
}

/// A call that was not started (`gadget call --json` on an unknown gadget
/// or invalid parameters).
#[derive(Debug, Clone, Serialize)]
pub struct RejectedJson<'a> {
    pub gadget: &'a str,
    pub invocation_id: &'a str,
    pub error: ErrorJson,
}

/// Everything a call produced, `gadget call --json`.
#[derive(Debug, Clone, Serialize)]
pub struct CallJson<'a> {
    pub gadget: &'a str,
    pub invocation_id: &'a str,
    pub ok: bool,
    pub outcome: Option<&'a Outcome>,
    pub result: Option<&'a str>,
    pub details: Option<&'a Value>,
    pub error: Option<ErrorJson>,
    pub cost_usd: f64,
    pub duration_ms: f64,
    pub logs: &'a [LogEntry],
    pub progress: &'a [String],
    pub updates: &'a [Update],
    pub dropped_log_entries: u64,
    pub stdout: String,
    pub stdout_dropped_bytes: u64,
    pub stderr: String,
    pub stderr_dropped_bytes: u64,
}

impl<'a> CallJson<'a> {
    pub fn new(gadget: &'a str, invocation_id: &'a str, report: &'a CallReport) -> CallJson<'a> {
        let (result, details) = match &report.outcome {
            Ok(
                Outcome::Result {
                    result, details, ..
                }
                | Outcome::Finish {
                    result, details, ..
                },
            ) => (Some(result.as_str()), details.as_ref()),
            _ => (None, None),
        };
        CallJson {
            gadget,
            invocation_id,
            ok: report.outcome.is_ok(),
            outcome: report.outcome.as_ref().ok(),
            result,
            details,
            error: report.outcome.as_ref().err().map(|error| ErrorJson {
                kind: error.kind(),
                message: error.to_string(),
            }),
            cost_usd: report.cost,
            duration_ms: report.duration.as_secs_f64() * 1000.0,
            logs: &report.logs,
            progress: &report.progress,
            updates: &report.updates,
            dropped_log_entries: report.dropped_log_entries,
            stdout: String::from_utf8_lossy(&report.stdout.bytes).into_owned(),
            stdout_dropped_bytes: report.stdout.dropped,
            stderr: String::from_utf8_lossy(&report.stderr.bytes).into_owned(),
            stderr_dropped_bytes: report.stderr.dropped,
        }
    }
}
