//! The `llm` import of gadget:plugin@0.2.0: completions a gadget asks for
//! during a call, sent through whatever [`LlmBackend`] the embedder set
//! (the command line sets the agent's providers). The runtime knows no
//! provider: it checks the grant (the model must be one the operator
//! named), the budget (the request's worst case must fit what is left of
//! the call's `max-usd-per-call`), and the clock (the call's deadline and
//! abort signal end the wait), then adds the cost to the call's ledger,
//! where it stays even if the call later fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use gadget_core::llm::{LlmAnswer, LlmBackend, LlmPrice, LlmRequest, LlmRole};

use crate::grants::LlmGrant;

/// The answer's token cap when the gadget gives none.
pub const DEFAULT_LLM_MAX_TOKENS: u32 = 1024;

/// The largest token cap a gadget may ask for: a completion is a step of a
/// gadget, not a book.
pub const MAX_LLM_MAX_TOKENS: u32 = 32_768;

/// How often a completion in flight looks at the abort signal.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// Why a completion did not happen (the WIT `llm-error`).
#[derive(Debug, Clone, PartialEq)]
pub enum LlmFailure {
    Denied(String),
    BudgetExceeded(String),
    Provider(String),
    Deadline,
}

/// A completion that happened.
#[derive(Debug, Clone)]
pub struct LlmDone {
    pub answer: LlmAnswer,
    pub model: String,
    pub cost: f64,
}

/// A call's access to the LLM: the backend, its grant, and what it spent.
pub(crate) struct LlmAccess {
    pub backend: Option<Arc<dyn LlmBackend>>,
    pub grant: LlmGrant,
    pub spent: f64,
}

/// What the gadget asked for, before the host filled in the defaults.
pub(crate) struct LlmAsk {
    pub model: Option<String>,
    pub messages: Vec<(LlmRole, String)>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
}

/// Checks and sends one completion; `time_left` is until the call's
/// deadline, `cancel` its abort signal from outside.
pub(crate) async fn complete(
    plugin: &str,
    access: Option<&LlmAccess>,
    ask: LlmAsk,
    time_left: Duration,
    cancel: Option<Arc<AtomicBool>>,
) -> Result<LlmDone, LlmFailure> {
    let LlmAsk {
        model,
        messages,
        max_tokens,
        temperature,
    } = ask;
    let Some(access) = access else {
        return Err(LlmFailure::Denied(format!(
            "plugin '{plugin}' has no LLM grant (the manifest asks with [permissions] llm = true; the operator grants with [plugins.{plugin}] llm = {{ models = [\"openai:gpt-4o-mini\"] }})"
        )));
    };
    let model = model.unwrap_or_else(|| access.grant.models[0].clone());
    if !access.grant.models.iter().any(|m| m == &model) {
        return Err(LlmFailure::Denied(format!(
            "model '{model}' is not granted to plugin '{plugin}' (granted: {}; add it to [plugins.{plugin}] llm.models)",
            access.grant.models.join(", ")
        )));
    }
    let Some(backend) = &access.backend else {
        return Err(LlmFailure::Provider(
            "this host has no LLM provider configured".to_string(),
        ));
    };
    let max_tokens = max_tokens
        .unwrap_or(DEFAULT_LLM_MAX_TOKENS)
        .clamp(1, MAX_LLM_MAX_TOKENS);
    let price = backend.price(&model);
    if let Some(budget) = access.grant.max_usd_per_call {
        let Some(price) = price else {
            return Err(LlmFailure::BudgetExceeded(format!(
                "model '{model}' has no known price, so the call's budget of ${budget} cannot be checked (add [llm.models.\"{model}\"] to the policy file)"
            )));
        };
        let bytes: usize = messages.iter().map(|(_, text)| text.len()).sum();
        let input = gadget_core::llm::estimate_tokens(bytes);
        let worst = price.cost(input, u64::from(max_tokens));
        let left = budget - access.spent;
        if worst > left {
            return Err(LlmFailure::BudgetExceeded(format!(
                "this completion could cost ${worst:.6} (about {input} tokens in, up to {max_tokens} out) and ${:.6} of the call's ${budget} is left",
                left.max(0.0)
            )));
        }
    }
    let request = LlmRequest {
        model: model.clone(),
        messages,
        max_tokens,
        temperature,
    };
    let sent = backend.complete(request);
    let cancelled = async {
        loop {
            tokio::time::sleep(CANCEL_POLL).await;
            if cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                break;
            }
        }
    };
    let answer = tokio::select! {
        answer = sent => answer.map_err(LlmFailure::Provider)?,
        _ = tokio::time::sleep(time_left) => return Err(LlmFailure::Deadline),
        _ = cancelled => return Err(LlmFailure::Deadline),
    };
    let cost = price
        .map(|p| p.cost(answer.input_tokens, answer.output_tokens))
        .unwrap_or(0.0);
    Ok(LlmDone {
        answer,
        model,
        cost,
    })
}

