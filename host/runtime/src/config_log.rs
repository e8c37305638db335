//! The config keys a call reads, told to its observer as
//! [`Effect::Config`]: granted config reaches a gadget as environment
//! variables, and `wasi:cli/environment` hands them over all at once, so
//! each read is told with every key it returned (never a value).

use gadget_core::effect::Effect;
use gadget_core::ledger::CallEvent;
use wasmtime::component::Linker;
use wasmtime_wasi::cli::WasiCliView as _;
use wasmtime_wasi::p2::bindings::cli::environment::Host as _;

use crate::CallState;

/// The interface shadowed: the version wasmtime-wasi links.
const ENVIRONMENT_INTERFACE: &str = "wasi:cli/environment@0.2.12";

/// The most config reads one call tells: a guest reads its environment
/// once at start; a loop reading it is told this many times, no more.
pub const MAX_CONFIG_EFFECTS_PER_CALL: u32 = 16;

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut environment = linker.instance(ENVIRONMENT_INTERFACE)?;
    environment.func_wrap("get-environment", |mut store, (): ()| {
        let state = store.data_mut();
        let variables = state.cli().get_environment()?;
        if let Some(observer) = state.http.observer.clone()
            && state.config_reads < MAX_CONFIG_EFFECTS_PER_CALL
        {
            state.config_reads += 1;
            let keys = variables.iter().map(|(key, _)| key.clone()).collect();
            observer(&CallEvent::Effect(Effect::Config { keys }));
        }
        Ok((variables,))
    })?;
    linker.allow_shadowing(false);
    Ok(())
}
