//! What surrounds every call of a session or a request, as one value: the
//! operator's approval rules and who approves, where calls are recorded
//! (a [`Recorder`], the audit journal), the trace the calls belong to,
//! the person who answers what a tool asks while it runs, the operator's
//! rate limits and who the caller is.
//!
//! A front end builds one [`CallScope`] per session (`gadget run`, an
//! agent) or per request (an MCP client's call) and shares it; every call
//! carries it in its [`crate::tool::ToolCall`], so a tool that runs calls
//! of its own (a sub-agent) runs them in the same scope.
//!
//! The recorder is a trait: this crate opens no file. The file-backed
//! journal lives above it (`gadget_exec::audit::Journal`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::approval::Approvals;
use crate::ask::{AskFailure, InputRequest, Kinds, Question, Reply};
use crate::call::CallReport;
use crate::client::ClientId;
use crate::events::Failure;
use crate::ledger::CallEvent;
use crate::rate::RateLimits;

/// Everything around a call that is not the call itself. Cheap to share:
/// every field is an `Arc` (or absent).
#[derive(Clone, Default)]
pub struct CallScope {
    /// The operator's approval rules and approver; `None`: no rules.
    pub approvals: Option<Arc<Approvals>>,
    /// Where calls are recorded (the audit journal); `None`: nowhere.
    pub recorder: Option<Arc<dyn Recorder>>,
    /// The span calls are children of, when tracing is on; within a call,
    /// the call's own span (sent on its outgoing HTTP requests, the parent
    /// of a sub-agent's calls).
    pub trace: Option<TraceParent>,
    /// Who answers what a tool asks a person while it runs (an upstream
    /// MCP server's elicitation, a sub-agent's gadget).
    pub human: Option<Arc<dyn HumanInput>>,
    /// The operator's rate limits (`[[rate-limits]]`), shared by every
    /// call of the host; `None`: none.
    pub rates: Option<Arc<RateLimits>>,
    /// Who is calling, as the front end knows them: what rules naming a
    /// client see, what `scope = "client"` limits count by, and who owns
    /// what the host keeps for the call.
    pub client: ClientId,
}

impl std::fmt::Debug for CallScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallScope")
            .field("approvals", &self.approvals.is_some())
            .field("recorder", &self.recorder.is_some())
            .field("trace", &self.trace)
            .field("human", &self.human.is_some())
            .field("rates", &self.rates.is_some())
            .field("client", &self.client)
            .finish()
    }
}

impl CallScope {
    /// A scope with nothing around its calls.
    pub fn none() -> Arc<CallScope> {
        Arc::new(CallScope::default())
    }
}

/// A W3C trace context, as text: what a tracer reads the parent span from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// The `traceparent` value.
    pub traceparent: Arc<str>,
    /// The `tracestate` value, if any.
    pub tracestate: Option<Arc<str>>,
}

impl TraceParent {
    pub fn new(traceparent: impl Into<Arc<str>>) -> TraceParent {
        TraceParent {
            traceparent: traceparent.into(),
            tracestate: None,
        }
    }
}

/// Where calls are recorded: each call that reaches a tool, what it does
/// on the way, and each call refused before it did.
pub trait Recorder: Send + Sync {
    /// Why nothing can be recorded now, in words for the refused call: a
    /// call never runs unrecorded. `None`: records are kept.
    fn failure(&self) -> Option<String>;

    /// A call refused before it reached a tool (no such gadget, a gadget
    /// the operator denies, parameters that do not fit), asked for by
    /// `client`: `name` as the caller wrote it, never its parameters.
    fn refused(&self, call: &str, name: &str, failure: &Failure, client: &ClientId);

    /// What records one entry into plugin code: a call of the tool named
    /// `gadget`, or a catalog request (`entry` says which), made by
    /// `client`.
    fn call(
        &self,
        entry: Entry<'_>,
        origin: Option<Arc<Origin>>,
        client: &ClientId,
    ) -> Arc<dyn CallRecord>;
}

/// What a record names: a call of a tool, or a catalog request of a
/// plugin (its own journal kind, with what it asked for).
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The call's or request's id.
    pub id: &'a str,
    /// The tool's name; for a catalog request, what it names
    /// (`resource:URI`, `prompt:NAME`, `completion:REF`).
    pub name: &'a str,
    pub kind: EntryKind,
}

