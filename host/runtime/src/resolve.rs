//! How a manifest's requests and the operator's grants become a plugin's
//! grants, with a note for each request not met and each grant not applied.
//! Above both the policy and the grants' types (it reads one and makes the
//! other), so neither depends on it.

use std::sync::Arc;

use crate::grants::{
    ConfigGrant, DirGrant, Grants, HttpRequestRule, IpRange, LlmGrant, OriginRule,
    default_guest_path,
};

use crate::dirs::{OpenedDir, WriteQuota};
use crate::manifest::{FileMode, Permissions};
use crate::policy::{ConfigSource, PluginPolicy};

/// What the manifest asks for AND the operator grants, and a note for each
/// request not met and each grant not applied. `env` reads the host's
/// environment (for `env = "VAR"` values).
pub fn resolve(
    plugin: &str,
    requested: &Permissions,
    policy: Option<&PluginPolicy>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Grants, Vec<String>) {
    let empty = PluginPolicy::default();
    let policy = policy.unwrap_or(&empty);
    let mut grants = Grants::default();
    let mut notes = Vec::new();

    http(plugin, requested, policy, &mut grants, &mut notes);
    config(plugin, requested, policy, env, &mut grants, &mut notes);
    llm(plugin, requested, policy, &mut grants, &mut notes);
    files(plugin, requested, policy, &mut grants, &mut notes);
    (grants, notes)
}

/// HTTP: each operator origin applies when some request covers it.
fn http(
    plugin: &str,
    requested: &Permissions,
    policy: &PluginPolicy,
    grants: &mut Grants,
    notes: &mut Vec<String>,
) {
    let requests: Vec<(String, HttpRequestRule)> = requested
        .http
        .iter()
        .filter_map(|r| Some((r.clone(), HttpRequestRule::parse(r).ok()?)))
        .collect();
    let mut met = vec![false; requests.len()];
    for text in &policy.http {
        let Ok(rule) = OriginRule::parse(text) else {
            continue; // checked when the policy was read
        };
        let covering: Vec<usize> = (0..requests.len())
            .filter(|&i| requests[i].1.covers(&rule))
            .collect();
        if covering.is_empty() {
            notes.push(format!(
                "http {text} is granted, but the manifest does not ask for it: not applied"
            ));
            continue;
        }
        for i in covering {
            met[i] = true;
        }
        grants.http.origins.push(rule);
    }
    for ((text, _), met) in requests.iter().zip(met) {
        if !met {
            let how = if text == "*" {
                format!("[plugins.{plugin}] http = [\"https://HOST\"]")
            } else {
                format!(
                    "[plugins.{plugin}] http = [\"https://{}\"]",
                    text.trim_start_matches("https://")
                )
            };
            notes.push(format!(
                "asks for http {text}, not granted (grant it with {how})"
            ));
        }
    }
    if !grants.http.origins.is_empty() {
        grants.http.addresses = policy
            .allow_addresses
            .iter()
            .filter_map(|a| IpRange::parse(a).ok())
            .collect();
    }
}

/// Config: by key.
fn config(
    plugin: &str,
    requested: &Permissions,
    policy: &PluginPolicy,
    env: &dyn Fn(&str) -> Option<String>,
    grants: &mut Grants,
    notes: &mut Vec<String>,
) {
    for key in &requested.config {
        match policy.config.get(key) {
            None => notes.push(format!(
                "asks for config {key}, not granted (grant it with [plugins.{plugin}] config = {{ {key} = {{ env = \"VAR\" }} }})"
            )),
            Some(ConfigSource { env: Some(var), .. }) => match env(var) {
                Some(value) => grants.config.push(ConfigGrant {
                    key: key.clone(),
                    value,
                    secret: true,
                }),
                None => notes.push(format!(
                    "config {key} is granted from ${var}, which is not set: not applied"
                )),
            },
            Some(ConfigSource {
                value: Some(value), ..
            }) => grants.config.push(ConfigGrant {
                key: key.clone(),
                value: value.clone(),
                secret: false,
            }),
            Some(_) => {} // checked when the policy was read
        }
    }
    for key in policy.config.keys() {
        if !requested.config.contains(key) {
            notes.push(format!(
                "config {key} is granted, but the manifest does not ask for it: not applied"
            ));
        }
    }
}

