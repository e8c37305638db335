//! The `host` interface of gadget:plugin (both contract versions): logs,
//! cost reports, progress, updates, the call's identity and its abort
//! signal, each recorded in the call's ledger.

use gadget_core::ledger::{Ledger, LogLevel};
use wasmtime::component::HasData;

use crate::bindings;
use crate::bindings::v0_1_0::gadget::plugin::{host as wit_host, types as wit};
use crate::bindings::v0_3_0::gadget::plugin::{host as host_v3, types as types_v3};
use crate::deadline::CallTime;

/// What the host interface sees of a call's store: who is called, its
/// time and its ledger, and nothing else (disjoint borrows of the store's
/// fields, handed out by the getter the interface is linked with).
pub(crate) struct GuestCall<'a> {
    pub gadget: &'a str,
    pub invocation_id: &'a str,
    pub time: &'a mut CallTime,
    pub ledger: &'a mut Ledger,
}

/// The host interface's [`HasData`]: it is linked with a getter that
/// returns a [`GuestCall`].
pub(crate) struct HostDoor;

impl HasData for HostDoor {
    type Data<'a> = GuestCall<'a>;
}

impl GuestCall<'_> {
    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.time.elapsed_ms()
    }
}

impl wit::Host for GuestCall<'_> {}

impl wit_host::Host for GuestCall<'_> {
    fn log(&mut self, level: wit::Level, message: String, fields: String) {
        let at = self.elapsed_ms();
        let level = match level {
            wit::Level::Trace => LogLevel::Trace,
            wit::Level::Debug => LogLevel::Debug,
            wit::Level::Info => LogLevel::Info,
            wit::Level::Warn => LogLevel::Warn,
            wit::Level::Error => LogLevel::Error,
        };
        self.ledger.guest_log(level, message, &fields, at);
    }

    fn report_cost(&mut self, usd: f64) {
        let at = self.elapsed_ms();
        self.ledger.report_cost(usd, at);
    }

    fn progress(&mut self, message: String) {
        self.ledger.progress(message);
    }

    fn update(&mut self, partial: String, details: Option<String>) {
        let at = self.elapsed_ms();
        self.ledger.update(partial, details.as_deref(), at);
    }

    fn cancelled(&mut self) -> bool {
        if self.time.externally_cancelled() {
            self.time.aborted = true;
        }
        // Between epoch callbacks the flag may lag; read the clock too.
        self.time.aborted || self.time.clock.now() >= self.time.deadline_epoch
    }

    fn call_info(&mut self) -> wit::InvocationInfo {
        wit::InvocationInfo {
            invocation_id: self.invocation_id.to_string(),
            gadget_name: self.gadget.to_string(),
            time_left_ms: self.time.time_left_ms(),
        }
    }
}

/// 0.2.0's host interface is 0.1.0's, function for function.
impl bindings::v0_2_0::gadget::plugin::host::Host for GuestCall<'_> {
    fn log(&mut self, level: wit::Level, message: String, fields: String) {
        wit_host::Host::log(self, level, message, fields)
    }

    fn report_cost(&mut self, usd: f64) {
        wit_host::Host::report_cost(self, usd)
    }

    fn progress(&mut self, message: String) {
        wit_host::Host::progress(self, message)
    }

    fn update(&mut self, partial: String, details: Option<String>) {
        wit_host::Host::update(self, partial, details)
    }

    fn cancelled(&mut self) -> bool {
        wit_host::Host::cancelled(self)
    }

    fn call_info(&mut self) -> wit::InvocationInfo {
        wit_host::Host::call_info(self)
    }
}

/// A 0.3.0 log level as 0.1.0's.
fn level_of(level: types_v3::Level) -> wit::Level {
    match level {
        types_v3::Level::Trace => wit::Level::Trace,
        types_v3::Level::Debug => wit::Level::Debug,
        types_v3::Level::Info => wit::Level::Info,
        types_v3::Level::Warn => wit::Level::Warn,
        types_v3::Level::Error => wit::Level::Error,
    }
}

impl types_v3::Host for GuestCall<'_> {}

/// 0.3.0's host interface is 0.1.0's, function for function, over its
/// own generated types.
impl host_v3::Host for GuestCall<'_> {
    fn log(&mut self, level: types_v3::Level, message: String, fields: String) {
        wit_host::Host::log(self, level_of(level), message, fields)
    }

    fn report_cost(&mut self, usd: f64) {
        wit_host::Host::report_cost(self, usd)
    }

    fn progress(&mut self, message: String) {
        wit_host::Host::progress(self, message)
    }

    fn report_progress(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        let at = self.elapsed_ms();
        self.ledger.measured(done, total, message, at);
    }

    fn update(&mut self, partial: String, details: Option<String>) {
        wit_host::Host::update(self, partial, details)
    }

    fn cancelled(&mut self) -> bool {
        wit_host::Host::cancelled(self)
    }

    fn call_info(&mut self) -> types_v3::InvocationInfo {
        let info = wit_host::Host::call_info(self);
        types_v3::InvocationInfo {
            invocation_id: info.invocation_id,
            gadget_name: info.gadget_name,
            time_left_ms: info.time_left_ms,
        }
    }
}