/// Which way into plugin code a record's entry came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A tool call (`call_started` .. `call_finished`).
    Call,
    /// `resources/read` (`resource_read` .. `call_finished`).
    ResourceRead,
    /// `prompts/get` (`prompt` .. `call_finished`).
    Prompt,
    /// `completion/complete` (`completion` .. `call_finished`).
    Completion,
}

/// The record of one call: its start, what it reports, its end.
pub trait CallRecord: Send + Sync {
    /// The call is about to run with `params`.
    fn started(&self, params: &Value, timeout: Option<Duration>);

    /// Something the running call reported.
    fn event(&self, event: &CallEvent);

    /// The call ended (ran, or was refused before it ran); `instant`: it
    /// answered in the host at once.
    fn finished(&self, report: &CallReport, instant: bool);
}

/// A tool's provenance: its plugin, the digest of its component, where it
/// was loaded from and what its signatures say. Built once per plugin and
/// shared by every call (the journal and the spans read it per call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub plugin: String,
    /// SHA-256 of the component, hex.
    pub digest: String,
    /// Where it was loaded from, as the operator named it: a path, or an
    /// `oci://` reference.
    pub source: String,
    /// What its signatures say: `signed by NAME`, `unsigned`, `signed, not
    /// verified (...)`, or `not checked` when the policy asks nothing of
    /// signatures.
    pub signature: String,
}

/// A future answer of a person (or an error text for the model).
pub type Answer<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// Future answers to a gadget's `ask`, one per question, in order.
pub type Replies<'a> = Pin<Box<dyn Future<Output = Result<Vec<Reply>, AskFailure>> + Send + 'a>>;

/// Answers what a call asks: a gadget's question for a person (the
/// `ask-human` outcome, the `ask` import) or one an upstream MCP server
/// asks during a call (elicitation).
///
/// [`HumanInput::ask`] is a person's answer in words (an error is why
/// there is none). The `ask` import's questions go to
/// [`HumanInput::inputs`]; a person at a terminal answers text and forms
/// through `ask` by default, while an MCP client overrides it to answer
/// every kind the way MCP does.
pub trait HumanInput: Send + Sync {
    fn ask<'a>(&'a self, call_id: &'a str, gadget: &'a str, question: &'a str) -> Answer<'a>;

    /// Whether this answerer also answers a call's own question (an
    /// ask-human outcome) on the one call path. A front end that answers
    /// those its own way (MCP: an elicitation or an input-required
    /// result) says no and gets the question back in the call's outcome.
    fn answers_outcome(&self) -> bool {
        true
    }

    /// The kinds of question this answerer can have answered.
    fn answerable(&self) -> Kinds {
        Kinds::TEXT.with(Kinds::FORM)
    }

    /// Answers every question of one `ask`, in order. `requests` has
    /// passed [`crate::ask::check_requests`].
    fn inputs<'a>(
        &'a self,
        call_id: &'a str,
        gadget: &'a str,
        requests: &'a [InputRequest],
    ) -> Replies<'a> {
        Box::pin(async move {
            let mut replies = Vec::with_capacity(requests.len());
            for request in requests {
                let reply = match &request.question {
                    Question::Text { text } => match self.ask(call_id, gadget, text).await {
                        Ok(answer) => Reply::Text(answer),
                        Err(why) => return Err(AskFailure::Unavailable(why)),
                    },
                    Question::Form { message, schema } => {
                        let prompt = crate::ask::form_prompt(message, schema);
                        match self.ask(call_id, gadget, &prompt).await {
                            Ok(answer) => match crate::ask::fill_form(schema, &answer) {
                                Some(form) => Reply::Form(form),
                                None => Reply::Declined,
                            },
                            Err(why) => return Err(AskFailure::Unavailable(why)),
                        }
                    }
                    other => {
                        return Err(AskFailure::Unavailable(format!(
                            "a '{}' question is answered only by an MCP client (gadget mcp or gadget serve); a person here answers text and forms",
                            other.kind().name()
                        )));
                    }
                };
                replies.push(reply);
            }
            Ok(replies)
        })
    }
}
