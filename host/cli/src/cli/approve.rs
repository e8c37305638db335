//! Who approves a call that waits for a person, on the command line
//! (`run`, `agent`, `call`): `--approve-all` for trusted scripts, an
//! `--approvals FILE` of decisions, else the person at the terminal, else
//! nobody, and the call is denied (fail closed) with how to approve it.
//!
//! What the person is shown is bounded and escaped (a model writes the
//! parameters): the gadget, why it waits, its parameters and what it may
//! touch (its effective grants).

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result, bail};

use gadget_core::approval::{
    ApprovalRequest, Approvals, Approver, Decider, Rules, Verdict, VerdictFuture,
};

/// How calls that wait for approval are decided: shared by `run`, `agent`
/// and `call`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ApprovalArgs {
    /// Decisions for calls that wait for approval, one per line in the order they are asked: approve, deny, or session (approve this gadget for the rest of the run). Default: ask on the terminal, if there is one.
    #[arg(long, value_name = "FILE", conflicts_with = "approve_all")]
    approvals: Option<PathBuf>,
    /// Approve every call that waits for approval (for trusted scripts); deny rules still refuse.
    #[arg(long)]
    approve_all: bool,
}

impl ApprovalArgs {
    /// The session's approvals under `rules`: `None` when there are no
    /// rules (nothing waits, nothing is checked).
    pub fn approvals(&self, rules: &Arc<Rules>, tty: &Tty) -> Result<Option<Arc<Approvals>>> {
        if rules.is_empty() {
            return Ok(None);
        }
        let approver: Arc<dyn Approver> = if self.approve_all {
            Arc::new(ApproveAll)
        } else if let Some(path) = &self.approvals {
            Arc::new(DecisionsFile::read(path)?)
        } else if let Some(tty) = tty.open() {
            if let Some(live) = &tty.live {
                live.prompt.set_asks_approvals();
            }
            Arc::new(TerminalApprover { tty })
        } else {
            Arc::new(Nobody)
        };
        Ok(Some(Arc::new(Approvals::new(rules.clone(), approver))))
    }
}

/// The approvals of a run nobody attends (`gadget test`): the rules hold,
/// and a call they ask a person about is denied, saying how to approve.
pub fn unattended(rules: &Arc<Rules>) -> Option<Arc<Approvals>> {
    (!rules.is_empty()).then(|| Arc::new(Approvals::new(rules.clone(), Arc::new(Nobody))))
}

/// `--approve-all`.
struct ApproveAll;

impl Approver for ApproveAll {
    fn decide<'a>(&'a self, _request: &'a ApprovalRequest) -> VerdictFuture<'a> {
        Box::pin(async {
            Verdict::Approved {
                by: Decider::ApproveAll,
                for_session: false,
            }
        })
    }
}

/// Nobody to ask: denied, saying how to approve.
struct Nobody;

impl Approver for Nobody {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> VerdictFuture<'a> {
        Box::pin(async move {
            Verdict::Denied {
                by: Decider::Nobody,
                why: format!(
                    "it needs a person's approval ({}) and there is no terminal to ask on: run in a terminal, or pass --approvals FILE (one decision per line) or --approve-all",
                    request.reasons.join("; ")
                ),
            }
        })
    }
}

/// One decision of an `--approvals` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Approve,
    Deny,
    Session,
}

/// `--approvals FILE`: one decision per line, taken in the order calls
/// ask (blank lines and `#` comments skipped).
/// The largest `--approvals` file read: a decision a line, far more than
/// any session asks.
const MAX_DECISIONS_FILE_BYTES: u64 = 1 << 20;

struct DecisionsFile {
    path: PathBuf,
    decisions: Mutex<VecDeque<(usize, Decision)>>,
}

impl DecisionsFile {
    fn read(path: &Path) -> Result<DecisionsFile> {
        let text = gadget_core::operator_file::read_text(path, MAX_DECISIONS_FILE_BYTES)
            .with_context(|| format!("reading approvals from {}", path.display()))?;
        let mut decisions = VecDeque::new();
        for (number, line) in text.lines().enumerate() {
            let word = line.trim();
            if word.is_empty() || word.starts_with('#') {
                continue;
            }
            let decision = match word.to_ascii_lowercase().as_str() {
                "approve" | "yes" | "y" => Decision::Approve,
                "deny" | "no" | "n" => Decision::Deny,
                "session" | "always" => Decision::Session,
                _ => bail!(
                    "{} line {}: '{}' is not a decision: write approve, deny or session",
                    path.display(),
                    number + 1,
                    gadget_core::approval::shown(word, 80)
                ),
            };
            decisions.push_back((number + 1, decision));
        }
        Ok(DecisionsFile {
            path: path.to_path_buf(),
            decisions: Mutex::new(decisions),
        })
    }
}

