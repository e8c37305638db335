//! The LLM grant: the models a plugin may use, and its per-call and
//! per-run budgets.

use std::sync::Arc;

/// The models a plugin's calls may complete with, and their budgets.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LlmGrant {
    /// `provider:model`; the first is the default.
    pub models: Vec<String>,
    /// USD one call's completions may cost together.
    pub max_usd_per_call: Option<f64>,
    /// USD all of the plugin's completions may cost together in one run
    /// (see [`RunBudget`]).
    pub max_usd_per_run: Option<f64>,
    /// What the plugin's calls have spent (and reserved) in this run.
    #[serde(skip)]
    pub run: Arc<RunBudget>,
}

impl PartialEq for LlmGrant {
    fn eq(&self, other: &Self) -> bool {
        self.models == other.models
            && self.max_usd_per_call == other.max_usd_per_call
            && self.max_usd_per_run == other.max_usd_per_run
    }
}

impl LlmGrant {
    pub fn new(
        models: Vec<String>,
        max_usd_per_call: Option<f64>,
        max_usd_per_run: Option<f64>,
    ) -> LlmGrant {
        LlmGrant {
            models,
            max_usd_per_call,
            max_usd_per_run,
            run: Arc::default(),
        }
    }
}

/// What all of one plugin's completions have cost in this run: one
/// `gadget run`, `agent` or `call`, or one load of the plugins in `gadget
/// mcp`/`serve` (a reload starts a new run). Shared by the plugin's calls,
/// which reserve a completion's worst case before sending it, so calls in
/// parallel cannot each pass the check and together go over.
#[derive(Debug, Default)]
pub struct RunBudget {
    /// USD spent, plus the worst case of completions in flight.
    spent: std::sync::Mutex<f64>,
}

impl RunBudget {
    fn spent(&self) -> std::sync::MutexGuard<'_, f64> {
        self.spent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What has been spent or reserved, USD.
    pub fn used(&self) -> f64 {
        *self.spent()
    }

    /// Reserves `worst` USD if it fits under `limit`; else what is left.
    pub fn reserve(self: &Arc<Self>, worst: f64, limit: Option<f64>) -> Result<Reservation, f64> {
        let mut spent = self.spent();
        if let Some(limit) = limit
            && *spent + worst > limit
        {
            return Err((limit - *spent).max(0.0));
        }
        *spent += worst;
        Ok(Reservation {
            budget: self.clone(),
            reserved: worst,
            settled: false,
        })
    }
}

/// A completion's worst case, held against the run's budget while it is in
/// flight. Settled with the real cost, or released when nothing was spent;
/// dropped otherwise (cancelled mid-flight, when what the provider charged
/// is unknown), the worst case stays spent.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<RunBudget>,
    reserved: f64,
    settled: bool,
}

impl Reservation {
    /// The completion cost `cost` (at most what was reserved).
    pub fn settle(mut self, cost: f64) {
        *self.budget.spent() += cost.min(self.reserved) - self.reserved;
        self.settled = true;
    }

    /// The completion was never charged (the provider refused it).
    pub fn release(self) {
        self.settle(0.0);
    }
}
