//! Where `gadget run`'s events go, by where its output goes:
//! - a terminal: a live view (text as it arrives, a spinner per running
//!   call with its elapsed time and last progress message, results, skips,
//!   costs, a summary);
//! - a pipe or file: the same as plain lines, one per event;
//! - `--json`: one event per line, the schema in `docs/events.md`.

/// Lines of a result the readable views show; the rest is counted (the
/// whole text is in `--json` and `--history`).
use std::collections::HashMap;
use std::io::Write;

use std::time::Duration;

use anyhow::Result;
use serde_json::json;

use gadget_agent::AgentEvent;
use gadget_core::call::OutcomeKind;
use gadget_core::ledger::{LogLevel, Nested};
use gadget_exec::{ExecEvent, ResponseSummary};

use super::safe::safe;

const SHOWN_RESULT_LINES: usize = 12;

/// Characters of a result the readable views show.
const SHOWN_RESULT_CHARS: usize = 2_000;

/// How often the live view redraws its spinners.
const SPINNER_TICK: Duration = Duration::from_millis(100);

/// The least severe gadget log the readable views show: warnings by
/// default, info with `-v`, debug with `-vv`, everything with `-vvv`
/// (set once, from the command line, before anything runs).
static SHOWN_LOG_LEVEL: std::sync::atomic::AtomicU8 =
    std::sync::atomic::AtomicU8::new(LogLevel::Warn as u8);

/// Shows gadget logs from `level` up in the readable views.
pub(super) fn show_gadget_logs_from(level: LogLevel) {
    SHOWN_LOG_LEVEL.store(level as u8, std::sync::atomic::Ordering::Relaxed);
}

fn log_shown(level: LogLevel) -> bool {
    level as u8 >= SHOWN_LOG_LEVEL.load(std::sync::atomic::Ordering::Relaxed)
}

/// Where events go.
pub(super) enum View {
    Json,
    Plain(PlainText),
    Live(LiveView),
}

/// Text outside blocks as it arrives, in plain output: a segment starts
/// without its leading blank lines and ends with one newline before the
/// next block, exactly as the whole segment printed at once would be, but
/// each piece is written (and flushed) the moment it is parsed. Another
/// call's event (a start, a result) goes between lines: after the line
/// being written is complete, never inside it.
#[derive(Debug, Default)]
pub(super) struct PlainText {
    /// The current segment has shown something.
    started: bool,
    /// Newlines at the end of what came so far: the segment's end, unless
    /// more text follows.
    held_newlines: usize,
    /// The cursor is after this segment's text (no newline written since).
    line_open: bool,
    /// Other calls' event lines waiting for the open line to end.
    deferred: Vec<String>,
}

impl PlainText {
    fn text(&mut self, out: &mut impl Write, content: &str) -> std::io::Result<()> {
        let mut content = if self.started {
            content
        } else {
            content.trim_start_matches('\n')
        };
        // Lines waiting on the open line go the moment it ends.
        if !self.deferred.is_empty() && self.line_open {
            if self.held_newlines == 0
                && let Some(end) = content.find('\n')
            {
                write!(out, "{}", safe(&content[..end]))?;
                self.held_newlines = 1;
                content = &content[end + 1..];
            }
            if self.held_newlines > 0 {
                self.flush_deferred(out)?;
            }
        }
        let body = content.trim_end_matches('\n');
        if !body.is_empty() {
            self.started = true;
            write!(out, "{}{}", "\n".repeat(self.held_newlines), safe(body))?;
            self.held_newlines = 0;
            self.line_open = true;
        }
        if self.started {
            self.held_newlines += content.len() - body.len();
        }
        out.flush()
    }

    /// The open line is complete (a newline is held): it ends, then the
    /// lines that waited for it.
    fn flush_deferred(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out)?;
        self.held_newlines -= 1;
        self.line_open = false;
        for line in self.deferred.drain(..) {
            write!(out, "{}", safe(&line))?;
        }
        Ok(())
    }

    /// Another call's event line (ending in a newline): now, between
    /// lines, or once the line being written is complete.
    fn between_lines(&mut self, out: &mut impl Write, line: String) -> std::io::Result<()> {
        if self.line_open && self.held_newlines == 0 {
            self.deferred.push(line);
            return Ok(());
        }
        if self.line_open {
            writeln!(out)?;
            self.held_newlines -= 1;
            self.line_open = false;
        }
        write!(out, "{}", safe(&line))?;
        out.flush()
    }

    /// Ends the current segment (a block began, or the response ended):
    /// its one newline, then what waited for it.
    fn end(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if std::mem::take(&mut self.line_open) {
            writeln!(out)?;
        }
        for line in self.deferred.drain(..) {
            write!(out, "{}", safe(&line))?;
        }
        self.started = false;
        self.held_newlines = 0;
        out.flush()
    }
}

