//! [`UpstreamTool`]: one tool of an upstream MCP server, as a [`Tool`]. A
//! call is a `tools/call` request with a progress token; its deadline and
//! the abort signal cancel it upstream; its result becomes the text the
//! model reads, bounded, and an error result the error the model sees.

use std::sync::{Arc, Weak};
use std::time::Instant;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    ResourceContents, ServerResult,
};
use rmcp::service::PeerRequestOptions;

use gadget_core::access::Declared;
use gadget_core::call::{CallError, CallReport, GadgetSpec, Outcome};
use gadget_core::content::{
    Content, Media, ResourceBody, ResourceContents as CoreResource, ResourceLink, Rich,
    from_base64, model_text,
};
use gadget_core::ledger::truncate;
use gadget_core::limits::OwnTimeout;
use gadget_core::params::ParamSchema;
use gadget_core::tool::{BoxFuture, Origin, Tool, ToolCall, ToolCard};

use super::connection::Upstream;
use super::oauth::MAX_AUTHORIZATIONS;
use super::spec::ORIGIN_PREFIX;

/// Largest result taken from one call, in bytes of text: the rest is cut
/// with a note (the executor's output limit then applies as to any tool).
pub const MAX_RESULT_BYTES: usize = 1 << 20;
use super::elicitation::Asker;

/// The most `input_required` rounds one call answers before it fails: a
/// server that keeps asking must not hold a call forever.
pub const MAX_INPUT_ROUNDS: usize = 10;

/// Longest tool name served, in bytes (prefix included): the limit on a
/// gadget's name (`gadget_runtime::specs::MAX_GADGET_NAME_BYTES`).
pub const MAX_NAME_BYTES: usize = 64;
/// Longest description taken from a server, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 4 << 10;
/// Largest input schema taken from a server, in bytes of JSON.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;
/// One upstream tool.
pub struct UpstreamTool {
    server: Weak<Upstream>,
    server_name: String,
    /// Its name on its server (the served name has the prefix).
    upstream_name: String,
    /// Its timeout is the server's (declared, so a run's default does not
    /// replace it).
    card: ToolCard,
    declared: Declared,
    origin: Arc<Origin>,
}

impl std::fmt::Debug for UpstreamTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTool")
            .field("server", &self.server_name)
            .field("name", &self.card.spec.name)
            .finish()
    }
}

