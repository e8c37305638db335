//! `gadget run`: execute a model's response as it arrives, events out as
//! they happen through one of the [views](super::view).

use std::collections::VecDeque;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use super::EXIT_FAILED;
use super::approve::{ApprovalArgs, Tty};
use super::guards::Guards;
use super::view::{LiveView, View};
use gadget_core::limits::MAX_RESPONSE_BYTES;
use gadget_core::parser;
use gadget_core::render::{self, Markers};
use gadget_core::schedule::{DependencyPolicy, ScheduleConfig, Strategy};
use gadget_core::viewer;
use gadget_exec::{Answer, ExecConfig, Executor, HumanInput, Timeouts};

/// How many bytes `--replay` feeds at a time: about what a streaming
/// model sends per event.
const REPLAY_CHUNK_BYTES: usize = 16;

/// How many bytes one read of a streamed input takes at most.
const READ_CHUNK_BYTES: usize = 8192;

/// The block-format markers, shared by `run` and `prompt`.
#[derive(Debug, clap::Args)]
pub struct MarkerOptions {
    /// The start marker.
    #[arg(long = "start-marker", value_name = "MARKER", allow_hyphen_values = true, default_value = parser::DEFAULT_START)]
    start: String,
    /// The end marker.
    #[arg(long = "end-marker", value_name = "MARKER", allow_hyphen_values = true, default_value = parser::DEFAULT_END)]
    end: String,
    /// The argument marker.
    #[arg(long = "arg-marker", value_name = "MARKER", allow_hyphen_values = true, default_value = parser::DEFAULT_ARG)]
    arg: String,
}

impl MarkerOptions {
    pub(super) fn markers(&self) -> Markers {
        Markers {
            start: self.start.clone(),
            end: self.end.clone(),
            arg: self.arg.clone(),
        }
    }
}

/// Output limiting, shared by `run` and `prompt` (the viewer is in the
/// prompt only when limiting is on).
#[derive(Debug, clap::Args)]
pub struct LimitOptions {
    /// The model's context window in tokens; sizes the output limit. Default: the model table's (agent), else 128000.
    #[arg(long, value_name = "TOKENS")]
    context_window: Option<u64>,
    /// The share of the context window one result may take (1-100); longer results are stored for GadgetOutputViewer.
    #[arg(long, value_name = "PERCENT", default_value_t = viewer::DEFAULT_OUTPUT_LIMIT_PERCENT,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    output_limit_percent: u32,
    /// Pass results through whole, and offer no GadgetOutputViewer.
    #[arg(long)]
    no_output_limit: bool,
}

impl LimitOptions {
    /// The output limit in characters, for a model whose context window
    /// is `known_window` when the option does not say.
    pub(super) fn char_limit(&self, known_window: Option<u64>) -> Option<usize> {
        let window = self
            .context_window
            .or(known_window)
            .unwrap_or(viewer::DEFAULT_CONTEXT_WINDOW_TOKENS);
        (!self.no_output_limit).then(|| viewer::char_limit(window, self.output_limit_percent))
    }
}

/// Options of `gadget run`.
#[derive(Debug, clap::Args)]
pub struct RunOptions {
    /// The responses of one session, each a file (run in order: ids, stored outputs and costs carry over), or `-` (the default) for stdin, read as it arrives.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Feed the file in small chunks with this many milliseconds between them, as a streaming model would.
    #[arg(long, value_name = "MS")]
    replay: Option<u64>,
    /// One JSON event per line (schema: docs/events.md).
    #[arg(long)]
    json: bool,
    /// After the run, print what the model is shown next: each finished call as a block, then `Result (id): ...`.
    #[arg(long)]
    history: bool,
    #[command(flatten)]
    exec: ExecOptions,
}

