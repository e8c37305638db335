//! Resources and prompts a component serves (MCP's `resources/*`,
//! `prompts/*` and `completion/complete`): implement [`Catalog`] and name
//! it in [`crate::export_gadgets!`] (`export_gadgets!(A, B; catalog = Notes)`).
//!
//! The lists are read once, when the host loads the plugin; each read,
//! prompt and completion runs in a fresh instance under the plugin's grants
//! and limits, like a call, and may ask ([`crate::Context::ask`]).

use crate::content::{Contents, Part};
use crate::{Context, GadgetError};

/// A resource with a fixed URI.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resource {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
}

impl Resource {
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Resource {
        Resource {
            uri: uri.into(),
            name: name.into(),
            ..Resource::default()
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Resource {
        self.description = Some(description.into());
        self
    }

    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Resource {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// A family of resources: an RFC 6570 URI template of simple expressions
/// (`file:///notes/{name}`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Template {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

impl Template {
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Template {
        Template {
            uri_template: uri_template.into(),
            name: name.into(),
            ..Template::default()
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Template {
        self.description = Some(description.into());
        self
    }

    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Template {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Argument {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
    /// Values offered when a client completes this argument, best first.
    pub examples: Vec<String>,
}

impl Argument {
    /// A required argument.
    pub fn required(name: impl Into<String>, description: impl Into<String>) -> Argument {
        Argument {
            name: name.into(),
            description: Some(description.into()),
            required: true,
            examples: Vec::new(),
        }
    }

    /// An optional argument.
    pub fn optional(name: impl Into<String>, description: impl Into<String>) -> Argument {
        Argument {
            required: false,
            ..Argument::required(name, description)
        }
    }

    /// Values offered for completion.
    pub fn examples<S: Into<String>>(mut self, values: impl IntoIterator<Item = S>) -> Argument {
        self.examples = values.into_iter().map(Into::into).collect();
        self
    }
}

/// A prompt template.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompt {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<Argument>,
}

impl Prompt {
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Prompt {
        Prompt {
            name: name.into(),
            description: Some(description.into()),
            ..Prompt::default()
        }
    }

    pub fn argument(mut self, argument: Argument) -> Prompt {
        self.arguments.push(argument);
        self
    }
}

/// Who says a message of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    User,
    Assistant,
}

/// A rendered prompt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendered {
    pub description: Option<String>,
    pub messages: Vec<(Speaker, Part)>,
}

impl Rendered {
    /// Adds a user message.
    pub fn user(mut self, part: impl Into<Part>) -> Rendered {
        self.messages.push((Speaker::User, part.into()));
        self
    }

    /// Adds an assistant message.
    pub fn assistant(mut self, part: impl Into<Part>) -> Rendered {
        self.messages.push((Speaker::Assistant, part.into()));
        self
    }
}

/// What an argument being completed belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// A prompt, by name.
    Prompt(String),
    /// A resource template, by its URI template.
    Resource(String),
}

/// Why a resource was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// No resource has this URI.
    NotFound,
    /// It exists but could not be read; the message says why.
    Failed(String),
}

impl<E: std::error::Error> From<E> for ReadError {
    fn from(error: E) -> Self {
        ReadError::Failed(error.to_string())
    }
}

/// The resources and prompts a component serves. Every method has a
/// default that serves nothing.
pub trait Catalog {
    /// Resources with fixed URIs.
    fn resources() -> Vec<Resource> {
        Vec::new()
    }

    /// URI templates for families of resources.
    fn templates() -> Vec<Template> {
        Vec::new()
    }

    /// Prompt templates.
    fn prompts() -> Vec<Prompt> {
        Vec::new()
    }

    /// Reads `uri`: one of [`Catalog::resources`], or one a template matches.
    fn read(uri: &str, ctx: &Context) -> Result<Vec<Contents>, ReadError> {
        let _ = (uri, ctx);
        Err(ReadError::NotFound)
    }

    /// Renders prompt `name`; the host has checked the arguments (every
    /// required one is there, none is unknown).
    fn prompt(
        name: &str,
        arguments: &[(String, String)],
        ctx: &Context,
    ) -> Result<Rendered, GadgetError> {
        let _ = (arguments, ctx);
        Err(GadgetError::failed(format!(
            "this component has no prompt named '{name}'"
        )))
    }

    /// Values for `argument` of `reference` that start with or match
    /// `value`, best first; asked only for arguments without examples.
    fn complete(
        reference: &Reference,
        argument: &str,
        value: &str,
        context: &[(String, String)],
    ) -> Vec<String> {
        let _ = (reference, argument, value, context);
        Vec::new()
    }
}

/// The catalog of a component that serves no resources and no prompts.
pub struct NoCatalog;

impl Catalog for NoCatalog {}
