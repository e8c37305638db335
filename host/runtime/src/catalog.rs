//! The `catalog` export of gadget:plugin@0.3.0: the resources, templates
//! and prompts a component lists (read once at load time, in a fresh
//! instance, bounded and checked), and each read, prompt and completion
//! run in a fresh instance under the plugin's grants, limits and
//! deadline through the runtime's one door ([`Runtime::run`]), as a call is. Older components
//! serve no catalog.
//!
//! [`PluginCatalog`] is a loaded plugin's catalog as the front ends see it
//! ([`gadget_core::catalog::Catalog`]).

use std::sync::Arc;
use std::time::Instant;

use gadget_core::call::CallError;
use gadget_core::catalog::{
    Catalog, CatalogAnswer, CatalogCall, CatalogError, CatalogOp, CatalogSpecs, CompletionRef,
    Later, MAX_CATALOG_ENTRIES, MAX_COMPLETIONS, PromptArgument, PromptMessage, PromptResult,
    PromptSpec, ResourceSpec, Speaker, TemplateSpec,
};
use gadget_core::content::media_type_fault;
use gadget_core::limits::Limits;
use gadget_core::scope::Origin;

use crate::bindings::v0_3_0::exports::gadget::plugin::catalog as wit;
use crate::outcome::{Failure, Instantiation, Trapped, classify_trap, content_of, resource_of};
use crate::plugin::Plugin;
use crate::runtime::{
    CallRequest, GuestAnswer, GuestOp, GuestRun, PluginPre, Runtime, RuntimeError, SPECS_TIMEOUT,
};

/// The longest text of one catalog entry's fields together (URI, name,
/// title, description), in bytes: entries are sent whole on every list.
pub const MAX_CATALOG_ENTRY_BYTES: usize = 16 << 10;

impl Runtime {
    /// The catalog a component lists (none before contract 0.3.0), read
    /// in a fresh instance with nothing granted, bounded like its specs.
    pub async fn read_catalog(
        &self,
        pre: &PluginPre,
        limits: &Limits,
    ) -> Result<CatalogSpecs, RuntimeError> {
        let PluginPre::V0_3_0(pre) = pre else {
            return Ok(CatalogSpecs::default());
        };
        let limits = Limits {
            timeout: SPECS_TIMEOUT,
            ..limits.clone()
        };
        let fail = |error: CallError| RuntimeError::Catalog(error);
        let mut store = self
            .new_store(&CallRequest::at_load("(catalog)", limits.clone()))
            .map_err(|reason| {
                fail(CallError::Instantiate {
                    gadget: "(catalog)".into(),
                    reason,
                })
            })?;
        let run = async {
            let plugin = pre.instantiate_async(&mut store).await?;
            let catalog = plugin.gadget_plugin_catalog();
            let resources = catalog.call_resources(&mut store).await?;
            let templates = catalog.call_resource_templates(&mut store).await?;
            let prompts = catalog.call_prompts(&mut store).await?;
            wasmtime::Result::Ok((resources, templates, prompts))
        };
        let (resources, templates, prompts) =
            match self.with_outer_timeout(&limits, run, None).await {
                Some(Ok(listed)) => listed,
                Some(Err(error)) => return Err(fail(classify_trap(error, &mut store, &limits))),
                None => {
                    return Err(fail(CallError::Timeout {
                        gadget: "(catalog)".into(),
                        timeout_ms: limits.timeout.as_millis() as u64,
                    }));
                }
            };
        specs_of(resources, templates, prompts)
            .map_err(|message| fail(CallError::Failed { message }))
    }