impl UpstreamTool {
    /// The tool a server listed, checked: a name the host can serve, a
    /// bounded description, a schema that compiles.
    pub(super) fn new(
        server: &Arc<Upstream>,
        tool: rmcp::model::Tool,
    ) -> Result<UpstreamTool, String> {
        let spec_of = server.spec();
        let shown = truncate(tool.name.to_string(), MAX_NAME_BYTES);
        let refused = |why: &str| format!("tool '{shown}' is not served: {why}");
        // A gadget name is a letter, then letters, digits and `_`: other
        // characters of the server's name (`get-sum`) become `_`.
        let mapped: String = tool
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let name = format!("{}{mapped}", spec_of.prefix);
        if tool.name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err(refused(
                "a served name must start with a letter (set a prefix)",
            ));
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(refused(&format!(
                "its name is over {MAX_NAME_BYTES} bytes with the prefix"
            )));
        }
        if gadget_core::viewer::is_reserved(&name) {
            return Err(refused("it is the name of a tool built into the host"));
        }
        let schema_text = serde_json::to_string(&*tool.input_schema).unwrap_or_default();
        if schema_text.len() > MAX_SCHEMA_BYTES {
            return Err(refused(&format!(
                "its input schema is over {MAX_SCHEMA_BYTES} bytes"
            )));
        }
        let schema = ParamSchema::compile(&schema_text).map_err(|e| refused(&e.to_string()))?;
        let annotations = tool.annotations.clone().unwrap_or_default();
        let label = tool.title.clone().or(annotations.title.clone());
        Ok(UpstreamTool {
            server: Arc::downgrade(server),
            server_name: spec_of.name.clone(),
            upstream_name: tool.name.to_string(),
            card: ToolCard::new(
                GadgetSpec {
                    name,
                    label: label.map(|l| truncate(l, MAX_NAME_BYTES * 2)),
                    description: truncate(
                        tool.description.as_deref().unwrap_or_default().to_string(),
                        MAX_DESCRIPTION_BYTES,
                    ),
                    parameters_schema: schema_text,
                    examples: Vec::new(),
                    timeout_ms: Some(spec_of.timeout.as_millis().min(u32::MAX as u128) as u32),
                    exclusive: false,
                    max_concurrent: None,
                },
                schema,
                OwnTimeout::Declared(spec_of.timeout),
            ),
            declared: Declared {
                read_only: annotations.read_only_hint,
                destructive: annotations.destructive_hint,
                idempotent: annotations.idempotent_hint,
                open_world: annotations.open_world_hint,
                // An upstream server runs its own tasks; its tools are
                // called within the request here.
                tasks: Default::default(),
            },
            origin: Arc::new(Origin {
                plugin: format!("{}{}", ORIGIN_PREFIX, spec_of.name),
                digest: String::new(),
                source: spec_of.source(),
                signature: "unsigned".into(),
            }),
        })
    }

    /// [`Self::new`], as a connection keeps its tools.
    pub(super) fn served(
        server: &Arc<Upstream>,
        tool: rmcp::model::Tool,
    ) -> Result<Arc<dyn Tool>, String> {
        UpstreamTool::new(server, tool).map(|tool| Arc::new(tool) as Arc<dyn Tool>)
    }

    /// The server it comes from.
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    async fn call(&self, call: ToolCall) -> CallReport {
        let started = Instant::now();
        let failed =
            |message: String| CallReport::of(Err(CallError::Failed { message }), started.elapsed());
        let Some(server) = self.server.upgrade() else {
            return failed(format!("MCP server '{}' was stopped", self.server_name));
        };
        let peer = match server.peer().await {
            Ok(peer) => peer,
            Err(why) => return failed(why),
        };
        let arguments = match &*call.params {
            serde_json::Value::Object(map) => Some(map.clone()),
            serde_json::Value::Null => None,
            _ => {
                return CallReport::of(
                    Err(CallError::InvalidArguments {
                        message: "the arguments must be a JSON object".into(),
                    }),
                    started.elapsed(),
                );
            }
        };
        let mut params = CallToolRequestParams::new(self.upstream_name.clone());
        params.arguments = arguments;
        let asker = call.scope.human.as_ref().map(|human| Asker {
            human: human.clone(),
            call_id: call.id.clone(),
            gadget: self.card.spec.name.clone(),
        });
        let timeout = call
            .deadline
            .or(self.card.own_timeout.duration())
            .unwrap_or(gadget_core::limits::DEFAULT_TIMEOUT);
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rounds = 0;
        // What the earlier rounds reported, kept for the call's report.
        let (mut progress, mut logs) = (Vec::new(), Vec::new());
        // Each round a request; a server on protocol 2026-07-28 that asks
        // answers `input_required`, and is called again with the answers
        // and its state, within the call's one deadline.
        let mut authorizations = 0;
        let (ended, token, handle) = loop {
            // Which authorization the round is sent with: a refusal
            // (401, 403 insufficient_scope) authorizes once for all the
            // calls it met, and the round is sent again.
            let seen = server.authorization();
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let mut handle = match peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
            {
                Ok(handle) => handle,
                Err(e) => {
                    server.broken().await;
                    return failed(format!(
                        "MCP server '{}' could not be sent the call: {e}",
                        self.server_name
                    ));
                }
            };
            let token = handle.progress_token.clone();
            server.watch(token.clone(), call.observer.clone());
            if let Some(asker) = &asker {
                server.asks(token.clone(), asker.clone());
            }
            let ended = tokio::select! {
                answer = &mut handle.rx => Ended::Answered(answer),
                _ = tokio::time::sleep_until(deadline) => Ended::TimedOut,
                _ = gadget_core::signal::raised(call.signal.as_ref()) => Ended::Cancelled,
            };
            match ended {
                Ended::Answered(Ok(Ok(ServerResult::InputRequiredResult(asked))))
                    if rounds < MAX_INPUT_ROUNDS =>
                {
                    rounds += 1;
                    let (seen, logged) = server.unwatch(&token);
                    progress.extend(seen);
                    logs.extend(logged);
                    let answers = server
                        .answer_inputs(asker.clone(), asked.input_requests.unwrap_or_default())
                        .await;
                    params.input_responses = Some(answers);
                    params.request_state = asked.request_state;
                }
                Ended::Answered(Ok(Err(e)))
                    if authorizations < MAX_AUTHORIZATIONS && e.auth_challenge().is_some() =>
                {
                    authorizations += 1;
                    let (seen_progress, logged) = server.unwatch(&token);
                    progress.extend(seen_progress);
                    logs.extend(logged);
                    let challenge = e.auth_challenge().unwrap_or_default().to_string();
                    if let Err(why) = server.authorize(&challenge, seen).await {
                        return failed(format!(
                            "MCP server '{}' refused the call ({e}); {why}",
                            self.server_name
                        ));
                    }
                }
                ended => break (ended, token, handle),
            }
        };
        let (seen, logged) = server.unwatch(&token);
        progress.extend(seen);
        logs.extend(logged);
        let result = self
            .outcome_of_round(&server, &peer, ended, handle, timeout)
            .await;
        let mut report = CallReport::of(result, started.elapsed());
        report.progress = progress;
        report.logs = logs;
        report
    }
}