impl View {
    /// The live view's spinners and its side of a terminal prompt, for
    /// the prompts to step around.
    pub(super) fn terminal(&self) -> Option<Terminal> {
        match self {
            View::Live(live) => Some(Terminal {
                multi: live.multi.clone(),
                prompt: live.prompt.clone(),
            }),
            _ => None,
        }
    }

    pub(super) fn event(&mut self, out: &mut impl Write, event: &ExecEvent) -> std::io::Result<()> {
        match self {
            View::Json => {
                let line = serde_json::to_string(event).map_err(std::io::Error::other)?;
                writeln!(out, "{line}")?;
                out.flush()
            }
            View::Plain(text) => match event {
                ExecEvent::Text { content } => text.text(out, content),
                // A block began: the text before it is a segment.
                ExecEvent::CallParsed { .. } => text.end(out),
                // Another call's event, whenever it happens.
                _ => match plain_line(event) {
                    Some(line) => text.between_lines(out, line),
                    None => Ok(()),
                },
            },
            View::Live(live) => {
                live.event(event);
                Ok(())
            }
        }
    }

    /// Ends the text streamed so far (a line of the front end's own
    /// follows): plain output gets the segment's newline, a terminal
    /// commits the half-written line above the spinners.
    pub(super) fn end_text(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            View::Json => Ok(()),
            View::Plain(text) => text.end(out),
            View::Live(live) => {
                live.finish_text();
                Ok(())
            }
        }
    }

    /// A line of the front end's own on stderr. On a terminal the
    /// spinners step aside for it: written past them, it was erased by
    /// their next redraw, and the line they were drawing stayed behind.
    pub(super) fn aside(&self, line: &str) {
        match self {
            View::Live(live) => live.multi.suspend(|| eprintln!("{line}")),
            _ => eprintln!("{line}"),
        }
    }

    pub(super) fn summary(
        &mut self,
        out: &mut impl Write,
        summary: &ResponseSummary,
    ) -> Result<()> {
        match self {
            View::Json => {
                let mut line = serde_json::to_value(summary)?;
                line["type"] = json!("summary");
                writeln!(out, "{line}")?;
            }
            View::Plain(text) => {
                text.end(out)?;
                writeln!(out, "\n{}", summary_line(summary))?
            }
            View::Live(live) => {
                live.finish_text();
                writeln!(out, "\n{}", summary_line(summary))?;
            }
        }
        Ok(())
    }
}

fn summary_line(summary: &ResponseSummary) -> String {
    let mut line = format!(
        "{} call{}: {} succeeded, {} failed, {} skipped; cost ${:.6}",
        summary.calls,
        if summary.calls == 1 { "" } else { "s" },
        summary.succeeded,
        summary.failed,
        summary.skipped,
        summary.cost,
    );
    if summary.session_cost != summary.cost {
        line.push_str(&format!(" (session ${:.6})", summary.session_cost));
    }
    line.push_str(&format!("; {:.0} ms", summary.duration_ms));
    if summary.finished {
        line.push_str("; task complete");
    }
    line
}

/// A result cut to what a person reads at a glance.
fn shown(text: &str) -> String {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.by_ref().take(SHOWN_RESULT_LINES).collect();
    let more_lines = lines.count();
    let mut joined = head.join("\n");
    if joined.chars().count() > SHOWN_RESULT_CHARS {
        joined = joined.chars().take(SHOWN_RESULT_CHARS).collect();
        joined.push_str(" …");
    }
    if more_lines > 0 {
        joined.push_str(&format!(
            "\n… {more_lines} more lines (--json or --history show all)"
        ));
    }
    if joined.contains('\n') {
        format!("\n  {}", joined.replace('\n', "\n  "))
    } else {
        joined
    }
}

