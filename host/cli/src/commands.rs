//! The `gadget` command line: the only module that prints.
//!
//! Exit codes: 0 success; 1 the call or check failed (a gadget error, a
//! timeout, a crash, a plugin that does not pass); 2 bad input (unknown
//! gadget, invalid parameters, bad JSON, a load error under `--strict`,
//! usage errors).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

use crate::plugins::{
    self, CallRejected, ComponentCache, LoadOptions, LoadProgress, PluginSource, Registry,
};
use crate::runtime::{CallError, CallReport, Outcome, Runtime, RuntimeConfig};

mod run;
mod scaffold;

const EXIT_FAILED: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;

/// Largest parameters document read from stdin, in bytes.
const MAX_STDIN_PARAMS_BYTES: u64 = 16 << 20;

#[derive(Debug, Parser)]
#[command(
    name = "gadget",
    version,
    about = "Run LLM tools (gadgets) compiled to WebAssembly components, sandboxed.",
    after_help = "Examples:\n  gadget list\n  gadget describe Calculator\n  gadget call Calculator --params '{\"operation\":\"add\",\"a\":15,\"b\":23}'\n  gadget check plugins/text"
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct GlobalArgs {
    /// A directory of plugins (repeatable). Default: $GADGET_PLUGINS, else the shipped `plugins/`.
    #[arg(long = "plugins", value_name = "DIR", global = true)]
    plugins: Vec<PathBuf>,
    /// Where precompiled components are cached. Default: $GADGET_CACHE_DIR, $XDG_CACHE_HOME/gadget-host or ~/.cache/gadget-host.
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
    /// Compile every component from scratch; read and write no cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Make any plugin load error fatal.
    #[arg(long, global = true)]
    strict: bool,
    /// More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the loaded gadgets.
    #[command(after_help = "Example:\n  gadget list --json | jq '.[].name'")]
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one gadget: description, parameters, examples, limits, plugin.
    #[command(after_help = "Example:\n  gadget describe RegexFind")]
    Describe {
        /// The gadget's name (case-insensitive).
        name: String,
        /// Print JSON (the spec, the schema, the limits, the plugin).
        #[arg(long)]
        json: bool,
    },
    /// Run one gadget with JSON parameters and print its result.
    #[command(
        after_help = "Examples:\n  gadget call Calculator --params '{\"operation\":\"divide\",\"a\":1,\"b\":8}'\n  echo '{\"text\":\"one two\"}' | gadget call TextStats --json"
    )]
    Call {
        /// The gadget's name (case-insensitive).
        name: String,
        /// The parameters, a JSON object. Default: read from stdin when it is not a terminal, else `{}`.
        #[arg(long, value_name = "JSON")]
        params: Option<String>,
        /// The invocation id the gadget sees.
        #[arg(long, default_value = "gadget_1")]
        id: String,
        /// Print the whole outcome as JSON: result, details, cost, logs, progress, duration, error kind.
        #[arg(long)]
        json: bool,
    },
    /// Parse block-format text from stdin and print the events as JSON lines.
    #[command(
        after_help = "Examples:\n  gadget parse < response.txt\n  gadget parse --chunk 7 --start '<<TOOL:' --end '<<END' --arg '@' < custom.txt\n  gadget parse --count < big.txt"
    )]
    Parse(ParseOptions),
    /// Execute an LLM response: parse it as it arrives and run its gadget calls, dependencies first.
    #[command(
        after_help = "Examples:\n  gadget run response.txt\n  gadget run --replay 20 response.txt     # stream it as a model would\n  my-llm-client | gadget run -\n  gadget run --json response.txt | jq 'select(.type == \"call_finished\")'\n\nExit code: 0 when every call succeeded, 1 when one failed or was skipped, 2 on bad input."
    )]
    Run(Box<run::RunOptions>),
    /// Print the instruction text a model needs: the loaded gadgets, their parameters and examples, and the block format.
    #[command(
        after_help = "Examples:\n  gadget prompt > system-prompt.txt\n  gadget prompt --start-marker '<<TOOL:' --end-marker '<<END' --arg-marker '@'"
    )]
    Prompt(run::PromptOptions),
    /// Start a plugin directory for a gadget in a language (it builds and passes `gadget check` as created).
    #[command(
        after_help = "Examples:\n  gadget new word-count --lang python\n  gadget build word-count && gadget check word-count\n  gadget --plugins word-count call WordCount --params '{\"text\": \"hello world\"}'"
    )]
    New {
        /// The plugin's name (letters, digits, '-'); the gadget is named after it in CamelCase.
        name: String,
        /// The language to write the gadget in.
        #[arg(long, value_enum)]
        lang: scaffold::Lang,
        /// Where to create it. Default: ./NAME.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Build a plugin directory's component with its language's toolchain (Rust, Python, C, JavaScript, Go).
    #[command(
        after_help = "Example:\n  gadget build examples/python-gadget && gadget check examples/python-gadget"
    )]
    Build {
        /// The plugin directory (with plugin.toml).
        path: PathBuf,
    },
    /// Check a plugin directory or component: manifest, world, specs, schemas, examples.
    #[command(after_help = "Example:\n  gadget check plugins/calculator && echo ok")]
    Check {
        /// A plugin directory (with plugin.toml) or a .wasm component.
        path: PathBuf,
    },
}

