//! What running calls report, as the executor's events: progress,
//! updates, logs, costs, nested events, questions, and the approval a call
//! waits for (its `CallStarted` comes once it is approved).

use gadget_core::approval::ApprovalEvent;
use gadget_core::ledger::CallEvent;
use gadget_core::schedule::CallIx;

use crate::state::Live;
use crate::{ExecEvent, Executor};

impl Executor {
    /// Something a running call reported.
    pub(crate) fn live(&self, ix: CallIx, live: Live, sink: &mut impl FnMut(ExecEvent)) {
        let entry = &self.entries[ix];
        let (id, gadget) = (entry.call.invocation_id.clone(), entry.call.name.clone());
        sink(match live {
            Live::Asking(question) => ExecEvent::HumanInput {
                id,
                gadget,
                question,
            },
            Live::Call(CallEvent::Progress(message)) => ExecEvent::Progress {
                id,
                gadget,
                message,
            },
            Live::Call(CallEvent::Measured {
                done,
                total,
                message,
            }) => ExecEvent::Progress {
                id,
                gadget,
                message: gadget_core::ledger::progress_line(done, total, message.as_deref()),
            },
            Live::Call(CallEvent::Update(update)) => ExecEvent::Update {
                id,
                gadget,
                partial: update.partial,
                details: update.details,
            },
            Live::Call(CallEvent::Log(entry)) => ExecEvent::Log {
                id,
                gadget,
                level: entry.level,
                message: entry.message,
                fields: entry.fields,
                source: entry.source,
            },
            Live::Call(CallEvent::Cost(usd)) => ExecEvent::Cost { id, gadget, usd },
            Live::Call(CallEvent::Nested(event)) => ExecEvent::Nested { id, gadget, event },
            Live::Call(CallEvent::Approval(event)) => return self.approval(ix, event, sink),
            Live::Call(CallEvent::Effect(effect)) => ExecEvent::Effect { id, gadget, effect },
        });
    }

    /// A call's approval: asked, then decided; once approved, it starts.
    fn approval(&self, ix: CallIx, event: ApprovalEvent, sink: &mut impl FnMut(ExecEvent)) {
        let entry = &self.entries[ix];
        let (id, gadget) = (entry.call.invocation_id.clone(), entry.call.name.clone());
        let parameters = entry.params.clone().unwrap_or_default();
        match event {
            ApprovalEvent::Requested { reasons, access } => sink(ExecEvent::ApprovalRequested {
                id,
                gadget,
                parameters,
                reasons,
                access,
            }),
            ApprovalEvent::Decided {
                approved,
                by,
                reason,
            } => {
                sink(ExecEvent::ApprovalDecided {
                    id: id.clone(),
                    gadget: gadget.clone(),
                    approved,
                    by,
                    reason,
                });
                if approved && let Some(tool) = &entry.tool {
                    let timeout = self
                        .config
                        .timeouts
                        .resolve(tool.name(), tool.own_timeout());
                    sink(ExecEvent::CallStarted {
                        id,
                        gadget,
                        parameters,
                        timeout_ms: timeout.map_or(0, |t| t.as_millis() as u64),
                    });
                }
            }
        }
    }
}
