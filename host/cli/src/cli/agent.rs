//! `gadget agent`: the agent loop against a real LLM. The loop itself is
//! the gadget-agent crate's; this file picks the provider, key, model
//! table and caps from the options and the policy's `[llm]`, renders the
//! loop's events (the views of `gadget run`, or JSON lines), saves the
//! session, and turns Ctrl-C into a clean stop.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};
use serde_json::json;

use gadget_agent::agent::{DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_TOKENS};
use gadget_agent::anthropic::{self, Anthropic};
use gadget_agent::backend::{ProviderBackend, Providers};
use gadget_agent::native::ToolFormat;
use gadget_agent::openai::{self, OpenAi};
use gadget_agent::recovery::{Fallback, MAX_FALLBACKS, OnLlmError};
use gadget_agent::subagent::{
    DEFAULT_SUBAGENT_ITERATIONS, DEFAULT_SUBAGENT_TIMEOUT, SubAgentDefinition, SubAgents,
};
use gadget_agent::{
    Agent, AgentConfig, AgentEvent, AgentOutcome, ModelInfo, ModelTable, Provider, ProviderError,
    RetryPolicy, StopReason,
};
use gadget_core::viewer;
use gadget_exec::ExecEvent;
use gadget_runtime::policy::LlmSettings;
use gadget_runtime::registry::Registry;

use super::run::{EXIT_INTERRUPTED, ExecOptions};
use super::view::View;
use super::{EXIT_BAD_INPUT, EXIT_FAILED};

/// The largest `--system` prompt file read: far past any model's context.
const MAX_SYSTEM_PROMPT_BYTES: u64 = 4 << 20;

/// Options of `gadget agent`.
/// `--tool-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolFormatArg {
    Block,
    Native,
}

#[derive(Debug, clap::Args)]
pub struct AgentOptions {
    /// The task, or `-` to read it from stdin.
    #[arg(value_name = "PROMPT")]
    prompt: String,
    /// PROVIDER:MODEL; providers are `openai` (any OpenAI-compatible server) and `anthropic`. Default: [llm] model in the policy file.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    model: Option<String>,
    /// The API's base URL, e.g. http://127.0.0.1:11434/v1 for Ollama. Default: [llm] base-url, else the provider's own.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The environment variable holding the API key. Default: [llm] api-key-env, else OPENAI_API_KEY or ANTHROPIC_API_KEY.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// How the model calls gadgets: `block` (the llmist block format in its text) or `native` (the provider's own tool calls: OpenAI tool_calls, Anthropic tool_use). Either way each call starts the moment it is complete.
    #[arg(long, value_name = "FORMAT", default_value = "block")]
    tool_format: ToolFormatArg,
    /// Requests at most; the loop stops after this many responses.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_ITERATIONS)]
    max_iterations: usize,
    /// USD over tokens and gadgets; no request starts that would go over it.
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
    /// Tokens one answer may have.
    #[arg(long, value_name = "TOKENS", default_value_t = DEFAULT_MAX_TOKENS)]
    max_tokens: u32,
    /// Retries of a request that failed with 429, 5xx or a connection error.
    #[arg(long, value_name = "N", default_value_t = RetryPolicy::default().max_retries)]
    max_retries: u32,
    /// A file whose text goes before the gadget instructions in the system prompt.
    #[arg(long, value_name = "FILE")]
    system: Option<PathBuf>,
    /// One JSON event per line: `gadget run`'s events plus llm_request, llm_text, llm_retry, llm_response, iteration and agent_summary.
    #[arg(long)]
    json: bool,
    /// Only the final answer on stdout (for `answer=$(gadget agent ...)`);
    /// the transcript goes to stderr as plain text.
    #[arg(long, conflicts_with = "json")]
    answer_only: bool,
    /// Write the whole session to FILE as JSON lines (every request, response and event).
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    #[command(flatten)]
    exec: ExecOptions,
}

/// The key variables the providers document.
const OPENAI_KEY_VARIABLE: &str = "OPENAI_API_KEY";
const ANTHROPIC_KEY_VARIABLE: &str = "ANTHROPIC_API_KEY";

