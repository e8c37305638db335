//! The agent loop inside a Rust program:
//!
//! 1. load the shipped plugins;
//! 2. pick a provider: a real one when `GADGET_EXAMPLE_MODEL` is set
//!    (`openai:gpt-4o-mini` with `OPENAI_API_KEY`, or `anthropic:...` with
//!    `ANTHROPIC_API_KEY`), else a scripted one written here, which shows
//!    what implementing [`Provider`] takes and runs offline;
//! 3. run a task, printing the loop's events as they happen;
//! 4. read the outcome: the answer, tokens and costs.
//!
//! Run it from the repository root: `cargo run -p example-agent`.

use std::sync::Arc;

use anyhow::{Result, bail};
use gadget_host::agent::anthropic::{self, Anthropic};
use gadget_host::agent::openai::{self, OpenAi};
use gadget_host::agent::provider::{BoxFuture, ResponseStream};
use gadget_host::agent::{
    Agent, AgentConfig, AgentEvent, ChatRequest, ModelTable, Provider, ProviderError, RetryPolicy,
    StreamItem, Usage,
};
use gadget_host::executor::{ExecConfig, ExecEvent, Executor};
use gadget_host::loader::{self, LoadOptions, NoProgress};
use gadget_host::render::Markers;
use gadget_host::runtime::{Runtime, RuntimeConfig};

/// A model that knows one trick: it asks the Calculator, then reads the
/// result back from the conversation. Its answer arrives in small pieces,
/// as a real stream does.
struct Scripted;

impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ResponseStream, ProviderError>> {
        let last = &request.messages.last().expect("a task").content;
        let text = match last.strip_prefix("Result (sum): ") {
            Some(result) => format!("15 + 23 = {result}."),
            None => "Let me work that out.\n!!!GADGET_START:Calculator:sum\n!!!ARG:operation\nadd\n!!!ARG:a\n15\n!!!ARG:b\n23\n!!!GADGET_END\n".to_string(),
        };
        let mut items: Vec<Result<StreamItem, ProviderError>> = text
            .as_bytes()
            .chunks(12)
            .map(|piece| {
                Ok(StreamItem::Text(
                    String::from_utf8_lossy(piece).into_owned(),
                ))
            })
            .collect();
        items.push(Ok(StreamItem::Usage(Usage {
            input_tokens: 1_500,
            output_tokens: 40,
        })));
        Box::pin(async move { Ok(Box::pin(futures_util::stream::iter(items)) as ResponseStream) })
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let runtime = Arc::new(Runtime::new(&RuntimeConfig::default())?);
    let (registry, errors) = loader::load_dirs(
        runtime,
        &["plugins".into()],
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    if !errors.is_empty() {
        bail!("loading plugins/: {errors:?}");
    }

    let (provider, model): (Arc<dyn Provider>, String) = match std::env::var("GADGET_EXAMPLE_MODEL")
    {
        Ok(spec) => match spec.split_once(':') {
            Some(("openai", model)) => (
                Arc::new(OpenAi::new(
                    openai::DEFAULT_BASE_URL,
                    std::env::var("OPENAI_API_KEY").ok(),
                )),
                model.to_string(),
            ),
            Some(("anthropic", model)) => (
                Arc::new(Anthropic::new(
                    anthropic::DEFAULT_BASE_URL,
                    std::env::var("ANTHROPIC_API_KEY").unwrap_or_default(),
                )),
                model.to_string(),
            ),
            _ => bail!("GADGET_EXAMPLE_MODEL is openai:MODEL or anthropic:MODEL"),
        },
        Err(_) => (Arc::new(Scripted), "scripted".to_string()),
    };
    let model_info = ModelTable::default().lookup(provider.name(), &model);

    let executor = Executor::new(Arc::new(registry), ExecConfig::default())?;
    let observer = Arc::new(|event: &AgentEvent| match event {
        AgentEvent::Request { iteration, .. } => println!("-- request {iteration}"),
        AgentEvent::Exec(ExecEvent::CallFinished { id, result, .. }) => {
            println!(
                "   call {id} -> {}",
                result.as_deref().unwrap_or("(failed)")
            )
        }
        AgentEvent::Response { text, usage, .. } => println!(
            "   response of {} chars ({} tokens in, {} out)",
            text.len(),
            usage.input_tokens,
            usage.output_tokens
        ),
        _ => {}
    });
    let config = AgentConfig {
        model,
        max_iterations: 5,
        max_cost: Some(0.05),
        max_tokens: 1024,
        system: Some("Use the gadgets for arithmetic.".into()),
        model_info,
        retry: RetryPolicy::default(),
        tool_format: Default::default(),
    };
    let mut agent = Agent::new(provider, executor, Markers::default(), config, observer);
    let outcome = agent.run("What is 15 + 23?").await;
    if let Some(error) = &outcome.error {
        bail!("{error}");
    }
    println!(
        "{:?}: {}\n{} iterations, {} tokens in, {} out, gadgets ${:.6}",
        outcome.stop,
        outcome.answer.as_deref().unwrap_or(""),
        outcome.iterations.len(),
        outcome.input_tokens,
        outcome.output_tokens,
        outcome.gadget_cost
    );
    if outcome.answer.as_deref() != Some("15 + 23 = 38.")
        && std::env::var("GADGET_EXAMPLE_MODEL").is_err()
    {
        bail!("the scripted session did not end with its answer");
    }
    Ok(())
}