/// The plain-text form of one event, or nothing for events a person does
/// not need to see.
fn plain_line(event: &ExecEvent) -> Option<String> {
    Some(match event {
        // Whole lines: the events around it start on lines of their own.
        ExecEvent::Text { content } => {
            let content = content.trim_matches('\n');
            if content.is_empty() {
                return None;
            }
            format!("{content}\n")
        }
        ExecEvent::CallParsed { .. } => return None,
        ExecEvent::CallWaiting { id, gadget, reason } => {
            format!("⏸ {gadget} ({id}) waiting: {reason}\n")
        }
        ExecEvent::CallStarted {
            id,
            gadget,
            timeout_ms,
            ..
        } => {
            if *timeout_ms > 0 {
                format!("▶ {gadget} ({id}) started (timeout {timeout_ms} ms)\n")
            } else {
                format!("▶ {gadget} ({id}) started\n")
            }
        }
        ExecEvent::Progress {
            id,
            gadget,
            message,
        } => format!("  … {gadget} ({id}): {message}\n"),
        ExecEvent::Update {
            id,
            gadget,
            partial,
            ..
        } => format!("  … {gadget} ({id}) partial: {}\n", shown(partial)),
        ExecEvent::Log {
            id,
            gadget,
            level,
            message,
            fields,
            ..
        } => {
            if !log_shown(*level) {
                return None;
            }
            let fields = if fields.is_null() {
                String::new()
            } else {
                format!(
                    " {}",
                    gadget_core::ledger::truncate(fields.to_string(), 512)
                )
            };
            format!("  {} {gadget} ({id}): {message}{fields}\n", level.as_str())
        }
        // What a call did through its doors: in --json and the journal.
        ExecEvent::Cost { .. } | ExecEvent::Effect { .. } => return None,
        ExecEvent::Nested { id, gadget, event } => {
            format!("  ↳ {gadget} ({id}): {}\n", nested_line(event)?)
        }
        ExecEvent::HumanInput {
            id,
            gadget,
            question,
        } => format!("  ? {gadget} ({id}) asks: {question}\n"),
        ExecEvent::ApprovalRequested { .. } | ExecEvent::ApprovalDecided { .. } => {
            format!("{}\n", approval_line(event)?)
        }
        ExecEvent::CallFinished { .. } | ExecEvent::CallSkipped { .. } => {
            format!("{}\n", outcome_line(event)?)
        }
    })
}

/// What a person sees of an event inside a call (a sub-agent's loop):
/// its requests and its calls' ends, deeper levels behind more arrows.
fn nested_line(event: &Nested) -> Option<String> {
    match event.downcast_ref::<AgentEvent>()? {
        AgentEvent::Request {
            iteration,
            provider,
            model,
            ..
        } => Some(format!("asks {provider}:{model} (iteration {iteration})")),
        AgentEvent::Exec(ExecEvent::CallFinished {
            id,
            gadget,
            result,
            error,
            ..
        }) => {
            let ended = match error {
                Some(error) => format!("✗ {}", error.message.lines().next().unwrap_or_default()),
                None => format!(
                    "✓ {}",
                    shown(result.as_deref().unwrap_or_default()).trim_start()
                ),
            };
            Some(format!("{gadget} ({id}) {ended}"))
        }
        AgentEvent::Exec(ExecEvent::CallSkipped { id, gadget, reason }) => {
            Some(format!("{gadget} ({id}) skipped: {}", skip_text(reason)))
        }
        AgentEvent::Exec(ExecEvent::Nested { id, gadget, event }) => {
            Some(format!("{gadget} ({id}) ↳ {}", nested_line(event)?))
        }
        AgentEvent::Exec(approval @ ExecEvent::ApprovalRequested { .. })
        | AgentEvent::Exec(approval @ ExecEvent::ApprovalDecided { .. }) => approval_line(approval),
        _ => None,
    }
}

/// A call's approval, asked or decided, in one line.
fn approval_line(event: &ExecEvent) -> Option<String> {
    match event {
        ExecEvent::ApprovalRequested {
            id,
            gadget,
            reasons,
            ..
        } => Some(format!(
            "⏸ {gadget} ({id}) waits for approval: {}",
            reasons.join("; ")
        )),
        ExecEvent::ApprovalDecided {
            id,
            gadget,
            approved: true,
            by,
            ..
        } => Some(format!("✓ {gadget} ({id}) approved ({by})")),
        ExecEvent::ApprovalDecided {
            id,
            gadget,
            by,
            reason,
            ..
        } => Some(format!(
            "✗ {gadget} ({id}) not approved ({by}): {}",
            reason.as_deref().unwrap_or("denied")
        )),
        _ => None,
    }
}

