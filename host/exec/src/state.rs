//! What the executor keeps of each call: the call and its tool, how it
//! ended, and what a running call reports.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use gadget_core::call::OutcomeKind;
use gadget_core::ledger::CallEvent;
use gadget_core::parser::GadgetCall;
use gadget_core::schedule::CallIx;
use gadget_core::tool::Tool;

use crate::{CallView, Failure};

/// One call of the session, as the executor knows it.
pub(crate) struct Entry {
    pub(crate) call: GadgetCall,
    /// The tool the call names, when there is one.
    pub(crate) tool: Option<Arc<dyn Tool>>,
    /// Validated parameters, once known (shared with the running call).
    pub(crate) params: Option<Arc<Value>>,
    /// It started, or ended without starting (skipped, refused).
    pub(crate) settled: bool,
}

impl Entry {
    /// The validated parameters, or before validation what could be
    /// parsed of them (an empty object when nothing could).
    pub(crate) fn known_parameters(&self) -> Value {
        match &self.params {
            Some(params) => Value::clone(params),
            None => Value::Object(self.call.parameters().unwrap_or_default()),
        }
    }

    pub(crate) fn view<'a>(&'a self, params: &'a Value) -> CallView<'a> {
        CallView {
            id: &self.call.invocation_id,
            gadget: &self.call.name,
            dependencies: &self.call.dependencies,
            parameters: params,
        }
    }
}

/// How a call ended, before output limiting and controllers.
pub(crate) struct Ended {
    pub(crate) call: CallIx,
    /// The outcome kind and text the model sees, or the failure.
    pub(crate) outcome: Result<(OutcomeKind, String), Failure>,
    /// Structured data from the gadget for people and UIs.
    pub(crate) details: Option<Value>,
    /// The result's images (the model that takes them sees them).
    pub(crate) images: Vec<gadget_core::content::Media>,
    pub(crate) cost: f64,
    pub(crate) duration: Duration,
}

/// What a call left besides its outcome, for its `CallFinished` event.
pub(crate) struct Finished {
    pub(crate) stored_output: Option<String>,
    pub(crate) details: Option<Value>,
    pub(crate) images: Vec<gadget_core::content::Media>,
    pub(crate) cost: f64,
    pub(crate) duration: Duration,
}

impl Finished {
    /// A call that never ran (skipped, fallback, duplicate id).
    pub(crate) fn nothing() -> Finished {
        Finished {
            stored_output: None,
            details: None,
            images: Vec::new(),
            cost: 0.0,
            duration: Duration::ZERO,
        }
    }
}

/// What a running call reports while it runs.
pub(crate) enum Live {
    Call(CallEvent),
    Asking(String),
}

/// The dependency policy of a call whose dependency failed: the
/// controller's, else its gadget's, else the run's.
pub(crate) fn policy_for<'a>(
    config: &'a crate::ExecConfig,
    controller: &'a dyn crate::Controller,
    entries: &'a gadget_core::chunked::ChunkedVec<Entry>,
) -> impl FnMut(CallIx, &str, &str) -> gadget_core::schedule::DependencyPolicy + 'a {
    move |call, failed_dependency, error| {
        let entry = &entries[call];
        let params = entry.known_parameters();
        if let Some(policy) =
            controller.on_dependency_skipped(&entry.view(&params), failed_dependency, error)
        {
            return policy;
        }
        config
            .gadget_policies
            .get(&entry.call.name.to_lowercase())
            .unwrap_or(&config.dependency_policy)
            .clone()
    }
}