/// How responses are executed: shared by `run` and `agent`.
#[derive(Debug, clap::Args)]
pub struct ExecOptions {
    /// Answers for gadgets that ask a person, one per line, in order. Default: ask on the terminal, if there is one.
    #[arg(long, value_name = "FILE")]
    answers: Option<PathBuf>,
    #[command(flatten)]
    approval: ApprovalArgs,
    /// Calls running at once, over all gadgets.
    #[arg(long, value_name = "N", default_value_t = gadget_core::schedule::DEFAULT_MAX_PARALLEL)]
    max_parallel: usize,
    /// How independent calls share the machine: parallel, sequential, or batched:N.
    #[arg(long, value_name = "STRATEGY", default_value = "parallel", value_parser = parse_strategy)]
    strategy: Strategy,
    /// What a call whose dependency failed gets: skip, execute-anyway, or fallback:TEXT.
    #[arg(long, value_name = "POLICY", default_value = "skip", value_parser = parse_policy)]
    on_dependency_failure: DependencyPolicy,
    /// The same, for one gadget: NAME=POLICY (repeatable).
    #[arg(long = "gadget-policy", value_name = "NAME=POLICY", value_parser = parse_gadget_policy)]
    gadget_policies: Vec<(String, DependencyPolicy)>,
    /// After the first failed call, skip the calls not started yet and stop reading.
    #[arg(long)]
    stop_on_error: bool,
    /// Calls accepted per response; the next is skipped and the rest is not read (0: no limit).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CALLS_PER_RESPONSE)]
    max_calls: usize,
    /// Timeout for gadgets that declare none, in milliseconds.
    #[arg(long = "timeout", value_name = "MS")]
    default_timeout: Option<u64>,
    /// Timeout for one gadget, over its own: NAME=MS (repeatable).
    #[arg(long = "gadget-timeout", value_name = "NAME=MS", value_parser = parse_gadget_timeout)]
    gadget_timeouts: Vec<(String, u64)>,
    /// No call runs longer than this, whatever the gadget or the options ask, in milliseconds.
    #[arg(long, value_name = "MS")]
    max_timeout: Option<u64>,
    #[command(flatten)]
    pub(super) markers: MarkerOptions,
    #[command(flatten)]
    pub(super) limits: LimitOptions,
}

impl ExecOptions {
    /// The executor's configuration; `known_window` is the model's context
    /// window when a model table knows it.
    pub(super) fn exec_config(&self, known_window: Option<u64>) -> ExecConfig {
        ExecConfig {
            schedule: ScheduleConfig {
                strategy: self.strategy,
                max_parallel: self.max_parallel,
                max_calls_per_response: (self.max_calls > 0).then_some(self.max_calls),
                stop_on_error: self.stop_on_error,
            },
            dependency_policy: self.on_dependency_failure.clone(),
            gadget_policies: self.gadget_policies.iter().cloned().collect(),
            markers: self.markers.markers(),
            timeouts: Timeouts {
                default: self.default_timeout.map(Duration::from_millis),
                per_gadget: self
                    .gadget_timeouts
                    .iter()
                    .map(|(name, ms)| (name.clone(), Duration::from_millis(*ms)))
                    .collect(),
                cap: self.max_timeout.map(Duration::from_millis),
            },
            output_limit: self.limits.char_limit(known_window),
            text_deltas: false,
        }
    }

    /// Warns about per-gadget options naming gadgets that are not loaded.
    pub(super) fn warn_unknown_gadgets(&self, tools: &dyn gadget_core::tool::Tools) {
        for name in self
            .gadget_timeouts
            .iter()
            .map(|(n, _)| n)
            .chain(self.gadget_policies.iter().map(|(n, _)| n))
        {
            if tools.find(name).is_none() {
                eprintln!("warning: no gadget named '{name}' is loaded; its option has no effect");
            }
        }
    }

    /// The executor over `tools` with these options, the view for stdout
    /// (JSON lines, a live terminal view, or plain lines) and the markers;
    /// gadgets that ask a person are answered as [`Self::human_input`] says.
    pub(super) fn executor(
        &self,
        tools: Arc<dyn gadget_core::tool::Tools>,
        known_window: Option<u64>,
        json: bool,
        plain: bool,
        guards: &Guards,
        journal: Option<Arc<gadget_exec::audit::Journal>>,
    ) -> Result<(Executor, View, Markers)> {
        let mut config = self.exec_config(known_window);
        // People see text as the model writes it; event streams keep
        // llmist's one event per segment.
        config.text_deltas = !json;
        self.warn_unknown_gadgets(&*tools);
        let markers = config.markers.clone();
        let mut executor = Executor::new(tools, config).context("invalid markers")?;
        let view = if json {
            View::Json
        } else if !plain && std::io::stdout().is_terminal() {
            View::Live(LiveView::new())
        } else {
            View::Plain(Default::default())
        };
        let tty = Tty::new(view.terminal());
        if let Some(human) = self.human_input(&tty)? {
            executor = executor.with_human_input(human);
        }
        if let Some(approvals) = self.approval.approvals(&guards.rules, &tty)? {
            executor = executor.with_approvals(approvals);
        }
        executor = executor.with_rates(guards.rates.clone());
        if let Some(journal) = journal {
            executor = executor.with_journal(journal);
        }
        Ok((executor, view, markers))
    }