/// LLM: the manifest asks, the operator names the models and budget.
fn llm(
    plugin: &str,
    requested: &Permissions,
    policy: &PluginPolicy,
    grants: &mut Grants,
    notes: &mut Vec<String>,
) {
    match (&policy.llm, requested.llm) {
        (Some(llm), true) => {
            grants.llm = Some(LlmGrant::new(
                llm.models.clone(),
                llm.max_usd_per_call,
                llm.max_usd_per_run,
            ))
        }
        (Some(_), false) => notes.push(
            "llm is granted, but the manifest does not ask for it: not applied".to_string(),
        ),
        (None, true) => notes.push(format!(
            "asks for llm, not granted (grant it with [plugins.{plugin}] llm = {{ models = [\"openai:gpt-4o-mini\"], max-usd-per-call = 0.05 }} or --grant {plugin}:llm=openai:gpt-4o-mini)"
        )),
        (None, false) => {}
    }
}

/// Files: each operator directory applies when the manifest asks for its
/// guest path (or for `*`); the mode is the narrower of the two.
fn files(
    plugin: &str,
    requested: &Permissions,
    policy: &PluginPolicy,
    grants: &mut Grants,
    notes: &mut Vec<String>,
) {
    let mut files_met = vec![false; requested.files.len()];
    for grant in &policy.files {
        let guest = grant
            .guest
            .clone()
            .unwrap_or_else(|| default_guest_path(&grant.host));
        let request = requested
            .files
            .iter()
            .position(|r| r.path() == guest)
            .or_else(|| requested.files.iter().position(|r| r.path() == "*"));
        let Some(index) = request else {
            notes.push(format!(
                "files {} → {guest} is granted, but the manifest does not ask for {guest}: not applied",
                grant.host.display()
            ));
            continue;
        };
        if grants.files.iter().any(|f| f.guest == guest) {
            notes.push(format!(
                "files: {guest} is granted twice; the first grant applies"
            ));
            continue;
        }
        let host = match grant.host.canonicalize() {
            Ok(host) if host.is_dir() => host,
            Ok(_) => {
                notes.push(format!(
                    "files {} is granted but is not a directory: not applied",
                    grant.host.display()
                ));
                continue;
            }
            Err(e) => {
                notes.push(format!(
                    "files {} is granted but cannot be used ({e}): not applied",
                    grant.host.display()
                ));
                continue;
            }
        };
        let wanted = requested.files[index].mode();
        let mode = wanted.min(grant.mode);
        if grant.mode == FileMode::ReadWrite && wanted == FileMode::ReadOnly {
            notes.push(format!(
                "files {guest} is granted rw, but the manifest asks for ro: read-only"
            ));
        }
        if grant.mode == FileMode::ReadOnly && wanted == FileMode::ReadWrite {
            notes.push(format!(
                "files {guest}: the manifest asks for rw, granted ro: read-only"
            ));
        }
        let opened = match OpenedDir::open(&host) {
            Ok(opened) => Arc::new(opened),
            Err(e) => {
                notes.push(format!(
                    "files {} is granted but cannot be opened ({e}): not applied",
                    grant.host.display()
                ));
                continue;
            }
        };
        files_met[index] = true;
        let defaults = WriteQuota::default();
        let quota = WriteQuota {
            bytes: grant
                .write_quota_mib
                .map_or(defaults.bytes, |mib| mib.saturating_mul(1 << 20)),
            entries: grant.max_entries.unwrap_or(defaults.entries),
        };
        grants.files.push(DirGrant {
            host,
            guest,
            mode,
            opened,
            quota,
        });
    }
    for (request, met) in requested.files.iter().zip(files_met) {
        if !met {
            let guest = if request.path() == "*" {
                "/PATH".to_string()
            } else {
                request.path().to_string()
            };
            notes.push(format!(
                "asks for files {} ({}), not granted (grant it with [plugins.{plugin}] files = [{{ host = \"DIR\", guest = \"{guest}\" }}] or --grant {plugin}:files=DIR:{guest})",
                request.path(),
                request.mode()
            ));
        }
    }
}
