//! gadget-host inside a Rust program, end to end:
//!
//! 1. load the plugins of a directory;
//! 2. feed a model's response in small chunks, as a streaming client
//!    would, while the calls run;
//! 3. observe every event;
//! 4. steer with a controller: skip a call before it runs (with a
//!    synthetic result), recover a failure after it ran (with a fallback),
//!    decide what a call whose dependency failed gets;
//! 5. read the summary and the history the model is shown next.
//!
//! Run it from the repository root: `cargo run -p example-embed`
//! (`-- DIR` for another plugin directory).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use gadget_host::executor::{
    AfterExecution, BeforeExecution, CallView, Controller, ExecConfig, ExecEvent, Executor, Failure,
};
use gadget_host::loader::{self, LoadOptions, NoProgress};
use gadget_host::render::{self, Markers};
use gadget_host::runtime::{Runtime, RuntimeConfig};
use gadget_host::schedule::DependencyPolicy;

/// What the "model" wrote.
const RESPONSE: &str = "\
I'll check the dates, wait a little, and do the sums.
!!!GADGET_START:DaysBetween:span
!!!ARG:from
2023-02-29
!!!ARG:to
2024-01-01
!!!GADGET_END
!!!GADGET_START:Sleep:nap
!!!ARG:ms
60000
!!!GADGET_END
!!!GADGET_START:Calculator:ratio
!!!ARG:operation
divide
!!!ARG:a
1
!!!ARG:b
0
!!!GADGET_END
!!!GADGET_START:Calculator:total:ratio
!!!ARG:operation
add
!!!ARG:a
2
!!!ARG:b
3
!!!GADGET_END
Done.
";

/// The steering: every decision the seeds' controllers can make.
struct Steering;

impl Controller for Steering {
    /// Long waits are not worth it here: answer for the gadget instead.
    fn before_execution(&self, call: &CallView<'_>) -> BeforeExecution {
        match call.parameters["ms"].as_u64() {
            Some(ms) if call.gadget == "Sleep" && ms > 1_000 => BeforeExecution::Skip {
                result: format!("not waiting {ms} ms in a demo"),
            },
            _ => BeforeExecution::Proceed,
        }
    }

    /// A date the calendar does not have is not fatal for this program.
    fn after_execution(
        &self,
        call: &CallView<'_>,
        outcome: &Result<String, Failure>,
    ) -> AfterExecution {
        match outcome {
            Err(failure) if call.gadget == "DaysBetween" => AfterExecution::Recover {
                result: format!("unknown ({})", failure.message),
            },
            _ => AfterExecution::Keep,
        }
    }

    /// A sum whose input failed runs anyway; anything else is skipped.
    fn on_dependency_skipped(
        &self,
        call: &CallView<'_>,
        failed_dependency: &str,
        _error: &str,
    ) -> Option<DependencyPolicy> {
        println!(
            "  (controller: {} lost its dependency {failed_dependency})",
            call.id
        );
        (call.gadget == "Calculator").then_some(DependencyPolicy::ExecuteAnyway)
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("plugins"));
    let runtime = Arc::new(Runtime::new(&RuntimeConfig::default())?);
    let (registry, errors) = loader::load_dirs(
        runtime,
        std::slice::from_ref(&dir),
        &LoadOptions::default(),
        Arc::new(NoProgress),
    )
    .await;
    if !errors.is_empty() {
        bail!("loading {}: {errors:?}", dir.display());
    }
    println!(
        "loaded {} gadgets from {}",
        registry.gadgets().count(),
        dir.display()
    );

    let mut executor = Executor::new(Arc::new(registry), ExecConfig::default())
        .context("building the executor")?
        .with_controller(Arc::new(Steering));

    // The "model": 7 bytes every millisecond.
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        for piece in RESPONSE.as_bytes().chunks(7) {
            let piece = String::from_utf8_lossy(piece).into_owned();
            if tx.send(piece).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });

    let summary = executor
        .run_response(rx, |event| match &event {
            ExecEvent::CallStarted { id, gadget, .. } => println!("started  {gadget} ({id})"),
            ExecEvent::CallFinished {
                id,
                outcome,
                result,
                error,
                ..
            } => match (result, error) {
                (Some(result), _) => println!("finished {id} [{outcome}]: {result}"),
                (_, Some(error)) => println!("failed   {id} [{}]: {}", error.kind, error.message),
                _ => {}
            },
            ExecEvent::CallSkipped { id, reason, .. } => println!("skipped  {id}: {reason}"),
            _ => {}
        })
        .await;
    println!(
        "\n{} calls: {} succeeded, {} failed, {} skipped",
        summary.calls, summary.succeeded, summary.failed, summary.skipped
    );

    println!("\nThe model is shown next:");
    for message in render::history(executor.history(), &Markers::default()) {
        println!(
            "[{}] {}",
            message.role,
            message.content.replace('\n', "\n    ")
        );
    }
    Ok(())
}