#[cfg(test)]
mod tests {
    //! The checks before a completion is sent, against a backend that
    //! records what reaches it (the provider side, not the runtime).
    use super::*;
    use gadget_core::tool::BoxFuture;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder {
        sent: Mutex<Vec<LlmRequest>>,
        /// How long each completion takes.
        delay: Duration,
        priced: bool,
    }

    impl LlmBackend for Recorder {
        fn price(&self, _model: &str) -> Option<LlmPrice> {
            self.priced.then_some(LlmPrice {
                input_per_mtok: 1.0,
                output_per_mtok: 1.0,
            })
        }

        fn complete(&self, request: LlmRequest) -> BoxFuture<'static, Result<LlmAnswer, String>> {
            self.sent.lock().unwrap().push(request);
            let delay = self.delay;
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(LlmAnswer {
                    text: "ok".into(),
                    input_tokens: 1_000,
                    output_tokens: 1_000,
                })
            })
        }
    }

    fn access(backend: Arc<Recorder>, budget: Option<f64>, spent: f64) -> LlmAccess {
        LlmAccess {
            backend: Some(backend),
            grant: LlmGrant {
                models: vec!["p:first".into(), "p:second".into()],
                max_usd_per_call: budget,
            },
            spent,
        }
    }

    fn ask(model: Option<&str>, max_tokens: Option<u32>) -> LlmAsk {
        LlmAsk {
            model: model.map(str::to_string),
            messages: vec![(LlmRole::User, "x".repeat(400))],
            max_tokens,
            temperature: None,
        }
    }

    async fn run(
        access: Option<&LlmAccess>,
        ask: LlmAsk,
        time_left: Duration,
    ) -> Result<LlmDone, LlmFailure> {
        complete("plug", access, ask, time_left, None).await
    }

    #[tokio::test]
    async fn each_check_fires_before_anything_is_sent() {
        let backend = Arc::new(Recorder {
            priced: true,
            ..Recorder::default()
        });
        let long = Duration::from_secs(10);
        let Err(LlmFailure::Denied(m)) = run(None, ask(None, None), long).await else {
            panic!("no grant must be denied")
        };
        assert!(m.contains("[plugins.plug] llm"), "{m}");
        let granted = access(backend.clone(), None, 0.0);
        let Err(LlmFailure::Denied(m)) =
            run(Some(&granted), ask(Some("p:other"), None), long).await
        else {
            panic!("an ungranted model must be denied")
        };
        assert!(m.contains("granted: p:first, p:second"), "{m}");
        // 100 tokens in + 1024 out at $1/M is about $0.0011: over what is
        // left of a $0.01 budget with $0.0095 spent.
        let tight = access(backend.clone(), Some(0.01), 0.0095);
        let Err(LlmFailure::BudgetExceeded(m)) = run(Some(&tight), ask(None, None), long).await
        else {
            panic!("over the budget must be refused")
        };
        assert!(m.contains("about 100 tokens in, up to 1024 out"), "{m}");
        assert!(backend.sent.lock().unwrap().is_empty(), "nothing was sent");

        // Within the grant: the first model by default, the token cap clamped.
        let done = run(Some(&granted), ask(None, Some(1_000_000)), long)
            .await
            .unwrap();
        assert_eq!(done.model, "p:first");
        assert!((done.cost - 0.002).abs() < 1e-12);
        assert_eq!(
            backend.sent.lock().unwrap()[0].max_tokens,
            MAX_LLM_MAX_TOKENS
        );
    }

    #[tokio::test]
    async fn an_unpriced_model_cannot_be_budgeted_and_the_deadline_ends_a_wait() {
        let unpriced = Arc::new(Recorder::default());
        let budgeted = access(unpriced.clone(), Some(1.0), 0.0);
        let Err(LlmFailure::BudgetExceeded(m)) =
            run(Some(&budgeted), ask(None, None), Duration::from_secs(10)).await
        else {
            panic!("an unpriced model under a budget must be refused")
        };
        assert!(m.contains("has no known price"), "{m}");
        let slow = Arc::new(Recorder {
            delay: Duration::from_secs(30),
            ..Recorder::default()
        });
        let started = std::time::Instant::now();
        let result = run(
            Some(&access(slow, None, 0.0)),
            ask(None, None),
            Duration::from_millis(50),
        )
        .await;
        assert_eq!(result.unwrap_err(), LlmFailure::Deadline);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