    /// Runs one catalog request in a fresh instance, as a call runs
    /// (`request` names the plugin, its grants, limits, signal, observer,
    /// trace and who answers what it asks): [`Runtime::run`]'s second arm.
    pub(crate) async fn catalog_op(
        &self,
        pre: &PluginPre,
        request: CallRequest,
        op: CatalogOp,
    ) -> Result<GuestAnswer, CallError> {
        let PluginPre::V0_3_0(pre) = pre else {
            return Err(CallError::Failed {
                message: "this component serves no catalog (contract 0.3.0 does)".into(),
            });
        };
        self.budget_room().await;
        let limits = &request.limits;
        let mut store = self
            .new_store(&request)
            .map_err(|reason| CallError::Instantiate {
                gadget: request.gadget.clone(),
                reason,
            })?;
        let pauses = store.data().time.pauses.clone();
        let run = async {
            let plugin = pre
                .instantiate_async(&mut store)
                .await
                .map_err(Instantiation)?;
            let catalog = plugin.gadget_plugin_catalog();
            let answer = match op {
                CatalogOp::Read { uri } => GuestAnswer::Read(
                    catalog
                        .call_read_resource(&mut store, &uri)
                        .await
                        .map_err(Trapped)?
                        .map(|contents| contents.into_iter().map(resource_of).collect()),
                ),
                CatalogOp::Prompt { name, arguments } => GuestAnswer::Prompt(
                    catalog
                        .call_get_prompt(&mut store, &name, &arguments)
                        .await
                        .map_err(Trapped)?
                        .map(prompt_result_of)
                        .map_err(error_message),
                ),
                CatalogOp::Complete {
                    reference,
                    argument,
                    value,
                    context,
                } => {
                    let reference = match reference {
                        CompletionRef::Prompt(name) => wit::CompletionRef::Prompt(name),
                        CompletionRef::Resource(uri) => wit::CompletionRef::Resource(uri),
                    };
                    let mut values = catalog
                        .call_complete(&mut store, &reference, &argument, &value, &context)
                        .await
                        .map_err(Trapped)?;
                    values.truncate(MAX_COMPLETIONS);
                    GuestAnswer::Complete(values)
                }
            };
            Ok::<_, Failure>(answer)
        };
        let result = self.with_outer_timeout(limits, run, Some(&pauses)).await;
        let gadget = request.gadget.clone();
        let answer = match result {
            None => Err(CallError::Timeout {
                gadget,
                timeout_ms: limits.timeout.as_millis() as u64,
            }),
            Some(Err(Instantiation(error))) => Err(CallError::Instantiate {
                gadget,
                reason: format!("{error:#}"),
            }),
            Some(Err(Trapped(_))) if store.data().awaiting.is_some() => {
                Err(CallError::AwaitingAnswers {
                    gadget,
                    keys: store.data_mut().awaiting.take().unwrap_or_default(),
                })
            }
            Some(Err(Trapped(error))) => Err(classify_trap(error, &mut store, limits)),
            Some(Ok(answer)) => Ok(answer),
        };
        // Secrets the plugin holds are replaced in what it returns.
        let answer = match (&request.grants, answer) {
            (Some(grants), Ok(answer)) if !grants.redactor.is_empty() => {
                Ok(redact(&grants.redactor, answer))
            }
            (Some(grants), Err(error)) if !grants.redactor.is_empty() => {
                Err(grants.redact_error(error))
            }
            (_, answer) => answer,
        };
        answer.map(|answer| checked_media_types(&request.gadget, answer))
    }
}

/// The answer with every media type that is not one replaced (as a
/// tool's result parts are), each replacement logged for the operator.
fn checked_media_types(plugin: &str, mut answer: GuestAnswer) -> GuestAnswer {
    let mut faults = Vec::new();
    match &mut answer {
        GuestAnswer::Read(Ok(contents)) => {
            for contents in contents {
                contents.check_media_type(&mut faults);
            }
        }
        GuestAnswer::Prompt(Ok(result)) => {
            for message in &mut result.messages {
                message.content.check_media_types(&mut faults);
            }
        }
        _ => {}
    }
    for fault in faults {
        tracing::warn!(target: "gadget", plugin, "{fault}");
    }
    answer
}