/// How the last round of a call ended.
enum Ended<T> {
    Answered(T),
    TimedOut,
    Cancelled,
}

/// What a round's request got back.
type Answer =
    Result<Result<ServerResult, rmcp::ServiceError>, tokio::sync::oneshot::error::RecvError>;

impl UpstreamTool {
    /// The call's outcome from how its last round ended: a deadline or a
    /// cancellation is told to the server (so it can stop the work).
    async fn outcome_of_round(
        &self,
        server: &Upstream,
        peer: &rmcp::Peer<rmcp::RoleClient>,
        ended: Ended<Answer>,
        handle: rmcp::service::RequestHandle<rmcp::RoleClient>,
        timeout: std::time::Duration,
    ) -> Result<Outcome, CallError> {
        match ended {
            Ended::TimedOut => {
                // The server is told, so it can stop the work.
                let _ = handle
                    .cancel(Some("the host's deadline for the call passed".into()))
                    .await;
                Err(CallError::Timeout {
                    gadget: self.card.spec.name.clone(),
                    timeout_ms: timeout.as_millis() as u64,
                })
            }
            Ended::Cancelled => {
                let _ = handle.cancel(Some("the call was cancelled".into())).await;
                Err(CallError::Cancelled {
                    gadget: self.card.spec.name.clone(),
                })
            }
            Ended::Answered(Ok(Ok(ServerResult::CallToolResult(result)))) => outcome_of(result),
            Ended::Answered(Ok(Ok(ServerResult::InputRequiredResult(_)))) => {
                Err(CallError::Failed {
                    message: format!(
                        "MCP server '{}' still asked for input after {MAX_INPUT_ROUNDS} rounds of answers",
                        self.server_name
                    ),
                })
            }
            Ended::Answered(Ok(Ok(_))) => Err(CallError::Failed {
                message: format!(
                    "MCP server '{}' answered tools/call with something else than a tool result",
                    self.server_name
                ),
            }),
            Ended::Answered(Ok(Err(e))) => {
                if peer.is_transport_closed() {
                    server.broken().await;
                }
                Err(CallError::Failed {
                    message: format!("MCP server '{}': {e}", self.server_name),
                })
            }
            // The session ended under the call (the server died): the next
            // call starts it again.
            Ended::Answered(Err(_)) => {
                server.broken().await;
                Err(CallError::Failed {
                    message: format!(
                        "MCP server '{}' ended during the call; it is started again for the next one",
                        self.server_name
                    ),
                })
            }
        }
    }
}

