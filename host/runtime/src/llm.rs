//! The `llm` import of gadget:plugin@0.2.0: completions a gadget asks for
//! during a call, sent through whatever [`LlmBackend`] the embedder set
//! (the command line sets the agent's providers). The runtime knows no
//! provider: it checks the grant (the model must be one the operator
//! named), the budgets (the request's worst case, one token per byte in and
//! every allowed token out, must fit what is left of the call's
//! `max-usd-per-call` and of the plugin's `max-usd-per-run`), and the clock
//! (the call's deadline and abort signal end the wait), then charges the
//! usage the provider reports, never more than the request could use, to
//! the call's ledger, where it stays even if the call later fails.

use gadget_core::signal::AbortSignal;
use std::sync::Arc;
use std::time::Duration;

pub use gadget_core::llm::{LlmAnswer, LlmBackend, LlmPrice, LlmRequest, LlmRole};

use wasmtime::component::HasData;

use gadget_core::ask::{AskFailure, InputRequest, Question, Reply};
use gadget_core::tool::HumanInput;

use crate::bindings;
use crate::bindings::v0_2_0::gadget::plugin::llm as wit_llm;
use crate::bindings::v0_3_0::gadget::plugin::llm as new_llm;
use crate::grants::LlmGrant;
use crate::host_imports::GuestCall;
use crate::llm;

/// The answer's token cap when the gadget gives none.
pub const DEFAULT_LLM_MAX_TOKENS: u32 = 1024;

/// The largest token cap a gadget may ask for: a completion is a step of a
/// gadget, not a book.
pub const MAX_LLM_MAX_TOKENS: u32 = 32_768;

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
    /// Said when the provider's usage report was not believed.
    pub note: Option<String>,
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
    signal: Option<AbortSignal>,
    client: Option<Arc<dyn LlmBackend>>,
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
    let backend = backend_for(&model, access, client)?;
    let max_tokens = max_tokens
        .unwrap_or(DEFAULT_LLM_MAX_TOKENS)
        .clamp(1, MAX_LLM_MAX_TOKENS);
    let price = backend.price(&model);
    // The budgets are caps, so they are checked against the most this
    // request can cost (one token per byte in, every allowed token out),
    // never an estimate.
    let max_input = gadget_core::llm::max_input_tokens(&messages);
    let max_output = u64::from(max_tokens);
    let grant = &access.grant;
    let worst = match price {
        Some(price) => price.cost(max_input, max_output),
        None if grant.max_usd_per_call.is_some() || grant.max_usd_per_run.is_some() => {
            return Err(LlmFailure::BudgetExceeded(format!(
                "model '{model}' has no known price, so the plugin's LLM budget cannot be checked (add [llm.models.\"{model}\"] to the policy file)"
            )));
        }
        None => 0.0,
    };
    let could_cost = || {
        format!(
            "this completion could cost up to ${worst:.6} (at most {max_input} tokens in, counting one per byte, and {max_output} out)"
        )
    };
    if let Some(budget) = grant.max_usd_per_call {
        let left = budget - access.spent;
        if worst > left {
            return Err(LlmFailure::BudgetExceeded(format!(
                "{} and ${:.6} of the call's ${budget} (max-usd-per-call) is left",
                could_cost(),
                left.max(0.0)
            )));
        }
    }
    let reservation = grant
        .run
        .reserve(worst, grant.max_usd_per_run)
        .map_err(|left| {
            LlmFailure::BudgetExceeded(format!(
                "{} and ${left:.6} of the plugin's ${} for this run (max-usd-per-run) is left",
                could_cost(),
                grant.max_usd_per_run.unwrap_or_default()
            ))
        })?;
    let request = LlmRequest {
        model: model.clone(),
        messages,
        max_tokens,
        temperature,
    };
    let sent = backend.complete(request);
    let cancelled = gadget_core::signal::raised(signal.as_ref());
    // A deadline or cancel drops the reservation unsettled: what the
    // provider charged for a request cut off mid-flight is unknown, so its
    // worst case stays spent for the run.
    let mut answer = tokio::select! {
        answer = sent => match answer {
            Ok(answer) => answer,
            Err(message) => {
                reservation.release();
                return Err(LlmFailure::Provider(message));
            }
        },
        _ = tokio::time::sleep(time_left) => return Err(LlmFailure::Deadline),
        _ = cancelled => return Err(LlmFailure::Deadline),
    };
    // A provider's usage is charged as reported, up to what the request
    // could use: a report beyond that is not believed (it would spend
    // budgets no request can spend) and is noted.
    let note = (answer.input_tokens > max_input || answer.output_tokens > max_output).then(|| {
        format!(
            "the provider reported {} tokens in and {} out, more than this request can use (at most {max_input} in, {max_output} out): charged at most that",
            answer.input_tokens, answer.output_tokens
        )
    });
    answer.input_tokens = answer.input_tokens.min(max_input);
    answer.output_tokens = answer.output_tokens.min(max_output);
    let cost = price
        .map(|p| p.cost(answer.input_tokens, answer.output_tokens))
        .unwrap_or(0.0);
    reservation.settle(cost);
    Ok(LlmDone {
        answer,
        model,
        cost,
        note,
    })
}

