//! The store of one entry into guest code ([`Runtime::new_store`]),
//! built whole from its request: the WASI context (config as the
//! environment, granted directories, captured stdio, the host's clocks),
//! the grants of each door, the limits, the abort signal, the observer,
//! the trace, the rules that hold at the HTTP door and the person who
//! answers. Nothing is patched in after the store is made.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::WasiCtxBuilder;

use gadget_core::ledger::Ledger;

use crate::deadline::YIELD_INTERVAL_TICKS;
use crate::limiter::CallLimiter;
use crate::runtime::{CallRequest, Runtime};
use crate::state::CallState;
use crate::{deadline, files, grants, http, llm, manifest, stdio};

impl Runtime {
    /// The store of one entry into guest code, built whole from its
    /// request: grants, limits, signal, observer, trace, the rules that
    /// hold at the HTTP door and the person who answers.
    pub(crate) fn new_store(&self, request: &CallRequest) -> Result<Store<CallState>, String> {
        let CallRequest {
            gadget,
            invocation_id,
            limits,
            signal,
            observer,
            grants,
            trace_parent,
            request_denials,
            human,
            ..
        } = request;
        let (signal, observer, grants) = (signal.clone(), observer.clone(), grants.as_ref());
        let stdout = stdio::CappedPipe::new(limits.stdio_bytes as usize);
        let stderr = stdio::CappedPipe::new(limits.stdio_bytes as usize);
        let wasi = wasi_ctx(grants, &stdout, &stderr)?;
        // What the HTTP policy and the filesystem guards refused, for the
        // call's log.
        let notes = crate::notes::Notes::default();
        let clock = self.clock().clone();
        let activity = clock.activity();
        let now = clock.now();
        let deadline = Instant::now() + limits.timeout;
        let timeout_ticks = (limits.timeout.as_millis() as u64).max(1);
        let grace_ticks = limits.grace.as_millis() as u64;
        let state = CallState {
            wasi,
            table: ResourceTable::new(),
            limiter: CallLimiter {
                memory_limit: limits.memory_bytes,
                memory_total: 0,
                memory_refused: false,
                budget: self.budget.clone(),
                budget_refused: false,
                table_elements: limits.table_elements,
                instances: limits.instances,
            },
            ledger: Ledger::new(limits.log_bytes, observer.clone())
                .with_redactor(grants.map(|g| g.redactor.clone())),
            stdout,
            stderr,
            gadget: gadget.to_string(),
            invocation_id: invocation_id.to_string(),
            time: deadline::CallTime {
                clock,
                started_epoch: now,
                deadline_epoch: now + timeout_ticks,
                deadline,
                hard_deadline_epoch: now + timeout_ticks + grace_ticks,
                grace_ticks,
                aborted: false,
                signal: signal.clone(),
                timed_out: false,
                pauses: deadline::Pauses::default(),
            },
            llm: grants
                .and_then(|g| g.grants.llm.clone())
                .map(|grant| llm::LlmAccess {
                    backend: self.llm_backend.get().cloned(),
                    grant,
                    spent: 0.0,
                }),
            http_ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
            config_reads: 0,
            human: human.clone(),
            ask_wait: limits.ask_wait,
            awaiting: None,
            files: files::CallFiles::new(
                grants.map_or(&[][..], |g| &g.grants.files[..]),
                notes.clone(),
                observer.clone(),
            ),
            http: http::HttpHooks {
                grants: grants.cloned(),
                requests: 0,
                deadline,
                signal,
                notes,
                observer,
                trace_parent: trace_parent.clone(),
                denials: request_denials.clone(),
            },
            _activity: activity,
        };
        let mut store = Store::new(self.engine(), state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_callback(|mut ctx| Ok(ctx.data_mut().time.on_epoch_deadline()));
        // The deadline is armed now, when the call starts (not when it was
        // queued); the first check comes at the first yield interval.
        store.set_epoch_deadline(YIELD_INTERVAL_TICKS.min(timeout_ticks));
        Ok(store)
    }
}

/// The WASI context of one instance. Deny by default: no preopens, no
/// sockets, no env, no args. Only what the plugin was granted is added:
/// its directories (cap-std handles: `..`, absolute paths and symlinks
/// cannot leave them) and its config as environment variables. Nothing
/// of the host's own environment is inherited.
fn wasi_ctx(
    grants: Option<&Arc<grants::CallGrants>>,
    stdout: &stdio::CappedPipe,
    stderr: &stdio::CappedPipe,
) -> Result<wasmtime_wasi::WasiCtx, String> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if let Some(grants) = grants {
        for dir in &grants.grants.files {
            let perms = match dir.mode {
                manifest::FileMode::ReadOnly => wasmtime_wasi::FsPerms::ReadOnly,
                manifest::FileMode::ReadWrite => wasmtime_wasi::FsPerms::ReadWrite,
            };
            // From the handle held since load, never the path again.
            let path = dir.opened.call_path()?;
            wasi.preopened_dir(&path, &dir.guest, perms).map_err(|e| {
                format!(
                    "the granted directory {} ({}) cannot be opened: {e}",
                    dir.host.display(),
                    dir.guest
                )
            })?;
        }
        for config in &grants.grants.config {
            wasi.env(&config.key, &config.value);
        }
    }
    Ok(wasi.build())
}
