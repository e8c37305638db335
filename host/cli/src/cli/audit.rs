//! The audit journal on the command line: opening it for a run (`--audit
//! FILE` or the policy's `[audit] file`), `gadget audit verify FILE` (the
//! hash chain, naming the first broken line) and `gadget audit show FILE`
//! (records for people, filtered by gadget, call or event).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result};

use gadget_core::audit::{Record, RecordBody, verify};
use gadget_core::effect::Effect;
use gadget_exec::audit::{Journal, JournalKey, JournalOptions};
use gadget_runtime::policy::Policy;

use super::{EXIT_FAILED, safe::safe};

/// `gadget audit ...`.
#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Check a journal's hash chain; name the first line that was changed, removed or reordered.
    Verify {
        file: PathBuf,
        /// The variable holding a keyed journal's key (default: the policy's [audit] key-env).
        #[arg(long, value_name = "VAR")]
        key_env: Option<String>,
    },
    /// Print a journal's records for people.
    Show {
        file: PathBuf,
        /// Only this gadget's records (case-insensitive).
        #[arg(long)]
        gadget: Option<String>,
        /// Only this call's records.
        #[arg(long)]
        call: Option<String>,
        /// Only these events (call_started, call_finished, http, llm, cost, approval, ...).
        #[arg(long)]
        event: Option<String>,
    },
}

/// The journal this run writes, if the operator asked for one.
pub fn open(flag: Option<&Path>, policy: &Policy) -> Result<Option<Arc<Journal>>> {
    let Some(path) = flag.or(policy.audit.file.as_deref()) else {
        return Ok(None);
    };
    let session = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
    let options = JournalOptions {
        session,
        record_params: policy.audit.record_params,
        secrets: policy.secret_values(),
        key: run_key(policy)?,
    };
    Ok(Some(Arc::new(Journal::open(path, options)?)))
}

/// The key this run's journal is written with: the operator's (`[audit]
/// key-env`), none when the policy asks for an unkeyed journal, else the
/// host's own (made on first use).
fn run_key(policy: &Policy) -> Result<Option<JournalKey>> {
    if let Some(var) = policy.audit.key_env.as_deref() {
        return env_key(var).map(Some);
    }
    if policy.audit.unkeyed {
        return Ok(None);
    }
    let (path, key) = gadget_runtime::journal_key::journal_key().context(
        "making the journal's key ([audit] key-env names your own; unkeyed = true keys nothing)",
    )?;
    tracing::debug!(key = %path.display(), "the journal is keyed with the host's key");
    Ok(Some(JournalKey(key.to_vec())))
}

/// The operator's key, from the variable the policy (or the flag) names;
/// an unset or empty one is an error, never a journal left unkeyed.
fn env_key(var: &str) -> Result<JournalKey> {
    match std::env::var(var) {
        Ok(key) if !key.is_empty() => Ok(JournalKey(key.into_bytes())),
        _ => anyhow::bail!(
            "[audit] key-env = \"{var}\": ${var} is not set (or empty); set it to the journal's key, or remove key-env to key it with the host's own"
        ),
    }
}

/// How a journal is verified: with which key, and what that proves.
struct VerifyMode {
    key: Option<JournalKey>,
    /// What the verdict says of the mode.
    said: String,
}

/// The mode `text` was written in (a MAC on its first line: keyed) and
/// the key to verify it with: the flag's or the policy's variable, else
/// this host's key.
fn verify_mode(text: &str, key_env: Option<&str>) -> Result<VerifyMode> {
    let keyed = text
        .lines()
        .next()
        .and_then(|line| serde_json::from_str::<Record>(line).ok())
        .is_some_and(|record| record.mac.is_some());
    if !keyed {
        return Ok(VerifyMode {
            key: None,
            said: " (unkeyed: no line was changed, removed or reordered unless every later line was rehashed too; anyone who can write the file could have, so key journals: the default, or [audit] key-env)".into(),
        });
    }
    let proves = "every line was written by a holder of the key, in this order, unchanged";
    if let Some(var) = key_env {
        return Ok(VerifyMode {
            key: Some(env_key(var)?),
            said: format!(", keyed with ${var}: {proves}"),
        });
    }
    match gadget_runtime::journal_key::existing_journal_key()
        .context("reading the host's journal key")?
    {
        Some((path, key)) => Ok(VerifyMode {
            key: Some(JournalKey(key.to_vec())),
            said: format!(
                ", keyed with this host's key ({}): {proves}",
                path.display()
            ),
        }),
        None => anyhow::bail!(
            "the journal is keyed, and this host has no journal key of its own: verify it with its key (--key-env VAR, or the policy's [audit] key-env)"
        ),
    }
}

/// Writes out what the journal still holds; an error when any record
/// could not be written (the run's record is incomplete).
pub fn close(journal: Option<Arc<Journal>>) -> Result<()> {
    let Some(journal) = journal else {
        return Ok(());
    };
    journal.flush();
    match journal.failure() {
        None => Ok(()),
        Some(why) => anyhow::bail!(
            "audit journal {}: {why}: records from that point on are missing",
            journal.path().display()
        ),
    }
}