/// Who answers a completion for `model`: the MCP client's model
/// (sampling) for the `client` provider, when a client that can sample is
/// asking; else the host's providers.
fn backend_for(
    model: &str,
    access: &LlmAccess,
    client: Option<Arc<dyn LlmBackend>>,
) -> Result<Arc<dyn LlmBackend>, LlmFailure> {
    if model
        .split_once(':')
        .is_some_and(|(provider, _)| provider == CLIENT_PROVIDER)
    {
        return client.ok_or_else(|| {
            LlmFailure::Provider(format!(
                "model '{model}' is the MCP client's own model (sampling), and no client that can sample is asking this call (serve the gadget with gadget mcp, or gadget serve, to a client with the sampling capability)"
            ))
        });
    }
    access
        .backend
        .clone()
        .ok_or_else(|| LlmFailure::Provider("this host has no LLM provider configured".to_string()))
}

/// What the `llm` interface sees of a call's store: the call, the plugin
/// it belongs to (whose budget it spends), and its access to the LLM.
pub(crate) struct LlmCall<'a> {
    pub call: GuestCall<'a>,
    pub plugin: &'a str,
    pub access: Option<&'a mut LlmAccess>,
    /// Who answers the call's questions: an MCP client that can sample
    /// answers completions of the `client:` provider.
    pub human: Option<&'a Arc<dyn HumanInput>>,
}

/// The provider whose completions the MCP client's own model makes
/// (sampling): a grant of `client:NAME` lets the plugin's completions go
/// to the client that called it, at no cost to the operator (the client
/// pays for its model), under the same grant and budgets.
pub const CLIENT_PROVIDER: &str = "client";

/// Completions by the calling MCP client's model, asked as one `sample`
/// question of the call's answerer (mid-call, or a stateless round trip).
struct ClientSampling {
    human: Arc<dyn HumanInput>,
    call_id: String,
    gadget: String,
}

impl LlmBackend for ClientSampling {
    /// The operator pays nothing for the client's model.
    fn price(&self, _model: &str) -> Option<LlmPrice> {
        Some(LlmPrice {
            input_per_mtok: 0.0,
            output_per_mtok: 0.0,
        })
    }

