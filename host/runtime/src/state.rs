//! A call's store data, [`CallState`]: everything one call owns, and the
//! getters that hand each host interface its part of it (wasmtime's
//! `WasiCtxView` shape): the host interface sees a [`GuestCall`], the
//! `llm` interface an [`LlmCall`], the `ask` interface an [`AskCall`], the files door a [`FilesView`], the
//! config log its [`ConfigReads`]; none of them sees the whole store.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use gadget_core::ledger::Ledger;

use crate::ask::AskCall;
use crate::config_log::ConfigReads;
use crate::files::{self, FilesView};
use crate::host_imports::GuestCall;
use crate::limiter::CallLimiter;
use crate::llm::{self, LlmCall};
use crate::{deadline, epoch, http, stdio};

/// Store data: everything one call owns.
pub struct CallState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) ledger: Ledger,
    pub(crate) stdout: stdio::CappedPipe,
    pub(crate) stderr: stdio::CappedPipe,
    pub(crate) gadget: String,
    pub(crate) invocation_id: String,
    /// Its deadline, grace period and abort signal.
    pub(crate) time: deadline::CallTime,
    /// Completions (the `llm` import), when granted.
    pub(crate) llm: Option<llm::LlmAccess>,
    /// Outbound HTTP (wasi:http), checked against the plugin's grants.
    pub(crate) http_ctx: wasmtime_wasi_http::WasiHttpCtx,
    pub(crate) http: http::HttpHooks,
    /// Granted directories' guards (symlinks, write quotas).
    pub(crate) files: files::CallFiles,
    /// Config reads told to the observer so far.
    pub(crate) config_reads: u32,
    /// Who answers what the gadget asks (the `ask` import).
    pub(crate) human: Option<std::sync::Arc<dyn gadget_core::tool::HumanInput>>,
    /// The longest wait of one `ask`.
    pub(crate) ask_wait: std::time::Duration,
    /// The keys the call was suspended waiting for (see `ask.rs`).
    pub(crate) awaiting: Option<Vec<String>>,
    /// Keeps the epoch ticker running while this store exists.
    pub(crate) _activity: epoch::ActivityGuard,
}

impl wasmtime_wasi_http::WasiHttpView for CallState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl CallState {
    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.time.elapsed_ms()
    }
}

/// The host interface's part of a call's store.
pub(crate) fn guest_call(state: &mut CallState) -> GuestCall<'_> {
    GuestCall {
        gadget: &state.gadget,
        invocation_id: &state.invocation_id,
        time: &mut state.time,
        ledger: &mut state.ledger,
    }
}

/// The `llm` interface's part of a call's store: the plugin whose budget
/// a completion spends is the grant's (the gadget's name without one).
pub(crate) fn llm_call(state: &mut CallState) -> LlmCall<'_> {
    let plugin = match state.http.grants.as_ref() {
        Some(grants) => grants.plugin.as_str(),
        None => state.gadget.as_str(),
    };
    LlmCall {
        call: GuestCall {
            gadget: &state.gadget,
            invocation_id: &state.invocation_id,
            time: &mut state.time,
            ledger: &mut state.ledger,
        },
        plugin,
        access: state.llm.as_mut(),
        human: state.human.as_ref(),
    }
}

/// The `ask` interface's part of a call's store.
pub(crate) fn ask_call(state: &mut CallState) -> AskCall<'_> {
    AskCall {
        call: GuestCall {
            gadget: &state.gadget,
            invocation_id: &state.invocation_id,
            time: &mut state.time,
            ledger: &mut state.ledger,
        },
        human: state.human.as_ref(),
        wait: state.ask_wait,
        awaiting: &mut state.awaiting,
    }
}

/// The config log's part of a call's store.
pub(crate) fn config_reads(state: &mut CallState) -> ConfigReads<'_> {
    ConfigReads {
        observer: state.http.observer.as_ref(),
        told: &mut state.config_reads,
    }
}

/// The files door's part of a call's store (disjoint borrows of its
/// fields, so the grants and the filesystem view are held at once): the
/// getter the door's shims are linked with.
pub(crate) fn files_view(state: &mut CallState) -> FilesView<'_> {
    FilesView {
        files: &mut state.files,
        fs: wasmtime_wasi::filesystem::WasiFilesystemCtxView {
            ctx: state.wasi.filesystem(),
            table: &mut state.table,
        },
    }
}
