//! __GADGET__: a gadget for gadget-host, in Rust.
//!
//! Build: gadget build .    Check: gadget check .

use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, json};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
struct Params {
    /// The text to count the words of.
    text: String,
}

struct __GADGET__;

impl Gadget for __GADGET__ {
    type Params = Params;
    const NAME: &'static str = "__GADGET__";
    const DESCRIPTION: &'static str =
        "Counts the words of a text. Describe here, for the model, what the gadget does.";

    fn examples() -> Vec<Example> {
        vec![Example::new(json!({ "text": "hello world" })).output("2 words")]
    }

    fn invoke(params: Params, ctx: &Context) -> Result<Outcome, GadgetError> {
        let words = params.text.split_whitespace().count();
        if words == 0 {
            return Err(GadgetError::invalid_arguments("text has no words"));
        }
        ctx.info(format!("counted {words} words"));
        Ok(format!("{words} words").into())
    }
}

gadget_sdk::export_gadgets!(__GADGET__);