    fn complete(
        &self,
        request: LlmRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<LlmAnswer, String>> + Send>>
    {
        let (human, call_id, gadget) = (
            self.human.clone(),
            self.call_id.clone(),
            self.gadget.clone(),
        );
        Box::pin(async move {
            let asked = [InputRequest {
                key: "completion".into(),
                question: Question::Sample {
                    messages: request.messages,
                    system_prompt: None,
                    max_tokens: request.max_tokens,
                },
            }];
            match human.inputs(&call_id, &gadget, &asked).await {
                Ok(replies) => match replies.into_iter().next() {
                    Some(Reply::Sample(text)) => Ok(LlmAnswer {
                        text,
                        input_tokens: 0,
                        output_tokens: 0,
                    }),
                    _ => Err("the client declined to sample".to_string()),
                },
                Err(AskFailure::Suspended) => Err(
                    "the call ends here so that the client's model can answer; it is called again with the answer".to_string(),
                ),
                Err(failure) => Err(format!("the client could not sample: {failure}")),
            }
        })
    }
}

/// The `llm` interface's [`HasData`]: linked with a getter that returns
/// an [`LlmCall`].
pub(crate) struct LlmDoor;

impl HasData for LlmDoor {
    type Data<'a> = LlmCall<'a>;
}

impl bindings::v0_2_0::gadget::plugin::llm::Host for LlmCall<'_> {
    async fn complete(
        &mut self,
        request: wit_llm::CompletionRequest,
    ) -> Result<wit_llm::Completion, wit_llm::LlmError> {
        let plugin = self.plugin.to_string();
        let messages = request
            .messages
            .into_iter()
            .map(|m| {
                let role = match m.role {
                    wit_llm::Role::System => llm::LlmRole::System,
                    wit_llm::Role::User => llm::LlmRole::User,
                    wit_llm::Role::Assistant => llm::LlmRole::Assistant,
                };
                (role, m.content)
            })
            .collect();
        let asked_model = request.model.clone().unwrap_or_default();
        let time_left = Duration::from_millis(self.call.time.time_left_ms());
        let done = llm::complete(
            &plugin,
            self.access.as_deref(),
            llm::LlmAsk {
                model: request.model,
                messages,
                max_tokens: request.max_tokens,
                temperature: request.temperature,
            },
            time_left,
            self.call.time.signal.clone(),
            self.human.map(|human| {
                Arc::new(ClientSampling {
                    human: human.clone(),
                    call_id: self.call.invocation_id.to_string(),
                    gadget: self.call.gadget.to_string(),
                }) as Arc<dyn LlmBackend>
            }),
        )
        .await;
        let at = self.call.elapsed_ms();
        match done {
            Ok(done) => {
                if let Some(access) = self.access.as_deref_mut() {
                    access.spent += done.cost;
                }
                if let Some(note) = &done.note {
                    self.call
                        .ledger
                        .host_warning(format!("llm usage: {note}"), at);
                }
                // Kept in the ledger, so a call that fails later still
                // reports what its completions cost.
                self.call.ledger.report_cost(done.cost, at);
                self.call.ledger.effect(gadget_core::effect::Effect::Llm {
                    model: done.model.clone(),
                    input_tokens: done.answer.input_tokens,
                    output_tokens: done.answer.output_tokens,
                    cost: done.cost,
                    refused: None,
                    error: None,
                });
                self.call.ledger.host_info(
                    format!("llm completion ({})", done.model),
                    serde_json::json!({
                        "model": done.model,
                        "input_tokens": done.answer.input_tokens,
                        "output_tokens": done.answer.output_tokens,
                        "cost_usd": done.cost,
                    }),
                    at,
                );
                Ok(wit_llm::Completion {
                    text: done.answer.text,
                    model: done.model,
                    input_tokens: done.answer.input_tokens,
                    output_tokens: done.answer.output_tokens,
                    cost: done.cost,
                })
            }
            Err(failure) => {
                let (error, note) = match failure {
                    llm::LlmFailure::Denied(m) => (wit_llm::LlmError::Denied(m.clone()), m),
                    llm::LlmFailure::BudgetExceeded(m) => {
                        (wit_llm::LlmError::BudgetExceeded(m.clone()), m)
                    }
                    llm::LlmFailure::Provider(m) => (wit_llm::LlmError::Provider(m.clone()), m),
                    llm::LlmFailure::Deadline => (
                        wit_llm::LlmError::Deadline,
                        "the call's deadline passed (or it was cancelled) during a completion"
                            .to_string(),
                    ),
                };
                let refused = matches!(
                    error,
                    wit_llm::LlmError::Denied(_) | wit_llm::LlmError::BudgetExceeded(_)
                );
                self.call.ledger.effect(gadget_core::effect::Effect::Llm {
                    model: asked_model,
                    input_tokens: 0,
                    output_tokens: 0,
                    cost: 0.0,
                    refused: refused.then(|| note.clone()),
                    error: (!refused).then(|| note.clone()),
                });
                self.call
                    .ledger
                    .host_warning(format!("llm refused or failed: {note}"), at);
                if matches!(error, wit_llm::LlmError::Deadline) {
                    self.call.time.aborted = true;
                }
                Err(error)
            }
        }
    }
}

