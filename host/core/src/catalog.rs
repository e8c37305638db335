//! What a plugin serves besides its gadgets (contract 0.3.0's `catalog`
//! export): resources (fixed URIs and URI templates), prompts with
//! arguments, and argument completion. [`CatalogSpecs`] is what a plugin
//! said at load time; a [`Catalog`] reads and renders them, each in a
//! fresh instance under the plugin's grants (the runtime's), and the MCP
//! server serves every catalog it is given.
//!
//! The checks that do not need the plugin live here: which template a URI
//! matches ([`match_template`]), whether a prompt's arguments fit it
//! ([`check_arguments`]), and completion from an argument's examples
//! ([`complete_from`]).

use std::sync::Arc;

use serde::Serialize;

use crate::call::CallError;
use crate::content::{Content, ResourceContents};
use crate::ledger::CallObserver;
use crate::scope::{CallScope, EntryKind, Origin};
use crate::signal::AbortSignal;

/// A catalog's answer, later (the tool module's `BoxFuture`, spelled out
/// so that this module does not depend on it: `Tools` lists catalogs).
pub type Later<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The most completion values returned for one request (MCP's limit).
pub const MAX_COMPLETIONS: usize = 100;

/// The most resources, templates or prompts one plugin may list: a
/// catalog is read at load time and sent whole on every list request.
pub const MAX_CATALOG_ENTRIES: usize = 1000;

/// A resource with a fixed URI.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceSpec {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
}

/// A family of resources named by a URI template.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateSpec {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptArgument {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
    /// Values offered when a client completes the argument.
    pub examples: Vec<String>,
}

/// A prompt a plugin renders.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptSpec {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgument>,
}

/// Who says a message of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    pub role: Speaker,
    pub content: Content,
}

/// A rendered prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptResult {
    pub description: Option<String>,
    pub messages: Vec<PromptMessage>,
}

/// What an argument being completed belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRef {
    /// A prompt, by name.
    Prompt(String),
    /// A resource template, by its URI template.
    Resource(String),
}

/// Everything a plugin listed at load time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogSpecs {
    pub resources: Vec<ResourceSpec>,
    pub templates: Vec<TemplateSpec>,
    pub prompts: Vec<PromptSpec>,
}

impl CatalogSpecs {
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.templates.is_empty() && self.prompts.is_empty()
    }

    /// Whether this catalog serves `uri`: one of its resources, or a URI
    /// one of its templates matches.
    pub fn serves(&self, uri: &str) -> bool {
        self.resources.iter().any(|r| r.uri == uri)
            || self
                .templates
                .iter()
                .any(|t| match_template(&t.uri_template, uri).is_some())
    }

    pub fn prompt(&self, name: &str) -> Option<&PromptSpec> {
        self.prompts.iter().find(|p| p.name == name)
    }
}

/// Why a read, a prompt or a completion gave nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CatalogError {
    /// No resource has this URI.
    #[error("no resource has the URI {uri}")]
    NotFound { uri: String },
    /// No prompt has this name.
    #[error("no prompt is named '{name}'")]
    NoPrompt { name: String },
    /// The arguments do not fit the prompt; the message says how.
    #[error("{0}")]
    Arguments(String),
    /// The operator's rules or rate limits kept the request from running;
    /// `request` is the name rules give it (`resource:URI`,
    /// `prompt:NAME`), `reason` says which rule, in the operator's words.
    #[error("The request '{request}' was not run: {reason}")]
    NotRun { request: String, reason: String },
    /// The plugin's instance failed (the call's error, with its kind).
    #[error(transparent)]
    Failed(#[from] CallError),
}

/// One request to a plugin's catalog: what MCP's `resources/read`,
/// `prompts/get` and `completion/complete` ask of plugin code.
#[derive(Debug, Clone, PartialEq)]
pub enum CatalogOp {
    /// Read the resource at this URI (one [`CatalogSpecs::serves`]).
    Read { uri: String },
    /// Render a prompt with arguments [`check_arguments`] passed.
    Prompt {
        name: String,
        arguments: Vec<(String, String)>,
    },
    /// The plugin's own completions of an argument.
    Complete {
        reference: CompletionRef,
        argument: String,
        value: String,
        context: Vec<(String, String)>,
    },
}