/// `gadget agent`.
pub async fn agent(
    tools: Arc<dyn gadget_core::tool::Tools>,
    options: &AgentOptions,
    settings: &LlmSettings,
    guards: &super::guards::Guards,
    journal: Option<Arc<gadget_exec::audit::Journal>>,
) -> Result<ExitCode> {
    let (task, model) = match task_and_model(options, settings)? {
        Ok(found) => found,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    let Some((provider_name, model_name)) = model.split_once(':') else {
        eprintln!("error: --model '{model}' is not PROVIDER:MODEL (e.g. openai:gpt-4o-mini)");
        return Ok(ExitCode::from(EXIT_BAD_INPUT));
    };
    if let Some(variable) = &options.api_key_env
        && std::env::var(variable).map_or(true, |key| key.trim().is_empty())
    {
        eprintln!(
            "warning: --api-key-env {variable}: the variable is not set (or empty), so requests go without a key"
        );
    }
    let provider = match make_provider(provider_name, options, settings) {
        Ok(provider) => provider,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    let table = model_table(settings);
    let model_info = table.lookup(provider_name, model_name);
    say_pricing(options, provider_name, model_name, model_info.is_some());
    let system = match &options.system {
        Some(path) => Some(
            gadget_core::operator_file::read_text(path, MAX_SYSTEM_PROMPT_BYTES)
                .with_context(|| format!("reading the system prompt {}", path.display()))?,
        ),
        None => None,
    };
    if let Some(max) = options.max_cost
        && !(max.is_finite() && max >= 0.0)
    {
        eprintln!("error: --max-cost {max} is not an amount of USD");
        return Ok(ExitCode::from(EXIT_BAD_INPUT));
    }

    let (executor, view, markers) = options.exec.executor(
        tools,
        model_info.map(|info| info.context_window),
        options.json,
        options.answer_only,
        guards,
        journal,
    )?;
    let save = match &options.save {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("creating the session file {}", path.display()))?,
        )),
        None => None,
    };
    let output = Arc::new(Mutex::new(Output {
        view,
        json: options.json,
        native: options.tool_format == ToolFormatArg::Native,
        answer_only: options.answer_only,
        save,
        failure: None,
    }));
    output
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .save(&json!({
            "type": "session", "provider": provider_name, "model": model_name, "task": task,
            "max_iterations": options.max_iterations, "max_cost": options.max_cost,
        }));
    let observer_output = output.clone();
    let observer: gadget_agent::Observer = Arc::new(move |event: &AgentEvent| {
        observer_output
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .event(event);
    });
    let on_llm_error = match on_llm_error(provider_name, options, settings, &table) {
        Ok(handler) => handler,
        Err(why) => {
            eprintln!("error: [llm.on-error] {why}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    let config = agent_config(options, model_name, system, model_info);
    let mut agent = Agent::new(provider, executor, markers, config, observer);
    if let Some(handler) = on_llm_error {
        agent.set_llm_error_controller(Arc::new(handler));
    }
    super::steer::from_terminal(&agent.steer_handle(), options.json);
    let interrupt = watch_interrupt(agent.stop_handle());
    let outcome = agent.run(&task).await;
    interrupt.abort();

    let mut output = output.lock().unwrap_or_else(|p| p.into_inner());
    output.finish(&outcome)?;
    Ok(match outcome.stop {
        StopReason::Answered | StopReason::Finished => ExitCode::SUCCESS,
        StopReason::MaxIterations | StopReason::MaxCost => ExitCode::from(EXIT_FAILED),
        StopReason::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        StopReason::Failed => match &outcome.error {
            Some(error) if error.is_setup() => ExitCode::from(EXIT_BAD_INPUT),
            _ => ExitCode::from(EXIT_FAILED),
        },
    })
}

/// What the operator should know of the model's price: an unpriced
/// model's tokens are counted, not priced, and a cost cap then holds for
/// gadgets only.
fn say_pricing(options: &AgentOptions, provider_name: &str, model_name: &str, priced: bool) {
    if !priced && let Some(max) = options.max_cost {
        // Said even with --json: the cap the operator set does not hold.
        eprintln!(
            "warning: --max-cost {max} caps gadget costs only: {provider_name}:{model_name} has no price, so its tokens count for nothing against the cap"
        );
    } else if !priced && !options.json {
        eprintln!(
            "note: no price for {provider_name}:{model_name} in the model table ({}): tokens are counted, not priced; add [llm.models.\"{provider_name}:{model_name}\"] input-per-mtok and output-per-mtok to the policy file",
            gadget_agent::models::TABLE_DATE
        );
    }
}

/// The task (read from stdin for `-`) and the model; `Ok(Err)`: why
/// they cannot be used.
fn task_and_model(
    options: &AgentOptions,
    settings: &LlmSettings,
) -> Result<Result<(String, String), String>> {
    let task = if options.prompt == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("reading the task from stdin")?;
        text
    } else {
        options.prompt.clone()
    };
    if task.trim().is_empty() {
        return Ok(Err("the task is empty".into()));
    }
    let Some(typed) = options.model.as_ref().or(settings.model.as_ref()) else {
        return Ok(Err("no model: pass --model PROVIDER:MODEL (e.g. openai:gpt-4o-mini) or set [llm] model in the policy file".into()));
    };
    let Some(model) = gadget_agent::models::resolve_model(typed) else {
        return Ok(Err(format!(
            "--model '{typed}': which provider serves it? Write PROVIDER:MODEL (openai:{typed} for an OpenAI-compatible server such as Ollama, anthropic:...), or a shortcut: haiku, sonnet, opus, gpt4o, gpt5, mini, nano"
        )));
    };
    if model != *typed && !options.json {
        eprintln!("note: --model {typed} is {model}");
    }
    Ok(Ok((task, model)))
}

/// The loop's configuration from the command line.
fn agent_config(
    options: &AgentOptions,
    model_name: &str,
    system: Option<String>,
    model_info: Option<gadget_agent::models::ModelInfo>,
) -> AgentConfig {
    AgentConfig {
        model: model_name.to_string(),
        max_iterations: options.max_iterations,
        max_cost: options.max_cost,
        max_tokens: options.max_tokens,
        system,
        model_info,
        retry: RetryPolicy {
            max_retries: options.max_retries,
            ..RetryPolicy::default()
        },
        tool_format: match options.tool_format {
            ToolFormatArg::Block => ToolFormat::Block,
            ToolFormatArg::Native => ToolFormat::Native,
        },
    }
}

/// The provider `name` with its base URL and key: the option, else
/// `[llm]`, else the provider's default. The key is required for the
/// provider's own endpoint; a local server at another base URL may need
/// none.
fn make_provider(
    name: &str,
    options: &AgentOptions,
    settings: &LlmSettings,
) -> Result<Arc<dyn Provider>, String> {
    provider_for(
        name,
        options.base_url.clone().or(settings.base_url.clone()),
        options.api_key_env.clone().or(settings.api_key_env.clone()),
    )
}

fn provider_for(
    name: &str,
    base_url: Option<String>,
    key_variable: Option<String>,
) -> Result<Arc<dyn Provider>, String> {
    let (default_url, default_variable) = match name {
        "openai" => (openai::DEFAULT_BASE_URL, OPENAI_KEY_VARIABLE),
        "anthropic" => (anthropic::DEFAULT_BASE_URL, ANTHROPIC_KEY_VARIABLE),
        other => {
            return Err(format!(
                "unknown provider '{other}': use openai (any OpenAI-compatible server, with --base-url) or anthropic"
            ));
        }
    };
    let variable = key_variable.unwrap_or_else(|| default_variable.to_string());
    let key = std::env::var(&variable)
        .ok()
        .filter(|k| !k.trim().is_empty());
    if let Some(url) = &base_url {
        gadget_agent::provider::check_base_url(url)?;
    }
    let own_endpoint = base_url.is_none();
    let base_url = base_url.unwrap_or_else(|| default_url.to_string());
    if key.is_none() && own_endpoint {
        return Err(ProviderError::MissingKey {
            provider: name.to_string(),
            variable,
        }
        .to_string());
    }
    Ok(match name {
        "openai" => Arc::new(OpenAi::new(&base_url, key)),
        _ => Arc::new(Anthropic::new(&base_url, key.unwrap_or_default())),
    })
}

/// `[llm.on-error]` as the loop's handler: each fallback's provider made
/// now, so a missing key or a mistyped model is said before the session
/// starts, not when the main model fails.
fn on_llm_error(
    session_provider: &str,
    options: &AgentOptions,
    settings: &LlmSettings,
    table: &ModelTable,
) -> Result<Option<OnLlmError>, String> {
    let Some(on_error) = &settings.on_error else {
        return Ok(None);
    };
    if on_error.fallback.len() > MAX_FALLBACKS {
        return Err(format!(
            "{} fallback models: at most {MAX_FALLBACKS}",
            on_error.fallback.len()
        ));
    }
    let mut fallbacks = Vec::new();
    for fallback in &on_error.fallback {
        let (typed, base_url, key_variable) = fallback.parts();
        let model = gadget_agent::models::resolve_model(typed)
            .ok_or_else(|| format!("fallback '{typed}' is not PROVIDER:MODEL"))?;
        let Some((provider_name, model_name)) = model.split_once(':') else {
            return Err(format!("fallback '{typed}' is not PROVIDER:MODEL"));
        };
        // The session's endpoint serves its own provider's fallbacks.
        let same = provider_name == session_provider;
        let base_url = base_url.map(str::to_string).or_else(|| {
            same.then(|| options.base_url.clone().or(settings.base_url.clone()))
                .flatten()
        });
        let key_variable = key_variable.map(str::to_string).or_else(|| {
            same.then(|| options.api_key_env.clone().or(settings.api_key_env.clone()))
                .flatten()
        });
        let provider = provider_for(provider_name, base_url, key_variable)
            .map_err(|e| format!("fallback {model}: {e}"))?;
        fallbacks.push(Fallback {
            provider,
            model: model_name.to_string(),
            model_info: table.lookup(provider_name, model_name),
        });
    }
    Ok(Some(OnLlmError {
        fallbacks,
        response: on_error.respond.clone(),
    }))
}

/// The model table: the built-in one under the policy file's prices.
fn model_table(settings: &LlmSettings) -> ModelTable {
    ModelTable::with_overrides(settings.models.iter().map(|(name, prices)| {
        (
            name.clone(),
            ModelInfo {
                input_per_mtok: prices.input_per_mtok,
                output_per_mtok: prices.output_per_mtok,
                context_window: prices
                    .context_window
                    .unwrap_or(viewer::DEFAULT_CONTEXT_WINDOW_TOKENS),
            },
        )
    }))
}

/// Every provider for gadgets' completions and sub-agents: the configured
/// model's provider (`--model`, else `[llm] model`) at the configured base
/// URL with the configured key variable, the others at their own
/// endpoints. A provider without a key answers each use with the reason.
pub fn providers(settings: &LlmSettings, options: Option<&AgentOptions>) -> Arc<Providers> {
    let model = options
        .and_then(|o| o.model.clone())
        .or(settings.model.clone())
        .and_then(|typed| gadget_agent::models::resolve_model(&typed));
    let configured = model
        .as_deref()
        .and_then(|m| m.split_once(':'))
        .map(|(provider, _)| provider.to_string());
    let mut providers = Providers::default();
    for name in ["openai", "anthropic"] {
        let provider = if configured.as_deref() == Some(name) {
            provider_for(
                name,
                options
                    .and_then(|o| o.base_url.clone())
                    .or(settings.base_url.clone()),
                options
                    .and_then(|o| o.api_key_env.clone())
                    .or(settings.api_key_env.clone()),
            )
        } else {
            provider_for(name, None, None)
        };
        providers = providers.with(name, provider);
    }
    Arc::new(providers)
}

/// Where gadgets' completions (the `llm` import) go.
pub fn llm_backend(
    settings: &LlmSettings,
    providers: Arc<Providers>,
) -> Arc<dyn gadget_core::llm::LlmBackend> {
    Arc::new(ProviderBackend::new(
        providers,
        model_table(settings),
        RetryPolicy::default(),
    ))
}

/// The tools a run serves: the loaded gadgets and the upstream MCP
/// servers' tools, plus the policy's agents (`[agents.NAME]`) as gadgets,
/// when there are any.
pub fn with_agents(
    registry: Arc<Registry>,
    upstream: Option<Arc<dyn gadget_core::tool::Tools>>,
    policy: &gadget_runtime::policy::Policy,
    providers: Arc<Providers>,
) -> Result<Arc<dyn gadget_core::tool::Tools>> {
    let base = base_tools(registry.clone(), upstream.clone());
    Ok(match sub_agents(registry, upstream, policy, providers)? {
        Some(agents) => agents.top_level(),
        None => base,
    })
}

/// The gadgets, then the upstream MCP servers' tools (a name a gadget has
/// stays the gadget's).
fn base_tools(
    registry: Arc<Registry>,
    upstream: Option<Arc<dyn gadget_core::tool::Tools>>,
) -> Arc<dyn gadget_core::tool::Tools> {
    match upstream {
        Some(upstream) => Arc::new(gadget_core::tool::Layered {
            first: registry,
            then: upstream,
        }),
        None => registry,
    }
}

/// The policy's agents over the gadgets and the upstream MCP servers'
/// tools, when it defines any.
pub fn sub_agents(
    registry: Arc<Registry>,
    upstream: Option<Arc<dyn gadget_core::tool::Tools>>,
    policy: &gadget_runtime::policy::Policy,
    providers: Arc<Providers>,
) -> Result<Option<Arc<SubAgents>>> {
    if policy.agents.is_empty() {
        return Ok(None);
    }
    let mut definitions = Vec::new();
    for (name, agent) in &policy.agents {
        let Some(model) = agent.model.clone().or(policy.llm.model.clone()) else {
            anyhow::bail!(
                "agents.{name}: no model (set model = \"provider:model\" there, or [llm] model)"
            );
        };
        if registry.get(name).is_some() {
            anyhow::bail!("agents.{name}: a loaded gadget already has this name");
        }
        definitions.push(SubAgentDefinition {
            name: name.clone(),
            description: agent.description.clone(),
            model,
            system: agent.system.clone(),
            gadgets: agent.gadgets.clone(),
            max_iterations: agent.max_iterations.unwrap_or(DEFAULT_SUBAGENT_ITERATIONS),
            timeout: agent
                .timeout_ms
                .map(std::time::Duration::from_millis)
                .unwrap_or(DEFAULT_SUBAGENT_TIMEOUT),
        });
    }
    // A pattern that matches nothing leaves the agent without that gadget:
    // said at start, not discovered when the agent cannot call it.
    let mut names: Vec<String> = registry
        .gadgets()
        .map(|g| g.card.spec.name.clone())
        .collect();
    if let Some(upstream) = &upstream {
        names.extend(upstream.all().iter().map(|t| t.name().to_string()));
    }
    names.extend(policy.agents.keys().cloned());
    for (name, agent) in &policy.agents {
        for pattern in &agent.gadgets {
            if !names
                .iter()
                .any(|n| gadget_core::tool::glob_matches(pattern, n))
            {
                eprintln!(
                    "warning: agents.{name}: gadgets entry \"{pattern}\" matches no loaded gadget, upstream tool or agent"
                );
            }
        }
    }
    Ok(Some(SubAgents::new(
        definitions,
        base_tools(registry, upstream),
        providers,
        model_table(&policy.llm),
    )))
}

/// Ctrl-C: the first stops the session cleanly (the stream is dropped,
/// running calls get the abort signal, the summary is printed and the
/// session saved); a second exits at once.
fn watch_interrupt(stop: gadget_agent::StopHandle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if !super::run::stop_signal().await {
            return;
        }
        eprintln!(
            "\ninterrupted: stopping the model, skipping the calls not started, cancelling the running ones (Ctrl-C again to quit at once)"
        );
        stop.stop();
        if super::run::stop_signal().await {
            std::process::exit(EXIT_INTERRUPTED.into());
        }
    })
}

