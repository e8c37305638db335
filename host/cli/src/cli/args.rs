//! The command line: global flags and every command's own, as clap reads
//! them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::{agent, approve, audit, mcp, new, parse, prompt, run};

#[derive(Debug, Parser)]
#[command(
    name = "gadget",
    version,
    about = "Run LLM tools (gadgets) compiled to WebAssembly components, sandboxed.",
    after_help = "Examples:\n  gadget list\n  gadget describe Calculator\n  gadget call Calculator --params '{\"operation\":\"add\",\"a\":15,\"b\":23}'\n  gadget check plugins/text"
)]
pub(super) struct Cli {
    #[command(flatten)]
    pub(super) global: GlobalArgs,
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Clone, Args)]
pub(super) struct GlobalArgs {
    /// A directory of plugins, a component, or an oci://HOST[:PORT]/REPOSITORY:TAG (or @sha256:DIGEST) to pull (repeatable). Default: $GADGET_PLUGINS, else the shipped `plugins/`.
    #[arg(long = "plugins", value_name = "DIR|oci://REF", global = true)]
    pub(super) plugins: Vec<PathBuf>,
    /// Refuse any plugin whose component digest or signers differ from the lock file (see `gadget lock`).
    #[arg(long, global = true)]
    pub(super) locked: bool,
    /// The lock file `gadget lock` writes and `--locked` checks.
    #[arg(long, value_name = "FILE", default_value = gadget_runtime::lockfile::LOCK_FILE, env = "GADGET_LOCK_FILE", global = true)]
    pub(super) lock_file: PathBuf,
    /// A registry (HOST[:PORT]) to speak plain HTTP to although it is not on this machine (repeatable; loopback registries always may).
    #[arg(
        long = "insecure-registry",
        value_name = "HOST[:PORT]",
        env = "GADGET_OCI_INSECURE",
        value_delimiter = ',',
        global = true
    )]
    pub(super) insecure_registries: Vec<String>,
    /// Where precompiled components are cached. Default: $GADGET_CACHE_DIR, $XDG_CACHE_HOME/gadget-host or ~/.cache/gadget-host.
    #[arg(long, value_name = "DIR", global = true)]
    pub(super) cache_dir: Option<PathBuf>,
    /// Compile every component from scratch; read and write no cache.
    #[arg(long, global = true)]
    pub(super) no_cache: bool,
    /// Make any plugin load error fatal.
    #[arg(long, global = true)]
    pub(super) strict: bool,
    /// The operator's policy file (TOML: [limits] ceilings, [gadgets] allow/deny/approve, [[rules]] on arguments, [plugins.NAME] prefix and grants, [audit]). Default: $GADGET_CONFIG, else $XDG_CONFIG_HOME/gadget-host/config.toml if it exists.
    #[arg(long, value_name = "FILE", global = true)]
    pub(super) config: Option<PathBuf>,
    /// Grant a plugin something for this run (repeatable): PLUGIN:http=URL; PLUGIN:files=HOST[:GUEST][:ro|rw] (GUEST defaults to / and HOST's last name, the mode to ro); PLUGIN:config=KEY=env:VAR or PLUGIN:config=KEY=value:TEXT; PLUGIN:llm=PROVIDER:MODEL. It still gets only what its manifest asks for.
    #[arg(long = "grant", value_name = "GRANT", global = true)]
    pub(super) grants: Vec<String>,
    /// Do not serve a gadget this run (name or glob, case-insensitive; repeatable).
    #[arg(long = "deny-gadget", value_name = "NAME", global = true)]
    pub(super) deny_gadgets: Vec<String>,
    /// Make every call of a gadget wait for a person's approval this run (name or glob, case-insensitive; repeatable).
    #[arg(long = "approve-gadget", value_name = "NAME", global = true)]
    pub(super) approve_gadgets: Vec<String>,
    /// Append an audit journal of every call and what it did (hash-chained JSON lines; `gadget audit verify FILE` checks it). Default: the policy's [audit] file.
    #[arg(long, value_name = "FILE", global = true)]
    pub(super) audit: Option<PathBuf>,
    /// More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(super) verbose: u8,
    /// No notes or warnings on stderr (errors only).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub(super) quiet: bool,
    /// How log lines are written on stderr: text (colour only on a terminal) or json (one object per line, for a log collector).
    #[arg(long, value_name = "FORMAT", default_value = "text", global = true)]
    pub(super) log_format: LogFormat,
}

/// The form of log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
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
        /// Only validate: print the parameters as the gadget would get them (defaults filled in), run nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        approval: approve::ApprovalArgs,
    },
    /// Run every example of every gadget (and a plugin directory's tests.toml cases) against the real component; exit 1 on a failure.
    #[command(
        after_help = "Examples:\n  gadget test plugins/calculator\n  gadget build word-count && gadget test word-count\n  gadget test Calculator          # a loaded gadget (or plugin) by name\n  gadget test                     # every loaded gadget\n\ntests.toml in a plugin directory adds cases the model is not shown:\n  [[case]]\n  gadget = \"WordCount\"\n  params = { text = \"\" }\n  error = \"no words\"            # or output = \"...\" (exact), contains = \"...\""
    )]
    Test {
        /// A plugin directory or component to test alone, or a loaded gadget's or plugin's name. Default: every loaded gadget.
        target: Option<String>,
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
    /// Authorize gadget-host with an upstream MCP server that asks for OAuth ([mcp-servers.NAME] url = ...): open the address it prints, approve, and the tokens are kept for later runs.
    #[command(
        after_help = "Examples:\n  gadget login github\n  gadget login github --forget   # remove its kept tokens"
    )]
    Login {
        /// The server's name in the policy's [mcp-servers].
        name: String,
        /// Remove the kept tokens instead (the next use authorizes anew).
        #[arg(long)]
        forget: bool,
    },
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
