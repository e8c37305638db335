//! The `gadget` command line: the only module that prints. One file per
//! command under `cli/`; this file parses the arguments, starts what a
//! command needs (the runtime, the plugins) and hands over.
//!
//! Exit codes: 0 success; 1 the call or check failed (a gadget error, a
//! timeout, a crash, a plugin that does not pass); 2 bad input (unknown
//! gadget, invalid parameters, bad JSON, a load error under `--strict`,
//! usage errors).

use gadget_core::ledger::LogLevel;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::Parser;

use args::{Cli, Command, GlobalArgs, LogFormat};
use gadget_core::tool::{Layered, Tools};
use gadget_runtime::policy::Policy;
use gadget_runtime::registry::Registry;
use host::Calls;
use out::{EXIT_BAD_INPUT, EXIT_FAILED, human_bytes, print_json};
use plugins::{CompileBars, load, load_options, plugin_dirs};

pub use compile::SYSTEM_ALLOCATOR_ENV;

mod agent;
mod approve;
mod args;
mod audit;
mod build;
mod call;
mod check;
mod compile;
mod describe;
mod guards;
mod host;
use guards::Guards;
mod list;
mod lock;
mod mcp;
mod new;
mod oci;
mod out;
mod parse;
mod plugins;
mod prompt;
mod run;
mod safe;
mod sdks;
mod sign;
mod steer;
mod telemetry;
mod testing;
mod toolchains;
mod unit_tests;
mod upstream;
mod view;

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
    quiet_on_a_closed_pipe();
    let result = runtime.block_on(runtime.spawn(run(cli)));
    // A blocking read (stdin, after Ctrl-C stopped a run reading it) cannot
    // be cancelled: exiting waits for the runtime's threads only this long.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    // Upstream MCP servers (and whatever they started) end with the host.
    gadget_mcp::upstream::end_every_server();
    match result {
        Ok(Ok(code)) => code,
        // `gadget list --json | head`: the reader has what it wanted.
        Ok(Err(error)) if closed_pipe(&error) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_FAILED)
        }
        Err(failed) => match failed.try_into_panic() {
            // `gadget schemas | head -c 40`: a print's panic on a closed
            // stdout (kept quiet by the hook below) is the reader done.
            Ok(payload) if panic_text(&*payload).is_some_and(closed_pipe_panic) => {
                ExitCode::SUCCESS
            }
            Ok(payload) => {
                let text = panic_text(&*payload).unwrap_or("(no message)");
                eprintln!("error: the command failed with a bug: it panicked: {text}");
                ExitCode::from(EXIT_FAILED)
            }
            Err(cancelled) => {
                eprintln!("error: the command failed with a bug: {cancelled}");
                ExitCode::from(EXIT_FAILED)
            }
        },
    }
}

/// A panic's message, when it has one.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
}

/// std's panic on a `print!` to a stdout whose reader has gone.
fn closed_pipe_panic(message: &str) -> bool {
    message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
}

/// Whether `error` is a write to a pipe whose reader has gone.
fn closed_pipe(error: &anyhow::Error) -> bool {
    let broken = Some(std::io::ErrorKind::BrokenPipe);
    error.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().map(|e| e.kind()) == broken
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(|e| e.io_error_kind())
                == broken
    })
}

/// A `print!` to a closed stdout panics in std; that is the reader having
/// had enough (`gadget schemas | head -c 400`), not a bug: no message, no
/// backtrace, and the command ends with success. Every other panic is
/// reported as before.
fn quiet_on_a_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if panic_text(info.payload()).is_some_and(closed_pipe_panic) {
            return;
        }
        default(info);
    }));
}

/// How long exiting waits for the async runtime's threads to end (a task
/// blocked reading stdin never does).
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The crates whose debug and trace events carry a gadget's raw data.
const GUEST_DATA_TARGETS: [&str; 3] = ["wasmtime_wasi", "wasmtime_wasi_http", "wasmtime_wasi_io"];