/// The one line that says how a call ended.
fn outcome_line(event: &ExecEvent) -> Option<String> {
    match event {
        ExecEvent::CallFinished {
            id,
            gadget,
            outcome,
            result,
            error,
            stored_output,
            cost,
            duration_ms,
            ..
        } => {
            let cost = if *cost > 0.0 {
                format!(", ${cost:.6}")
            } else {
                String::new()
            };
            let stored = stored_output
                .as_ref()
                .map(|id| format!(" [stored as {id}]"))
                .unwrap_or_default();
            Some(match (result, error) {
                (Some(result), _) => {
                    let label = if *outcome == OutcomeKind::Result {
                        String::new()
                    } else {
                        format!(" [{outcome}]")
                    };
                    format!(
                        "✓ {gadget} ({id}) in {duration_ms:.1} ms{cost}{label}{stored}: {}",
                        shown(result)
                    )
                }
                (None, Some(error)) => format!(
                    "✗ {gadget} ({id}) failed ({}){cost}{stored}: {}",
                    error.kind,
                    shown(&error.message)
                ),
                (None, None) => format!("✓ {gadget} ({id})"),
            })
        }
        ExecEvent::CallSkipped {
            id, gadget, reason, ..
        } => Some(format!("⤼ {gadget} ({id}) skipped: {}", skip_text(reason))),
        _ => None,
    }
}

/// A question open on the terminal (an approval, a gadget's question),
/// shared by the live view and the prompt: while it is open the spinners
/// are off the screen and the view writes each line above the prompt and
/// redraws the prompt's last line under it, so finished results show
/// while the person decides, and nothing waits for them.
#[derive(Clone, Default)]
pub(super) struct PromptShared(std::sync::Arc<PromptState>);

#[derive(Default)]
struct PromptState {
    /// The open prompt's last line (what the person types after).
    open: std::sync::Mutex<Option<String>>,
    /// Approvals are asked here: the prompt names the call, so the view
    /// does not say it waits as well.
    asks_approvals: std::sync::atomic::AtomicBool,
}

