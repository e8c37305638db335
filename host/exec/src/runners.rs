//! Where started calls run: a few long-lived runner tasks (one per core),
//! each driving many calls at once, instead of a task spawned per call.
//!
//! A spawned task per call cost as much as a small gadget's whole call
//! (allocating and scheduling the task, waking a parked worker thread for
//! it, joining it), and every start and end went through the executor's
//! one task. So calls travel in batches both ways: the executor hands each
//! runner the calls it started in one turn as one message, and a runner
//! hands back every call that ended in one of its turns as one message
//! (one wake-up of the other side per batch, not per call).
//!
//! A runner polls each new call once as it takes it: a small gadget's whole
//! call (instantiate, run, return) ends in that poll. Only a call that must
//! wait (a sleep, HTTP, its epoch yield) joins the runner's set of running
//! calls, which polls it again when it is woken; a busy gadget yields to
//! the others every few milliseconds (the runtime's epoch yield). A runner
//! starts at most [`STARTS_PER_TURN`] calls, for at most [`TURN_TIME`],
//! before it reports what ended and lets the executor run, so the executor can start successors while
//! the runners still have work. Each new call goes to the runner with the
//! fewest calls in flight.
//!
//! A panic in a call (a bug in a tool, never a gadget's doing: gadgets are
//! contained by the runtime) ends that call with a `crashed` failure; the
//! other calls of its runner go on. Dropping the [`Runners`] (a response
//! abandoned midway) drops the calls in flight, which cancels them.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::{FutureExt, Stream};
use tokio::sync::mpsc;

use gadget_core::call::FailureKind;
use gadget_core::events::Failure;
use gadget_core::schedule::CallIx;

use crate::state::Ended;

/// A started call: its index and what runs it.
pub(crate) type Job = (CallIx, Pin<Box<dyn Future<Output = Ended> + Send>>);

/// Calls a runner starts in one turn before it reports the calls that
/// ended and gives way. A small gadget's call takes about 10 µs, so a turn
/// reports ends at most about 0.2 ms late; then the executor gets the
/// chance to settle them and start what waited on them (with the
/// parallelism limit reached, nothing else starts until it has). Fewer
/// means more turns, each a message, a wake-up and a task switch (4 cost
/// about 5% of the throughput of 10,000 small calls); many more, and the
/// executor is held back long enough for runners to run dry.
const STARTS_PER_TURN: usize = 16;

/// How long a turn may go on starting calls. A first poll can run as long
/// as the runtime's yield interval (2 ms) when a gadget computes, so
/// sixteen of them could hold the end of a quick call of the same turn
/// back for some 30 ms; past this, the turn reports what ended and the
/// rest wait for the next turn.
const TURN_TIME: Duration = Duration::from_micros(500);

struct Runner {
    jobs: mpsc::UnboundedSender<Vec<Job>>,
    /// Calls this runner has taken and not yet reported as ended.
    in_flight: Arc<AtomicUsize>,
    /// Calls started in this turn of the executor, sent by [`Runners::flush`].
    unsent: Vec<Job>,
}

/// The runners of one response.
pub(crate) struct Runners {
    runners: Vec<Runner>,
    ended: mpsc::UnboundedReceiver<Vec<Ended>>,
    /// Ends received and not yet taken, and calls that ended without
    /// reaching a runner.
    received: VecDeque<Ended>,
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
                Runner {
                    jobs,
                    in_flight,
                    unsent: Vec::new(),
                }
            })
            .collect();
        Runners {
            runners,
            ended,
            received: VecDeque::new(),
            in_flight: 0,
        }
    }

    /// Calls started and not yet ended (taken back with [`Runners::next`]).
    pub(crate) fn is_empty(&self) -> bool {
        self.in_flight == 0
    }

    /// Starts a call on the least busy runner, once [`Runners::flush`]
    /// sends this turn's calls.
    pub(crate) fn spawn(
        &mut self,
        call: CallIx,
        run: impl Future<Output = Ended> + Send + 'static,
    ) {
        let runner = self
            .runners
            .iter_mut()
            .min_by_key(|r| r.in_flight.load(Ordering::Relaxed) + r.unsent.len())
            .expect("at least one runner");
        runner.unsent.push((call, Box::pin(run)));
        self.in_flight += 1;
    }

    /// Sends each runner the calls started since the last flush, as one
    /// message (one wake-up of it).
    pub(crate) fn flush(&mut self) {
        for runner in &mut self.runners {
            if runner.unsent.is_empty() {
                continue;
            }
            let jobs = std::mem::take(&mut runner.unsent);
            runner.in_flight.fetch_add(jobs.len(), Ordering::Relaxed);
            if let Err(mpsc::error::SendError(jobs)) = runner.jobs.send(jobs) {
                // The runner is gone (the async runtime is shutting down):
                // the calls end at once rather than never.
                for (call, _) in jobs {
                    self.received.push_back(failed(
                        call,
                        "the call could not be started: the host is shutting down".into(),
                    ));
                }
            }
        }
    }

    /// The next call to end (waits for one).
    pub(crate) async fn next(&mut self) -> Option<Ended> {
        if self.received.is_empty() {
            let batch = self.ended.recv().await?;
            self.received.extend(batch);
        }
        self.take()
    }

    /// A call that has already ended, if any (no wait).
    pub(crate) fn try_next(&mut self) -> Option<Ended> {
        if self.received.is_empty() {
            let batch = self.ended.try_recv().ok()?;
            self.received.extend(batch);
        }
        self.take()
    }

    fn take(&mut self) -> Option<Ended> {
        let ended = self.received.pop_front()?;
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
        images: Vec::new(),
        cost: 0.0,
        duration: Duration::ZERO,
    }
}