    /// Who answers gadgets that ask a person: `--answers`, else the
    /// terminal when there is one.
    pub(super) fn human_input(&self, tty: &Tty) -> Result<Option<Arc<dyn HumanInput>>> {
        Ok(match &self.answers {
            Some(path) => Some(Arc::new(ScriptedAnswers::read(path)?)),
            None => tty
                .open()
                .map(|tty| Arc::new(TerminalInput { tty }) as Arc<dyn HumanInput>),
        })
    }
}

fn parse_strategy(text: &str) -> Result<Strategy, String> {
    match text {
        "parallel" => Ok(Strategy::Parallel),
        "sequential" => Ok(Strategy::Sequential),
        _ => match text.strip_prefix("batched:").map(str::parse::<usize>) {
            Some(Ok(size)) if size > 0 => Ok(Strategy::Batched { size }),
            _ => Err(format!(
                "'{text}' is not a strategy: use parallel, sequential or batched:N (N > 0)"
            )),
        },
    }
}

fn parse_policy(text: &str) -> Result<DependencyPolicy, String> {
    match text {
        "skip" => Ok(DependencyPolicy::Skip),
        "execute-anyway" => Ok(DependencyPolicy::ExecuteAnyway),
        _ => match text.strip_prefix("fallback:") {
            Some(fallback) => Ok(DependencyPolicy::UseFallback(fallback.to_string())),
            None => Err(format!(
                "'{text}' is not a policy: use skip, execute-anyway or fallback:TEXT"
            )),
        },
    }
}

fn parse_gadget_policy(text: &str) -> Result<(String, DependencyPolicy), String> {
    let (name, policy) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not NAME=POLICY"))?;
    Ok((name.to_lowercase(), parse_policy(policy)?))
}

fn parse_gadget_timeout(text: &str) -> Result<(String, u64), String> {
    let (name, ms) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not NAME=MS"))?;
    let ms = ms
        .parse::<u64>()
        .map_err(|_| format!("'{ms}' is not a number of milliseconds"))?;
    Ok((name.to_lowercase(), ms))
}

