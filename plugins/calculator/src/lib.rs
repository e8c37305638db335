//! The seeds' `Calculator`: one arithmetic operation on two numbers.
//!
//! Division by zero is a gadget error (invalid arguments) the model sees,
//! not a crash and not `inf`.

use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, json};
use schemars::JsonSchema;
use serde::Deserialize;

/// The arithmetic operation to perform.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Operation {
    Add,
    Subtract,
    Multiply,
    Divide,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct CalculatorParams {
    /// The arithmetic operation to perform.
    operation: Operation,
    /// The first operand.
    a: f64,
    /// The second operand.
    b: f64,
}

struct Calculator;

impl Gadget for Calculator {
    type Params = CalculatorParams;
    const NAME: &'static str = "Calculator";
    const LABEL: Option<&'static str> = Some("Calculator");
    const DESCRIPTION: &'static str =
        "Performs arithmetic on two numbers: add, subtract, multiply or divide a by b.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "operation": "add", "a": 15, "b": 23 })).output("38"),
            Example::new(json!({ "operation": "divide", "a": 1, "b": 8 }))
                .output("0.125")
                .comment("Results are exact decimals where possible"),
        ]
    }

    fn invoke(params: CalculatorParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let CalculatorParams { operation, a, b } = params;
        let value = match operation {
            Operation::Add => a + b,
            Operation::Subtract => a - b,
            Operation::Multiply => a * b,
            Operation::Divide if b == 0.0 => {
                return Err(GadgetError::invalid_arguments(
                    "division by zero: b must not be 0",
                ));
            }
            Operation::Divide => a / b,
        };
        if !value.is_finite() {
            return Err(GadgetError::failed(format!(
                "the result of {operation:?} on {a} and {b} does not fit in a 64-bit float"
            )));
        }
        Ok(Outcome::result(format_number(value)).with_details(json!({ "value": value })))
    }
}

/// Integers print without a fractional part (`38`, not `38.0`), as the
/// model would write them.
fn format_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

gadget_sdk::export_gadgets!(Calculator);
