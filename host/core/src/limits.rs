//! Limits on what one gadget call may use, on by default.
//!
//! Each limit is a named constant with its unit and the reason for its
//! value. A plugin's manifest may ask for different limits (`[limits]` in
//! `plugin.toml`) and a gadget's spec may ask for a timeout; what they ask
//! for is clamped to the operator's ceilings ([`LimitCeilings`]), so neither
//! a plugin nor a model can widen them. Going over a limit is an explicit
//! outcome with a message naming the limit (see `runtime::CallError`).

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;

/// Wall time per call when neither the gadget nor its manifest says: long
/// enough for real work (an HTTP round trip, a big regex), short enough that
/// a stuck gadget does not stall an agent turn.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// After the deadline the abort signal is raised (`cancelled` returns true)
/// and the gadget gets this long to return `cancelled` before it is trapped.
/// Polling once per millisecond is easy; 50 ms leaves room for cleanup.
pub const CANCEL_GRACE: Duration = Duration::from_millis(50);

/// How long one `ask` may wait for its answers. The wait is not counted
/// against the call's deadline (a person reads and types), but it holds
/// the call's instance and memory: ten minutes is a form filled in with
/// care, not a question left open overnight.
pub const DEFAULT_ASK_WAIT: Duration = Duration::from_secs(600);

/// Extra time the outer (tokio) timeout allows beyond deadline + grace
/// before dropping a call stuck inside a host import, where epoch traps
/// cannot reach. Covers ticker jitter so the epoch trap fires first when it
/// can, which gives the better error.
pub const OUTER_TIMEOUT_SLACK: Duration = Duration::from_millis(20);

/// Linear memory per instance, in bytes: 256 MiB fits CPython and
/// SpiderMonkey-based components with room for real data, and bounds what
/// a memory bomb can take from the host.
pub const DEFAULT_MEMORY_BYTES: u64 = 256 << 20;

/// Size of a call's result text, in bytes. Results this large are already
/// far past what a model should read at once (the output limiter stores
/// them for GadgetOutputViewer); past 4 MiB the call fails instead.
pub const DEFAULT_RESULT_BYTES: u64 = 4 << 20;

/// Log entries, progress messages and updates per call, in bytes of text
/// kept. Past it, entries are dropped and counted: a chatty gadget cannot
/// grow the host's memory.
pub const DEFAULT_LOG_BYTES: u64 = 256 << 10;

/// Captured stdout and captured stderr per call, in bytes each. Output past
/// it is discarded and counted (not a trap: printing too much is not worth
/// losing the result).
pub const DEFAULT_STDIO_BYTES: u64 = 64 << 10;

/// Table elements per table: wasm function tables of real components hold
/// a few thousand entries; 100k bounds host memory for tables.
pub const DEFAULT_TABLE_ELEMENTS: usize = 100_000;

/// Core instances per component instance: a Python component has a few
/// dozen; 1,000 bounds a component that instantiates without end.
pub const DEFAULT_INSTANCES: usize = 1_000;

/// Linear memories per component instance.
pub const DEFAULT_MEMORIES: usize = 100;

/// Tables per component instance.
pub const DEFAULT_TABLES: usize = 1_000;

/// Length of a single log message or progress line kept, in bytes: longer
/// ones are truncated with a marker.
pub const MAX_LOG_MESSAGE_BYTES: usize = 8 << 10;

/// A log entry's `fields` text, in bytes, parsed as JSON. Past it the
/// host does not parse the text at all (parsing is the expensive part of a
/// log call): the entry keeps its message and a note of the size dropped.
pub const MAX_LOG_FIELDS_BYTES: usize = 16 << 10;

/// `details` of a result or an update, in bytes of JSON text. Details are
/// for people and UIs, never the model; 64 KiB holds any table worth
/// showing. Past it they are dropped unparsed, with a warning on the call.
pub const MAX_DETAILS_BYTES: usize = 64 << 10;

/// The partial text of one `update`, in bytes: updates are previews for a
/// UI; longer ones are truncated with a marker.
pub const MAX_UPDATE_BYTES: usize = 8 << 10;

/// An error message a gadget returns (`invalid-arguments`, `failed`) or a
/// question it asks a person, in bytes. The model reads it, so it is cut
/// (with a marker) at the size of a long paragraph, not at the result limit.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 16 << 10;

/// Host warnings kept per call (refused costs, dropped details): each
/// further one is counted, not stored or printed, so a gadget cannot turn
/// one import into unbounded host output.
pub const MAX_HOST_WARNINGS: usize = 16;