/// Options of `gadget parse`.
#[derive(Debug, clap::Args)]
struct ParseOptions {
    /// Feed the input N bytes at a time (moved to the next character boundary), as a stream would arrive.
    #[arg(long, value_name = "N")]
    chunk: Option<usize>,
    /// The start marker.
    #[arg(long, value_name = "MARKER", allow_hyphen_values = true, default_value = crate::parser::DEFAULT_START)]
    start: String,
    /// The end marker.
    #[arg(long, value_name = "MARKER", allow_hyphen_values = true, default_value = crate::parser::DEFAULT_END)]
    end: String,
    /// The argument marker.
    #[arg(long, value_name = "MARKER", allow_hyphen_values = true, default_value = crate::parser::DEFAULT_ARG)]
    arg: String,
    /// Print only counts (text events, calls, parse errors), for timing.
    #[arg(long)]
    count: bool,
    /// Emit text as it arrives (pieces of segments) instead of whole segments.
    #[arg(long)]
    text_deltas: bool,
    /// Emit `gadget_args_partial` events for argument values of blocks still open at the end of a chunk.
    #[arg(long)]
    partials: bool,
}

/// Runs the CLI; the exit code says how it went.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.global.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

async fn run(cli: Cli) -> Result<ExitCode> {
    // Each command starts only what it needs: `parse` needs no WebAssembly
    // runtime and no cache.
    let start = || -> Result<Arc<Runtime>> {
        // These commands make at most one call, so the pooling allocator's
        // up-front reservation would only slow start-up down.
        let config = RuntimeConfig {
            pooling: false,
            ..RuntimeConfig::default()
        };
        Ok(Arc::new(
            Runtime::new(&config).context("starting the WebAssembly runtime")?,
        ))
    };
    let options = || load_options(&cli.global);
    match &cli.command {
        Command::Parse(options) => parse(options),
        Command::New { name, lang, dir } => scaffold::new(name, *lang, dir.as_deref()),
        Command::Build { path } => scaffold::build(path),
        Command::Run(run_options) => {
            // A response may hold thousands of calls: the pooling
            // allocator pays for its reservation there.
            let runtime = Arc::new(
                Runtime::new(&RuntimeConfig::default())
                    .context("starting the WebAssembly runtime")?,
            );
            let Some(registry) = load(&runtime, &cli.global, &options()).await? else {
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            };
            run::run(Arc::new(registry), run_options).await
        }
        Command::Prompt(prompt_options) => {
            let Some(registry) = load(&start()?, &cli.global, &options()).await? else {
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            };
            run::prompt(Arc::new(registry), prompt_options)
        }
        Command::Check { path } => check(&start()?, path, &options()).await,
        Command::List { json } => {
            let Some(registry) = load(&start()?, &cli.global, &options()).await? else {
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            };
            list(&registry, *json)
        }
        Command::Describe { name, json } => {
            let Some(registry) = load(&start()?, &cli.global, &options()).await? else {
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            };
            describe(&registry, name, *json)
        }
        Command::Call {
            name,
            params,
            id,
            json,
        } => {
            let params = read_params(params.clone())?;
            let Some(registry) = load(&start()?, &cli.global, &options()).await? else {
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            };
            call(&registry, name, params, id, *json).await
        }
    }
}