/// Where events go: the view (or JSON lines) and the session file.
struct Output {
    view: View,
    json: bool,
    /// Native tool calls: the model's text never goes through the
    /// executor (which shows it in the block format), so it is shown here.
    native: bool,
    /// The transcript to stderr, the answer alone to stdout at the end.
    answer_only: bool,
    save: Option<std::io::BufWriter<std::fs::File>>,
    /// The first write error (stdout closed, disk full), reported at the end.
    failure: Option<std::io::Error>,
}

impl Output {
    fn save(&mut self, value: &serde_json::Value) {
        if let Some(file) = &mut self.save
            && let Err(e) = writeln!(file, "{value}")
        {
            self.failure.get_or_insert(e);
        }
    }

    fn event(&mut self, event: &AgentEvent) {
        let value = event.to_json();
        self.save(&value);
        let mut out: Box<dyn Write> = if self.answer_only {
            Box::new(std::io::stderr())
        } else {
            Box::new(std::io::stdout())
        };
        let written = if self.json {
            writeln!(out, "{value}").and_then(|_| out.flush())
        } else {
            match event {
                // Natively, providers stream the model's text and its
                // tool calls as blocks in turn: the text before a call is
                // a finished paragraph, shown above it (on a terminal it
                // stayed below the calls' lines until the turn ended).
                AgentEvent::Exec(event @ ExecEvent::CallParsed { .. }) if self.native => self
                    .view
                    .end_text(&mut out)
                    .and_then(|()| self.view.event(&mut out, event)),
                AgentEvent::Exec(event) => self.view.event(&mut out, event),
                AgentEvent::Request {
                    iteration,
                    provider,
                    model,
                    estimated_input_tokens,
                    ..
                } => self.view.end_text(&mut out).map(|()| {
                    self.view.aside(&format!(
                        "── iteration {iteration}: {provider}:{model}, about {estimated_input_tokens} tokens in ──"
                    ))
                }),
                AgentEvent::Retry {
                    attempt,
                    delay,
                    error,
                    ..
                } => self.view.end_text(&mut out).map(|()| {
                    self.view.aside(&format!(
                        "retry {attempt} in {} ms: {error}",
                        delay.as_millis()
                    ))
                }),
                AgentEvent::LlmError {
                    error,
                    action,
                    model,
                    ..
                } => self.view.end_text(&mut out).map(|()| {
                    self.view.aside(&match (*action, model) {
                        ("fallback", Some(model)) => format!("{error}; trying {model} ([llm.on-error])"),
                        ("recover", _) => format!("{error}; going on with [llm.on-error] respond"),
                        _ => format!("{error}; no fallback left ([llm.on-error])"),
                    })
                }),
                AgentEvent::Steered { text, .. } => self.view.end_text(&mut out).map(|()| {
                    self.view.aside(&format!("↪ to the model: {text}"))
                }),
                AgentEvent::IterationEnd(record) => self.view.end_text(&mut out).map(|()| {
                    self.view.aside(&format!(
                        "\niteration {}: {} call(s) ({} ok, {} failed, {} skipped); tokens {} in / {} out; LLM {}, gadgets ${:.6}; {:.0} ms",
                        record.iteration,
                        record.calls,
                        record.succeeded,
                        record.failed,
                        record.skipped,
                        record.input_tokens,
                        record.output_tokens,
                        usd(record.llm_cost),
                        record.gadget_cost,
                        record.duration_ms
                    ))
                }),
                // In the block format the text outside calls is shown by
                // the view as the executor parses it; natively, as it
                // streams. The raw stream is for --json and --save.
                AgentEvent::Text { content, .. } if self.native => self
                    .view
                    .event(&mut out, &ExecEvent::Text {
                        content: content.clone(),
                    }),
                AgentEvent::Text { .. } | AgentEvent::Response { .. } => Ok(()),
            }
        };
        if let Err(e) = written {
            self.failure.get_or_insert(e);
        }
    }