/// The least time between two live cost events of one call, ms: reports in
/// between are added up and told together (the call's total is exact in
/// its report either way), so a loop of tiny reports cannot flood the
/// output. Ten a second is as fast as a person reads a changing figure.
pub const COST_EVENT_INTERVAL_MS: u64 = 100;

/// Bytes of one response `gadget run` reads (a file or stdin): a model's
/// response is far smaller (a provider stream is capped at 16 MiB), and the
/// executor's bookkeeping grows with what it reads. Past it the rest is not
/// read and the run says so.
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Bytes one call may write into one read-write directory grant, by
/// default (the grant's `write-quota-mib` changes it): 256 MiB is more than
/// any honest tool call writes, and stops one call from filling the disk in
/// seconds (one wrote 2 GiB in under 6 s with only its deadline to stop it).
pub const DEFAULT_GRANT_WRITE_BYTES: u64 = 256 << 20;

/// Files, directories and links one call may create in one read-write
/// grant, by default (the grant's `max-entries`): 10,000 covers unpacking a
/// real archive; 75,000 empty files in 10 s was an inode-exhaustion attack.
pub const DEFAULT_GRANT_ENTRIES: u64 = 10_000;

/// The operator's ceilings on each limit, by default (the policy file's
/// `[limits]` replaces them); a manifest or spec asking for more gets the
/// ceiling, with a warning. Chosen for a shared machine and for timeouts a
/// third-party plugin declares itself: two minutes is long for one tool
/// call of an agent turn, and a plugin that needs more is given it by the
/// operator, not by its own manifest.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(120);
/// Default ceiling on linear memory per instance, in bytes: four times the
/// default, enough for a big data-processing gadget, far from what a few
/// parallel calls could take from a shared machine.
pub const MAX_MEMORY_BYTES: u64 = 1 << 30;
/// The most an operator may set as the timeout ceiling: one hour (epoch
/// deadlines and every timer stay well inside their ranges).
pub const HARD_MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// The most an operator may set as the memory ceiling: 4 GiB, all that a
/// 32-bit memory can address (and what the pooling allocator reserves).
pub const HARD_MAX_MEMORY_BYTES: u64 = 4 << 30;
/// Ceiling on a result, in bytes.
pub const MAX_RESULT_BYTES: u64 = 64 << 20;
/// Ceiling on log volume per call, in bytes.
pub const MAX_LOG_BYTES: u64 = 16 << 20;
/// Ceiling on captured stdout / stderr per call, in bytes each.
pub const MAX_STDIO_BYTES: u64 = 16 << 20;

/// The limits one call runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall time from the call's start to its deadline.
    pub timeout: Duration,
    /// Grace period after the deadline before the trap.
    pub grace: Duration,
    /// Linear memory per instance, bytes.
    pub memory_bytes: u64,
    /// Result text, bytes.
    pub result_bytes: u64,
    /// Log + progress + update text kept, bytes.
    pub log_bytes: u64,
    /// Captured stdout, and separately stderr, bytes.
    pub stdio_bytes: u64,
    /// Elements per table.
    pub table_elements: usize,
    /// Core instances per component instance.
    pub instances: usize,
    /// The longest wait of one `ask` for its answers.
    pub ask_wait: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: DEFAULT_TIMEOUT,
            grace: CANCEL_GRACE,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            result_bytes: DEFAULT_RESULT_BYTES,
            log_bytes: DEFAULT_LOG_BYTES,
            stdio_bytes: DEFAULT_STDIO_BYTES,
            table_elements: DEFAULT_TABLE_ELEMENTS,
            instances: DEFAULT_INSTANCES,
            ask_wait: DEFAULT_ASK_WAIT,
        }
    }
}

/// What a plugin's manifest asks for (`[limits]` in `plugin.toml`); every
/// field is optional and unknown fields are an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RequestedLimits {
    /// Wall time per call, milliseconds.
    pub timeout_ms: Option<u64>,
    /// Linear memory per instance, MiB.
    pub memory_mib: Option<u64>,
    /// Result size, KiB.
    pub result_kib: Option<u64>,
    /// Log volume per call, KiB.
    pub log_kib: Option<u64>,
    /// Captured stdout / stderr per call, KiB each.
    pub stdio_kib: Option<u64>,
}

/// The operator's ceilings. A manifest asking for more than a ceiling gets
/// the ceiling, and a warning says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitCeilings {
    pub timeout: Duration,
    pub memory_bytes: u64,
    pub result_bytes: u64,
    pub log_bytes: u64,
    pub stdio_bytes: u64,
}

