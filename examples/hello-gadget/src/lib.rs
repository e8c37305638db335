//! The README's five-minute gadget: typed parameters with doc comments, an
//! example, logging, a reported cost and an error the model can act on.
//!
//! Build and try it:
//!
//! ```text
//! cargo build -p example-hello-gadget --target wasm32-wasip2 --profile guest
//! cp target/wasm32-wasip2/guest/example_hello_gadget.wasm examples/hello-gadget/hello.wasm
//! gadget check examples/hello-gadget
//! gadget --plugins examples call Greet --params '{"name": "Ada"}'
//! ```

use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, json};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How warm the greeting is. (`Serialize` lets the schema show the default.)
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Tone {
    #[default]
    Friendly,
    Formal,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct GreetParams {
    /// Who to greet.
    name: String,
    /// How warm the greeting is.
    #[serde(default)]
    tone: Tone,
    /// How many times to repeat the greeting (1 to 5).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 5))]
    times: u8,
}

fn one() -> u8 {
    1
}

struct Greet;

impl Gadget for Greet {
    type Params = GreetParams;
    const NAME: &'static str = "Greet";
    const DESCRIPTION: &'static str = "Greets a person by name.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "name": "Ada" })).output("Hello, Ada!"),
            Example::new(json!({ "name": "Dr Lovelace", "tone": "formal", "times": 2 }))
                .output("Good day, Dr Lovelace. Good day, Dr Lovelace.")
                .comment("tone and times are optional"),
        ]
    }

    fn invoke(params: GreetParams, ctx: &Context) -> Result<Outcome, GadgetError> {
        let name = params.name.trim();
        if name.is_empty() {
            return Err(GadgetError::invalid_arguments("name must not be blank"));
        }
        ctx.info(format!("greeting {name}"));
        let one = match params.tone {
            Tone::Friendly => format!("Hello, {name}!"),
            Tone::Formal => format!("Good day, {name}."),
        };
        let text = vec![one; params.times.into()].join(" ");
        // A real gadget would report what a paid API charged it.
        ctx.report_cost(0.0001);
        Ok(Outcome::result(text).with_details(json!({ "times": params.times })))
    }
}

gadget_sdk::export_gadgets!(Greet);