fn redact(redactor: &gadget_core::redact::Redactor, answer: GuestAnswer) -> GuestAnswer {
    let parts = |content: Vec<gadget_core::content::Content>| {
        let rich = redactor.rich(gadget_core::content::Rich {
            content,
            structured: None,
        });
        rich.content
    };
    match answer {
        GuestAnswer::Read(Ok(contents)) => {
            let wrapped = contents
                .into_iter()
                .map(gadget_core::content::Content::Resource)
                .collect();
            GuestAnswer::Read(Ok(parts(wrapped)
                .into_iter()
                .filter_map(|c| match c {
                    gadget_core::content::Content::Resource(r) => Some(r),
                    _ => None,
                })
                .collect()))
        }
        GuestAnswer::Prompt(Ok(mut result)) => {
            let roles: Vec<Speaker> = result.messages.iter().map(|m| m.role).collect();
            let content = parts(result.messages.into_iter().map(|m| m.content).collect());
            result.messages = roles
                .into_iter()
                .zip(content)
                .map(|(role, content)| PromptMessage { role, content })
                .collect();
            GuestAnswer::Prompt(Ok(result))
        }
        other => other,
    }
}

fn error_message(error: crate::bindings::wit::GadgetError) -> String {
    use crate::bindings::wit::GadgetError;
    match error {
        GadgetError::InvalidArguments(message) | GadgetError::Failed(message) => message,
        GadgetError::Cancelled => "the prompt was cancelled".into(),
    }
}

fn prompt_result_of(result: wit::PromptResult) -> PromptResult {
    PromptResult {
        description: result.description,
        messages: result
            .messages
            .into_iter()
            .map(|m| PromptMessage {
                role: match m.role {
                    wit::Speaker::User => Speaker::User,
                    wit::Speaker::Assistant => Speaker::Assistant,
                },
                content: content_of(m.content),
            })
            .collect(),
    }
}

/// The lists as the host keeps them, each checked: bounded in number and
/// size, names and URIs not empty, templates well formed, no URI, template
/// or prompt name twice.
fn specs_of(
    resources: Vec<wit::Resource>,
    templates: Vec<wit::ResourceTemplate>,
    prompts: Vec<wit::Prompt>,
) -> Result<CatalogSpecs, String> {
    for (what, count) in [
        ("resources", resources.len()),
        ("resource templates", templates.len()),
        ("prompts", prompts.len()),
    ] {
        if count > MAX_CATALOG_ENTRIES {
            return Err(format!(
                "its catalog lists {count} {what}; at most {MAX_CATALOG_ENTRIES}"
            ));
        }
    }
    let mut specs = CatalogSpecs::default();
    add_resources(&mut specs, resources)?;
    add_templates(&mut specs, templates)?;
    add_prompts(&mut specs, prompts)?;
    Ok(specs)
}

/// Bytes of text of an entry's fields.
fn text(parts: &[&str], optional: &[&Option<String>]) -> usize {
    parts.iter().map(|p| p.len()).sum::<usize>()
        + optional
            .iter()
            .map(|o| o.as_ref().map_or(0, String::len))
            .sum::<usize>()
}

fn add_resources(specs: &mut CatalogSpecs, resources: Vec<wit::Resource>) -> Result<(), String> {
    for r in resources {
        if r.uri.is_empty() || r.name.is_empty() {
            return Err("a resource of its catalog has an empty URI or name".into());
        }
        if text(
            &[&r.uri, &r.name],
            &[&r.title, &r.description, &r.mime_type],
        ) > MAX_CATALOG_ENTRY_BYTES
        {
            return Err(format!(
                "resource {} is over {MAX_CATALOG_ENTRY_BYTES} bytes of text",
                r.uri
            ));
        }
        if let Some(fault) = r.mime_type.as_deref().and_then(media_type_fault) {
            return Err(format!(
                "the media type of resource {} is not one: {fault}",
                r.uri
            ));
        }
        if specs.resources.iter().any(|s| s.uri == r.uri) {
            return Err(format!("its catalog lists resource {} twice", r.uri));
        }
        specs.resources.push(ResourceSpec {
            uri: r.uri,
            name: r.name,
            title: r.title,
            description: r.description,
            mime_type: r.mime_type,
            size: r.size,
        });
    }
    Ok(())
}

