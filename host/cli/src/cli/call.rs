//! `gadget call NAME`: run one gadget with JSON parameters (llmist's
//! `gadget run` / testGadget) and print its outcome, for people or as JSON.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use gadget_core::tool::Tools;
use gadget_runtime::describe::{CallJson, ErrorJson, RejectedJson};
use gadget_runtime::policy::GadgetRules;
use gadget_runtime::registry::{CallRejected, Registry};
use gadget_runtime::{CallError, CallReport, FailureKind, LogSource, Outcome};

use super::safe::safe;
use super::{EXIT_BAD_INPUT, EXIT_FAILED, print_json};

/// Parameters read from stdin, at most (a JSON object for one call).
const MAX_STDIN_PARAMS_BYTES: u64 = 16 << 20;

pub fn read_params(params: Option<String>) -> Result<Value> {
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
        let kind = gadget_core::parser::json_type(&value);
        let article = if kind.starts_with(['a', 'o']) {
            "an"
        } else {
            "a"
        };
        bail!("parameters must be a JSON object, not {article} {kind}");
    }
    Ok(value)
}

/// The tool `name` and its validated parameters (defaults filled in), or
/// why there is no call to make.
/// What a call is looked up in: the gadgets, everything served (the
/// upstream MCP servers' tools and the policy's agents too), and the
/// operator's rules on names.
pub struct Target<'a> {
    pub registry: &'a Registry,
    pub tools: &'a dyn Tools,
    pub rules: &'a GadgetRules,
}

fn prepare(
    target: &Target<'_>,
    name: &str,
    params: Value,
) -> Result<(Arc<dyn gadget_core::tool::Tool>, Value), CallRejected> {
    match target.tools.find(name) {
        Some(tool) => match gadget_exec::call::prepare(&*tool, params) {
            Ok(params) => Ok((tool, params)),
            Err(failure) => Err(CallRejected::InvalidParameters(failure)),
        },
        // Denied by the operator, claimed twice, or unknown: the registry
        // knows which of its gadgets; the rules say why a name none of
        // them has (an upstream server's tool) is not served.
        None => match (target.registry.rejection(name), target.rules.check(name)) {
            (CallRejected::UnknownGadget { .. }, Err(rule)) => Err(CallRejected::Denied {
                name: name.to_string(),
                rule,
            }),
            (rejected, _) => Err(rejected),
        },
    }
}

/// A call refused before it ran: the reason, exit 2.
fn reject(name: &str, id: &str, rejected: &CallRejected, json: bool) -> Result<ExitCode> {
    let kind = match rejected {
        CallRejected::UnknownGadget { .. } | CallRejected::Denied { .. } => {
            FailureKind::UnknownGadget
        }
        CallRejected::InvalidParameters(_) => FailureKind::InvalidParameters,
    };
    if json {
        print_json(&RejectedJson {
            gadget: name,
            invocation_id: id,
            error: ErrorJson {
                kind,
                message: rejected.to_string(),
            },
        })?;
    } else {
        eprintln!("error: {}", safe(&rejected.to_string()));
    }
    Ok(ExitCode::from(EXIT_BAD_INPUT))
}

/// How `gadget call --dry-run` answers.
pub struct DryRun<'a> {
    /// The policy names upstream MCP servers, whose tools a dry run does
    /// not list (that would start them).
    pub upstream: bool,
    pub id: &'a str,
    pub json: bool,
}

/// `gadget call --dry-run`: the parameters as the gadget would get them
/// (validated, defaults filled in), and nothing run or started: the
/// upstream MCP servers' tools are not among `tools`.
pub fn dry_run(
    target: &Target<'_>,
    name: &str,
    params: Value,
    dry: DryRun<'_>,
) -> Result<ExitCode> {
    let DryRun { upstream, id, json } = dry;
    let (tool, params) = match prepare(target, name, params) {
        Ok(prepared) => prepared,
        Err(rejected) => {
            let code = reject(name, id, &rejected, json);
            if upstream && matches!(rejected, CallRejected::UnknownGadget { .. }) && !json {
                eprintln!(
                    "note: --dry-run starts no MCP server, so the tools of the policy's [mcp-servers] were not looked at; call it without --dry-run"
                );
            }
            return code;
        }
    };
    if json {
        print_json(&json!({"gadget": tool.name(), "params": params, "dry_run": true}))?;
    } else {
        eprintln!(
            "✓ {}: the parameters fit its schema (--dry-run: nothing ran)",
            tool.name()
        );
        println!("{}", safe(&serde_json::to_string_pretty(&params)?));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one call of a gadget or of one of the policy's agents, through
/// the one call path every front end uses.
pub async fn call(
    target: &Target<'_>,
    name: &str,
    params: Value,
    id: &str,
    json: bool,
    // The session's approvals, rate limits and journal.
    scope: Arc<gadget_core::scope::CallScope>,
) -> Result<ExitCode> {
    let prepared = prepare(target, name, params);
    let (tool, params) = match prepared {
        Ok(prepared) => prepared,
        Err(rejected) => return reject(name, id, &rejected, json),
    };
    let gadget = tool.name().to_string();
    let mut call = gadget_core::tool::ToolCall::new(id, params);
    call.scope = scope;
    let report = gadget_exec::call::run(tool, call).await.report;
    if json {
        print_json(&CallJson::new(&gadget, id, &report))?;
    } else {
        print_report(&gadget, &report)?;
    }
    Ok(if report.outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
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
            LogSource::Gadget => gadget,
            LogSource::Host => "host",
        };
        writeln!(
            err,
            "[{} {who}] {}{}",
            log.level.as_str(),
            safe(&log.message),
            safe(&fields)
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
            println!("{}", safe(result));
        }
        Ok(Outcome::Finish { result, .. }) => {
            writeln!(
                err,
                "✓ {summary} — task complete (the agent loop would end here)"
            )?;
            println!("{}", safe(result));
        }
        Ok(Outcome::AskHuman { question }) => {
            writeln!(
                err,
                "? {summary} — the gadget asks a person (in `gadget run` a human-input handler answers):"
            )?;
            println!("{}", safe(question));
        }
        Err(error) => {
            writeln!(err, "✗ {summary}")?;
            let label = match error {
                CallError::InvalidArguments { .. } => "invalid arguments",
                CallError::Failed { .. } => "gadget failed",
                _ => "error",
            };
            writeln!(err, "{label}: {}", safe(&error.to_string()))?;
        }
    }
    Ok(())
}