fn load_options(global: &GlobalArgs) -> LoadOptions {
    let cache = if global.no_cache {
        None
    } else {
        match global
            .cache_dir
            .clone()
            .or_else(ComponentCache::default_dir)
        {
            Some(dir) => match ComponentCache::open(&dir) {
                Ok(cache) => Some(cache),
                Err(e) => {
                    tracing::warn!(
                        "not caching compiled components: cannot use {}: {e}",
                        dir.display()
                    );
                    None
                }
            },
            None => None,
        }
    };
    LoadOptions {
        cache,
        ..LoadOptions::default()
    }
}

/// The plugin directories: `--plugins`, else `$GADGET_PLUGINS` (separated
/// by `:`), else the shipped set next to this build.
fn plugin_dirs(global: &GlobalArgs) -> Vec<PathBuf> {
    if !global.plugins.is_empty() {
        return global.plugins.clone();
    }
    if let Some(dirs) = std::env::var_os("GADGET_PLUGINS").filter(|d| !d.is_empty()) {
        return std::env::split_paths(&dirs).collect();
    }
    let shipped = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../plugins"));
    if let Ok(shipped) = shipped.canonicalize() {
        return vec![shipped];
    }
    vec![PathBuf::from("plugins")]
}

/// Loads the plugins; reports each load error. `None` under `--strict`
/// when any failed.
async fn load(
    runtime: &Arc<Runtime>,
    global: &GlobalArgs,
    options: &LoadOptions,
) -> Result<Option<Registry>> {
    let dirs = plugin_dirs(global);
    let progress = Arc::new(CompileBars::new());
    let (registry, errors) =
        plugins::load_dirs(runtime.clone(), &dirs, options, progress.clone()).await;
    progress.finish();
    for error in &errors {
        eprintln!(
            "{}: {error}",
            if global.strict { "error" } else { "warning" }
        );
    }
    if global.strict && !errors.is_empty() {
        eprintln!(
            "error: {} plugin(s) failed to load (--strict)",
            errors.len()
        );
        return Ok(None);
    }
    Ok(Some(registry))
}

/// One spinner per component being compiled, only on a terminal.
struct CompileBars {
    multi: Option<indicatif::MultiProgress>,
    bars: Mutex<Vec<(String, indicatif::ProgressBar)>>,
}

impl CompileBars {
    fn new() -> CompileBars {
        let multi = std::io::stderr()
            .is_terminal()
            .then(indicatif::MultiProgress::new);
        CompileBars {
            multi,
            bars: Mutex::new(Vec::new()),
        }
    }

    fn finish(&self) {
        for (_, bar) in self
            .bars
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            bar.finish_and_clear();
        }
    }
}

impl LoadProgress for CompileBars {
    fn compiling(&self, plugin: &str, bytes: u64) {
        let Some(multi) = &self.multi else { return };
        let bar = multi.add(indicatif::ProgressBar::new_spinner());
        bar.set_message(format!(
            "compiling {plugin} ({}) — cached for next time",
            human_bytes(bytes)
        ));
        bar.enable_steady_tick(Duration::from_millis(100));
        self.bars
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((plugin.to_string(), bar));
    }

    fn compiled(&self, plugin: &str) {
        let mut bars = self.bars.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(index) = bars.iter().position(|(name, _)| name == plugin) {
            bars.remove(index).1.finish_and_clear();
        }
    }
}

