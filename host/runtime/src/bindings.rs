//! The only place `bindgen!` runs: one module per version of the WIT
//! contract (`wit/gadget@X.Y.Z/`), each converting its generated types into
//! the domain types of `gadget-core` at this edge. A new contract version
//! gets a module beside `v0_1_0`, and the runtime picks the module by what
//! the component exports; nothing outside this crate sees generated types.

use gadget_core::call::{Example, GadgetSpec};

/// The WIT packages this host speaks, oldest first, and the export each
/// version's components have.
pub const WIT_PACKAGE: &str = "gadget:plugin@0.1.0, 0.2.0 or 0.3.0";
pub const GADGET_EXPORT: &str = "gadget:plugin/gadget@0.1.0";
pub const GADGET_EXPORT_V0_2_0: &str = "gadget:plugin/gadget@0.2.0";
pub const GADGET_EXPORT_V0_3_0: &str = "gadget:plugin/gadget@0.3.0";

/// Imports a component may have: WASI 0.2 and the contracts' own.
pub(crate) const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "wasi:",
    "gadget:plugin/host@0.1.0",
    "gadget:plugin/types@0.1.0",
    "gadget:plugin/host@0.2.0",
    "gadget:plugin/types@0.2.0",
    "gadget:plugin/llm@0.2.0",
    "gadget:plugin/host@0.3.0",
    "gadget:plugin/types@0.3.0",
    "gadget:plugin/llm@0.3.0",
    "gadget:plugin/ask@0.3.0",
];

/// Which contract a component was built against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContractVersion {
    V0_1_0,
    V0_2_0,
    V0_3_0,
}

impl ContractVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            ContractVersion::V0_1_0 => "0.1.0",
            ContractVersion::V0_2_0 => "0.2.0",
            ContractVersion::V0_3_0 => "0.3.0",
        }
    }
}

/// `gadget:plugin@0.1.0`, as released (frozen).
pub mod v0_1_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/gadget@0.1.0",
        world: "plugin",
        exports: { default: async },
    });
}

/// `gadget:plugin@0.2.0`: 0.1.0 plus the `llm` import. Its types are
/// 0.1.0's, field for field, so they are generated once (`with`) and the
/// rest of the runtime handles one set.
pub mod v0_2_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/gadget@0.2.0",
        world: "plugin",
        exports: { default: async },
        imports: { "gadget:plugin/llm.complete": async },
        with: { "gadget:plugin/types@0.2.0": super::v0_1_0::gadget::plugin::types },
    });
}

/// `gadget:plugin@0.3.0` (a draft until issue 39 releases it): results
/// as content parts. Its types are its own; they are the runtime's
/// currency, and the older versions' outcomes are converted into them at
/// this edge (a 0.1.0 result is one text part).
pub mod v0_3_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/gadget@0.3.0",
        world: "plugin",
        exports: { default: async },
        imports: {
            "gadget:plugin/llm.complete": async,
            "gadget:plugin/ask.ask": async | trappable,
        },
    });
}

use v0_1_0::gadget::plugin::types as old;
/// The types every version's outcome is read as.
pub(crate) use v0_3_0::gadget::plugin::types as wit;

/// How a call of any version ended: the newest contract's outcome, or
/// the question of an older gadget's `ask-human` (which 0.3.0 replaced
/// with the `ask` import, and which ends the call).
pub(crate) enum GuestOutcome {
    Done(wit::Outcome),
    AskHuman(String),
}

impl From<wit::Outcome> for GuestOutcome {
    fn from(outcome: wit::Outcome) -> Self {
        GuestOutcome::Done(outcome)
    }
}

impl From<old::Outcome> for GuestOutcome {
    fn from(outcome: old::Outcome) -> Self {
        let result = |r: old::CallResult| wit::CallResult {
            content: vec![wit::Content::Text(r.result)],
            structured: None,
            cost: r.cost,
            details: r.details,
        };
        match outcome {
            old::Outcome::Result(r) => GuestOutcome::Done(wit::Outcome::Result(result(r))),
            old::Outcome::Finish(r) => GuestOutcome::Done(wit::Outcome::Finish(result(r))),
            old::Outcome::AskHuman(question) => GuestOutcome::AskHuman(question),
        }
    }
}

impl From<old::GadgetError> for wit::GadgetError {
    fn from(error: old::GadgetError) -> Self {
        match error {
            old::GadgetError::InvalidArguments(m) => wit::GadgetError::InvalidArguments(m),
            old::GadgetError::Failed(m) => wit::GadgetError::Failed(m),
            old::GadgetError::Cancelled => wit::GadgetError::Cancelled,
        }
    }
}

/// Every version's spec record is the same, field for field.
macro_rules! spec_from {
    ($wit:ty) => {
        impl From<$wit> for GadgetSpec {
            fn from(s: $wit) -> Self {
                GadgetSpec {
                    name: s.name,
                    label: s.label,
                    description: s.description,
                    parameters_schema: s.parameters_schema,
                    examples: s
                        .examples
                        .into_iter()
                        .map(|e| Example {
                            params: e.params,
                            output: e.output,
                            comment: e.comment,
                        })
                        .collect(),
                    timeout_ms: s.timeout_ms,
                    exclusive: s.exclusive,
                    max_concurrent: s.max_concurrent,
                }
            }
        }
    };
}
spec_from!(old::GadgetSpec);
spec_from!(wit::GadgetSpec);
