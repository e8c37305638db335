//! Glue between `export_gadgets!` and the bindings: specs, calls and the
//! catalog in the contract's types. Not part of the API.

use crate::__bindings::exports::gadget::plugin::catalog as wit_catalog;
use crate::__bindings::gadget::plugin::types as wit;
use crate::catalog::{Catalog, ReadError, Reference, Speaker};
use crate::content::wire;
use crate::*;

pub use crate::__bindings::exports::gadget::plugin::catalog::Guest as CatalogGuest;
pub use crate::__bindings::exports::gadget::plugin::gadget::Guest;
pub use crate::__bindings::gadget::plugin::types::{
    GadgetError as WitError, GadgetSpec, Outcome as WitOutcome,
};
pub use wit::ResourceContents;
pub use wit_catalog::{
    CompletionRef, Prompt as WitPrompt, PromptResult, ReadError as WitReadError,
    Resource as WitResource, ResourceTemplate as WitTemplate,
};

pub fn spec<G: Gadget>() -> GadgetSpec {
    GadgetSpec {
        name: G::NAME.to_string(),
        label: G::LABEL.map(str::to_string),
        description: G::DESCRIPTION.to_string(),
        parameters_schema: parameters_schema::<G::Params>().to_string(),
        examples: G::examples()
            .into_iter()
            .map(|e| wit::Example {
                params: e.params.to_string(),
                output: e.output,
                comment: e.comment,
            })
            .collect(),
        timeout_ms: G::TIMEOUT_MS,
        exclusive: G::EXCLUSIVE,
        max_concurrent: G::MAX_CONCURRENT,
    }
}

pub fn invoke<G: Gadget>(invocation_id: String, params: &str) -> Result<WitOutcome, WitError> {
    let params: G::Params = serde_json::from_str(if params.trim().is_empty() {
        "{}"
    } else {
        params
    })
    .map_err(|e| WitError::InvalidArguments(e.to_string()))?;
    let ctx = Context {
        invocation_id,
        test: None,
    };
    match G::invoke(params, &ctx).and_then(|outcome| answer_ask_human(outcome, &ctx)) {
        Ok(Outcome::Result(out)) => Ok(WitOutcome::Result(to_wit_result(out))),
        Ok(Outcome::Finish(out)) => Ok(WitOutcome::Finish(to_wit_result(out))),
        Ok(Outcome::AskHuman(_)) => unreachable!("answered above"),
        Err(error) => Err(to_wit_error(error)),
    }
}

/// 0.2.0's ask-human outcome on 0.3.0: ask the question now and return
/// the answer as the result.
fn answer_ask_human(outcome: Outcome, ctx: &Context) -> Result<Outcome, GadgetError> {
    let Outcome::AskHuman(question) = outcome else {
        return Ok(outcome);
    };
    match ctx.ask_text(question)? {
        Some(answer) => Ok(Outcome::result(answer)),
        None => Err(GadgetError::failed("the person declined to answer")),
    }
}

fn to_wit_error(error: GadgetError) -> WitError {
    match error {
        GadgetError::InvalidArguments(m) => WitError::InvalidArguments(m),
        GadgetError::Failed(m) => WitError::Failed(m),
        GadgetError::Cancelled => WitError::Cancelled,
    }
}

pub fn unknown(name: &str) -> WitError {
    WitError::Failed(format!("this component has no gadget named '{name}'"))
}

fn to_wit_result(out: Output) -> wit::CallResult {
    wit::CallResult {
        content: out.content.into_iter().map(wire::part).collect(),
        structured: out.structured.map(|v| v.to_string()),
        cost: out.cost,
        details: out.details.map(|d| d.to_string()),
    }
}

/// A context for a catalog operation (no invocation of the model's).
fn catalog_context() -> Context {
    Context {
        invocation_id: String::new(),
        test: None,
    }
}