/// 0.3.0's `llm` interface is 0.2.0's, over its own generated types.
impl bindings::v0_3_0::gadget::plugin::llm::Host for LlmCall<'_> {
    async fn complete(
        &mut self,
        request: new_llm::CompletionRequest,
    ) -> Result<new_llm::Completion, new_llm::LlmError> {
        let role = |role: new_llm::Role| match role {
            new_llm::Role::System => wit_llm::Role::System,
            new_llm::Role::User => wit_llm::Role::User,
            new_llm::Role::Assistant => wit_llm::Role::Assistant,
        };
        let request = wit_llm::CompletionRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| wit_llm::Message {
                    role: role(m.role),
                    content: m.content,
                })
                .collect(),
            model: request.model,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
        };
        match bindings::v0_2_0::gadget::plugin::llm::Host::complete(self, request).await {
            Ok(c) => Ok(new_llm::Completion {
                text: c.text,
                model: c.model,
                input_tokens: c.input_tokens,
                output_tokens: c.output_tokens,
                cost: c.cost,
            }),
            Err(wit_llm::LlmError::Denied(m)) => Err(new_llm::LlmError::Denied(m)),
            Err(wit_llm::LlmError::BudgetExceeded(m)) => Err(new_llm::LlmError::BudgetExceeded(m)),
            Err(wit_llm::LlmError::Provider(m)) => Err(new_llm::LlmError::Provider(m)),
            Err(wit_llm::LlmError::Deadline) => Err(new_llm::LlmError::Deadline),
        }
    }
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
        /// The usage each answer reports: (in, out).
        usage: (u64, u64),
    }

    impl Recorder {
        fn priced(usage: (u64, u64)) -> Arc<Recorder> {
            Arc::new(Recorder {
                priced: true,
                usage,
                ..Recorder::default()
            })
        }
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
            let (delay, (input_tokens, output_tokens)) = (self.delay, self.usage);
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(LlmAnswer {
                    text: "ok".into(),
                    input_tokens,
                    output_tokens,
                })
            })
        }
    }

    fn access(backend: Arc<Recorder>, budget: Option<f64>, spent: f64) -> LlmAccess {
        LlmAccess {
            backend: Some(backend),
            grant: LlmGrant::new(vec!["p:first".into(), "p:second".into()], budget, None),
            spent,
        }
    }

    /// 400 bytes: at most 400 + 2 * 16 = 432 tokens in.
    fn ask(model: Option<&str>, max_tokens: Option<u32>) -> LlmAsk {
        LlmAsk {
            model: model.map(str::to_string),
            messages: vec![(LlmRole::User, "x".repeat(400))],
            max_tokens,
            temperature: None,
        }
    }

    /// The most `ask(None, None)` can cost at $1 per million tokens.
    const WORST: f64 = (432.0 + 1024.0) / 1e6;

    async fn run(
        access: Option<&LlmAccess>,
        ask: LlmAsk,
        time_left: Duration,
    ) -> Result<LlmDone, LlmFailure> {
        complete("plug", access, ask, time_left, None, None).await
    }

    const LONG: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn each_check_fires_before_anything_is_sent() {
        let backend = Recorder::priced((100, 100));
        let Err(LlmFailure::Denied(m)) = run(None, ask(None, None), LONG).await else {
            panic!("no grant must be denied")
        };
        assert!(m.contains("[plugins.plug] llm"), "{m}");
        let granted = access(backend.clone(), None, 0.0);
        let Err(LlmFailure::Denied(m)) =
            run(Some(&granted), ask(Some("p:other"), None), LONG).await
        else {
            panic!("an ungranted model must be denied")
        };
        assert!(m.contains("granted: p:first, p:second"), "{m}");
        let tight = access(backend.clone(), Some(0.01), 0.0095);
        let Err(LlmFailure::BudgetExceeded(m)) = run(Some(&tight), ask(None, None), LONG).await
        else {
            panic!("over the budget must be refused")
        };
        assert!(
            m.contains("at most 432 tokens in, counting one per byte, and 1024 out"),
            "{m}"
        );
        assert!(backend.sent.lock().unwrap().is_empty(), "nothing was sent");

        // Within the grant: the first model by default, the token cap clamped.
        let done = run(Some(&granted), ask(None, Some(1_000_000)), LONG)
            .await
            .unwrap();
        assert_eq!(done.model, "p:first");
        assert!((done.cost - 0.0002).abs() < 1e-12);
        assert_eq!(done.note, None);
        assert_eq!(
            backend.sent.lock().unwrap()[0].max_tokens,
            MAX_LLM_MAX_TOKENS
        );
    }

    #[tokio::test]
    async fn a_budget_is_checked_against_the_most_a_request_can_cost_not_an_estimate() {
        // Four bytes a token would make this request $0.001124, under the
        // budget; text a tokenizer knows badly can be a token a byte, so
        // the request could cost $0.001456 and is refused.
        let backend = Recorder::priced((432, 1024));
        let budget = access(backend.clone(), Some(0.0012), 0.0);
        let refused = run(Some(&budget), ask(None, None), LONG).await;
        assert!(
            matches!(refused, Err(LlmFailure::BudgetExceeded(_))),
            "{refused:?}"
        );
        // At the bound it fits, and costs what the provider reports.
        let exact = access(backend, Some(WORST), 0.0);
        let done = run(Some(&exact), ask(None, None), LONG).await.unwrap();
        assert!((done.cost - WORST).abs() < 1e-12);
    }

    #[tokio::test]
    async fn a_hostile_usage_report_is_charged_only_what_the_request_could_use() {
        for usage in [(1_000_000_000_000, 5), (u64::MAX, u64::MAX), (5, u64::MAX)] {
            let backend = Recorder::priced(usage);
            let granted = access(backend, Some(1.0), 0.0);
            let done = run(Some(&granted), ask(None, None), LONG).await.unwrap();
            assert!(done.cost <= WORST + 1e-12, "{usage:?} cost {}", done.cost);
            assert!(done.answer.input_tokens <= 432 && done.answer.output_tokens <= 1024);
            let note = done.note.expect("an unbelievable report is noted");
            assert!(note.contains("more than this request can use"), "{note}");
        }
    }

    #[tokio::test]
    async fn the_run_budget_holds_across_calls_even_in_parallel() {
        // Three worst cases fit in $0.005, four do not; each completion
        // really costs $0.0002.
        let backend = Arc::new(Recorder {
            priced: true,
            usage: (100, 100),
            delay: Duration::from_millis(200),
            ..Recorder::default()
        });
        let grant = LlmGrant::new(vec!["p:first".into()], None, Some(0.005));
        let call = || LlmAccess {
            backend: Some(backend.clone()),
            grant: grant.clone(),
            spent: 0.0,
        };
        let calls: Vec<LlmAccess> = (0..10).map(|_| call()).collect();
        let results = futures_util::future::join_all(
            calls.iter().map(|c| run(Some(c), ask(None, None), LONG)),
        )
        .await;
        let done = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(done, 3, "{results:?}");
        for refused in results.iter().filter_map(|r| r.as_ref().err()) {
            let LlmFailure::BudgetExceeded(m) = refused else {
                panic!("{refused:?}")
            };
            assert!(m.contains("for this run (max-usd-per-run)"), "{m}");
        }
        // Settled at what they cost, so a later call has room again.
        assert!((grant.run.used() - 0.0006).abs() < 1e-12);
        assert!(run(Some(&call()), ask(None, None), LONG).await.is_ok());
        // A completion cut off by the deadline keeps its worst case spent.
        let before = grant.run.used();
        let cut = run(Some(&call()), ask(None, None), Duration::from_millis(20)).await;
        assert_eq!(cut.unwrap_err(), LlmFailure::Deadline);
        assert!((grant.run.used() - before - WORST).abs() < 1e-12);
    }

    #[tokio::test]
    async fn an_unpriced_model_cannot_be_budgeted_and_the_deadline_ends_a_wait() {
        let unpriced = Arc::new(Recorder::default());
        let budgeted = access(unpriced.clone(), Some(1.0), 0.0);
        let Err(LlmFailure::BudgetExceeded(m)) = run(Some(&budgeted), ask(None, None), LONG).await
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