fn add_templates(
    specs: &mut CatalogSpecs,
    templates: Vec<wit::ResourceTemplate>,
) -> Result<(), String> {
    for t in templates {
        // A template must match something: its own expansion with a value.
        if t.name.is_empty() || !t.uri_template.contains('{') {
            return Err(format!(
                "resource template '{}' needs a name and a {{variable}}",
                t.uri_template
            ));
        }
        if text(
            &[&t.uri_template, &t.name],
            &[&t.title, &t.description, &t.mime_type],
        ) > MAX_CATALOG_ENTRY_BYTES
        {
            return Err(format!(
                "resource template {} is over {MAX_CATALOG_ENTRY_BYTES} bytes of text",
                t.uri_template
            ));
        }
        if let Some(fault) = t.mime_type.as_deref().and_then(media_type_fault) {
            return Err(format!(
                "the media type of resource template {} is not one: {fault}",
                t.uri_template
            ));
        }
        if specs
            .templates
            .iter()
            .any(|s| s.uri_template == t.uri_template)
        {
            return Err(format!(
                "its catalog lists template {} twice",
                t.uri_template
            ));
        }
        specs.templates.push(TemplateSpec {
            uri_template: t.uri_template,
            name: t.name,
            title: t.title,
            description: t.description,
            mime_type: t.mime_type,
        });
    }
    Ok(())
}

fn add_prompts(specs: &mut CatalogSpecs, prompts: Vec<wit::Prompt>) -> Result<(), String> {
    for p in prompts {
        if p.name.is_empty() {
            return Err("a prompt of its catalog has no name".into());
        }
        let arguments_text: usize = p
            .arguments
            .iter()
            .map(|a| {
                a.name.len()
                    + a.description.as_ref().map_or(0, String::len)
                    + a.examples.iter().map(String::len).sum::<usize>()
            })
            .sum();
        if text(&[&p.name], &[&p.title, &p.description]) + arguments_text > MAX_CATALOG_ENTRY_BYTES
        {
            return Err(format!(
                "prompt '{}' is over {MAX_CATALOG_ENTRY_BYTES} bytes of text",
                p.name
            ));
        }
        if specs.prompts.iter().any(|s| s.name == p.name) {
            return Err(format!("its catalog lists prompt '{}' twice", p.name));
        }
        specs.prompts.push(PromptSpec {
            name: p.name,
            title: p.title,
            description: p.description,
            arguments: p
                .arguments
                .into_iter()
                .map(|a| PromptArgument {
                    name: a.name,
                    description: a.description,
                    required: a.required,
                    examples: a.examples,
                })
                .collect(),
        });
    }
    Ok(())
}

/// A loaded plugin's catalog: its lists, and each request run in a fresh
/// instance under the plugin's grants and default limits, with the
/// request's abort signal, observer, trace and person (the one call path
/// opened its layers around it).
pub struct PluginCatalog {
    pub plugin: Arc<Plugin>,
    pub specs: CatalogSpecs,
    /// The names of the plugin's gadgets (what rate limits on them count).
    pub gadgets: Vec<String>,
}

impl PluginCatalog {
    fn request(&self, call: CatalogCall) -> (CallRequest, CatalogOp) {
        let CatalogCall {
            id,
            op,
            signal,
            observer,
            scope,
        } = call;
        let name = op.name();
        let request_denials = scope
            .approvals
            .as_ref()
            .and_then(|a| a.rules.request_denials(&name, None, &scope.client));
        let request = CallRequest {
            gadget: format!("{} ({name})", self.plugin.identity.name),
            component_name: None,
            invocation_id: id,
            params: String::new(),
            limits: self.plugin.access.limits.clone(),
            signal,
            observer,
            grants: Some(self.plugin.access.grants.clone()),
            trace_parent: scope.trace.as_ref().map(|t| t.traceparent.clone()),
            request_denials,
            human: scope.human.clone(),
        };
        (request, op)
    }
}

