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

/// Significant digits a result is shown with: a double holds 15 exactly,
/// so `0.3 - 0.1` reads `0.2`, not the binary residue `0.19999999999999998`
/// (the details keep the raw value).
const SHOWN_SIGNIFICANT_DIGITS: usize = 15;

/// Integers print without a fractional part (`38`, not `38.0`), as the
/// model would write them; others with at most 15 significant digits.
fn format_number(value: f64) -> String {
    let rounded: f64 = format!("{value:.*e}", SHOWN_SIGNIFICANT_DIGITS - 1)
        .parse()
        .unwrap_or(value);
    if rounded.fract() == 0.0 && rounded.abs() < 1e15 {
        format!("{}", rounded as i64)
    } else {
        format!("{rounded}")
    }
}

/// The most numbers one `Sequence` call lists: at most about 2 MB of text, under
/// the host's default 4 MiB result limit.
const MAX_SEQUENCE_ITEMS: u64 = 100_000;

#[derive(Debug, Deserialize, JsonSchema)]
struct SequenceParams {
    /// The first number.
    start: i64,
    /// The last number (included when the steps land on it).
    end: i64,
    /// The distance between numbers; negative to count down.
    #[serde(default = "one")]
    step: i64,
}

fn one() -> i64 {
    1
}

struct Sequence;

impl Gadget for Sequence {
    type Params = SequenceParams;
    const NAME: &'static str = "Sequence";
    const LABEL: Option<&'static str> = Some("Number sequence");
    const DESCRIPTION: &'static str =
        "Lists the integers from start to end in steps, one per line (at most 100,000 numbers).";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "start": 1, "end": 5 })).output("1\n2\n3\n4\n5"),
            Example::new(json!({ "start": 10, "end": 0, "step": -5 })).output("10\n5\n0"),
        ]
    }

    fn invoke(params: SequenceParams, _ctx: &Context) -> Result<Outcome, GadgetError> {
        let SequenceParams { start, end, step } = params;
        if step == 0 || (end - start).signum() * step.signum() < 0 {
            return Err(GadgetError::invalid_arguments(format!(
                "step {step} never gets from {start} to {end}"
            )));
        }
        let count = (i128::from(end) - i128::from(start)) / i128::from(step) + 1;
        if count > i128::from(MAX_SEQUENCE_ITEMS) {
            return Err(GadgetError::invalid_arguments(format!(
                "that is {count} numbers; at most {MAX_SEQUENCE_ITEMS} per call"
            )));
        }
        let mut text = String::new();
        for i in 0..count as i64 {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&(start + i * step).to_string());
        }
        Ok(Outcome::result(text).with_details(json!({ "count": count as i64 })))
    }
}

gadget_sdk::export_gadgets!(Calculator, Sequence);