impl Approver for DecisionsFile {
    fn decide<'a>(&'a self, _request: &'a ApprovalRequest) -> VerdictFuture<'a> {
        let next = self
            .decisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        let file = self.path.display().to_string();
        Box::pin(async move {
            match next {
                Some((_, Decision::Approve)) => Verdict::Approved {
                    by: Decider::File,
                    for_session: false,
                },
                Some((_, Decision::Session)) => Verdict::Approved {
                    by: Decider::File,
                    for_session: true,
                },
                Some((line, Decision::Deny)) => Verdict::Denied {
                    by: Decider::File,
                    why: format!("denied by the approvals file ({file} line {line})"),
                },
                None => Verdict::Denied {
                    by: Decider::File,
                    why: format!("the approvals file {file} has no decision left for it"),
                },
            }
        })
    }
}

/// The terminal a person answers on (`/dev/tty`, so it works while a
/// response comes through stdin): one prompt at a time, shared by the
/// questions gadgets ask and the approvals calls wait for.
#[derive(Clone, Default)]
pub struct Tty {
    lock: Arc<Mutex<()>>,
    live: Option<super::view::Terminal>,
}

impl Tty {
    /// Prompts take the live view's place at the bottom of the screen
    /// while they wait; its lines go on above them.
    pub(super) fn new(live: Option<super::view::Terminal>) -> Tty {
        Tty {
            lock: Arc::default(),
            live,
        }
    }

    /// The terminal, when there is one to ask on.
    pub fn open(&self) -> Option<Tty> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        std::fs::File::open("/dev/tty").ok()?;
        Some(self.clone())
    }

    /// Writes `prompt` and reads one line (without its end).
    pub async fn line(&self, prompt: String) -> Result<String, String> {
        let (lock, live) = (self.lock.clone(), self.live.clone());
        tokio::task::spawn_blocking(move || {
            let _one_at_a_time = lock.lock().unwrap_or_else(|p| p.into_inner());
            let ask = || -> std::io::Result<String> {
                // While the agent is steered from the terminal, one reader
                // hands this prompt the next line.
                if let Some(answer) = super::steer::answer(&prompt) {
                    return answer;
                }
                let mut tty = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/tty")?;
                tty.write_all(prompt.as_bytes())?;
                tty.flush()?;
                let mut line = String::new();
                std::io::BufRead::read_line(&mut std::io::BufReader::new(tty), &mut line)?;
                Ok(line.trim_end_matches(['\r', '\n']).to_string())
            };
            // Not `suspend`: it holds the view's lock while the person
            // thinks, and every result finished meanwhile waited on it.
            if let Some(live) = &live {
                live.open_prompt(prompt.rsplit('\n').next().unwrap_or_default());
            }
            let answer = ask();
            if let Some(live) = &live {
                live.close_prompt();
            }
            answer.map_err(|e| format!("Could not read an answer from the terminal: {e}"))
        })
        .await
        .map_err(|e| format!("Could not read an answer from the terminal: {e}"))?
    }
}

/// Asks the person at the terminal.
struct TerminalApprover {
    tty: Tty,
}

impl Approver for TerminalApprover {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> VerdictFuture<'a> {
        let prompt = prompt(request);
        Box::pin(async move {
            let answer = match self.tty.line(prompt).await {
                Ok(answer) => answer,
                Err(why) => {
                    return Verdict::Denied {
                        by: Decider::Terminal,
                        why,
                    };
                }
            };
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" | "approve" => Verdict::Approved {
                    by: Decider::Terminal,
                    for_session: false,
                },
                "a" | "always" | "s" | "session" => Verdict::Approved {
                    by: Decider::Terminal,
                    for_session: true,
                },
                _ => Verdict::Denied {
                    by: Decider::Terminal,
                    why: "the person at the terminal denied it".into(),
                },
            }
        })
    }
}

/// What the person reads before deciding.
fn prompt(request: &ApprovalRequest) -> String {
    let gadget = gadget_core::approval::shown(&request.gadget, 128);
    format!(
        "\n⏸ {gadget} ({}) waits for your approval: {}\n  parameters: {}\n  may touch:  {}\n  run it? [y]es / [N]o / [a]lways {gadget} this session: ",
        gadget_core::approval::shown(&request.call_id, 128),
        gadget_core::approval::shown(&request.reasons.join("; "), 1024),
        request.shown_params(),
        request.shown_access(),
    )
}