impl CatalogOp {
    /// What the request names, as rules, rate limits, the journal and
    /// spans see it: `resource:URI`, `prompt:NAME`, and for a completion
    /// what it completes (`prompt:NAME` or `resource:TEMPLATE`).
    pub fn name(&self) -> String {
        match self {
            CatalogOp::Read { uri } => format!("resource:{uri}"),
            CatalogOp::Prompt { name, .. } => format!("prompt:{name}"),
            CatalogOp::Complete { reference, .. } => reference.name(),
        }
    }

    /// Which way into plugin code it is.
    pub fn kind(&self) -> EntryKind {
        match self {
            CatalogOp::Read { .. } => EntryKind::ResourceRead,
            CatalogOp::Prompt { .. } => EntryKind::Prompt,
            CatalogOp::Complete { .. } => EntryKind::Completion,
        }
    }

    /// What it was asked with, as the parameters rules look into and the
    /// journal records: `{"uri"}`, the prompt's arguments by name, or
    /// `{"argument", "value"}`.
    pub fn params(&self) -> serde_json::Value {
        use serde_json::{Map, Value, json};
        match self {
            CatalogOp::Read { uri } => json!({ "uri": uri }),
            CatalogOp::Prompt { arguments, .. } => Value::Object(
                arguments
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect::<Map<String, Value>>(),
            ),
            CatalogOp::Complete {
                argument, value, ..
            } => json!({ "argument": argument, "value": value }),
        }
    }
}

impl CompletionRef {
    /// `prompt:NAME` or `resource:TEMPLATE`.
    pub fn name(&self) -> String {
        match self {
            CompletionRef::Prompt(name) => format!("prompt:{name}"),
            CompletionRef::Resource(uri) => format!("resource:{uri}"),
        }
    }
}

/// What a plugin answered a [`CatalogOp`] with, in kind.
#[derive(Debug, Clone, PartialEq)]
pub enum CatalogAnswer {
    Read(Vec<ResourceContents>),
    Prompt(PromptResult),
    Complete(Vec<String>),
}

/// One catalog request as it reaches the plugin: what it asks, and the
/// context a tool call has too (its id, the abort signal, the observer
/// the layers wrapped, the scope with the request's own trace).
#[derive(Clone)]
pub struct CatalogCall {
    pub id: String,
    pub op: CatalogOp,
    pub signal: Option<AbortSignal>,
    pub observer: Option<CallObserver>,
    pub scope: Arc<CallScope>,
}

/// What a plugin serves, read and rendered on request. A front end never
/// calls [`Catalog::run`] itself: it goes through the one call path's
/// catalog entry (`gadget_exec::catalog::run_catalog`), which runs it inside
/// the same layers as a tool call.
pub trait Catalog: Send + Sync {
    /// The plugin that serves it (for messages and the journal).
    fn plugin(&self) -> &str;

    fn specs(&self) -> &CatalogSpecs;

    /// The plugin's provenance, as its tools carry it.
    fn origin(&self) -> Option<Arc<Origin>> {
        None
    }

    /// The names of the plugin's gadgets: a rate limit on one of them
    /// counts its catalog requests too.
    fn gadgets(&self) -> &[String] {
        &[]
    }

    /// Runs one request in plugin code.
    fn run(&self, call: CatalogCall) -> Later<'_, Result<CatalogAnswer, CatalogError>>;
}

