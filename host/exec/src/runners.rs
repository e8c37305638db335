//! Where started calls run: a few long-lived runner tasks (one per core),
//! each driving many calls at once, instead of a task spawned per call.
//!
//! A spawned task per call cost as much as a small gadget's whole call
//! (allocating and scheduling the task, waking a parked worker thread for
//! it, joining it), and every start and end went through the executor's
//! one task. A runner takes calls in batches from its queue and hands back
//! every call that ended in one batch too. Calls still overlap freely: a
//! runner polls all of its calls, and a busy gadget yields to the others
//! every few milliseconds (the runtime's epoch yield). Each new call goes
//! to the runner with the fewest calls in flight.
//!
//! A panic in a call (a bug in a tool, never a gadget's doing: gadgets are
//! contained by the runtime) ends that call with a `crashed` failure; the
//! other calls of its runner go on. Dropping the [`Runners`] (a response
//! abandoned midway) drops the calls in flight, which cancels them.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;

use gadget_core::call::FailureKind;
use gadget_core::events::Failure;
use gadget_core::schedule::CallIx;

use crate::Ended;

/// A started call: its index and what runs it.
pub(crate) type Job = (CallIx, Pin<Box<dyn Future<Output = Ended> + Send>>);

struct Runner {
    jobs: mpsc::UnboundedSender<Job>,
    in_flight: Arc<AtomicUsize>,
}

/// The runners of one response.
pub(crate) struct Runners {
    runners: Vec<Runner>,
    ended: mpsc::UnboundedReceiver<Ended>,
    /// Calls that ended without reaching a runner.
    refused: Vec<Ended>,
    in_flight: usize,
}

impl Runners {
    /// One runner per core the machine has (at least one).
    pub(crate) fn start() -> Runners {
        let count = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (ended_tx, ended) = mpsc::unbounded_channel();
        let runners = (0..count)
            .map(|_| {
                let (jobs, queue) = mpsc::unbounded_channel();
                let in_flight = Arc::new(AtomicUsize::new(0));
                tokio::spawn(run(queue, ended_tx.clone(), in_flight.clone()));
                Runner { jobs, in_flight }
            })
            .collect();
        Runners {
            runners,
            ended,
            refused: Vec::new(),
            in_flight: 0,
        }
    }

    /// Calls started and not yet ended (taken back with [`Runners::next`]).
    pub(crate) fn is_empty(&self) -> bool {
        self.in_flight == 0
    }

    /// Starts a call on the least busy runner.
    pub(crate) fn spawn(
        &mut self,
        call: CallIx,
        run: impl Future<Output = Ended> + Send + 'static,
    ) {
        let runner = self
            .runners
            .iter()
            .min_by_key(|r| r.in_flight.load(Ordering::Relaxed))
            .expect("at least one runner");
        runner.in_flight.fetch_add(1, Ordering::Relaxed);
        self.in_flight += 1;
        if let Err(mpsc::error::SendError((call, _))) = runner.jobs.send((call, Box::pin(run))) {
            // The runner is gone (the async runtime is shutting down): the
            // call ends at once rather than never.
            self.refused.push(failed(
                call,
                "the call could not be started: the host is shutting down".into(),
            ));
        }
    }

    /// The next call to end (waits for one).
    pub(crate) async fn next(&mut self) -> Option<Ended> {
        let ended = match self.refused.pop() {
            Some(ended) => ended,
            None => self.ended.recv().await?,
        };
        self.in_flight -= 1;
        Some(ended)
    }

    /// A call that has already ended, if any (no wait).
    pub(crate) fn try_next(&mut self) -> Option<Ended> {
        let ended = match self.refused.pop() {
            Some(ended) => ended,
            None => self.ended.try_recv().ok()?,
        };
        self.in_flight -= 1;
        Some(ended)
    }
}

/// A call that ended in a failure of the host's.
fn failed(call: CallIx, message: String) -> Ended {
    Ended {
        call,
        outcome: Err(Failure::new(
            FailureKind::Crashed,
            format!("Error: {message}"),
        )),
        details: None,
        cost: 0.0,
        duration: std::time::Duration::ZERO,
    }
}

/// One runner: takes calls from its queue, drives them all, and sends
/// each one's end back, until the executor drops its queue.
async fn run(
    mut queue: mpsc::UnboundedReceiver<Job>,
    ended: mpsc::UnboundedSender<Ended>,
    in_flight: Arc<AtomicUsize>,
) {
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            job = queue.recv() => match job {
                Some((call, future)) => running.push(contain(call, future)),
                None => break,
            },
            Some(done) = running.next(), if !running.is_empty() => {
                in_flight.fetch_sub(1, Ordering::Relaxed);
                // The executor may be gone (an abandoned response).
                let _ = ended.send(done);
            }
        }
    }
}

/// A call whose panic becomes its `crashed` failure.
async fn contain(call: CallIx, future: Pin<Box<dyn Future<Output = Ended> + Send>>) -> Ended {
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(ended) => ended,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            failed(
                call,
                format!("the host's call failed with a bug: {message}"),
            )
        }
    }
}