/// A tool result as the host carries it: every part whole (images, audio,
/// resources and links pass through to an MCP client and reach a model
/// that takes them), and the text a text-only model reads; an error result
/// is the error it reads. A result over [`MAX_RESULT_BYTES`] is cut to its
/// text.
fn outcome_of(result: CallToolResult) -> Result<Outcome, CallError> {
    let rich = rich_of(result.content, result.structured_content);
    let text = truncate(model_text(&rich), MAX_RESULT_BYTES);
    if result.is_error == Some(true) {
        return Err(CallError::Failed { message: text });
    }
    let plain = rich.structured.is_none()
        && rich
            .content
            .iter()
            .all(|part| matches!(part, Content::Text { .. }));
    let whole = !plain && rich.size_bytes() <= MAX_RESULT_BYTES as u64;
    Ok(Outcome::Result {
        result: text,
        details: None,
        rich: whole.then(|| Box::new(rich)),
    })
}

/// The server's content blocks as the host's parts. Bytes the server sent
/// as base64 are decoded; a block whose base64 does not decode is said in
/// words, and a media type outside RFC 6838's grammar is replaced (as a
/// gadget's own is).
fn rich_of(blocks: Vec<ContentBlock>, structured: Option<serde_json::Value>) -> Rich {
    let media = |kind: &str, data: String, mime_type: String, part: fn(Media) -> Content| {
        match from_base64(&data) {
            Some(data) => part(Media { mime_type, data }),
            None => Content::Text {
                text: format!("[{kind} {mime_type}: the server's base64 did not decode]"),
            },
        }
    };
    // A kind a newer protocol adds: said, not dropped in silence.
    let unknown = |what: &str| Content::Text {
        text: format!("[a {what} of a kind this host does not know]"),
    };
    let content = blocks
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(content) => Content::Text { text: content.text },
            ContentBlock::Image(image) => {
                media("image", image.data, image.mime_type, Content::Image)
            }
            ContentBlock::Audio(audio) => {
                media("audio", audio.data, audio.mime_type, Content::Audio)
            }
            ContentBlock::Resource(resource) => match resource.resource {
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    ..
                } => Content::Resource(CoreResource {
                    uri,
                    mime_type,
                    body: ResourceBody::Text(text),
                }),
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => match from_base64(&blob) {
                    Some(bytes) => Content::Resource(CoreResource {
                        uri,
                        mime_type,
                        body: ResourceBody::Blob(bytes),
                    }),
                    None => Content::Text {
                        text: format!("[resource {uri}: the server's base64 did not decode]"),
                    },
                },
                _ => unknown("resource"),
            },
            ContentBlock::ResourceLink(link) => Content::ResourceLink(ResourceLink {
                uri: link.uri,
                name: link.name,
                title: link.title,
                description: link.description,
                mime_type: link.mime_type,
            }),
            _ => unknown("content block"),
        })
        .collect();
    let mut rich = Rich {
        content,
        structured: structured.filter(serde_json::Value::is_object),
    };
    let mut replaced = Vec::new();
    for part in &mut rich.content {
        part.check_media_types(&mut replaced);
    }
    if !replaced.is_empty() {
        tracing::warn!(replaced = ?replaced, "an upstream result's media types were replaced");
    }
    rich
}

impl Tool for UpstreamTool {
    fn card(&self) -> &ToolCard {
        &self.card
    }

    fn declared(&self) -> Declared {
        self.declared
    }

    /// Not the sandbox's: a process (or a service) the policy does not
    /// bound beyond its calls, and a person deciding is told so.
    fn access(&self) -> gadget_core::access::Access {
        gadget_core::access::Access {
            outside: Some(format!(
                "a tool of the MCP server '{}' ({})",
                self.server_name, self.origin.source
            )),
            ..Default::default()
        }
    }

    /// Its server, for the journal, the spans and listings: no component,
    /// so no digest and no signature.
    fn origin(&self) -> Option<Arc<Origin>> {
        Some(self.origin.clone())
    }

    fn run(&self, call: ToolCall) -> BoxFuture<'_, CallReport> {
        Box::pin(self.call(call))
    }
}