/// The values of a URI that `template` (RFC 6570, simple `{name}`
/// expressions) matches, by name; `None` when it does not match. A value
/// never spans a `/`, as simple expansion would have escaped it.
pub fn match_template(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let mut values = Vec::new();
    let mut rest = uri;
    let mut pattern = template;
    while !pattern.is_empty() {
        match pattern.find('{') {
            None => return (rest == pattern).then_some(values),
            Some(open) => {
                let literal = &pattern[..open];
                rest = rest.strip_prefix(literal)?;
                let close = pattern[open..].find('}')? + open;
                let name = &pattern[open + 1..close];
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return None;
                }
                pattern = &pattern[close + 1..];
                // The value runs to the next literal (or the end).
                let next = pattern.find('{').map_or(pattern, |i| &pattern[..i]);
                let end = if next.is_empty() {
                    rest.len()
                } else {
                    rest.find(next)?
                };
                let value = &rest[..end];
                if value.is_empty() || value.contains('/') {
                    return None;
                }
                values.push((name.to_string(), value.to_string()));
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(values)
}

/// Checks a prompt's arguments: each required one given, none unknown.
pub fn check_arguments(prompt: &PromptSpec, arguments: &[(String, String)]) -> Result<(), String> {
    if let Some((name, _)) = arguments
        .iter()
        .find(|(name, _)| !prompt.arguments.iter().any(|a| &a.name == name))
    {
        let known: Vec<&str> = prompt.arguments.iter().map(|a| a.name.as_str()).collect();
        return Err(format!(
            "prompt '{}' has no argument '{name}' (its arguments: {})",
            prompt.name,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    let missing: Vec<&str> = prompt
        .arguments
        .iter()
        .filter(|a| a.required && !arguments.iter().any(|(n, _)| n == &a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "prompt '{}' needs the argument{} {}",
            prompt.name,
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        ));
    }
    Ok(())
}

/// The values of `offered` that complete `value`: those that start with
/// it first (case-insensitively), then those that contain it, at most
/// [`MAX_COMPLETIONS`].
pub fn complete_from(offered: &[String], value: &str) -> Vec<String> {
    let value = value.to_lowercase();
    let starts = offered
        .iter()
        .filter(|o| o.to_lowercase().starts_with(&value));
    let contains = offered.iter().filter(|o| {
        let o = o.to_lowercase();
        !o.starts_with(&value) && o.contains(&value)
    });
    starts
        .chain(contains)
        .take(MAX_COMPLETIONS)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_simple_expressions_only() {
        assert_eq!(
            match_template("test://template/{id}/data", "test://template/123/data"),
            Some(vec![("id".into(), "123".into())])
        );
        assert_eq!(
            match_template("file:///notes/{name}", "file:///notes/a.md"),
            Some(vec![("name".into(), "a.md".into())])
        );
        assert_eq!(
            match_template("x://{a}-{b}", "x://1-2"),
            Some(vec![("a".into(), "1".into()), ("b".into(), "2".into())])
        );
        for (template, uri) in [
            ("test://template/{id}/data", "test://template/1/2/data"),
            ("test://template/{id}/data", "test://template//data"),
            ("test://template/{id}/data", "test://other/1/data"),
            ("test://t/{id}", "test://t/1/extra"),
            ("test://t/{bad name}", "test://t/1"),
            ("test://t/{id", "test://t/1"),
        ] {
            assert_eq!(match_template(template, uri), None, "{template} {uri}");
        }
        assert_eq!(
            match_template("test://static", "test://static"),
            Some(vec![])
        );
    }

    #[test]
    fn arguments_must_fit_the_prompt() {
        let prompt = PromptSpec {
            name: "p".into(),
            title: None,
            description: None,
            arguments: vec![
                PromptArgument {
                    name: "arg1".into(),
                    description: None,
                    required: true,
                    examples: vec![],
                },
                PromptArgument {
                    name: "arg2".into(),
                    description: None,
                    required: false,
                    examples: vec![],
                },
            ],
        };
        let args = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert!(check_arguments(&prompt, &args(&[("arg1", "x")])).is_ok());
        let missing = check_arguments(&prompt, &args(&[("arg2", "x")])).unwrap_err();
        assert!(missing.contains("needs the argument arg1"), "{missing}");
        let unknown = check_arguments(&prompt, &args(&[("arg1", "x"), ("arg9", "y")])).unwrap_err();
        assert!(unknown.contains("no argument 'arg9'") && unknown.contains("arg1, arg2"));
    }

    #[test]
    fn completion_prefers_prefixes() {
        let offered: Vec<String> = ["paris", "park", "party", "spare", "london"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            complete_from(&offered, "PAR"),
            vec!["paris", "park", "party", "spare"]
        );
        assert!(complete_from(&offered, "zzz").is_empty());
        let many: Vec<String> = (0..500).map(|i| format!("v{i}")).collect();
        assert_eq!(complete_from(&many, "v").len(), MAX_COMPLETIONS);
    }
}