impl PromptShared {
    fn open(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.0.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set_asks_approvals(&self) {
        self.0
            .asks_approvals
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn asks_approvals(&self) -> bool {
        self.0
            .asks_approvals
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The live view as a prompt sees it.
#[derive(Clone)]
pub(super) struct Terminal {
    multi: indicatif::MultiProgress,
    pub(super) prompt: PromptShared,
}

impl Terminal {
    /// The prompt whose last line is `last_line` opens: the spinners leave
    /// the screen.
    pub(super) fn open_prompt(&self, last_line: &str) {
        let _ = self.multi.clear();
        self.multi
            .set_draw_target(indicatif::ProgressDrawTarget::hidden());
        *self.prompt.open() = Some(last_line.to_string());
    }

    /// The prompt was answered: the spinners come back.
    pub(super) fn close_prompt(&self) {
        *self.prompt.open() = None;
        self.multi
            .set_draw_target(indicatif::ProgressDrawTarget::stdout());
    }
}

/// The terminal view: finished lines scroll above one spinner per
/// running call.
pub(super) struct LiveView {
    multi: indicatif::MultiProgress,
    prompt: PromptShared,
    running: HashMap<String, indicatif::ProgressBar>,
    /// Text not yet ended by a newline: printed as whole lines only, so
    /// the spinners never cut a line in two; meanwhile shown as it grows
    /// on a line of its own (`typing`).
    partial_text: String,
    typing: Option<indicatif::ProgressBar>,
}

impl LiveView {
    pub(super) fn new() -> LiveView {
        LiveView {
            multi: indicatif::MultiProgress::with_draw_target(
                indicatif::ProgressDrawTarget::stdout(),
            ),
            prompt: PromptShared::default(),
            running: HashMap::new(),
            partial_text: String::new(),
            typing: None,
        }
    }

    fn println(&self, text: &str) {
        let open = self.prompt.open();
        // A closed terminal is not worth failing the run over.
        match open.as_deref() {
            // Above the open prompt: its last line is cleared, the line
            // written, the prompt's line written again under it.
            Some(last_line) => {
                let mut out = std::io::stdout().lock();
                let _ = write!(out, "\r\x1b[2K{}\n{last_line}", safe(text));
                let _ = out.flush();
            }
            None => {
                let _ = self.multi.println(safe(text));
            }
        }
    }

    fn text(&mut self, content: &str) {
        self.partial_text.push_str(content);
        if let Some(end) = self.partial_text.rfind('\n') {
            let lines: String = self.partial_text.drain(..=end).collect();
            self.println(lines.trim_end_matches('\n'));
        }
        if self.partial_text.is_empty() {
            self.stop_typing();
        } else {
            let bar = self.typing.get_or_insert_with(|| {
                let bar = self.multi.insert(0, indicatif::ProgressBar::new_spinner());
                bar.set_style(
                    indicatif::ProgressStyle::with_template("{msg}").expect("a valid template"),
                );
                bar
            });
            bar.set_message(safe(&self.partial_text).into_owned());
        }
    }

    fn stop_typing(&mut self) {
        if let Some(bar) = self.typing.take() {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
    }

    pub(super) fn finish_text(&mut self) {
        self.stop_typing();
        if !self.partial_text.is_empty() {
            let rest = std::mem::take(&mut self.partial_text);
            self.println(&rest);
        }
    }

    /// A spinner line for call `id`, kept until the call's next state. A
    /// half-written line of text stays where it is (on its own line above
    /// the spinners) until its newline: committing it here cut it in two.
    fn spinner(&mut self, id: &str, gadget: &str, template: &str) -> indicatif::ProgressBar {
        let bar = self.multi.add(indicatif::ProgressBar::new_spinner());
        bar.set_style(indicatif::ProgressStyle::with_template(template).expect("a valid template"));
        bar.set_prefix(safe(&format!("{gadget} ({id})")).into_owned());
        bar.enable_steady_tick(SPINNER_TICK);
        self.running.insert(id.to_string(), bar.clone());
        bar
    }

    fn event(&mut self, event: &ExecEvent) {
        match event {
            ExecEvent::Text { content } => self.text(content),
            ExecEvent::CallWaiting { id, gadget, reason } => {
                let template = "⏸ {prefix:.bold} {elapsed:.dim} {msg:.dim}";
                let bar = self.spinner(id, gadget, template);
                bar.set_message(format!("waiting: {reason}"));
            }
            ExecEvent::CallStarted { id, gadget, .. } => {
                // A call that waited has its spinner replaced.
                if let Some(waiting) = self.running.remove(id) {
                    waiting.finish_and_clear();
                    self.multi.remove(&waiting);
                }
                self.spinner(
                    id,
                    gadget,
                    "{spinner:.cyan} {prefix:.bold} {elapsed:.dim} {msg}",
                );
            }
            ExecEvent::Progress { id, message, .. } => {
                if let Some(bar) = self.running.get(id) {
                    bar.set_message(safe(message).into_owned());
                }
            }
            ExecEvent::Cost { id, usd, .. } => {
                if let Some(bar) = self.running.get(id) {
                    bar.set_message(format!("${usd:.6} reported"));
                }
            }
            ExecEvent::CallFinished { id, .. } => {
                if let Some(bar) = self.running.remove(id) {
                    bar.finish_and_clear();
                    self.multi.remove(&bar);
                }
                if let Some(line) = outcome_line(event) {
                    self.println(&line);
                }
            }
            // The terminal prompt that follows names the call and why.
            ExecEvent::ApprovalRequested { .. } if self.prompt.asks_approvals() => {}
            other => {
                if let Some(line) = plain_line(other) {
                    self.println(line.trim_end_matches('\n'));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// Why a call was skipped, for a person: a failed dependency is named (the
/// reason alone, llmist's text, read as if the skipped call had failed so),
/// and no second "Skipped:".
fn skip_text(reason: &gadget_core::schedule::SkipReason) -> String {
    use gadget_core::schedule::SkipReason;
    match reason {
        // llmist's text when the dependency was itself skipped.
        SkipReason::DependencyFailed { dependency, error } if error == "Dependency failed" => {
            format!("its dependency {dependency} did not run")
        }
        SkipReason::DependencyFailed { dependency, error } => {
            format!("its dependency {dependency} failed: {error}")
        }
        other => {
            let text = other.to_string();
            match text.strip_prefix("Skipped: ") {
                Some(rest) => rest.to_string(),
                None => text,
            }
        }
    }
}
