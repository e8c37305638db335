//! The `gadget` command line: the only module that prints. One file per
//! command under `cli/`; this file parses the arguments, starts what a
//! command needs (the runtime, the plugins) and hands over.
//!
//! Exit codes: 0 success; 1 the call or check failed (a gadget error, a
//! timeout, a crash, a plugin that does not pass); 2 bad input (unknown
//! gadget, invalid parameters, bad JSON, a load error under `--strict`,
//! usage errors).

use std::io::Write;

use gadget_core::ledger::LogLevel;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use gadget_core::tool::{Layered, Tools};
use gadget_runtime::policy::Policy;
use gadget_runtime::registry::Registry;
use host::Calls;
use plugins::{CompileBars, load, load_options, plugin_dirs};

/// Set (to anything) in the environment of the compiling child process
/// (`gadget __compile`): the binary then allocates with the system's
/// allocator, whose use of memory `RLIMIT_DATA` bounds closely. mimalloc,
/// the binary's allocator otherwise, commits its arenas in 128 MiB to
/// 1 GiB steps, so under a budget of 64 MiB it could not compile even a
/// small component (see src/main.rs).
pub const SYSTEM_ALLOCATOR_ENV: &std::ffi::CStr = c"GADGET_SYSTEM_ALLOCATOR";

mod agent;
mod approve;
mod audit;
mod build;
mod call;
mod check;
mod compile;
mod describe;
mod host;
mod list;
mod lock;
mod mcp;
mod new;
mod oci;
mod parse;
mod plugins;
mod prompt;
mod run;
mod safe;
mod sign;
mod telemetry;
mod upstream;
mod view;

const EXIT_FAILED: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;

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

#[derive(Debug, Clone, Args)]
struct GlobalArgs {
    /// A directory of plugins, a component, or an oci://HOST[:PORT]/REPOSITORY:TAG (or @sha256:DIGEST) to pull (repeatable). Default: $GADGET_PLUGINS, else the shipped `plugins/`.
    #[arg(long = "plugins", value_name = "DIR|oci://REF", global = true)]
    plugins: Vec<PathBuf>,
    /// Refuse any plugin whose component digest or signers differ from the lock file (see `gadget lock`).
    #[arg(long, global = true)]
    locked: bool,
    /// The lock file `gadget lock` writes and `--locked` checks.
    #[arg(long, value_name = "FILE", default_value = gadget_runtime::lockfile::LOCK_FILE, env = "GADGET_LOCK_FILE", global = true)]
    lock_file: PathBuf,
    /// A registry (HOST[:PORT]) to speak plain HTTP to although it is not on this machine (repeatable; loopback registries always may).
    #[arg(
        long = "insecure-registry",
        value_name = "HOST[:PORT]",
        env = "GADGET_OCI_INSECURE",
        value_delimiter = ',',
        global = true
    )]
    insecure_registries: Vec<String>,
    /// Where precompiled components are cached. Default: $GADGET_CACHE_DIR, $XDG_CACHE_HOME/gadget-host or ~/.cache/gadget-host.
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
    /// Compile every component from scratch; read and write no cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Make any plugin load error fatal.
    #[arg(long, global = true)]
    strict: bool,
    /// The operator's policy file (TOML: [limits] ceilings, [gadgets] allow/deny/approve, [[rules]] on arguments, [plugins.NAME] prefix and grants, [audit]). Default: $GADGET_CONFIG, else $XDG_CONFIG_HOME/gadget-host/config.toml if it exists.
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// Grant a plugin something for this run (repeatable): PLUGIN:http=URL; PLUGIN:files=HOST[:GUEST][:ro|rw] (GUEST defaults to / and HOST's last name, the mode to ro); PLUGIN:config=KEY=env:VAR or PLUGIN:config=KEY=value:TEXT; PLUGIN:llm=PROVIDER:MODEL. It still gets only what its manifest asks for.
    #[arg(long = "grant", value_name = "GRANT", global = true)]
    grants: Vec<String>,
    /// Do not serve a gadget this run (name or glob, case-insensitive; repeatable).
    #[arg(long = "deny-gadget", value_name = "NAME", global = true)]
    deny_gadgets: Vec<String>,
    /// Make every call of a gadget wait for a person's approval this run (name or glob, case-insensitive; repeatable).
    #[arg(long = "approve-gadget", value_name = "NAME", global = true)]
    approve_gadgets: Vec<String>,
    /// Append an audit journal of every call and what it did (hash-chained JSON lines; `gadget audit verify FILE` checks it). Default: the policy's [audit] file.
    #[arg(long, value_name = "FILE", global = true)]
    audit: Option<PathBuf>,
    /// More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// No notes or warnings on stderr (errors only).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// How log lines are written on stderr: text (colour only on a terminal) or json (one object per line, for a log collector).
    #[arg(long, value_name = "FORMAT", default_value = "text", global = true)]
    log_format: LogFormat,
}

