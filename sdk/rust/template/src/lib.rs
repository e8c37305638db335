//! __GADGET__: a gadget for gadget-host, in Rust.
//!
//! Build: gadget build .    Test: cargo test (this file's unit tests, no
//! host) and gadget test . (the built component: examples and tests.toml).

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

#[cfg(test)]
mod tests {
    use super::*;
    use gadget_sdk::testing;

    #[test]
    fn counts_words_and_its_examples_hold() {
        let call = testing::call::<__GADGET__>(json!({ "text": "one two three" }));
        assert_eq!(call.text().as_deref(), Some("3 words"));
        assert_eq!(call.logs[0].message, "counted 3 words");
        let empty = testing::call::<__GADGET__>(json!({ "text": "  " }));
        assert!(matches!(empty.error(), Some(GadgetError::InvalidArguments(_))));
        testing::assert_examples::<__GADGET__>();
    }
}