fn init_tracing(verbose: u8, quiet: bool, format: LogFormat, serving: bool) {
    let default = match verbose {
        0 if quiet => "error",
        // A server logs its start, reloads, drain and errors; each call's
        // record is the journal's and the spans' (rmcp logs three INFO
        // lines per request, one of them the client's parameters).
        0 if serving => "info,rmcp=warn",
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // rmcp's transport worker logs its end as an ERROR, the expected first
    // 401 of a server that asks for OAuth included; the host says itself
    // why an upstream server failed, so that line is kept for -vv.
    let default = if verbose < 2 {
        format!("{default},rmcp::transport::worker=off")
    } else {
        default.to_string()
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
    out::set_json_logs(matches!(format, LogFormat::Json));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        // A log collector filters by target (`gadget` for gadgets' logs).
        LogFormat::Json => builder.with_target(true).json().try_init(),
    };
}

/// The policy as the command line makes it: the file's, then `--grant`,
/// `--deny-gadget` and `--approve-gadget`; `Err`: why not (printed).
fn policy_of(global: &GlobalArgs) -> Result<Policy, String> {
    let mut policy = match Policy::locate(global.config.as_deref()) {
        None => Policy::default(),
        Some(path) => Policy::from_file(&path).map_err(|e| format!("policy file {e}"))?,
    };
    for grant in &global.grants {
        policy
            .add_grant(grant)
            .map_err(|e| format!("--grant {e}"))?;
    }
    for pattern in &global.deny_gadgets {
        policy.deny_gadget(pattern);
    }
    for pattern in &global.approve_gadgets {
        policy.approve_gadget(pattern);
    }
    Ok(policy)
}

/// A command that does not stop gracefully on SIGTERM still ends its
/// upstream servers' process groups before it goes (no destructor runs
/// when a signal ends a process).
fn end_upstream_servers_on_sigterm(policy: &Policy, command: &Command) {
    #[cfg(unix)]
    if !policy.mcp_servers.is_empty()
        && !matches!(
            command,
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
    #[cfg(not(unix))]
    let _ = (policy, command);
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let policy = match policy_of(&cli.global) {
        Ok(policy) => policy,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    end_upstream_servers_on_sigterm(&policy, &cli.command);
    let command = Session {
        // Compiled once (the policy file's were checked when it was read).
        guards: Guards {
            rules: Arc::new(policy.approval_rules().map_err(anyhow::Error::msg)?),
            rates: policy.rate_limits().map_err(anyhow::Error::msg)?,
        },
        global: &cli.global,
        policy: &policy,
    };
    // Spans and metrics for the commands that run calls, when a collector
    // is named; flushed when the command ends, however it ends.
    let runs_calls = matches!(
        cli.command,
        Command::Run(_)
            | Command::Agent(_)
            | Command::Serve(_)
            | Command::Mcp
            | Command::Call { .. }
            | Command::Test { .. }
    );
    let telemetry = if runs_calls {
        telemetry::start(&policy.telemetry)?
    } else {
        None
    };
    let done = if runs_calls {
        command.run_calls(&cli.command).await
    } else {
        command.run(&cli.command).await
    };
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    done
}

/// The journal a command that runs calls keeps open until it ends.
type Journal = Option<Arc<gadget_exec::audit::Journal>>;

/// What one command runs with: the flags, the policy, its guards.
struct Session<'a> {
    global: &'a GlobalArgs,
    policy: &'a Policy,
    guards: Guards,
}

/// The exit code of a command that could not start (each reason printed).
fn bad_input() -> Result<ExitCode> {
    Ok(ExitCode::from(EXIT_BAD_INPUT))
}

impl Session<'_> {
    /// The runtime with the plugins loaded: each command starts only what
    /// it needs (`parse` needs no WebAssembly runtime and no cache).
    async fn host(
        &self,
        calls: Calls,
        agent_options: Option<&agent::AgentOptions>,
    ) -> Result<Option<host::Host>> {
        host::start(self.global, self.policy, calls, agent_options).await
    }

    /// The audit journal: opened only by the commands that run calls.
    fn journal(&self) -> Result<Option<Arc<gadget_exec::audit::Journal>>> {
        audit::open(self.global.audit.as_deref(), self.policy)
    }

    /// The commands that run calls, each with the journal open once its
    /// plugins are loaded, and written out when it ends.
    async fn run_calls(&self, command: &Command) -> Result<ExitCode> {
        let (policy, guards) = (self.policy, &self.guards);
        let (ran, journal) = match command {
            Command::Run(run_options) => {
                let Some(host) = self.host(Calls::Many, None).await? else {
                    return bad_input();
                };
                let journal = self.journal()?;
                let tools = host.tools(policy)?;
                let ran = run::run(tools, run_options, guards, journal.clone()).await;
                (ran, journal)
            }
            Command::Agent(options) => {
                let Some(host) = self.host(Calls::Many, Some(options)).await? else {
                    return bad_input();
                };
                let journal = self.journal()?;
                let tools = host.tools(policy)?;
                let llm = &policy.llm;
                let ran = agent::agent(tools, options, llm, guards, journal.clone()).await;
                (ran, journal)
            }
            Command::Serve(args) => {
                let Some((tools, gadgets, reload)) = serving(self.global, policy).await? else {
                    return bad_input();
                };
                // Written out when the server stops, whoever still holds it.
                let journal = self.journal()?;
                let served = mcp::serve(tools, gadgets, args, reload, guards, journal.clone());
                (served.await, journal)
            }
            // The session starts at once; the plugins load (and compile)
            // while the client initializes, and its first list or call
            // waits for them.
            Command::Mcp => {
                let journal = self.journal()?;
                let served = mcp::mcp(serving(self.global, policy), guards, journal.clone());
                (served.await, journal)
            }
            Command::Call {
                name,
                params,
                id,
                json,
                dry_run,
                approval,
            } => {
                // Unusable parameters are bad input (exit 2), as README says.
                let params = match call::read_params(params.clone()) {
                    Ok(params) => params,
                    Err(e) => {
                        eprintln!("error: {e:#}");
                        return bad_input();
                    }
                };
                let Some(host) = self.host(Calls::Few, None).await? else {
                    return bad_input();
                };
                if *dry_run {
                    // Nothing runs, so nothing is journaled, and no
                    // upstream MCP server is started to list its tools.
                    let tools = host.local_tools(policy)?;
                    let dry = call::DryRun {
                        upstream: host.has_upstream(),
                        id,
                        json: *json,
                    };
                    let target = call::Target {
                        registry: &host.registry,
                        tools: &*tools,
                        rules: &policy.gadgets,
                    };
                    return call::dry_run(&target, name, params, dry);
                }
                let journal = self.journal()?;
                let scope = gadget_core::scope::CallScope {
                    approvals: approval.approvals(&guards.rules, &approve::Tty::default())?,
                    recorder: journal.as_ref().map(|journal| journal.recorder()),
                    rates: guards.rates.clone(),
                    ..Default::default()
                };
                let tools = host.tools(policy)?;
                let scope = Arc::new(scope);
                let target = call::Target {
                    registry: &host.registry,
                    tools: &*tools,
                    rules: &policy.gadgets,
                };
                let called = call::call(&target, name, params, id, *json, scope);
                (called.await, journal)
            }
            Command::Test { target } => match self.test(target.as_deref()).await? {
                Some(tested) => tested,
                None => return bad_input(),
            },
            _ => unreachable!("only the commands that run calls come here"),
        };
        audit::close(journal)?;
        ran
    }

    /// `gadget test`: the plugins' cases, in the scope `gadget call`
    /// builds; `None` when the plugins did not load.
    async fn test(&self, target: Option<&str>) -> Result<Option<(Result<ExitCode>, Journal)>> {
        let (policy, guards) = (self.policy, &self.guards);
        // A path is a plugin tested alone, whatever --plugins says.
        let alone = target
            .filter(|t| std::path::Path::new(t).exists() || gadget_runtime::oci::OciRef::is_oci(t));
        let global = match alone {
            Some(path) => &GlobalArgs {
                plugins: vec![path.into()],
                ..self.global.clone()
            },
            None => self.global,
        };
        let Some(host) = host::start(global, policy, Calls::Few, None).await? else {
            return Ok(None);
        };
        // The cases run in the scope `gadget call` builds: the
        // operator's rules (nobody to ask, so an approval is a
        // denial), rate limits and journal.
        let journal = self.journal()?;
        let scope = gadget_core::scope::CallScope {
            approvals: approve::unattended(&guards.rules),
            recorder: journal.as_ref().map(|journal| journal.recorder()),
            rates: guards.rates.clone(),
            ..Default::default()
        };
        let tools = host.tools(policy)?;
        let run = testing::TestRun {
            target: if alone.is_some() { None } else { target },
            // Host-side unit tests run only for a directory the
            // user names.
            named_dir: alone.map(std::path::Path::new).filter(|p| p.is_dir()),
            scope: Arc::new(scope),
        };
        let tested = testing::test(&host.registry, &*tools, run).await;
        Ok(Some((tested, journal)))
    }

    /// The commands that run no call.
    async fn run(&self, command: &Command) -> Result<ExitCode> {
        let (global, policy) = (self.global, self.policy);
        let host = |calls| self.host(calls, None);
        match command {
            Command::Parse(options) => parse::parse(options),
            Command::Audit(command) => audit::audit(command, policy),
            Command::New { name, lang, dir } => new::new(name, *lang, dir.as_deref()),
            Command::Build { path } => {
                let built = build::build(path)?;
                // Compiled into the cache now, so the first call after an
                // edit does not pay for it (a CPython component takes ~13 s).
                let runtime = host::runtime(policy, Calls::Few)?;
                build::warm_cache(&runtime, path, &load_options(global, policy)?).await;
                Ok(built)
            }
            // The policy's agents are tools like the gadgets in every listing.
            Command::Schemas { format } => match host(Calls::Few).await? {
                Some(host) => mcp::schemas(&*host.tools(policy)?, *format),
                None => bad_input(),
            },
            Command::Prompt(prompt_options) => match host(Calls::Few).await? {
                Some(host) => prompt::prompt(host.tools(policy)?, prompt_options),
                None => bad_input(),
            },
            Command::Lock => match host(Calls::Few).await? {
                Some(host) => lock::lock(&host.registry, &global.lock_file),
                None => bad_input(),
            },
            Command::Login { name, forget } => upstream::login(policy, name, *forget).await,
            Command::Pull { reference } => oci::pull(global, reference).await,
            Command::Push { source, reference } => oci::push(global, source, reference).await,
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
                let runtime = host::runtime(policy, Calls::Few)?;
                let options = load_options(global, policy)?;
                let rules = policy.approval_rules().ok();
                let checking = check::Checking {
                    global,
                    options: &options,
                    rules: rules.as_ref(),
                };
                check::check(&runtime, path, &checking).await
            }
            Command::List { json } => match host(Calls::Few).await? {
                Some(host) => {
                    list::list(&host.registry, &*host.tools(policy)?, *json, global.quiet)
                }
                None => bad_input(),
            },
            Command::Describe { name, json } => match host(Calls::Few).await? {
                Some(host) => describe::describe(
                    &host.registry,
                    &*host.tools(policy)?,
                    name,
                    *json,
                    &describe::Operator {
                        rules: &self.guards.rules,
                        rates: self.guards.rates.as_deref(),
                    },
                ),
                None => bad_input(),
            },
            _ => unreachable!("the commands that run calls go to run_calls"),
        }
    }
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
    // Gadgets loaded but not offered: their plugins lack a grant.
    let gadgets = host.registry.gadgets().count() - host.registry.available().count();
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
        host::warn_unmatched_rules(policy, &*host.registry, host.upstream.as_deref());
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