/// One runner: takes calls from its queue, drives them all, and sends the
/// ends of each turn back together, until the executor drops its queue.
async fn run(
    mut queue: mpsc::UnboundedReceiver<Vec<Job>>,
    ended: mpsc::UnboundedSender<Vec<Ended>>,
    in_flight: Arc<AtomicUsize>,
) {
    let mut running = FuturesUnordered::new();
    // Calls taken from the queue and not yet polled.
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut done: Vec<Ended> = Vec::new();
    loop {
        if waiting.is_empty() {
            // Nothing to start: wait for new calls or for a running call
            // to end.
            tokio::select! {
                jobs = queue.recv() => match jobs {
                    Some(jobs) => waiting.extend(jobs),
                    None => break,
                },
                Some(end) = running.next(), if !running.is_empty() => done.push(end),
            }
        }
        loop {
            match queue.try_recv() {
                Ok(jobs) => waiting.extend(jobs),
                Err(mpsc::error::TryRecvError::Empty) => break,
                // The response was abandoned: calls not started yet never
                // start, and those running are dropped (cancelled).
                Err(mpsc::error::TryRecvError::Disconnected) => return,
            }
        }
        let turn = Instant::now();
        for _ in 0..STARTS_PER_TURN {
            let Some((call, mut future)) = waiting.pop_front() else {
                break;
            };
            match first_poll(call, &mut future).await {
                Some(end) => done.push(end),
                None => running.push(contain(call, future)),
            }
            if turn.elapsed() >= TURN_TIME {
                break;
            }
        }
        // Running calls that have ended by now (no wait).
        while let Some(end) = ready_end(&mut running).await {
            done.push(end);
        }
        if !done.is_empty() {
            in_flight.fetch_sub(done.len(), Ordering::Relaxed);
            // The executor may be gone (an abandoned response).
            let _ = ended.send(std::mem::take(&mut done));
        }
        if !waiting.is_empty() {
            // Let the executor (and the other tasks) run before the next
            // starts: they may be waiting for the ends just sent.
            tokio::task::yield_now().await;
        }
    }
}

/// Polls a call once (its panic is its `crashed` failure): `Some` when it
/// ended in that poll.
async fn first_poll(
    call: CallIx,
    future: &mut Pin<Box<dyn Future<Output = Ended> + Send>>,
) -> Option<Ended> {
    std::future::poll_fn(|cx| {
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
        Poll::Ready(match polled {
            Ok(Poll::Ready(done)) => Some(done),
            Ok(Poll::Pending) => None,
            Err(panic) => Some(panicked(call, panic)),
        })
    })
    .await
}

/// The next running call that has already ended, if one has. Polled with
/// the runner's own waker, so a call still waiting wakes the runner later.
async fn ready_end<S: Stream<Item = Ended> + Unpin>(running: &mut S) -> Option<Ended> {
    std::future::poll_fn(|cx| {
        Poll::Ready(match running.poll_next_unpin(cx) {
            Poll::Ready(end) => end,
            Poll::Pending => None,
        })
    })
    .await
}

/// A call whose panic becomes its `crashed` failure.
async fn contain(call: CallIx, future: Pin<Box<dyn Future<Output = Ended> + Send>>) -> Ended {
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(ended) => ended,
        Err(panic) => panicked(call, panic),
    }
}

/// The `crashed` failure of a call that panicked.
fn panicked(call: CallIx, panic: Box<dyn std::any::Any + Send>) -> Ended {
    failed(call, crate::call::bug(panic.as_ref()))
}
