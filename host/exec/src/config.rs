//! How responses are executed, and what a caller plugs in: a controller
//! that may skip, recover or stop calls, and who answers a gadget's
//! question.

use std::collections::HashMap;

use serde_json::Value;

use gadget_core::render::Markers;
use gadget_core::schedule::{DependencyPolicy, ScheduleConfig};
use gadget_core::viewer;

use crate::{Failure, Timeouts};

/// llmist's error when a gadget asks a person and nobody can answer.
pub const NO_HUMAN_INPUT: &str =
    "Human input required but not available (stdin is not interactive)";

/// How responses are executed.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    pub schedule: ScheduleConfig,
    /// What a call whose dependency failed gets, unless its gadget has its
    /// own policy or the controller decides.
    pub dependency_policy: DependencyPolicy,
    /// Per gadget (case-insensitive name), overriding `dependency_policy`.
    pub gadget_policies: HashMap<String, DependencyPolicy>,
    pub markers: Markers,
    pub timeouts: Timeouts,
    /// Characters a result may have before it is stored for
    /// `GadgetOutputViewer` instead; `None` turns output limiting (and the
    /// viewer) off. Default: 15% of a 128k-token window at 4 characters
    /// per token, 76,800.
    pub output_limit: Option<usize>,
    /// Text outside blocks as it arrives (several `Text` events per
    /// segment, concatenating to it) rather than one event per segment
    /// once it has ended: for people watching. Off by default, so event
    /// streams (`--json`, the history) keep llmist's shape.
    pub text_deltas: bool,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            schedule: ScheduleConfig::default(),
            dependency_policy: DependencyPolicy::Skip,
            gadget_policies: HashMap::new(),
            markers: Markers::default(),
            timeouts: Timeouts::default(),
            output_limit: Some(viewer::char_limit(
                viewer::DEFAULT_CONTEXT_WINDOW_TOKENS,
                viewer::DEFAULT_OUTPUT_LIMIT_PERCENT,
            )),
            text_deltas: false,
        }
    }
}

/// A call, as controllers see it.
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    pub id: &'a str,
    pub gadget: &'a str,
    pub dependencies: &'a [String],
    /// The validated parameters; before validation (a dependency was
    /// skipped), what could be parsed of them, or an empty object.
    pub parameters: &'a Value,
}

/// A controller's decision before a call runs.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeExecution {
    Proceed,
    /// Do not run it; the model sees this result instead.
    Skip {
        result: String,
    },
}

/// A controller's decision after a call ran.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterExecution {
    Keep,
    /// Turn a failure into this result (dependents then run).
    Recover {
        result: String,
    },
}

/// Steers execution (the seeds' controllers). Every method has a default
/// that changes nothing. Called on the executor's task: keep them quick.
pub trait Controller: Send + Sync {
    /// Before a call runs (its parameters are valid).
    fn before_execution(&self, _call: &CallView<'_>) -> BeforeExecution {
        BeforeExecution::Proceed
    }

    /// After a call ended, with the text the model would see.
    fn after_execution(
        &self,
        _call: &CallView<'_>,
        _outcome: &Result<String, Failure>,
    ) -> AfterExecution {
        AfterExecution::Keep
    }

    /// A dependency of `call` failed; `None` leaves it to the configured
    /// policy.
    fn on_dependency_skipped(
        &self,
        _call: &CallView<'_>,
        _failed_dependency: &str,
        _error: &str,
    ) -> Option<DependencyPolicy> {
        None
    }

    /// With stop-on-error on, whether this failure stops the response
    /// (`true`, the default) or is let pass.
    fn stop_on(&self, _call: &CallView<'_>, _failure: &Failure) -> bool {
        true
    }
}

/// The controller that changes nothing.
pub struct NoController;
impl Controller for NoController {}

// Ask-human's handler is the Tool trait's (a tool may ask a person too).
pub use gadget_core::tool::{Answer, HumanInput, Replies};
