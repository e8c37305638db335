//! `sampling/createMessage` from an upstream server: refused unless the
//! operator granted that server a model and a budget
//! (`[mcp-servers.NAME] llm`), and then answered through the host's own LLM
//! providers, bounded like a gadget's `llm` import: the budgets are checked
//! against the most a request can cost (one token per byte in, every
//! allowed token out), never an estimate.
// Sampling is deprecated by SEP-2577, but servers still ask for it; the
// operator decides whether they get it.
#![allow(deprecated, reason = "servers still send sampling/createMessage")]

use std::sync::{Arc, Mutex};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, Role, SamplingMessage,
    SamplingMessageContentBlock,
};

use gadget_core::ledger::truncate;
use gadget_core::llm::{LlmBackend, LlmRequest, LlmRole};

/// Most tokens one sampling request may ask for.
pub const MAX_SAMPLING_TOKENS: u32 = 4096;
/// Largest text one sampling request may send, in bytes (all messages).
pub const MAX_SAMPLING_INPUT_BYTES: usize = 256 << 10;

/// What the operator granted one server.
pub struct Sampling {
    pub backend: Arc<dyn LlmBackend>,
    /// `provider:model`: every request goes to it (a server's model
    /// preferences are hints the host does not take).
    pub model: String,
    /// What one request may cost, USD.
    pub max_usd_per_request: Option<f64>,
    /// What all of the server's requests may cost together while the host
    /// runs, USD.
    pub max_usd_total: Option<f64>,
    /// What its requests have cost (and reserved) so far, USD.
    pub spent: Mutex<f64>,
}

impl std::fmt::Debug for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampling")
            .field("model", &self.model)
            .field("max_usd_per_request", &self.max_usd_per_request)
            .field("max_usd_total", &self.max_usd_total)
            .finish()
    }
}

impl Sampling {
    pub fn new(
        backend: Arc<dyn LlmBackend>,
        model: String,
        max_usd_per_request: Option<f64>,
        max_usd_total: Option<f64>,
    ) -> Sampling {
        Sampling {
            backend,
            model,
            max_usd_per_request,
            max_usd_total,
            spent: Mutex::new(0.0),
        }
    }

    /// Answers one request, within the grant.
    pub(super) async fn answer(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, McpError> {
        let refuse = |why: String| McpError::invalid_request(why, None);
        let mut messages = Vec::new();
        if let Some(system) = &params.system_prompt {
            messages.push((LlmRole::System, system.clone()));
        }
        for message in params.messages {
            let text: Vec<String> = message
                .content
                .into_vec()
                .into_iter()
                .filter_map(|block| match block {
                    SamplingMessageContentBlock::Text(text) => Some(text.text),
                    _ => None,
                })
                .collect();
            let role = match message.role {
                Role::User => LlmRole::User,
                Role::Assistant => LlmRole::Assistant,
            };
            messages.push((role, text.join("\n")));
        }
        let input: usize = messages.iter().map(|(_, text)| text.len()).sum();
        if input > MAX_SAMPLING_INPUT_BYTES {
            return Err(refuse(format!(
                "the request's messages are {input} bytes, over the host's limit of {MAX_SAMPLING_INPUT_BYTES}"
            )));
        }
        let max_tokens = params.max_tokens.clamp(1, MAX_SAMPLING_TOKENS);
        let max_input = gadget_core::llm::max_input_tokens(&messages);
        let price = self.backend.price(&self.model);
        let worst = match price {
            Some(price) => price.cost(max_input, u64::from(max_tokens)),
            None if self.max_usd_per_request.is_some() || self.max_usd_total.is_some() => {
                return Err(refuse(format!(
                    "model '{}' has no known price, so the budget of MCP server '{server}' cannot be checked",
                    self.model
                )));
            }
            None => 0.0,
        };
        if let Some(cap) = self.max_usd_per_request
            && worst > cap
        {
            return Err(refuse(format!(
                "this request could cost up to ${worst:.6}, over the ${cap} per request granted to MCP server '{server}'"
            )));
        }
        // Reserved before it is sent: requests at once cannot overspend.
        {
            let mut spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(total) = self.max_usd_total
                && *spent + worst > total
            {
                return Err(refuse(format!(
                    "this request could cost up to ${worst:.6} and ${:.6} of the ${total} granted to MCP server '{server}' is left",
                    (total - *spent).max(0.0)
                )));
            }
            *spent += worst;
        }
        let answered = self
            .backend
            .complete(LlmRequest {
                model: self.model.clone(),
                messages,
                max_tokens,
                temperature: params.temperature,
            })
            .await;
        let mut spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        let answer = match answered {
            Ok(answer) => answer,
            Err(message) => {
                *spent -= worst;
                return Err(McpError::internal_error(
                    truncate(message.to_string(), 4096),
                    None,
                ));
            }
        };
        // Charged as reported, up to what the request could use.
        let cost = price.map_or(0.0, |p| {
            p.cost(
                answer.input_tokens.min(max_input),
                answer.output_tokens.min(u64::from(max_tokens)),
            )
        });
        *spent += cost - worst;
        tracing::info!(
            mcp_server = server,
            model = %self.model,
            cost,
            "answered a sampling request"
        );
        let mut result = CreateMessageResult::new(
            SamplingMessage::assistant_text(answer.text),
            self.model.clone(),
        );
        result.stop_reason = Some("endTurn".into());
        Ok(result)
    }
}
