//! What a result is made of: parts (text, an image, a sound, an embedded
//! resource, a link to one), plus an optional structured JSON value.
//!
//! The model sees what its API accepts (an image as an image where it can
//! take one, otherwise its type and size); an MCP client gets every part.
//! The host's result limit covers the sum of the parts.

/// One part of a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Words.
    Text(String),
    /// An image: its MIME type (such as `image/png`) and bytes.
    Image { mime_type: String, data: Vec<u8> },
    /// A sound: its MIME type (such as `audio/wav`) and bytes.
    Audio { mime_type: String, data: Vec<u8> },
    /// A resource's contents, embedded in the result.
    Resource(Contents),
    /// A pointer to a resource the client may read instead.
    Link(Link),
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text(text.into())
    }

    /// An image part (`mime_type` such as `image/png`).
    pub fn image(mime_type: impl Into<String>, data: impl Into<Vec<u8>>) -> Part {
        Part::Image {
            mime_type: mime_type.into(),
            data: data.into(),
        }
    }

    /// A sound part (`mime_type` such as `audio/wav`).
    pub fn audio(mime_type: impl Into<String>, data: impl Into<Vec<u8>>) -> Part {
        Part::Audio {
            mime_type: mime_type.into(),
            data: data.into(),
        }
    }

    /// An embedded resource.
    pub fn resource(contents: Contents) -> Part {
        Part::Resource(contents)
    }

    /// A link to a resource.
    pub fn link(link: Link) -> Part {
        Part::Link(link)
    }
}

impl From<String> for Part {
    fn from(text: String) -> Self {
        Part::Text(text)
    }
}

impl From<&str> for Part {
    fn from(text: &str) -> Self {
        Part::Text(text.to_string())
    }
}

/// What a resource holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Text(String),
    Blob(Vec<u8>),
}

/// A resource's contents, named by its URI.
#[derive(Debug, Clone, PartialEq)]
pub struct Contents {
    pub uri: String,
    pub mime_type: Option<String>,
    pub body: Body,
}

impl Contents {
    /// Text contents.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Contents {
        Contents {
            uri: uri.into(),
            mime_type: None,
            body: Body::Text(text.into()),
        }
    }

    /// Binary contents.
    pub fn blob(uri: impl Into<String>, data: impl Into<Vec<u8>>) -> Contents {
        Contents {
            uri: uri.into(),
            mime_type: None,
            body: Body::Blob(data.into()),
        }
    }

    /// Sets the MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Contents {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// A pointer to a resource the client may read (`resources/read`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Link {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

impl Link {
    /// A link to `uri`, called `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Link {
        Link {
            uri: uri.into(),
            name: name.into(),
            ..Link::default()
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Link {
        self.description = Some(description.into());
        self
    }

    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Link {
        self.mime_type = Some(mime_type.into());
        self
    }
}

pub(crate) mod wire {
    //! Conversions to the contract's types.

    use super::*;
    use crate::__bindings::gadget::plugin::types as wit;

    pub(crate) fn part(part: Part) -> wit::Content {
        match part {
            Part::Text(text) => wit::Content::Text(text),
            Part::Image { mime_type, data } => wit::Content::Image(wit::Media { mime_type, data }),
            Part::Audio { mime_type, data } => wit::Content::Audio(wit::Media { mime_type, data }),
            Part::Resource(contents) => wit::Content::Resource(self::contents(contents)),
            Part::Link(link) => wit::Content::ResourceLink(wit::ResourceLink {
                uri: link.uri,
                name: link.name,
                title: link.title,
                description: link.description,
                mime_type: link.mime_type,
            }),
        }
    }

    pub(crate) fn contents(contents: Contents) -> wit::ResourceContents {
        wit::ResourceContents {
            uri: contents.uri,
            mime_type: contents.mime_type,
            body: match contents.body {
                Body::Text(text) => wit::ResourceBody::Text(text),
                Body::Blob(data) => wit::ResourceBody::Blob(data),
            },
        }
    }
}