/// A catalog answer of another kind than its request: the runtime
/// answers each request in kind, so this is a host bug, reported as the
/// request's failure rather than a panic.
fn mismatched() -> CatalogError {
    CatalogError::Failed(CallError::Failed {
        message: "the host answered a catalog request with another kind of answer".into(),
    })
}

impl Catalog for PluginCatalog {
    fn plugin(&self) -> &str {
        &self.plugin.identity.name
    }

    fn specs(&self) -> &CatalogSpecs {
        &self.specs
    }

    fn origin(&self) -> Option<Arc<Origin>> {
        Some(self.plugin.origin.clone())
    }

    fn gadgets(&self) -> &[String] {
        &self.gadgets
    }

    fn run(&self, call: CatalogCall) -> Later<'_, Result<CatalogAnswer, CatalogError>> {
        Box::pin(async move {
            let (request, op) = self.request(call);
            let uri = match &op {
                CatalogOp::Read { uri } => Some(uri.clone()),
                _ => None,
            };
            let started = Instant::now();
            let answer = self
                .plugin
                .runtime
                .run(
                    &self.plugin.pre,
                    GuestRun {
                        op: GuestOp::Catalog(op),
                        call: request,
                    },
                )
                .await;
            tracing::debug!(
                plugin = %self.plugin.identity.name,
                ok = answer.is_ok(),
                ms = started.elapsed().as_millis() as u64,
                "catalog request"
            );
            match answer.map_err(CatalogError::Failed)? {
                GuestAnswer::Read(Ok(contents)) => Ok(CatalogAnswer::Read(contents)),
                GuestAnswer::Read(Err(wit::ReadError::NotFound)) => Err(CatalogError::NotFound {
                    uri: uri.unwrap_or_default(),
                }),
                GuestAnswer::Read(Err(wit::ReadError::Failed(message))) => {
                    Err(CatalogError::Failed(CallError::Failed { message }))
                }
                GuestAnswer::Prompt(Ok(result)) => Ok(CatalogAnswer::Prompt(result)),
                GuestAnswer::Prompt(Err(message)) => {
                    Err(CatalogError::Failed(CallError::Failed { message }))
                }
                GuestAnswer::Complete(values) => Ok(CatalogAnswer::Complete(values)),
                GuestAnswer::Invoked(_) => Err(mismatched()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(uri: &str) -> wit::Resource {
        wit::Resource {
            uri: uri.into(),
            name: "r".into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
        }
    }

    fn prompt(name: &str, description: Option<String>) -> wit::Prompt {
        wit::Prompt {
            name: name.into(),
            title: None,
            description,
            arguments: vec![],
        }
    }

    #[test]
    fn a_catalog_is_bounded_and_says_nothing_twice() {
        let many: Vec<_> = (0..=MAX_CATALOG_ENTRIES)
            .map(|i| resource(&format!("x://{i}")))
            .collect();
        let over = specs_of(many, vec![], vec![]).unwrap_err();
        assert!(over.contains("at most 1000"), "{over}");
        let twice = specs_of(vec![resource("x://a"), resource("x://a")], vec![], vec![]);
        assert!(twice.unwrap_err().contains("twice"));
        let long = prompt("p", Some("x".repeat(MAX_CATALOG_ENTRY_BYTES)));
        let long = specs_of(vec![], vec![], vec![long]).unwrap_err();
        assert!(long.contains("bytes of text"), "{long}");
        let fixed = wit::ResourceTemplate {
            uri_template: "x://fixed".into(),
            name: "t".into(),
            title: None,
            description: None,
            mime_type: None,
        };
        let fixed = specs_of(vec![], vec![fixed], vec![]).unwrap_err();
        assert!(fixed.contains("{variable}"), "{fixed}");
        let fine = specs_of(vec![resource("x://a")], vec![], vec![prompt("p", None)]).unwrap();
        assert!(fine.serves("x://a") && fine.prompt("p").is_some());
    }
}
