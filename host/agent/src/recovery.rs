//! What a session does when a request still fails after its retries
//! (llmist's `afterLLMError` controller): end with the error (the default),
//! send the same request to a fallback model, or go on as if the model had
//! answered with a given response (llmist's `recover` with a
//! `fallbackResponse`; any block in it runs, a plain text is the answer).
//!
//! The operator configures it in the policy (`[llm.on-error]`, read by the
//! command line into an [`OnLlmError`]); a program that embeds the agent
//! implements [`LlmErrorController`] itself.
//!
//! Only a request that failed before its response started is recovered: a
//! stream that breaks mid-response has already started its calls, and
//! sending the request again would run them twice.

use std::sync::Arc;

use futures_util::stream;

use crate::models::ModelInfo;
use crate::provider::{Provider, ProviderError, ResponseStream, StreamItem};

/// Another model to send a failed request to.
#[derive(Clone)]
pub struct Fallback {
    pub provider: Arc<dyn Provider>,
    /// The model name the provider knows.
    pub model: String,
    /// Its prices, when the model table knows them.
    pub model_info: Option<ModelInfo>,
}

impl std::fmt::Debug for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.provider.name(), self.model)
    }
}

/// The controller's answer to one failure.
#[derive(Debug, Clone)]
pub enum AfterLlmError {
    /// The session ends with the error.
    Rethrow,
    /// The request goes to this model instead.
    Fallback(Fallback),
    /// The session goes on as if the model had answered this.
    Recover { response: String },
}

/// Decides what follows a request that failed after its retries;
/// `tried` counts the fallbacks this request already went to (each of
/// which failed too), so a controller moves down its list.
pub trait LlmErrorController: Send + Sync {
    fn after_llm_error(&self, error: &ProviderError, tried: usize) -> AfterLlmError;
}

/// The most fallbacks one request goes to: each is a full request with
/// its own retries, and a list longer than this is a configuration
/// mistake, not resilience.
pub const MAX_FALLBACKS: usize = 4;

/// The operator's handler: each fallback in order, then the response if
/// there is one, else the error.
#[derive(Debug, Clone, Default)]
pub struct OnLlmError {
    pub fallbacks: Vec<Fallback>,
    pub response: Option<String>,
}

impl LlmErrorController for OnLlmError {
    fn after_llm_error(&self, _error: &ProviderError, tried: usize) -> AfterLlmError {
        match self.fallbacks.get(tried).filter(|_| tried < MAX_FALLBACKS) {
            Some(fallback) => AfterLlmError::Fallback(fallback.clone()),
            None => match &self.response {
                Some(response) => AfterLlmError::Recover {
                    response: response.clone(),
                },
                None => AfterLlmError::Rethrow,
            },
        }
    }
}

/// A request that failed after its retries, handled as the controller
/// says: the response that started instead, and the prices it is counted
/// at when not the session's model's (`Some(None)`: unknown), or the
/// error that ends the session. `tell` hears each decision, `on_retry`
/// each retry of a fallback.
pub(crate) async fn recover(
    controller: &dyn LlmErrorController,
    retry: &crate::retry::RetryPolicy,
    request: &crate::provider::ChatRequest,
    mut error: ProviderError,
    mut tell: impl FnMut(&ProviderError, &AfterLlmError),
    mut on_retry: impl FnMut(u32, std::time::Duration, &ProviderError),
) -> Result<(ResponseStream, Option<Option<ModelInfo>>), ProviderError> {
    for tried in 0..=MAX_FALLBACKS {
        let action = controller.after_llm_error(&error, tried);
        tell(&error, &action);
        match action {
            AfterLlmError::Rethrow => break,
            AfterLlmError::Recover { response } => return Ok((response_of(response), None)),
            AfterLlmError::Fallback(fallback) => {
                let mut request = request.clone();
                request.model = fallback.model.clone();
                match retry
                    .send(&*fallback.provider, &request, &mut on_retry)
                    .await
                {
                    Ok(stream) => return Ok((stream, Some(fallback.model_info))),
                    Err(failed) => error = failed,
                }
            }
        }
    }
    Err(error)
}

/// A response that is `text`, as if streamed (no usage: nothing was
/// spent on it).
pub(crate) fn response_of(text: String) -> ResponseStream {
    Box::pin(stream::iter([Ok(StreamItem::Text(text))]))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nowhere;

    impl Provider for Nowhere {
        fn name(&self) -> &str {
            "openai"
        }

        fn stream<'a>(
            &'a self,
            _request: &'a crate::provider::ChatRequest,
        ) -> crate::provider::BoxFuture<'a, Result<ResponseStream, ProviderError>> {
            Box::pin(async {
                Err(ProviderError::StreamBroken {
                    provider: "openai".into(),
                    cause: "nowhere".into(),
                })
            })
        }
    }

    #[test]
    fn fallbacks_go_in_order_then_the_response_then_the_error() {
        let error = ProviderError::StreamBroken {
            provider: "openai".into(),
            cause: "refused".into(),
        };
        let fallback = |model: &str| Fallback {
            provider: Arc::new(Nowhere),
            model: model.into(),
            model_info: None,
        };
        let handler = OnLlmError {
            fallbacks: vec![fallback("a"), fallback("b")],
            response: Some("Sorry.".into()),
        };
        let models: Vec<String> = (0..4)
            .map(|tried| match handler.after_llm_error(&error, tried) {
                AfterLlmError::Fallback(f) => f.model,
                AfterLlmError::Recover { response } => response,
                AfterLlmError::Rethrow => "rethrow".into(),
            })
            .collect();
        assert_eq!(models, ["a", "b", "Sorry.", "Sorry."]);
        let bare = OnLlmError::default();
        assert!(matches!(
            bare.after_llm_error(&error, 0),
            AfterLlmError::Rethrow
        ));
        let many = OnLlmError {
            fallbacks: (0..MAX_FALLBACKS + 2)
                .map(|i| fallback(&i.to_string()))
                .collect(),
            response: None,
        };
        assert!(matches!(
            many.after_llm_error(&error, MAX_FALLBACKS),
            AfterLlmError::Rethrow
        ));
    }
}