impl Default for LimitCeilings {
    fn default() -> Self {
        LimitCeilings {
            timeout: MAX_TIMEOUT,
            memory_bytes: MAX_MEMORY_BYTES,
            result_bytes: MAX_RESULT_BYTES,
            log_bytes: MAX_LOG_BYTES,
            stdio_bytes: MAX_STDIO_BYTES,
        }
    }
}

impl LimitCeilings {
    /// The limits a plugin gets: its requests (or the defaults) clamped to
    /// the ceilings, plus one message for each request that was cut.
    pub fn grant(&self, requested: &RequestedLimits) -> (Limits, Vec<String>) {
        let mut notes = Vec::new();
        let mut limits = Limits::default();
        let mut clamp = |what: &str, asked: Option<u64>, default: u64, ceiling: u64, unit: u64| {
            let Some(asked) = asked else {
                return default.min(ceiling);
            };
            let asked = asked.saturating_mul(unit);
            if asked > ceiling {
                notes.push(format!(
                    "asks for {what} of {asked}, capped at the operator's ceiling of {ceiling} (the policy file's [limits] sets ceilings)"
                ));
                ceiling
            } else {
                if asked > default {
                    notes.push(format!(
                        "asks for {what} of {asked}, above the default of {default}; granted, within the operator's ceiling of {ceiling}"
                    ));
                }
                asked
            }
        };
        limits.timeout = Duration::from_millis(clamp(
            "timeout (ms)",
            requested.timeout_ms,
            DEFAULT_TIMEOUT.as_millis() as u64,
            self.timeout.as_millis() as u64,
            1,
        ));
        limits.memory_bytes = clamp(
            "memory (bytes)",
            requested.memory_mib,
            DEFAULT_MEMORY_BYTES,
            self.memory_bytes,
            1 << 20,
        );
        limits.result_bytes = clamp(
            "result size (bytes)",
            requested.result_kib,
            DEFAULT_RESULT_BYTES,
            self.result_bytes,
            1 << 10,
        );
        limits.log_bytes = clamp(
            "log volume (bytes)",
            requested.log_kib,
            DEFAULT_LOG_BYTES,
            self.log_bytes,
            1 << 10,
        );
        limits.stdio_bytes = clamp(
            "captured stdout/stderr (bytes)",
            requested.stdio_kib,
            DEFAULT_STDIO_BYTES,
            self.stdio_bytes,
            1 << 10,
        );
        (limits, notes)
    }

    /// A gadget's own timeout: its spec's (clamped to the ceiling), else
    /// its manifest's (already in `plugin`), both *declared*; else the
    /// plugin's default, which a run's default timeout may replace.
    pub fn own_timeout(
        &self,
        plugin: &Limits,
        manifest_timeout_ms: Option<u64>,
        spec_timeout_ms: Option<u32>,
    ) -> OwnTimeout {
        match (spec_timeout_ms, manifest_timeout_ms) {
            (Some(ms), _) => {
                OwnTimeout::Declared(Duration::from_millis(ms.into()).min(self.timeout))
            }
            (None, Some(_)) => OwnTimeout::Declared(plugin.timeout),
            (None, None) => OwnTimeout::Default(plugin.timeout),
        }
    }
}

/// What a tool says about its own deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnTimeout {
    /// The tool (its spec or its manifest) chose it: a run's default
    /// timeout does not replace it.
    Declared(Duration),
    /// Nobody chose it: a run's default timeout replaces it.
    Default(Duration),
    /// The tool runs in the host and returns at once (the output viewer):
    /// it gets no deadline.
    None,
}

impl OwnTimeout {
    /// The timeout when nothing else applies.
    pub fn duration(self) -> Option<Duration> {
        match self {
            OwnTimeout::Declared(d) | OwnTimeout::Default(d) => Some(d),
            OwnTimeout::None => None,
        }
    }
}

/// Timeouts of a run, on top of what each tool declares. The one place a
/// call's deadline is decided.
#[derive(Debug, Clone, Default)]
pub struct Timeouts {
    /// For gadgets that declare none (in their spec or their manifest).
    pub default: Option<Duration>,
    /// Per gadget (lower-cased name); wins over the gadget's own.
    pub per_gadget: HashMap<String, Duration>,
    /// The operator's cap: no call runs longer, whatever was asked.
    pub cap: Option<Duration>,
}