/// `gadget run`: the response through the executor, events out as they happen.
pub async fn run(
    registry: Arc<dyn gadget_core::tool::Tools>,
    options: &RunOptions,
    guards: &Guards,
    journal: Option<Arc<gadget_exec::audit::Journal>>,
) -> Result<ExitCode> {
    // A response file that cannot be opened is the caller's mistake, said
    // before anything runs (exit 2, as for any bad input).
    for file in options.files.iter().filter(|f| f.as_os_str() != "-") {
        if let Err(e) = std::fs::File::open(file) {
            eprintln!("error: opening {}: {e}", file.display());
            return Ok(ExitCode::from(super::EXIT_BAD_INPUT));
        }
    }
    let (mut executor, view, markers) =
        options
            .exec
            .executor(registry, None, options.json, false, guards, journal)?;

    // Not locked for the whole run: the live view's spinner thread writes
    // to stdout too, and would wait on the lock forever.
    let mut out = std::io::stdout();
    let mut view = view;
    let sources: Vec<Option<PathBuf>> = if options.files.is_empty() {
        vec![None]
    } else {
        let stdin_count = options
            .files
            .iter()
            .filter(|f| f.as_os_str() == "-")
            .count();
        if stdin_count > 1 {
            bail!("stdin (-) can be read only once");
        }
        options
            .files
            .iter()
            .map(|f| (f.as_os_str() != "-").then(|| f.clone()))
            .collect()
    };
    let mut all_ok = true;
    let interrupt = Interrupt::watch(executor.abort_handle());
    for (n, source) in sources.iter().enumerate() {
        let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
        let reader = spawn_reader(source.clone(), options.replay, tx)?;
        interrupt.reading(reader.abort_handle());
        let mut failure: Option<std::io::Error> = None;
        let summary = executor
            .run_response(rx, |event| {
                if let Err(error) = view.event(&mut out, &event)
                    && failure.is_none()
                {
                    failure = Some(error);
                }
            })
            .await;
        match failure {
            // The reader went away (`| head`): nothing more to say.
            Some(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                return Ok(ExitCode::SUCCESS);
            }
            Some(error) => return Err(error).context("writing stdout"),
            None => {}
        }
        if interrupt.happened() {
            view.summary(&mut out, &summary)?;
            out.flush()?;
            eprintln!("interrupted");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        reader.await.context("the input reader stopped")??;
        view.summary(&mut out, &summary)?;
        all_ok &= summary.failed == 0 && summary.skipped == 0;
        if options.history {
            let messages = render::history(executor.history(), &markers);
            if options.json {
                writeln!(out, "{}", json!({"type": "history", "messages": messages}))?;
            } else {
                writeln!(out, "\n── history (what the model is shown next) ──")?;
                for message in messages {
                    let content = super::safe::safe(&message.content);
                    writeln!(out, "[{}]\n{content}\n", message.role)?;
                }
            }
        }
        let left = sources.len() - n - 1;
        if summary.finished && left > 0 {
            // The agent loop ends with the response that finished.
            if !options.json {
                writeln!(out, "task complete: {left} later response(s) not run")?;
            }
            break;
        }
    }
    out.flush()?;
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// Calls accepted per response unless `--max-calls` says otherwise: a model
/// that writes 100,000 calls would otherwise make every later request carry
/// them all (two history messages each).
pub const DEFAULT_MAX_CALLS_PER_RESPONSE: usize = 1_000;

/// Starts reading the response: a file replayed in chunks, or a file or
/// stdin as it arrives.
fn spawn_reader(
    source: Option<PathBuf>,
    replay: Option<u64>,
    tx: tokio::sync::mpsc::Sender<String>,
) -> Result<tokio::task::JoinHandle<Result<()>>> {
    Ok(match (source, replay) {
        (Some(path), Some(delay)) => {
            let size = std::fs::metadata(&path)
                .with_context(|| format!("reading {}", path.display()))?
                .len();
            if size > MAX_RESPONSE_BYTES as u64 {
                bail!(
                    "{}: {size} bytes, over the limit of {MAX_RESPONSE_BYTES} bytes for one response",
                    path.display()
                );
            }
            let text = gadget_core::operator_file::read_text(&path, MAX_RESPONSE_BYTES as u64)
                .with_context(|| format!("reading {}", path.display()))?;
            tokio::spawn(async move {
                let mut rest = text.as_str();
                while !rest.is_empty() {
                    let mut cut = REPLAY_CHUNK_BYTES.min(rest.len());
                    while !rest.is_char_boundary(cut) {
                        cut += 1;
                    }
                    if tx.send(rest[..cut].to_string()).await.is_err() {
                        break; // the executor stopped reading
                    }
                    rest = &rest[cut..];
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                }
                Ok(())
            })
        }
        (None, Some(_)) => bail!("--replay needs a FILE (it replays a whole file)"),
        (source, None) => {
            let input: Box<dyn Read + Send> = match &source {
                Some(path) => Box::new(
                    std::fs::File::open(path)
                        .with_context(|| format!("opening {}", path.display()))?,
                ),
                None => {
                    reading_from_a_terminal("a model's response");
                    Box::new(std::io::stdin())
                }
            };
            tokio::task::spawn_blocking(move || stream_utf8(input, &tx))
        }
    })
}

/// Reads `input` as it arrives and sends it as UTF-8 text, never splitting
/// a character (invalid bytes become U+FFFD).
fn stream_utf8(
    mut input: Box<dyn Read + Send>,
    tx: &tokio::sync::mpsc::Sender<String>,
) -> Result<()> {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    let mut read = 0usize;
    loop {
        let n = input.read(&mut buf).context("reading the response")?;
        if n == 0 {
            break;
        }
        read += n;
        if read > MAX_RESPONSE_BYTES {
            bail!(
                "the response is over the limit of {MAX_RESPONSE_BYTES} bytes: the rest was not read"
            );
        }
        pending.extend_from_slice(&buf[..n]);
        // Keep an incomplete character at the end for the next read.
        let valid = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => pending.len(),
        };
        let text = String::from_utf8_lossy(&pending[..valid]).into_owned();
        pending.drain(..valid);
        if !text.is_empty() && tx.blocking_send(text).is_err() {
            return Ok(()); // the executor stopped reading
        }
    }
    if !pending.is_empty() {
        let _ = tx.blocking_send(String::from_utf8_lossy(&pending).into_owned());
    }
    Ok(())
}

/// Answers from a file, one per line, in order.
struct ScriptedAnswers {
    lines: Mutex<VecDeque<String>>,
}

/// The largest `--answers` file read: an answer a line.
const MAX_ANSWERS_FILE_BYTES: u64 = 1 << 20;

impl ScriptedAnswers {
    fn read(path: &std::path::Path) -> Result<ScriptedAnswers> {
        let text = gadget_core::operator_file::read_text(path, MAX_ANSWERS_FILE_BYTES)
            .with_context(|| format!("reading answers from {}", path.display()))?;
        Ok(ScriptedAnswers {
            lines: Mutex::new(text.lines().map(str::to_string).collect()),
        })
    }
}

impl HumanInput for ScriptedAnswers {
    fn ask<'a>(&'a self, _call_id: &'a str, _gadget: &'a str, question: &'a str) -> Answer<'a> {
        let next = self.lines.lock().expect("answers lock").pop_front();
        Box::pin(async move {
            next.ok_or_else(|| format!("No scripted answer left for the question: {question}"))
        })
    }
}

/// Asks the person at the terminal, one question at a time.
struct TerminalInput {
    tty: Tty,
}

impl HumanInput for TerminalInput {
    fn ask<'a>(&'a self, call_id: &'a str, gadget: &'a str, question: &'a str) -> Answer<'a> {
        let prompt = format!("\n? {gadget} ({call_id}) asks: {question}\n> ");
        Box::pin(self.tty.line(prompt))
    }
}

/// The exit code after Ctrl-C (128 + SIGINT, as shells report it).
pub(super) const EXIT_INTERRUPTED: u8 = 130;

/// Ctrl-C or SIGTERM, whichever comes first (false when neither can be
/// watched): both stop a run the same way.
pub(super) async fn stop_signal() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            return tokio::select! {
                interrupted = tokio::signal::ctrl_c() => interrupted.is_ok(),
                _ = terminate.recv() => true,
            };
        }
    }
    tokio::signal::ctrl_c().await.is_ok()
}

