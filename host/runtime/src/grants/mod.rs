//! Grants: what one plugin may use during its calls, and why.
//!
//! A plugin gets what its manifest asks for AND what the operator's policy
//! grants (Zed's capability granter), never more than either: a grant the
//! manifest did not ask for is not applied, a request the operator did not
//! grant is not met, and both are reported so that `check`, `describe`,
//! `list --json` and the load warnings can say so. The result is computed
//! once, at load time, from the manifest and the policy; nothing a model
//! writes or a gadget does reaches it.
//!
//! - **files**: directories, each at a guest path, read-only unless both
//!   sides say `rw`. The host side is canonicalized here, once.
//! - **http**: origins (`scheme://host[:port]`, host may be `*.domain`);
//!   a request must match one, and every address its host resolves to must
//!   be public unless the grant names that address or the policy's
//!   `allow-addresses` holds it (no SSRF through DNS).
//! - **config**: environment variables of the instance; values read from
//!   the host's environment (`env = "VAR"`) are secrets, redacted from
//!   everything the host emits (the weaker form: the gadget holds them).
//! - **secrets**: brokered (`secrets`): the gadget holds a placeholder and
//!   the host puts the value on its requests to the origins the operator
//!   names, and nowhere else.
//!
//! `types` holds what a call gets, `llm` the model grant and its budgets;
//! the origin and address rules are [`crate::origins`], what a grant may
//! name [`crate::requests`], and how a manifest and a policy become
//! grants [`crate::resolve`].

mod llm;
mod opened;
mod secrets;
#[cfg(test)]
mod tests;
mod types;

pub use crate::origins::*;
pub use crate::requests::{check_config_key, check_guest_path, default_guest_path};
pub use llm::LlmGrant;
pub use opened::{OpenedDir, WriteQuota};
pub use secrets::{Brokered, BrokeredSecret, Scrubber, broker_request};
pub use types::*;
