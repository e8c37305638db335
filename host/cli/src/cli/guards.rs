//! The operator's checks on every call of a command, compiled once: the
//! approval rules and the rate limits (whose windows every call shares).

use std::sync::Arc;

pub(crate) struct Guards {
    pub rules: Arc<gadget_core::approval::Rules>,
    pub rates: Option<Arc<gadget_core::rate::RateLimits>>,
}