/// The form of log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
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
    /// Check or read an audit journal.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
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
        #[command(flatten)]
        approval: approve::ApprovalArgs,
    },
    /// Parse block-format text from stdin and print the events as JSON lines.
    #[command(
        after_help = "Examples:\n  gadget parse < response.txt\n  gadget parse --chunk 7 --start '<<TOOL:' --end '<<END' --arg '@' < custom.txt\n  gadget parse --count < big.txt"
    )]
    Parse(parse::ParseOptions),
    /// Execute an LLM response: parse it as it arrives and run its gadget calls, dependencies first.
    #[command(
        after_help = "Examples:\n  gadget run response.txt\n  gadget run --replay 20 response.txt     # stream it as a model would\n  my-llm-client | gadget run -\n  gadget run --json response.txt | jq 'select(.type == \"call_finished\")'\n\nExit code: 0 when every call succeeded, 1 when one failed or was skipped, 2 on bad input."
    )]
    Run(Box<run::RunOptions>),
    /// Run an agent: send a task to an LLM, run the gadgets it calls while it streams, feed the results back, until it answers.
    #[command(
        after_help = "Examples:\n  OPENAI_API_KEY=... gadget agent 'What is 15 + 23?' --model openai:gpt-4o-mini\n  gadget agent 'Slugify \"Hello World\"' --model openai:llama3.2 --base-url http://127.0.0.1:11434/v1\n  ANTHROPIC_API_KEY=... gadget agent - --model anthropic:claude-sonnet-4-5 --save session.jsonl < task.txt\n\nExit code: 0 when the model answered or a gadget finished the task, 1 when a cap stopped it or the stream broke, 2 on bad input or a setup error (key, model, server), 130 on Ctrl-C."
    )]
    Agent(Box<agent::AgentOptions>),
    /// Serve the gadgets as MCP tools over stdio (for Claude Desktop, Claude Code, Cursor, ...).
    #[command(
        after_help = "Examples:\n  gadget mcp\n  gadget --plugins ./my-plugins --config policy.toml mcp\n\nClaude Desktop / Claude Code: a server whose command is `gadget` and whose args are [\"mcp\"]."
    )]
    Mcp,
    /// Serve the gadgets as MCP tools over Streamable HTTP, as a service (health, metrics, a call cap, graceful drain).
    #[command(
        after_help = "Examples:\n  gadget serve\n  GADGET_TOKEN=... gadget serve --listen 0.0.0.0:8765 --auth-token-env GADGET_TOKEN --allowed-host gadgets.example.com"
    )]
    Serve(mcp::ServeArgs),
    /// Print the gadgets as native tool definitions (OpenAI, Anthropic or MCP), as JSON.
    #[command(
        after_help = "Examples:\n  gadget schemas --format openai > tools.json\n  gadget schemas --format anthropic"
    )]
    Schemas {
        #[arg(long, value_enum, default_value = "openai")]
        format: mcp::SchemaFormat,
    },
    /// Print the instruction text a model needs: the loaded gadgets, their parameters and examples, and the block format.
    #[command(
        after_help = "Examples:\n  gadget prompt > system-prompt.txt\n  gadget prompt --start-marker '<<TOOL:' --end-marker '<<END' --arg-marker '@'"
    )]
    Prompt(prompt::PromptOptions),
    /// Start a plugin directory for a gadget in a language (it builds and passes `gadget check` as created).
    #[command(
        after_help = "Examples:\n  gadget new word-count --lang python\n  gadget build word-count && gadget check word-count\n  gadget --plugins word-count call WordCount --params '{\"text\": \"hello world\"}'"
    )]
    New {
        /// The plugin's name (letters, digits, '-'); the gadget is named after it in CamelCase.
        name: String,
        /// The language to write the gadget in.
        #[arg(long, value_enum)]
        lang: new::Lang,
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
    /// Pull a plugin from an OCI registry into the cache (what `--plugins oci://...` does at start-up).
    #[command(
        after_help = "Examples:\n  gadget pull oci://ghcr.io/acme/web:1.0\n  gadget pull oci://127.0.0.1:5000/gadgets/web@sha256:...\n\nCredentials: GADGET_OCI_USERNAME and GADGET_OCI_PASSWORD, else the Docker config (docker login)."
    )]
    Pull {
        /// oci://HOST[:PORT]/REPOSITORY:TAG or oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST
        reference: String,
    },
    /// Push a plugin (a directory with plugin.toml, or a component) to an OCI registry, in the layout wkg uses.
    #[command(after_help = "Example:\n  gadget push plugins/web oci://ghcr.io/acme/web:1.0")]
    Push {
        /// A plugin directory or a .wasm component.
        source: PathBuf,
        /// oci://HOST[:PORT]/REPOSITORY:TAG
        reference: String,
    },
    /// Write the lock file: each loaded plugin's source, component digest and verified signers, for `--locked`.
    #[command(
        after_help = "Example:\n  gadget --config policy.toml --plugins oci://ghcr.io/acme/web:1.0 lock\n  gadget --config policy.toml --plugins oci://ghcr.io/acme/web:1.0 --locked serve"
    )]
    Lock,
    /// Make an Ed25519 key pair for signing components (the files wasmsign2 reads).
    #[command(after_help = "Example:\n  gadget keygen --secret-key acme.sec --public-key acme.pub")]
    Keygen {
        /// Where the secret key goes (created; readable by you only).
        #[arg(long, value_name = "FILE")]
        secret_key: PathBuf,
        /// Where the public key goes: what operators trust.
        #[arg(long, value_name = "FILE")]
        public_key: PathBuf,
    },
    /// Sign a component: the signature goes inside it (several signers may sign one).
    #[command(after_help = "Example:\n  gadget sign --key acme.sec plugins/web/web.wasm")]
    Sign {
        /// The secret key (from `gadget keygen` or wasmsign2).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// The component (.wasm).
        component: PathBuf,
        /// Write the signed component (or the signature) here instead.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Write the signature beside the component (COMPONENT.sig), leaving it unchanged.
        #[arg(long)]
        detached: bool,
    },
}