/// Ctrl-C (or SIGTERM) during a run: the first stops reading the response,
/// skips every call not started yet and raises the abort signal in every
/// running call (they end as cancelled, and the summary is printed); a
/// second one exits at once.
pub(super) struct Interrupt {
    happened: Arc<std::sync::atomic::AtomicBool>,
    reader: Arc<std::sync::Mutex<Option<tokio::task::AbortHandle>>>,
}

impl Interrupt {
    fn watch(abort: gadget_exec::AbortHandle) -> Interrupt {
        let happened = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader: Arc<std::sync::Mutex<Option<tokio::task::AbortHandle>>> = Arc::default();
        let (flag, current_reader) = (happened.clone(), reader.clone());
        tokio::spawn(async move {
            if !stop_signal().await {
                return;
            }
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            eprintln!(
                "\ninterrupted: skipping the calls not started, cancelling the running ones (Ctrl-C again to quit at once)"
            );
            if let Some(reader) = current_reader
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
            {
                reader.abort();
            }
            abort.abort();
            if stop_signal().await {
                std::process::exit(EXIT_INTERRUPTED.into());
            }
        });
        Interrupt { happened, reader }
    }

    /// The reader of the response now being run (stopped on Ctrl-C).
    fn reading(&self, reader: tokio::task::AbortHandle) {
        if self.happened() {
            reader.abort();
        }
        *self.reader.lock().unwrap_or_else(|p| p.into_inner()) = Some(reader);
    }

    fn happened(&self) -> bool {
        self.happened.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Says so when stdin is a terminal: a command waiting there for `what`
/// otherwise looks hung.
pub(super) fn reading_from_a_terminal(what: &str) {
    if std::io::stdin().is_terminal() {
        eprintln!("reading {what} from the terminal: type or paste it, then Ctrl-D to end");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_or_say_why_not() {
        assert_eq!(
            parse_strategy("batched:3"),
            Ok(Strategy::Batched { size: 3 })
        );
        assert!(parse_strategy("batched:0").is_err());
        assert_eq!(
            parse_gadget_timeout("Sleep=150"),
            Ok(("sleep".to_string(), 150))
        );
        assert!(parse_gadget_timeout("Sleep").is_err());
        assert_eq!(
            parse_gadget_policy("Calc=fallback:n/a"),
            Ok((
                "calc".to_string(),
                DependencyPolicy::UseFallback("n/a".into())
            ))
        );
    }
}