    fn finish(&mut self, outcome: &AgentOutcome) -> Result<()> {
        let mut summary = serde_json::to_value(outcome)?;
        summary["type"] = json!("agent_summary");
        if let Some(error) = &outcome.error {
            summary["error"] = json!(error.to_string());
        }
        self.save(&summary);
        if let Some(file) = &mut self.save {
            file.flush().context("writing the session file")?;
        }
        if self.json {
            println!("{summary}");
        } else {
            let mut out: Box<dyn Write> = if self.answer_only {
                Box::new(std::io::stderr())
            } else {
                Box::new(std::io::stdout())
            };
            if let Err(e) = self.view.end_text(&mut out) {
                self.failure.get_or_insert(e);
            }
            let stop = match outcome.stop {
                StopReason::Answered => "answered".to_string(),
                StopReason::Finished => "task complete".to_string(),
                StopReason::MaxIterations => format!(
                    "stopped: --max-iterations ({}) reached without an answer",
                    outcome.iterations.len()
                ),
                StopReason::MaxCost => "stopped: the next request would go over --max-cost".into(),
                StopReason::Interrupted => "interrupted".into(),
                StopReason::Failed => "failed".into(),
            };
            self.view.aside(&format!(
                "\nsession: {} iteration(s), {stop}; tokens {} in / {} out; LLM {} + gadgets ${:.6} = ${:.6}",
                outcome.iterations.len(),
                outcome.input_tokens,
                outcome.output_tokens,
                usd(outcome.llm_cost),
                outcome.gadget_cost,
                outcome.total_cost
            ));
            if let Some(error) = &outcome.error {
                self.view.aside(&format!("error: {error}"));
            }
            if self.answer_only
                && let Some(answer) = &outcome.answer
            {
                let mut out = std::io::stdout();
                // Raw for a pipe; escaped for a person's terminal.
                let answer = if std::io::IsTerminal::is_terminal(&out) {
                    super::safe::safe(answer.trim_end()).into_owned()
                } else {
                    answer.trim_end().to_string()
                };
                if let Err(e) = writeln!(out, "{answer}").and_then(|_| out.flush()) {
                    self.failure.get_or_insert(e);
                }
            }
        }
        match self.failure.take() {
            Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(e).context("writing the session's output")
            }
            _ => Ok(()),
        }
    }
}

fn usd(cost: Option<f64>) -> String {
    match cost {
        Some(cost) => format!("${cost:.6}"),
        None => "(unpriced)".into(),
    }
}
