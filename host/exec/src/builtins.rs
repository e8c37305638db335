//! The tools every executor has of its own: the output viewer, reading
//! the stored results output limiting keeps.

use std::sync::{Arc, Mutex};

use gadget_core::tool::{Tool, Toolbox, Tools};
use gadget_core::viewer::{OutputLimiter, OutputViewer};

use crate::ExecConfig;

/// The tools of the executor's own under `config`: the output viewer when
/// output limiting is on, reading `limiter`'s store.
pub(crate) fn builtins(limiter: Option<&Arc<Mutex<OutputLimiter>>>) -> Toolbox {
    let mut builtins = Toolbox::new();
    if let Some(limiter) = limiter {
        let viewer: Arc<dyn Tool> = Arc::new(OutputViewer::new(limiter.clone()));
        let _ = builtins.insert(viewer);
    }
    builtins
}

/// Every tool a response can call under `config`: `tools`, then the
/// executor's own (the output viewer when output limiting is on). What
/// the prompt documents; no executor needs to exist for it.
pub fn callable_tools(tools: &dyn Tools, config: &ExecConfig) -> Vec<Arc<dyn Tool>> {
    let limiter = config
        .output_limit
        .map(|limit| Arc::new(Mutex::new(OutputLimiter::new(limit))));
    let mut all = tools.all();
    all.extend(builtins(limiter.as_ref()).all());
    all
}
