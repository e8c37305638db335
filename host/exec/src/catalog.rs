//! The one call path's second arm: a request to a plugin's catalog (a
//! resource read, a prompt, a completion) runs plugin code as a tool call
//! does, so it passes the same ordered layers ([`crate::layers`]): the
//! span, the journal (its own record kinds, `resource_read`, `prompt`,
//! `completion`, then the doors it used and `call_finished`), the rate
//! limit, and the operator's rules and approvals, with the scope's
//! caller. No front end calls [`Catalog::run`] but through [`run_catalog`].
//!
//! What the rules and limits see: the request's own name (`resource:URI`,
//! `prompt:NAME`, a completion's `prompt:NAME` or `resource:TEMPLATE`)
//! and its parameters ([`CatalogOp::params`]); a rate limit naming any of
//! the plugin's gadgets counts the plugin's catalog requests as well, so a
//! limit on a plugin cannot be passed by reading its resources instead.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;

use gadget_core::approval::Admission;
use gadget_core::call::{CallError, CallReport, Outcome};
use gadget_core::catalog::{Catalog, CatalogAnswer, CatalogCall, CatalogError};

use crate::call::bug;
use crate::layers::{Admit, CatalogSubject, Layers, Subject};

/// Runs one catalog request inside its scope's layers.
pub async fn run_catalog(
    catalog: &dyn Catalog,
    call: CatalogCall,
) -> Result<CatalogAnswer, CatalogError> {
    let CatalogCall {
        id,
        op,
        signal,
        observer,
        scope,
    } = call;
    let name = op.name();
    let params = Arc::new(op.params());
    let admission = match &scope.approvals {
        Some(approvals) if !approvals.rules.is_empty() => {
            approvals
                .rules
                .check_for(&name, &params, None, &scope.client)
        }
        _ => Admission::Run,
    };
    let subject = CatalogSubject {
        kind: op.kind(),
        name: &name,
        gadgets: catalog.gadgets(),
        origin: catalog.origin(),
    };
    let subject = Subject::Catalog(&subject);
    let layers = Layers::open(subject, &scope, &id, admission);
    let observer = layers.observe(observer);
    let refusal = match layers
        .admit(subject, &id, &params, signal.as_ref(), &observer)
        .await
    {
        Admit::Run => None,
        Admit::Refused(reason) => Some(CallError::NotApproved {
            gadget: name.clone(),
            reason,
        }),
        Admit::Limited(limited) => Some(CallError::RateLimited {
            gadget: name.clone(),
            reason: limited.reason(),
            retry_after_ms: limited.retry_after.as_millis() as u64,
        }),
        // A catalog request has no way to come back with a person's
        // answer to an approval (its result cannot ask for one): the
        // rules that ask one refuse it, saying so.
        Admit::Deferred(_) => Some(CallError::NotApproved {
            gadget: name.clone(),
            reason: "the operator's rules ask a person to approve it, and this client can only be asked through a tool call's result; approve it in the policy or call a gadget instead".into(),
        }),
    };
    if let Some(error) = refusal {
        let reason = match &error {
            CallError::NotApproved { reason, .. } | CallError::RateLimited { reason, .. } => {
                reason.clone()
            }
            other => other.to_string(),
        };
        layers.finished(&CallReport::of(Err(error), Duration::ZERO), true);
        return Err(CatalogError::NotRun {
            request: name,
            reason,
        });
    }
    layers.started(&params, None);
    let scope = layers.scope(scope);
    let started = Instant::now();
    let run = catalog.run(CatalogCall {
        id,
        op,
        signal,
        observer,
        scope,
    });
    let answer = match AssertUnwindSafe(run).catch_unwind().await {
        Ok(answer) => answer,
        Err(panic) => Err(CatalogError::Failed(CallError::Crashed {
            gadget: name.clone(),
            reason: bug(panic.as_ref()),
        })),
    };
    let outcome = match &answer {
        Ok(_) => Ok(Outcome::text("")),
        Err(CatalogError::Failed(error)) => Err(error.clone()),
        Err(other) => Err(CallError::Failed {
            message: other.to_string(),
        }),
    };
    layers.finished(&CallReport::of(outcome, started.elapsed()), false);
    answer
}
