//! What a response is read as: text of the block format, parsed into
//! text and calls, or calls complete already (a provider's native tool
//! calls).

use gadget_core::parser::{EventRef, GadgetCall};

/// The parser's events, owned, for the executor to handle after the feed.
pub(crate) enum Parsed {
    Text(String),
    Call(GadgetCall),
}

/// What a response is read as: text of the block format, or a call that
/// is complete already (a provider's native tool call, with its JSON
/// parameters).
#[derive(Debug, Clone)]
pub enum ResponseInput {
    Text(String),
    Call(GadgetCall),
}

impl From<String> for ResponseInput {
    fn from(text: String) -> ResponseInput {
        ResponseInput::Text(text)
    }
}

pub(crate) fn collect(event: EventRef<'_>, into: &mut Vec<Parsed>) {
    match event {
        EventRef::Text(text) => into.push(Parsed::Text(text.to_string())),
        EventRef::Call(call) => into.push(Parsed::Call(call.to_owned())),
        EventRef::ArgumentDelta(_) => {}
    }
}
