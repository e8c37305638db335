//! The config keys a call reads, told to its observer as
//! [`Effect::Config`]: granted config reaches a gadget as environment
//! variables, and `wasi:cli/environment` hands them over all at once, so
//! each read is told with every key it returned (never a value).

use gadget_core::effect::Effect;
use gadget_core::ledger::{CallEvent, CallObserver};
use wasmtime::component::Linker;
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::WasiCliView as _;
use wasmtime_wasi::p2::bindings::cli::environment::Host as _;

/// The interface shadowed: the version wasmtime-wasi links.
const ENVIRONMENT_INTERFACE: &str = "wasi:cli/environment@0.2.12";

/// The most config reads one call tells: a guest reads its environment
/// once at start; a loop reading it is told this many times, no more.
pub const MAX_CONFIG_EFFECTS_PER_CALL: u32 = 16;

/// What the shadowed interface sees of a call's store: who hears of a
/// read, and how many reads were told so far.
pub(crate) struct ConfigReads<'a> {
    pub observer: Option<&'a CallObserver>,
    pub told: &'a mut u32,
}

/// Links `get-environment` over wasmtime-wasi's, telling each read to the
/// observer `reads` returns from the store.
pub(crate) fn add_to_linker<T: WasiView + 'static>(
    linker: &mut Linker<T>,
    reads: fn(&mut T) -> ConfigReads<'_>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut environment = linker.instance(ENVIRONMENT_INTERFACE)?;
    environment.func_wrap("get-environment", move |mut store, (): ()| {
        let variables = store.data_mut().cli().get_environment()?;
        let reads = reads(store.data_mut());
        if let Some(observer) = reads.observer
            && *reads.told < MAX_CONFIG_EFFECTS_PER_CALL
        {
            *reads.told += 1;
            let keys = variables.iter().map(|(key, _)| key.clone()).collect();
            observer(&CallEvent::Effect(Effect::Config { keys }));
        }
        Ok((variables,))
    })?;
    linker.allow_shadowing(false);
    Ok(())
}
