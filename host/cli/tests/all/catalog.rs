//! What a plugin serves besides its gadgets (contract 0.3.0's `catalog`):
//! an MCP client (the official Rust SDK, over stdio) lists and reads the
//! conformance fixture's resources and templates, renders its prompts,
//! completes a prompt argument from its examples, is told `-32602` with
//! the URI for a resource nobody serves and with the missing argument for
//! a prompt, and answers a prompt that asks (the SDK answers the
//! `input_required` round trip through its elicitation handler).

use std::process::Stdio;

use rmcp::model::{
    ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, GetPromptRequestParams, InitializeRequestParams,
    ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::RequestContext;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient, ServiceExt as _};

use crate::common;
use crate::content::conformance_plugins;

/// A client whose person answers every form field with "tests".
struct Answering;

impl ClientHandler for Answering {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new());
        let mut info = InitializeRequestParams::default();
        info.capabilities = capabilities;
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        let fields: serde_json::Map<String, serde_json::Value> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| (k.clone(), serde_json::json!("tests")))
            .collect();
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(fields.into()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_reads_resources_renders_prompts_and_completes() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(conformance_plugins(dir.path()))
        .env("XDG_CACHE_HOME", dir.path())
        .arg("mcp")
        .stderr(Stdio::null());
    let client = Answering
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();

    let resources = client.list_resources(None).await.unwrap().resources;
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["test://static-text", "test://static-binary"]);
    let templates = client.list_resource_templates(None).await.unwrap();
    assert_eq!(
        templates.resource_templates[0].uri_template,
        "test://template/{id}/data"
    );

    let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri));
    let text = read("test://static-text").await.unwrap();
    assert!(matches!(
        &text.contents[0],
        ResourceContents::TextResourceContents { text, .. } if text == "This is the content of the static text resource."
    ));
    let binary = read("test://static-binary").await.unwrap();
    assert!(matches!(
        &binary.contents[0],
        ResourceContents::BlobResourceContents { blob, mime_type, .. }
            if blob.starts_with("iVBORw0KGgo") && mime_type.as_deref() == Some("image/png")
    ));
    let templated = read("test://template/42/data").await.unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &templated.contents[0] else {
        panic!("{templated:?}")
    };
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(text).unwrap()["id"],
        "42"
    );
    // Nobody serves it: -32602 naming the URI, never an empty result.
    let missing = read("test://template/4/2/data").await.unwrap_err();
    let rmcp::ServiceError::McpError(error) = missing else {
        panic!("{missing:?}")
    };
    assert_eq!(error.code.0, -32602);
    assert_eq!(error.data.unwrap()["uri"], "test://template/4/2/data");

    let prompts = client.list_prompts(None).await.unwrap().prompts;
    assert!(
        prompts
            .iter()
            .any(|p| p.name == "test_prompt_with_arguments")
    );
    let get = |name: &str, arguments: serde_json::Value| {
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = arguments.as_object().cloned();
        client.get_prompt(params)
    };
    let rendered = get(
        "test_prompt_with_arguments",
        serde_json::json!({"arg1": "hello", "arg2": "world"}),
    )
    .await
    .unwrap();
    let said = serde_json::to_value(&rendered.messages[0]).unwrap();
    assert_eq!(
        said["content"]["text"],
        "Prompt with arguments: arg1='hello', arg2='world'"
    );
    let short = get(
        "test_prompt_with_arguments",
        serde_json::json!({"arg1": "x"}),
    )
    .await
    .unwrap_err();
    assert!(
        short.to_string().contains("needs the argument arg2"),
        "{short}"
    );

    // A prompt that asks: the person's answer is rendered in it.
    let asked = get("test_input_required_result_prompt", serde_json::json!({}))
        .await
        .unwrap();
    let said = serde_json::to_value(&asked.messages[0]).unwrap();
    assert_eq!(said["content"]["text"], "Use this context: tests");

    let values = client
        .complete_prompt_simple("test_prompt_with_arguments", "arg1", "par")
        .await
        .unwrap();
    assert_eq!(values, ["paris", "park", "party"]);

    // A session subscribes to at most MAX_SUBSCRIPTIONS URIs.
    #[allow(
        deprecated,
        reason = "resources/subscribe is what 2025-11-25 clients use"
    )]
    for i in 0..=gadget_mcp::server::MAX_SUBSCRIPTIONS {
        let subscribed = client
            .subscribe(rmcp::model::SubscribeRequestParams::new(format!(
                "test://s/{i}"
            )))
            .await;
        if i < gadget_mcp::server::MAX_SUBSCRIPTIONS {
            subscribed.unwrap();
        } else {
            let refused = subscribed.unwrap_err().to_string();
            assert!(refused.contains("unsubscribe from one first"), "{refused}");
        }
    }
    client.cancel().await.unwrap();
}

/// A client whose model answers every sampling request with one line.
struct Sampling;

impl ClientHandler for Sampling {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::default();
        capabilities.sampling = Some(Default::default());
        let mut info = InitializeRequestParams::default();
        info.capabilities = capabilities;
        info
    }

    #[allow(
        deprecated,
        reason = "sampling is how a 2025-11-25 client offers its model"
    )]
    async fn create_message(
        &self,
        request: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, McpError> {
        // The gadget's system message travels as the system prompt.
        assert!(
            request
                .system_prompt
                .unwrap_or_default()
                .contains("summarise")
        );
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text("Cats sleep a lot."),
            "client-model".into(),
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gadgets_completion_can_be_the_clients_model_where_granted() {
    use rmcp::model::CallToolRequestParams;

    let dir = tempfile::tempdir().unwrap();
    let serve = |grant: Option<&str>| {
        let mut command = tokio::process::Command::new(common::gadget_bin());
        command
            .arg("--plugins")
            .arg(common::shipped_plugins())
            .env("XDG_CACHE_HOME", dir.path())
            .env_remove("GADGET_CONFIG")
            .stderr(Stdio::null());
        if let Some(grant) = grant {
            command.args(["--grant", grant]);
        }
        command.arg("mcp");
        command
    };
    let arguments = serde_json::json!({"text": "Cats sleep most of the day and night."});
    let call = CallToolRequestParams::new("Summarize")
        .with_arguments(arguments.as_object().unwrap().clone());

    // Granted the client's model: the client's sampling answers.
    let command = serve(Some("summarize:llm=client:default"));
    let client = Sampling
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let result = client.call_tool(call.clone()).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let text = result.content[0].as_text().unwrap().text.clone();
    assert!(text.contains("Cats sleep a lot."), "{text}");
    client.cancel().await.unwrap();

    // The same grant and a client that cannot sample: the gadget is told
    // who would answer.
    let command = serve(Some("summarize:llm=client:default"));
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let result = client.call_tool(call).await.unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = result.content[0].as_text().unwrap().text.clone();
    assert!(text.contains("sampling"), "{text}");
    client.cancel().await.unwrap();
}
