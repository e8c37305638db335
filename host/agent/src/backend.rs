//! The agent's providers behind the runtime's `llm` import: a gadget's
//! completion (`provider:model`) goes to the provider of that name, is
//! retried like the loop's requests, and is priced by the model table.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use gadget_core::llm::{LlmAnswer, LlmBackend, LlmPrice, LlmRequest, LlmRole};
use gadget_core::tool::BoxFuture;

use crate::agent::RetryPolicy;
use crate::models::ModelTable;
use crate::provider::{ChatMessage, ChatRequest, Provider, StreamItem, Usage};

/// Providers by name (`openai`, `anthropic`), or why one is unusable (a
/// missing key). Shared by gadgets' completions and sub-agents.
#[derive(Default)]
pub struct Providers {
    map: HashMap<String, Result<Arc<dyn Provider>, String>>,
}

impl Providers {
    /// Serves `name` with `provider`, or answers with `Err(why)`.
    pub fn with(mut self, name: &str, provider: Result<Arc<dyn Provider>, String>) -> Providers {
        self.map.insert(name.to_string(), provider);
        self
    }

    /// The provider of a `provider:model` name, and the model's own name.
    pub fn for_model(&self, model: &str) -> Result<(Arc<dyn Provider>, String), String> {
        let (provider, name) = model
            .split_once(':')
            .ok_or_else(|| format!("'{model}' is not provider:model"))?;
        match self.map.get(provider) {
            Some(Ok(p)) => Ok((p.clone(), name.to_string())),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!("no provider named '{provider}'")),
        }
    }
}

/// Gadgets' completions through [`Providers`], priced by the model table.
pub struct ProviderBackend {
    providers: Arc<Providers>,
    table: ModelTable,
    retry: RetryPolicy,
}

impl ProviderBackend {
    pub fn new(
        providers: Arc<Providers>,
        table: ModelTable,
        retry: RetryPolicy,
    ) -> ProviderBackend {
        ProviderBackend {
            providers,
            table,
            retry,
        }
    }
}

impl LlmBackend for ProviderBackend {
    fn price(&self, model: &str) -> Option<LlmPrice> {
        let (provider, name) = model.split_once(':')?;
        self.table.lookup(provider, name).map(|info| LlmPrice {
            input_per_mtok: info.input_per_mtok,
            output_per_mtok: info.output_per_mtok,
        })
    }

    fn complete(&self, request: LlmRequest) -> BoxFuture<'static, Result<LlmAnswer, String>> {
        let found = self.providers.for_model(&request.model);
        let retry = self.retry;
        Box::pin(async move {
            let (provider, model) = found?;
            let mut chat = ChatRequest {
                model,
                system: Vec::new(),
                messages: Vec::new(),
                max_tokens: request.max_tokens,
                temperature: request.temperature,
                tools: Vec::new(),
            };
            for (role, text) in request.messages {
                match role {
                    LlmRole::System => chat.system.push(text),
                    LlmRole::User => chat.messages.push(ChatMessage::user(text)),
                    LlmRole::Assistant => chat.messages.push(ChatMessage::assistant(text)),
                }
            }
            let mut stream = retry
                .send(&*provider, &chat, |_, _, _| {})
                .await
                .map_err(|e| e.to_string())?;
            let mut text = String::new();
            let mut usage = Usage::default();
            while let Some(item) = stream.next().await {
                match item.map_err(|e| e.to_string())? {
                    StreamItem::Text(piece) => text.push_str(&piece),
                    StreamItem::Usage(u) => usage.merge(u),
                    // Completions offer no tools.
                    StreamItem::Finish(_) | StreamItem::ToolCall(_) => {}
                }
            }
            Ok(LlmAnswer {
                text,
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            })
        })
    }
}