pub fn resources<C: Catalog>() -> Vec<WitResource> {
    C::resources()
        .into_iter()
        .map(|r| WitResource {
            uri: r.uri,
            name: r.name,
            title: r.title,
            description: r.description,
            mime_type: r.mime_type,
            size: r.size,
        })
        .collect()
}

pub fn templates<C: Catalog>() -> Vec<WitTemplate> {
    C::templates()
        .into_iter()
        .map(|t| WitTemplate {
            uri_template: t.uri_template,
            name: t.name,
            title: t.title,
            description: t.description,
            mime_type: t.mime_type,
        })
        .collect()
}

pub fn prompts<C: Catalog>() -> Vec<WitPrompt> {
    C::prompts()
        .into_iter()
        .map(|p| WitPrompt {
            name: p.name,
            title: p.title,
            description: p.description,
            arguments: p
                .arguments
                .into_iter()
                .map(|a| wit_catalog::PromptArgument {
                    name: a.name,
                    description: a.description,
                    required: a.required,
                    examples: a.examples,
                })
                .collect(),
        })
        .collect()
}

pub fn read<C: Catalog>(uri: String) -> Result<Vec<ResourceContents>, WitReadError> {
    match C::read(&uri, &catalog_context()) {
        Ok(contents) => Ok(contents.into_iter().map(wire::contents).collect()),
        Err(ReadError::NotFound) => Err(WitReadError::NotFound),
        Err(ReadError::Failed(m)) => Err(WitReadError::Failed(m)),
    }
}

pub fn prompt<C: Catalog>(
    name: String,
    arguments: Vec<(String, String)>,
) -> Result<PromptResult, WitError> {
    let rendered = C::prompt(&name, &arguments, &catalog_context()).map_err(to_wit_error)?;
    Ok(PromptResult {
        description: rendered.description,
        messages: rendered
            .messages
            .into_iter()
            .map(|(speaker, part)| wit_catalog::PromptMessage {
                role: match speaker {
                    Speaker::User => wit_catalog::Speaker::User,
                    Speaker::Assistant => wit_catalog::Speaker::Assistant,
                },
                content: wire::part(part),
            })
            .collect(),
    })
}

pub fn complete<C: Catalog>(
    reference: CompletionRef,
    argument: String,
    value: String,
    context: Vec<(String, String)>,
) -> Vec<String> {
    let reference = match reference {
        CompletionRef::Prompt(name) => Reference::Prompt(name),
        CompletionRef::Resource(template) => Reference::Resource(template),
    };
    C::complete(&reference, &argument, &value, &context)
}

/// Implements the catalog export for `$component` from `$catalog`.
#[doc(hidden)]
#[macro_export]
macro_rules! __catalog_glue {
    ($component:ident, $catalog:ty) => {
        impl $crate::__private::CatalogGuest for $component {
            fn resources() -> ::std::vec::Vec<$crate::__private::WitResource> {
                $crate::__private::resources::<$catalog>()
            }
            fn resource_templates() -> ::std::vec::Vec<$crate::__private::WitTemplate> {
                $crate::__private::templates::<$catalog>()
            }
            fn prompts() -> ::std::vec::Vec<$crate::__private::WitPrompt> {
                $crate::__private::prompts::<$catalog>()
            }
            fn read_resource(
                uri: ::std::string::String,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::__private::ResourceContents>,
                $crate::__private::WitReadError,
            > {
                $crate::__private::read::<$catalog>(uri)
            }
            fn get_prompt(
                name: ::std::string::String,
                arguments: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::result::Result<$crate::__private::PromptResult, $crate::__private::WitError>
            {
                $crate::__private::prompt::<$catalog>(name, arguments)
            }
            fn complete(
                reference: $crate::__private::CompletionRef,
                argument: ::std::string::String,
                value: ::std::string::String,
                context: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::vec::Vec<::std::string::String> {
                $crate::__private::complete::<$catalog>(reference, argument, value, context)
            }
        }
    };
}
pub use crate::__catalog_glue as catalog_glue;