impl Timeouts {
    /// The deadline of a call to the tool `name` whose own timeout is
    /// `own`, in order of precedence: the run's per-gadget setting, the
    /// tool's declared timeout, the run's default, the tool's default; all
    /// capped by the operator's cap and [`HARD_MAX_TIMEOUT`]. `None` for a tool
    /// without a deadline.
    pub fn resolve(&self, name: &str, own: OwnTimeout) -> Option<Duration> {
        // Most runs set no per-gadget timeout: no lower-cased copy then.
        let per_gadget = if self.per_gadget.is_empty() {
            None
        } else {
            self.per_gadget.get(&name.to_lowercase())
        };
        let chosen = match (per_gadget, own) {
            (_, OwnTimeout::None) => return None,
            (Some(timeout), _) => *timeout,
            (None, OwnTimeout::Declared(timeout)) => timeout,
            (None, OwnTimeout::Default(timeout)) => self.default.unwrap_or(timeout),
        };
        let cap = self
            .cap
            .map_or(HARD_MAX_TIMEOUT, |cap| cap.min(HARD_MAX_TIMEOUT));
        Some(chosen.min(cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_when_nothing_is_asked() {
        let (limits, notes) = LimitCeilings::default().grant(&RequestedLimits::default());
        assert_eq!(limits, Limits::default());
        assert!(notes.is_empty());
    }

    #[test]
    fn requests_over_the_ceiling_are_capped_with_a_note() {
        let ceilings = LimitCeilings {
            memory_bytes: 32 << 20,
            ..LimitCeilings::default()
        };
        let asked = RequestedLimits {
            memory_mib: Some(1024),
            timeout_ms: Some(500),
            ..RequestedLimits::default()
        };
        let (limits, notes) = ceilings.grant(&asked);
        assert_eq!(limits.memory_bytes, 32 << 20);
        assert_eq!(limits.timeout, Duration::from_millis(500));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("memory"), "{notes:?}");
    }

    #[test]
    fn spec_timeout_is_capped_by_the_ceiling() {
        let ceilings = LimitCeilings {
            timeout: Duration::from_secs(1),
            ..LimitCeilings::default()
        };
        let plugin = Limits::default();
        assert_eq!(
            ceilings.own_timeout(&plugin, None, Some(100)),
            OwnTimeout::Declared(Duration::from_millis(100))
        );
        assert_eq!(
            ceilings.own_timeout(&plugin, None, Some(5_000)),
            OwnTimeout::Declared(Duration::from_secs(1))
        );
        assert_eq!(
            ceilings.own_timeout(&plugin, Some(30_000), None),
            OwnTimeout::Declared(DEFAULT_TIMEOUT)
        );
        assert_eq!(
            ceilings.own_timeout(&plugin, None, None),
            OwnTimeout::Default(DEFAULT_TIMEOUT)
        );
    }

    #[test]
    fn timeouts_resolve_in_order_of_precedence() {
        let ms = Duration::from_millis;
        let mut timeouts = Timeouts::default();
        assert_eq!(
            timeouts.resolve("X", OwnTimeout::Default(ms(30))),
            Some(ms(30))
        );
        assert_eq!(timeouts.resolve("X", OwnTimeout::None), None);
        timeouts.default = Some(ms(10));
        // The run's default replaces a default, not a declared timeout.
        assert_eq!(
            timeouts.resolve("X", OwnTimeout::Default(ms(30))),
            Some(ms(10))
        );
        assert_eq!(
            timeouts.resolve("X", OwnTimeout::Declared(ms(30))),
            Some(ms(30))
        );
        // Per gadget wins over everything, matched case-insensitively.
        timeouts.per_gadget.insert("x".into(), ms(7));
        assert_eq!(
            timeouts.resolve("X", OwnTimeout::Declared(ms(30))),
            Some(ms(7))
        );
        // The operator's cap bounds them all, and HARD_MAX_TIMEOUT the cap.
        timeouts.cap = Some(ms(5));
        assert_eq!(
            timeouts.resolve("X", OwnTimeout::Declared(ms(30))),
            Some(ms(5))
        );
        timeouts.cap = Some(HARD_MAX_TIMEOUT * 2);
        timeouts.per_gadget.insert("x".into(), HARD_MAX_TIMEOUT * 3);
        assert_eq!(timeouts.resolve("x", OwnTimeout::None), None);
        assert_eq!(
            timeouts.resolve("x", OwnTimeout::Default(ms(1))),
            Some(HARD_MAX_TIMEOUT)
        );
    }
}
