//! `gadget prompt`: the instruction text a model needs, rendered from the
//! descriptions of the tools a response could call (no executor is built
//! for it).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result};

use gadget_core::parser::ParserBuilder;
use gadget_core::render;
use gadget_core::tool::docs;
use gadget_exec::{ExecConfig, callable_tools};

use super::run::{LimitOptions, MarkerOptions};

/// Options of `gadget prompt`.
#[derive(Debug, clap::Args)]
pub struct PromptOptions {
    #[command(flatten)]
    markers: MarkerOptions,
    #[command(flatten)]
    limits: LimitOptions,
}

/// `gadget prompt`: the instruction text for the loaded gadgets.
pub fn prompt(
    registry: Arc<dyn gadget_core::tool::Tools>,
    options: &PromptOptions,
) -> Result<ExitCode> {
    let markers = options.markers.markers();
    ParserBuilder::new()
        .start_marker(&markers.start)
        .end_marker(&markers.end)
        .arg_marker(&markers.arg)
        .build()
        .context("invalid markers")?;
    let config = ExecConfig {
        output_limit: options.limits.char_limit(None),
        ..ExecConfig::default()
    };
    let tools = callable_tools(&*registry, &config);
    let text = render::prompt(&docs(&tools), &markers);
    let mut out = std::io::stdout().lock();
    out.write_all(super::safe::safe(&text).as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