fn list(registry: &Registry, json: bool) -> Result<ExitCode> {
    if json {
        let items: Vec<Value> = registry
            .gadgets()
            .map(|g| {
                json!({
                    "name": g.spec.name,
                    "label": g.spec.label,
                    "description": g.spec.description,
                    "plugin": g.plugin.name,
                    "timeout_ms": g.limits.timeout.as_millis() as u64,
                    "exclusive": g.spec.exclusive,
                    "max_concurrent": g.spec.max_concurrent,
                })
            })
            .collect();
        print_json(&Value::Array(items))?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = |len: fn(&plugins::Gadget) -> usize, header: &str| {
        registry
            .gadgets()
            .map(|g| len(g))
            .max()
            .unwrap_or(0)
            .max(header.len())
    };
    let name_width = width(|g| g.spec.name.len(), "NAME");
    let plugin_width = width(|g| g.plugin.name.len(), "PLUGIN");
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:name_width$}  {:plugin_width$}  DESCRIPTION",
        "NAME", "PLUGIN"
    )?;
    for g in registry.gadgets() {
        let description = g.spec.description.lines().next().unwrap_or_default();
        writeln!(
            out,
            "{:name_width$}  {:plugin_width$}  {description}",
            g.spec.name, g.plugin.name
        )?;
    }
    if registry.gadgets().next().is_none() {
        writeln!(out, "(no gadgets loaded)")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(registry: &Registry, name: &str, json: bool) -> Result<ExitCode> {
    let Some(g) = registry.get(name) else {
        eprintln!(
            "error: {}",
            CallRejected::UnknownGadget {
                name: name.to_string(),
                available: registry.names(),
            }
        );
        return Ok(ExitCode::from(EXIT_BAD_INPUT));
    };
    let limits = &g.limits;
    if json {
        let examples: Vec<Value> = g
            .spec
            .examples
            .iter()
            .map(|e| {
                json!({
                    "params": serde_json::from_str::<Value>(&e.params).unwrap_or(Value::Null),
                    "output": e.output,
                    "comment": e.comment,
                })
            })
            .collect();
        print_json(&json!({
            "name": g.spec.name,
            "label": g.spec.label,
            "description": g.spec.description,
            "parameters_schema": g.schema.schema(),
            "examples": examples,
            "exclusive": g.spec.exclusive,
            "max_concurrent": g.spec.max_concurrent,
            "limits": {
                "timeout_ms": limits.timeout.as_millis() as u64,
                "grace_ms": limits.grace.as_millis() as u64,
                "memory_bytes": limits.memory_bytes,
                "result_bytes": limits.result_bytes,
                "log_bytes": limits.log_bytes,
                "stdio_bytes": limits.stdio_bytes,
            },
            "plugin": {
                "name": g.plugin.name,
                "version": g.plugin.version,
                "description": g.plugin.description,
                "path": g.plugin.source.path(),
                "component": g.plugin.component_path,
                "sha256": g.plugin.sha256,
                "requested_permissions": {
                    "http": g.plugin.requested_permissions.http,
                    "config": g.plugin.requested_permissions.config,
                },
                "granted_permissions": { "http": [], "config": [] },
            },
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    let title = match &g.spec.label {
        Some(label) if label != &g.spec.name => format!("{} ({label})", g.spec.name),
        _ => g.spec.name.clone(),
    };
    out.push_str(&format!("{title}\n{}\n\n", g.spec.description));
    out.push_str("Parameters:\n");
    match g.schema.schema() {
        None => out.push_str("  (none)\n"),
        Some(schema) => render_properties(schema, 1, &mut out),
    }
    if !g.spec.examples.is_empty() {
        out.push_str("\nExamples:\n");
        for example in &g.spec.examples {
            if let Some(comment) = &example.comment {
                out.push_str(&format!("  # {comment}\n"));
            }
            out.push_str(&format!("  {}\n", example.params));
            if let Some(output) = &example.output {
                out.push_str(&format!("    -> {output}\n"));
            }
        }
    }
    out.push_str(&format!(
        "\nLimits: timeout {} ms (+{} ms grace), memory {}, result {}, logs {}, stdout/stderr {} each\n",
        limits.timeout.as_millis(),
        limits.grace.as_millis(),
        human_bytes(limits.memory_bytes),
        human_bytes(limits.result_bytes),
        human_bytes(limits.log_bytes),
        human_bytes(limits.stdio_bytes),
    ));
    out.push_str(&format!(
        "Concurrency: {}{}\n",
        if g.spec.exclusive {
            "exclusive (runs alone)"
        } else {
            "parallel"
        },
        g.spec
            .max_concurrent
            .map(|n| format!(", at most {n} at once"))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "Plugin: {} {} ({})\n",
        g.plugin.name,
        g.plugin.version,
        g.plugin.source.path().display()
    ));
    if !g.plugin.requested_permissions.is_empty() {
        out.push_str(&format!(
            "Permissions asked for, not granted: {}\n",
            g.plugin.requested_permissions.describe()
        ));
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Renders an object schema's properties as an indented list: type,
/// required or optional (with the default), enum values, description.
fn render_properties(schema: &Value, depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        out.push_str(&format!("{indent}(none)\n"));
        return;
    };
    for (name, property) in properties {
        let mut facts = vec![type_name(property)];
        if let Some(default) = property.get("default") {
            facts.push(format!("optional, default {default}"));
        } else if required.contains(&name.as_str()) {
            facts.push("required".into());
        } else {
            facts.push("optional".into());
        }
        if let Some(values) = property.get("enum").and_then(Value::as_array) {
            let values: Vec<String> = values
                .iter()
                .map(|v| v.as_str().map_or(v.to_string(), str::to_string))
                .collect();
            facts.push(format!("one of: {}", values.join(", ")));
        }
        out.push_str(&format!("{indent}{name}  ({})\n", facts.join("; ")));
        if let Some(description) = property.get("description").and_then(Value::as_str) {
            out.push_str(&format!("{indent}    {description}\n"));
        }
        if property.get("properties").is_some() {
            render_properties(property, depth + 2, out);
        } else if let Some(items) = property
            .get("items")
            .filter(|i| i.get("properties").is_some())
        {
            render_properties(items, depth + 2, out);
        }
    }
}

fn type_name(schema: &Value) -> String {
    let base = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ if schema.get("enum").is_some() => "string".into(),
        _ if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() => {
            "one of several shapes".into()
        }
        _ => "any".into(),
    };
    if base == "array"
        && let Some(items) = schema.get("items")
    {
        return format!("array of {}", type_name(items));
    }
    base
}

fn read_params(params: Option<String>) -> Result<Value> {
    let text = match params {
        Some(text) => text,
        None if !std::io::stdin().is_terminal() => {
            let mut text = String::new();
            std::io::stdin()
                .take(MAX_STDIN_PARAMS_BYTES + 1)
                .read_to_string(&mut text)
                .context("reading parameters from stdin")?;
            if text.len() as u64 > MAX_STDIN_PARAMS_BYTES {
                bail!("parameters on stdin exceed {MAX_STDIN_PARAMS_BYTES} bytes");
            }
            text
        }
        None => String::new(),
    };
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    let value: Value = serde_json::from_str(&text).context("parameters are not valid JSON")?;
    if !value.is_object() {
        let kind = crate::parser::json_type(&value);
        let article = if kind.starts_with(['a', 'o']) {
            "an"
        } else {
            "a"
        };
        bail!("parameters must be a JSON object, not {article} {kind}");
    }
    Ok(value)
}

async fn call(
    registry: &Registry,
    name: &str,
    params: Value,
    id: &str,
    json: bool,
) -> Result<ExitCode> {
    let report = match registry.call(name, params, id, None).await {
        Ok(report) => report,
        Err(rejected) => {
            let kind = match &rejected {
                CallRejected::UnknownGadget { .. } => "unknown-gadget",
                CallRejected::InvalidParameters(_) => "invalid-parameters",
            };
            if json {
                print_json(
                    &json!({ "gadget": name, "invocation_id": id, "error": { "kind": kind, "message": rejected.to_string() } }),
                )?;
            } else {
                eprintln!("error: {rejected}");
            }
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    let gadget = registry
        .get(name)
        .map_or(name.to_string(), |g| g.spec.name.clone());
    if json {
        print_json(&report_json(&gadget, id, &report))?;
    } else {
        print_report(&gadget, &report)?;
    }
    Ok(if report.outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

fn report_json(gadget: &str, id: &str, report: &CallReport) -> Value {
    let (outcome, error) = match &report.outcome {
        Ok(outcome) => (
            serde_json::to_value(outcome).unwrap_or(Value::Null),
            Value::Null,
        ),
        Err(error) => (
            Value::Null,
            json!({ "kind": error.kind(), "message": error.to_string() }),
        ),
    };
    let (result, details) = match &report.outcome {
        Ok(Outcome::Result { result, details } | Outcome::Finish { result, details }) => {
            (json!(result), details.clone().unwrap_or(Value::Null))
        }
        _ => (Value::Null, Value::Null),
    };
    json!({
        "gadget": gadget,
        "invocation_id": id,
        "ok": report.outcome.is_ok(),
        "outcome": outcome,
        "result": result,
        "details": details,
        "error": error,
        "cost_usd": report.cost,
        "duration_ms": report.duration.as_secs_f64() * 1000.0,
        "logs": report.logs,
        "progress": report.progress,
        "updates": report.updates,
        "dropped_log_entries": report.dropped_log_entries,
        "stdout": String::from_utf8_lossy(&report.stdout.bytes),
        "stdout_dropped_bytes": report.stdout.dropped,
        "stderr": String::from_utf8_lossy(&report.stderr.bytes),
        "stderr_dropped_bytes": report.stderr.dropped,
    })
}

fn print_report(gadget: &str, report: &CallReport) -> Result<()> {
    let mut err = std::io::stderr().lock();
    for log in &report.logs {
        let fields = if log.fields.is_null() {
            String::new()
        } else {
            format!(" {}", log.fields)
        };
        let who = match log.source {
            crate::runtime::LogSource::Gadget => gadget,
            crate::runtime::LogSource::Host => "host",
        };
        writeln!(
            err,
            "[{} {who}] {}{fields}",
            log.level.as_str(),
            log.message
        )?;
    }
    if report.dropped_log_entries > 0 {
        writeln!(
            err,
            "[host] {} log entries dropped past the log volume limit",
            report.dropped_log_entries
        )?;
    }
    let summary = format!(
        "{} in {:.1} ms, cost ${:.6}",
        gadget,
        report.duration.as_secs_f64() * 1000.0,
        report.cost
    );
    match &report.outcome {
        Ok(Outcome::Result { result, .. }) => {
            writeln!(err, "✓ {summary}")?;
            println!("{result}");
        }
        Ok(Outcome::Finish { result, .. }) => {
            writeln!(
                err,
                "✓ {summary} — task complete (the agent loop would end here)"
            )?;
            println!("{result}");
        }
        Ok(Outcome::AskHuman { question }) => {
            writeln!(
                err,
                "? {summary} — the gadget asks a person (in `gadget run` a human-input handler answers):"
            )?;
            println!("{question}");
        }
        Err(error) => {
            writeln!(err, "✗ {summary}")?;
            let label = match error {
                CallError::InvalidArguments { .. } => "invalid arguments",
                CallError::Failed { .. } => "gadget failed",
                _ => "error",
            };
            writeln!(err, "{label}: {error}")?;
        }
    }
    Ok(())
}

async fn check(
    runtime: &Arc<Runtime>,
    path: &std::path::Path,
    options: &LoadOptions,
) -> Result<ExitCode> {
    println!("checking {}", path.display());
    let source = match PluginSource::from_path(path) {
        Ok(source) => source,
        Err(e) => {
            println!("  ✗ {}", e.reason);
            println!("FAIL");
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    let progress = CompileBars::new();
    let loaded = plugins::load_plugin(runtime, source, options, &progress).await;
    progress.finish();
    let (plugin, gadgets) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            println!("  ✗ {}", e.reason);
            println!("FAIL");
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    println!(
        "  ✓ manifest: {} {} — {}",
        plugin.name, plugin.version, plugin.description
    );
    println!(
        "  ✓ component: {} ({}, sha256 {}; {})",
        plugin.component_path.display(),
        human_bytes(plugin.component_bytes),
        plugin.sha256,
        match plugin.cache {
            plugins::CacheOutcome::Hit => "loaded from the cache",
            plugins::CacheOutcome::Miss => "compiled and cached",
            plugins::CacheOutcome::Off => "compiled, not cached",
        }
    );
    println!(
        "  ✓ world: exports {} ({})",
        crate::runtime::GADGET_EXPORT,
        crate::runtime::WIT_PACKAGE
    );
    for gadget in &gadgets {
        let params = match gadget.schema.schema() {
            Some(schema) => format!(
                "{} parameter(s)",
                schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .map_or(0, |p| p.len())
            ),
            None => "no parameters".into(),
        };
        println!(
            "  ✓ gadget {}: schema compiles ({params}), {} example(s) validate, timeout {} ms",
            gadget.spec.name,
            gadget.spec.examples.len(),
            gadget.limits.timeout.as_millis()
        );
        if gadget.spec.examples.is_empty() {
            println!("    ! no examples: models call gadgets more reliably with one");
        }
    }
    for warning in &plugin.warnings {
        println!("  ! {warning}");
    }
    println!("PASS");
    Ok(ExitCode::SUCCESS)
}

/// `gadget parse`: stdin through the block-format parser, events out as
/// JSON lines in the conformance kit's format.
fn parse(options: &ParseOptions) -> Result<ExitCode> {
    use crate::parser::{EventRef, ParserBuilder};
    let mut parser = ParserBuilder::new()
        .start_marker(&options.start)
        .end_marker(&options.end)
        .arg_marker(&options.arg)
        .text_deltas(options.text_deltas)
        .partial_arguments(options.partials)
        .build()
        .context("invalid markers")?;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .context("reading stdin")?;
    let input = match std::str::from_utf8(&bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(&bytes),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let (mut texts, mut calls, mut errors, mut partials) = (0usize, 0usize, 0usize, 0usize);
    let mut failure: Option<std::io::Error> = None;
    let count = options.count;
    let mut emit = |event: EventRef<'_>| {
        let line = match event {
            EventRef::Text(content) => {
                texts += 1;
                if count {
                    return;
                }
                json!({ "type": "text", "content": content })
            }
            EventRef::Call(call) => {
                calls += 1;
                errors += usize::from(call.parse_error.is_some());
                if count {
                    return;
                }
                let call = call.to_owned();
                json!({ "type": "gadget_call", "call": {
                    "gadgetName": call.name,
                    "invocationId": call.invocation_id,
                    "dependencies": call.dependencies,
                    "parametersRaw": call.parameters_raw,
                    "parameters": call.parameters(),
                    "parseError": call.parse_error,
                }})
            }
            EventRef::ArgumentDelta(delta) => {
                partials += 1;
                json!({
                    "type": "gadget_args_partial",
                    "gadgetName": delta.header.name,
                    "invocationId": delta.header.invocation_id.to_string(),
                    "fieldPath": delta.pointer,
                    "delta": delta.delta,
                })
            }
        };
        if !count
            && failure.is_none()
            && let Err(error) = writeln!(out, "{line}")
        {
            failure = Some(error);
        }
    };
    match options.chunk {
        None | Some(0) => parser.feed_events(&input, &mut emit),
        Some(size) => {
            let mut rest: &str = &input;
            while !rest.is_empty() {
                let mut cut = size.min(rest.len());
                while !rest.is_char_boundary(cut) {
                    cut += 1;
                }
                parser.feed_events(&rest[..cut], &mut emit);
                rest = &rest[cut..];
            }
        }
    }
    parser.finish_events(&mut emit);
    if let Some(error) = failure {
        return Err(error).context("writing stdout");
    }
    if count {
        write!(
            out,
            "text events: {texts}, calls: {calls}, parse errors: {errors}"
        )?;
        if options.partials {
            write!(out, ", argument deltas: {partials}")?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn print_json(value: &Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

fn human_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}