pub fn audit(command: &AuditCommand, policy: &Policy) -> Result<ExitCode> {
    match command {
        AuditCommand::Verify { file, key_env } => {
            let text = read(file)?;
            let mode = verify_mode(
                &text,
                key_env.as_deref().or(policy.audit.key_env.as_deref()),
            )?;
            match verify(&text, mode.key.as_ref().map(|k| &k.0[..])) {
                Ok(records) => {
                    println!(
                        "{}: {records} records, the chain holds{}",
                        file.display(),
                        mode.said
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(broken) => {
                    eprintln!("error: {}: {broken}", file.display());
                    Ok(ExitCode::from(EXIT_FAILED))
                }
            }
        }
        AuditCommand::Show {
            file,
            gadget,
            call,
            event,
        } => {
            let text = read(file)?;
            let mut out = std::io::stdout().lock();
            for (number, line) in text.lines().enumerate() {
                let Ok(record) = serde_json::from_str::<Record>(line) else {
                    writeln!(out, "line {}: not a journal record", number + 1)?;
                    continue;
                };
                let wanted = gadget.as_ref().is_none_or(|g| {
                    record
                        .gadget
                        .as_deref()
                        .is_some_and(|r| r.eq_ignore_ascii_case(g))
                }) && call
                    .as_ref()
                    .is_none_or(|c| record.call.as_deref() == Some(c))
                    && event.as_ref().is_none_or(|e| &record.event == e);
                if wanted {
                    writeln!(out, "{}", safe(&shown(&record)))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The largest journal `audit verify` and `audit show` read whole (they
/// hold it in memory): a bound, not a size journals reach in a day.
const MAX_JOURNAL_READ_BYTES: u64 = 1 << 30;

fn read(file: &Path) -> Result<String> {
    gadget_core::operator_file::read_text(file, MAX_JOURNAL_READ_BYTES)
        .with_context(|| format!("reading {}", file.display()))
}

/// One record in a line: when, what, which call of which gadget, and its
/// detail.
fn shown(record: &Record) -> String {
    let who = match (&record.gadget, &record.call) {
        (Some(gadget), Some(call)) => format!(" {gadget} ({call})"),
        (Some(gadget), None) => format!(" {gadget}"),
        (None, Some(call)) => format!(" ({call})"),
        (None, None) => String::new(),
    };
    let detail = if record.detail.is_null() {
        String::new()
    } else {
        match record.body().as_ref().and_then(summary) {
            Some(summary) => format!(": {summary}"),
            None => format!(" {}", record.detail),
        }
    };
    format!(
        "{} #{} {}{who}{detail}",
        record.time, record.seq, record.event
    )
}

/// A door's record for people (`GET http://host/path: 200, 26 bytes in,
/// 3.1 ms`); `None`: shown as its JSON.
fn summary(body: &RecordBody) -> Option<String> {
    let ending = |refused: &Option<String>, error: &Option<String>| match (refused, error) {
        (Some(why), _) => format!(" REFUSED: {why}"),
        (None, Some(why)) => format!(" failed: {why}"),
        (None, None) => String::new(),
    };
    Some(match body {
        RecordBody::Http(Effect::Http {
            method,
            origin,
            path,
            status,
            bytes_out,
            bytes_in,
            duration_ms,
            refused,
            error,
        }) => {
            let status = status.map_or("no response".to_string(), |s| s.to_string());
            format!(
                "{method} {origin}{path}: {status}, {bytes_out} bytes out, {bytes_in} bytes in, {duration_ms:.1} ms{}",
                ending(refused, error)
            )
        }
        RecordBody::File(Effect::File {
            op,
            path,
            host,
            bytes,
            to,
            refused,
            error,
        }) => {
            let bytes = bytes.map_or(String::new(), |b| format!(" ({b} bytes)"));
            let to = to.as_ref().map_or(String::new(), |to| format!(" to {to}"));
            format!(
                "{op} {path}{to}{bytes} [host {host}]{}",
                ending(refused, error)
            )
        }
        RecordBody::Config(Effect::Config { keys }) => {
            format!("read config keys {}", keys.join(", "))
        }
        RecordBody::Llm(Effect::Llm {
            model,
            input_tokens,
            output_tokens,
            cost,
            refused,
            error,
        }) => format!(
            "{model}: {input_tokens} tokens in, {output_tokens} out, ${cost:.6}{}",
            ending(refused, error)
        ),
        RecordBody::Omitted(Effect::Omitted { of, count }) => {
            format!("{count} more {of} operations not recorded (the per-call cap)")
        }
        RecordBody::RecordsDropped { count, cap } => {
            format!("{count} more records of this call not kept (the cap of {cap})")
        }
        RecordBody::CallFinished(finished) => {
            let outcome = match &finished.error {
                Some(error) => format!("{}: {}", error.kind, error.message),
                None => finished.outcome.clone(),
            };
            format!(
                "{outcome} in {:.1} ms, cost ${:.6}",
                finished.duration_ms, finished.cost
            )
        }
        _ => return None,
    })
}