/// Runs the CLI; the exit code says how it went.
pub fn main() -> ExitCode {
    // The compiling child (see `compile`): no arguments to parse, no async
    // runtime, nothing to load.
    if std::env::args().nth(1).as_deref() == Some(compile::SUBCOMMAND) {
        return compile::child();
    }
    let cli = Cli::parse();
    view::show_gadget_logs_from(match cli.global.verbose {
        0 if cli.global.quiet => LogLevel::Error,
        0 => LogLevel::Warn,
        1 => LogLevel::Info,
        2 => LogLevel::Debug,
        _ => LogLevel::Trace,
    });
    // A server's operator wants to see it start, reload and stop.
    let serving = matches!(cli.command, Command::Serve(_) | Command::Mcp);
    init_tracing(
        cli.global.verbose,
        cli.global.quiet,
        cli.global.log_format,
        serving,
    );
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
    // The command runs on a worker thread, not on this one: the runtime
    // has a worker per core, and an executor driven from this thread made
    // it a core's worth of threads plus one, all busy under load (on two
    // cores the executor then ran at about 55% of the bare runtime's calls
    // per second instead of over 70%).
    let result = runtime.block_on(runtime.spawn(run(cli)));
    // A blocking read (stdin, after Ctrl-C stopped a run reading it) cannot
    // be cancelled: exiting waits for the runtime's threads only this long.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    // Upstream MCP servers (and whatever they started) end with the host.
    gadget_mcp::upstream::end_every_server();
    match result {
        Ok(Ok(code)) => code,
        Ok(Err(error)) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_FAILED)
        }
        Err(panic) => {
            eprintln!("error: the command failed with a bug: {panic}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// How long exiting waits for the async runtime's threads to end (a task
/// blocked reading stdin never does).
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The crates whose debug and trace events carry a gadget's raw data.
const GUEST_DATA_TARGETS: [&str; 3] = ["wasmtime_wasi", "wasmtime_wasi_http", "wasmtime_wasi_io"];

fn init_tracing(verbose: u8, quiet: bool, format: LogFormat, serving: bool) {
    let default = match verbose {
        0 if quiet => "error",
        0 if serving => "info",
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // wasmtime-wasi logs guest data below warn: raw stdout bytes at debug,
    // every host call's arguments at trace (a URL with `?key=SECRET`). A
    // gadget's output reaches people only through the host, redacted, so
    // these never go past warn, whatever RUST_LOG says about them.
    for target in GUEST_DATA_TARGETS {
        if let Ok(directive) = format!("{target}=warn").parse() {
            filter = filter.add_directive(directive);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        // A log collector filters by target (`gadget` for gadgets' logs).
        LogFormat::Json => builder.with_target(true).json().try_init(),
    };
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let mut policy = match Policy::locate(cli.global.config.as_deref()) {
        None => Policy::default(),
        Some(path) => match Policy::from_file(&path) {
            Ok(policy) => policy,
            Err(e) => {
                eprintln!("error: policy file {e}");
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            }
        },
    };
    for grant in &cli.global.grants {
        if let Err(e) = policy.add_grant(grant) {
            eprintln!("error: --grant {e}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    }
    for pattern in &cli.global.deny_gadgets {
        policy.deny_gadget(pattern);
    }
    for pattern in &cli.global.approve_gadgets {
        policy.approve_gadget(pattern);
    }
    // A command that does not stop gracefully on SIGTERM still ends its
    // upstream servers' process groups before it goes (no destructor runs
    // when a signal ends a process).
    #[cfg(unix)]
    if !policy.mcp_servers.is_empty()
        && !matches!(
            cli.command,
            Command::Serve(_) | Command::Run(_) | Command::Agent(_)
        )
        && let Ok(mut terminate) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::spawn(async move {
            if terminate.recv().await.is_some() {
                gadget_mcp::upstream::end_every_server();
                std::process::exit(128 + 15);
            }
        });
    }
    // Compiled once (the policy file's were checked when it was read).
    let rules = Arc::new(policy.approval_rules().map_err(anyhow::Error::msg)?);
    // Opened only by the commands that run calls.
    let journal = || audit::open(cli.global.audit.as_deref(), &policy);
    // Each command starts only what it needs: `parse` needs no WebAssembly
    // runtime and no cache.
    let start = |calls, agent_options| host::start(&cli.global, &policy, calls, agent_options);
    macro_rules! host {
        ($calls:expr) => {
            host!($calls, None)
        };
        ($calls:expr, $agent_options:expr) => {
            match start($calls, $agent_options).await? {
                Some(host) => host,
                None => return Ok(ExitCode::from(EXIT_BAD_INPUT)),
            }
        };
    }
    // Spans and metrics for the commands that run calls, when a collector
    // is named; flushed when the command ends, however it ends.
    let runs_calls = matches!(
        cli.command,
        Command::Run(_)
            | Command::Agent(_)
            | Command::Serve(_)
            | Command::Mcp
            | Command::Call { .. }
    );
    let telemetry = if runs_calls {
        telemetry::start(&policy.telemetry)?
    } else {
        None
    };
    let done: Result<ExitCode> = async {
        match &cli.command {
            Command::Parse(options) => parse::parse(options),
            Command::Audit(command) => audit::audit(command, &policy),
            Command::New { name, lang, dir } => new::new(name, *lang, dir.as_deref()),
            Command::Build { path } => {
                let built = build::build(path)?;
                // Compiled into the cache now, so the first call after an
                // edit does not pay for it (a CPython component takes ~13 s).
                let runtime = host::runtime(&policy, Calls::Few)?;
                build::warm_cache(&runtime, path, &load_options(&cli.global, &policy)?).await;
                Ok(built)
            }
            Command::Run(run_options) => {
                let host = host!(Calls::Many);
                let journal = journal()?;
                let ran =
                    run::run(host.tools(&policy)?, run_options, &rules, journal.clone()).await;
                audit::close(journal)?;
                ran
            }
            Command::Agent(agent_options) => {
                let host = host!(Calls::Many, Some(agent_options));
                let journal = journal()?;
                let ran = agent::agent(
                    host.tools(&policy)?,
                    agent_options,
                    &policy.llm,
                    &rules,
                    journal.clone(),
                )
                .await;
                audit::close(journal)?;
                ran
            }
            Command::Serve(args) => {
                let Some((tools, gadgets, reload)) = serving(&cli.global, &policy).await? else {
                    return Ok(ExitCode::from(EXIT_BAD_INPUT));
                };
                // Written out when the server stops, whoever still holds it.
                let journal = journal()?;
                let served =
                    mcp::serve(tools, gadgets, args, reload, &rules, journal.clone()).await;
                audit::close(journal)?;
                served
            }
            // The session starts at once; the plugins load (and compile) while
            // the client initializes, and its first list or call waits for them.
            Command::Mcp => {
                let journal = journal()?;
                let served = mcp::mcp(serving(&cli.global, &policy), &rules, journal.clone()).await;
                audit::close(journal)?;
                served
            }
            // The policy's agents are tools like the gadgets in every listing.
            Command::Schemas { format } => {
                let host = host!(Calls::Few);
                mcp::schemas(&*host.tools(&policy)?, *format)
            }
            Command::Prompt(prompt_options) => {
                let host = host!(Calls::Few);
                prompt::prompt(host.tools(&policy)?, prompt_options)
            }
            Command::Lock => {
                let host = host!(Calls::Few);
                lock::lock(&host.registry, &cli.global.lock_file)
            }
            Command::Pull { reference } => oci::pull(&cli.global, reference).await,
            Command::Push { source, reference } => oci::push(&cli.global, source, reference).await,
            Command::Keygen {
                secret_key,
                public_key,
            } => sign::keygen(secret_key, public_key),
            Command::Sign {
                key,
                component,
                output,
                detached,
            } => sign::sign(key, component, output.as_deref(), *detached),
            Command::Check { path } => {
                let runtime = host::runtime(&policy, Calls::Few)?;
                let options = load_options(&cli.global, &policy)?;
                check::check(&runtime, &cli.global, path, &options).await
            }
            Command::List { json } => {
                let host = host!(Calls::Few);
                list::list(
                    &host.registry,
                    &*host.tools(&policy)?,
                    *json,
                    cli.global.quiet,
                )
            }
            Command::Describe { name, json } => {
                let host = host!(Calls::Few);
                describe::describe(&host.registry, &*host.tools(&policy)?, name, *json, &rules)
            }
            Command::Call {
                name,
                params,
                id,
                json,
                approval,
            } => {
                // Unusable parameters are bad input (exit 2), as README says.
                let params = match call::read_params(params.clone()) {
                    Ok(params) => params,
                    Err(e) => {
                        eprintln!("error: {e:#}");
                        return Ok(ExitCode::from(EXIT_BAD_INPUT));
                    }
                };
                let host = host!(Calls::Few);
                let journal = journal()?;
                let called = call::call(
                    &host.registry,
                    &*host.tools(&policy)?,
                    name,
                    params,
                    id,
                    *json,
                    gadget_exec::call::CallOptions {
                        scope: Arc::new(gadget_core::scope::CallScope {
                            approvals: approval.approvals(&rules, &approve::Tty::default())?,
                            recorder: journal.as_ref().map(|journal| journal.recorder()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                )
                .await;
                audit::close(journal)?;
                called
            }
        }
    }
    .await;
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    done
}

/// What `gadget mcp` and `gadget serve` serve: the loaded gadgets and the
/// policy's agents, how many gadgets, and the SIGHUP reload. `None` when
/// loading failed (each reason has been printed).
async fn serving(
    global: &GlobalArgs,
    policy: &Policy,
) -> Result<Option<(Arc<dyn Tools>, usize, gadget_mcp::Reload)>> {
    let Some(host) = host::start(global, policy, Calls::Many, None).await? else {
        return Ok(None);
    };
    let gadgets = host.registry.gadgets().count();
    if host.registry.available().next().is_none() {
        tracing::warn!(
            "no gadget to serve from {}: clients will see an empty tools/list (set --plugins or GADGET_PLUGINS, and grant what the plugins ask for)",
            plugin_dirs(global)
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // The policy's agents are tools too (over the gadgets loaded at
    // start; a reload does not change what they may call).
    let agents = agent::sub_agents(
        host.registry.clone(),
        host.upstream.clone().map(|u| u as Arc<dyn Tools>),
        policy,
        host.providers.clone(),
    )?
    .map(|agents| agents.agents());
    let upstream = host.upstream.clone();
    let tools = served(host.registry.clone(), agents.clone(), upstream.clone());
    if !global.quiet {
        host::warn_unmatched_rules(policy, &*tools);
    }
    // SIGHUP loads the plugins again (the policy as read at start).
    let (runtime, global, options) = (
        host.runtime.clone(),
        global.clone(),
        load_options(global, policy)?,
    );
    let reload: gadget_mcp::Reload = Arc::new(move || {
        let (runtime, global, options, agents, upstream) = (
            runtime.clone(),
            global.clone(),
            options.clone(),
            agents.clone(),
            upstream.clone(),
        );
        Box::pin(async move {
            match load(&runtime, &global, &options).await {
                Ok(Some(registry)) => Some(served(Arc::new(registry), agents, upstream)),
                Ok(None) => None,
                Err(e) => {
                    eprintln!("error: reloading the plugins: {e:#}");
                    None
                }
            }
        })
    });
    Ok(Some((tools, gadgets, reload)))
}

fn print_json(value: &impl Serialize) -> Result<()> {
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

/// What the MCP servers serve: the gadgets, the policy's agents, then the
/// upstream MCP servers' tools.
fn served(
    registry: Arc<Registry>,
    agents: Option<Arc<dyn Tools>>,
    upstream: Option<Arc<gadget_mcp::upstream::UpstreamTools>>,
) -> Arc<dyn Tools> {
    let mut tools: Arc<dyn Tools> = registry;
    for then in [agents, upstream.map(|u| u as Arc<dyn Tools>)]
        .into_iter()
        .flatten()
    {
        tools = Arc::new(Layered { first: tools, then });
    }
    tools
}
