//! The only place `bindgen!` runs: one module per version of the WIT
//! contract (`wit/gadget@X.Y.Z/`), each converting its generated types into
//! the domain types of `gadget-core` at this edge. A new contract version
//! gets a module beside `v0_1_0`, and the runtime picks the module by what
//! the component exports; nothing outside this crate sees generated types.

use gadget_core::call::{Example, GadgetSpec};

/// The WIT package and interfaces this host speaks.
pub const WIT_PACKAGE: &str = "gadget:plugin@0.1.0";
pub const GADGET_EXPORT: &str = "gadget:plugin/gadget@0.1.0";

/// Imports a component may have: WASI 0.2 and the contract's own.
pub(crate) const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "wasi:",
    "gadget:plugin/host@0.1.0",
    "gadget:plugin/types@0.1.0",
];

/// `gadget:plugin@0.1.0`, as released (frozen).
pub mod v0_1_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/gadget@0.1.0",
        world: "plugin",
        exports: { default: async },
    });
}

use v0_1_0::gadget::plugin::types as wit;

impl From<wit::GadgetSpec> for GadgetSpec {
    fn from(s: wit::GadgetSpec) -> Self {
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
