//! What the executor's tests share: fake tools (each a closure from a call
//! to a report), a response runner, and block builders.

#![allow(dead_code, reason = "each test binary uses some of the helpers")]
#![allow(unused_imports, reason = "a prelude for the test binaries")]

pub use std::sync::atomic::{AtomicUsize, Ordering};
pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

pub use serde_json::{Value, json};
pub use tokio::sync::mpsc;

pub use gadget_core::call::{CallError, CallReport, FailureKind, GadgetSpec, Outcome, OutcomeKind};
pub use gadget_core::ledger::CallEvent;
pub use gadget_core::limits::OwnTimeout;
pub use gadget_core::params::ParamSchema;
pub use gadget_core::schedule::DependencyPolicy;
pub use gadget_core::tool::{BoxFuture, Tool, ToolCall, ToolCard, Toolbox};
pub use gadget_exec::{
    AfterExecution, Answer, BeforeExecution, CallView, Controller, ExecConfig, ExecEvent, Executor,
    Failure, HumanInput, ResponseSummary,
};

pub type Behaviour = dyn Fn(ToolCall) -> BoxFuture<'static, CallReport> + Send + Sync;

pub struct Fake {
    pub card: ToolCard,
    pub instant: bool,
    pub behaviour: Box<Behaviour>,
}

impl Tool for Fake {
    fn card(&self) -> &ToolCard {
        &self.card
    }
    fn run(&self, call: ToolCall) -> BoxFuture<'_, CallReport> {
        (self.behaviour)(call)
    }
    fn is_instant(&self) -> bool {
        self.instant
    }
}

pub fn spec(name: &str, schema: &str) -> GadgetSpec {
    GadgetSpec {
        name: name.into(),
        label: None,
        description: format!("The fake {name}."),
        parameters_schema: schema.into(),
        examples: Vec::new(),
        timeout_ms: None,
        exclusive: false,
        max_concurrent: None,
    }
}

pub fn fake(
    spec: GadgetSpec,
    behaviour: impl Fn(ToolCall) -> BoxFuture<'static, CallReport> + Send + Sync + 'static,
) -> Arc<dyn Tool> {
    let schema = ParamSchema::compile(&spec.parameters_schema).unwrap();
    Arc::new(Fake {
        card: ToolCard::new(spec, schema, OwnTimeout::Default(Duration::from_secs(30))),
        instant: false,
        behaviour: Box::new(behaviour),
    })
}

pub fn report(outcome: Result<Outcome, CallError>, cost: f64) -> CallReport {
    CallReport {
        cost,
        ..CallReport::of(outcome, Duration::from_millis(1))
    }
}

pub fn result(text: impl Into<String>) -> Result<Outcome, CallError> {
    Ok(Outcome::Result {
        result: text.into(),
        details: None,
        rich: None,
    })
}

/// Echo: returns its `text` after `delay_ms`.
pub fn echo() -> Arc<dyn Tool> {
    let schema = r#"{"type":"object","properties":{"text":{"type":"string"},"delay_ms":{"type":"integer","default":0}},"required":["text"]}"#;
    fake(spec("Echo", schema), |call| {
        Box::pin(async move {
            let delay = call.params["delay_ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            report(
                result(call.params["text"].as_str().unwrap_or_default()),
                0.0,
            )
        })
    })
}

/// Fail: reports a cost, then fails.
pub fn fail() -> Arc<dyn Tool> {
    fake(spec("Fail", ""), |_| {
        Box::pin(async move {
            report(
                Err(CallError::Failed {
                    message: "it broke".into(),
                }),
                0.25,
            )
        })
    })
}

pub fn toolbox(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Arc<Toolbox> {
    let mut toolbox = Toolbox::new();
    for tool in tools {
        toolbox.insert(tool).map_err(|_| "duplicate").unwrap();
    }
    Arc::new(toolbox)
}

/// Runs `response` (fed whole) and collects the events.
pub async fn run(executor: &mut Executor, response: &str) -> (Vec<ExecEvent>, ResponseSummary) {
    let (tx, rx) = mpsc::channel(4);
    tx.send(response.to_string()).await.unwrap();
    drop(tx);
    let mut events = Vec::new();
    let summary = executor.run_response(rx, |e| events.push(e)).await;
    (events, summary)
}

pub fn finished(
    events: &[ExecEvent],
    wanted: &str,
) -> (OutcomeKind, Option<String>, Option<Failure>) {
    events
        .iter()
        .find_map(|e| match e {
            ExecEvent::CallFinished {
                id,
                outcome,
                result,
                error,
                ..
            } if id == wanted => Some((*outcome, result.clone(), error.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no call_finished for {wanted}: {events:#?}"))
}

pub fn block(name: &str, id: &str, deps: &str, args: &[(&str, &str)]) -> String {
    let header = if deps.is_empty() {
        format!("!!!GADGET_START:{name}:{id}\n")
    } else {
        format!("!!!GADGET_START:{name}:{id}:{deps}\n")
    };
    let args: String = args
        .iter()
        .map(|(k, v)| format!("!!!ARG:{k}\n{v}\n"))
        .collect();
    format!("{header}{args}!!!GADGET_END\n")
}

/// Answers every question with "yes to" it.
pub struct Answers;

impl HumanInput for Answers {
    fn ask<'a>(&'a self, _call_id: &'a str, _gadget: &'a str, question: &'a str) -> Answer<'a> {
        Box::pin(async move { Ok(format!("yes to {question}")) })
    }
}
