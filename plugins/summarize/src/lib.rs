//! `Summarize`: a text to a length, written by the host's LLM through the
//! `llm` import. The plugin holds no key and reaches no network: the host
//! sends the completion with the operator's provider, to a model the
//! operator granted, within the call's budget, and adds its cost to the
//! call's (the result's details repeat the tokens and the cost).

use gadget_sdk::llm::Request;
use gadget_sdk::{Context, Example, Gadget, GadgetError, Outcome, json};
use schemars::JsonSchema;
use serde::Deserialize;

/// The longest summary a call may ask for, in words: a summary, not a
/// rewrite.
const MAX_WORDS: u32 = 1_000;

/// Answer tokens allowed per requested word: English averages about 1.3
/// tokens a word; the rest is headroom so a summary is not cut off.
const TOKENS_PER_WORD: u32 = 2;

#[derive(Debug, Deserialize, JsonSchema)]
struct SummarizeParams {
    /// The text to summarise.
    text: String,
    /// The most words the summary may have.
    #[serde(default = "default_words")]
    max_words: u32,
    /// Who will read it, if that should shape the summary (for example "a
    /// child" or "a lawyer").
    #[serde(default)]
    audience: Option<String>,
}

fn default_words() -> u32 {
    100
}

struct Summarize;

impl Gadget for Summarize {
    type Params = SummarizeParams;
    const NAME: &'static str = "Summarize";
    const LABEL: Option<&'static str> = Some("Summarize a text");
    const DESCRIPTION: &'static str = "Summarises a text in at most max_words words (default 100) and returns the summary. Uses an LLM, so it costs a little; prefer it for long texts.";

    fn examples() -> Vec<Example> {
        vec![
            Example::new(json!({ "text": "The meeting moved from Tuesday to Thursday because the room was booked; everyone should bring the Q3 figures.", "max_words": 15 }))
                .output("Meeting moved to Thursday (room booked); bring the Q3 figures."),
        ]
    }

    fn invoke(params: SummarizeParams, ctx: &Context) -> Result<Outcome, GadgetError> {
        if params.text.trim().is_empty() {
            return Err(GadgetError::invalid_arguments(
                "text is empty: there is nothing to summarise",
            ));
        }
        if params.max_words == 0 || params.max_words > MAX_WORDS {
            return Err(GadgetError::invalid_arguments(format!(
                "max_words must be between 1 and {MAX_WORDS}"
            )));
        }
        let audience = params
            .audience
            .map(|a| format!(" Write it for {a}."))
            .unwrap_or_default();
        let request = Request::new()
            .system(format!(
                "You summarise texts. Reply with the summary only, in at most {} words, in the language of the text.{audience}",
                params.max_words
            ))
            .user(params.text)
            .max_tokens(params.max_words * TOKENS_PER_WORD + 16)
            .temperature(0.2);
        ctx.progress("asking the LLM");
        let completion = ctx.complete(request)?;
        ctx.info(format!(
            "summarised with {} ({} tokens in, {} out)",
            completion.model, completion.input_tokens, completion.output_tokens
        ));
        let summary = completion.text.trim().to_string();
        Ok(Outcome::result(summary).with_details(json!({
            "model": completion.model,
            "input_tokens": completion.input_tokens,
            "output_tokens": completion.output_tokens,
            "cost_usd": completion.cost,
        })))
    }
}

gadget_sdk::export_gadgets!(Summarize);
