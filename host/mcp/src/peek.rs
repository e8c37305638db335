//! What the server's guard reads of a request before the MCP SDK does:
//! whether it holds a `tools/call` (it then takes a call slot), and which
//! tool a single call names (a per-client rate limit may refuse the whole
//! request). Each reads only the fields it needs.

use crate::direct::DirectCall;
use crate::server::GadgetServer;

/// Whether a JSON-RPC body is (or, in a batch, holds) a `tools/call`:
/// read for its `method` alone, nothing else kept. A body that does not
/// read so (a repeated key, say) is read whole, as rmcp will read it, so
/// that no call passes the cap unseen.
pub(crate) fn is_tool_call(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    let calls = |m: &Method| m.method.as_deref() == Some("tools/call");
    let batch = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let light = if batch {
        serde_json::from_slice::<Vec<Method>>(body).map(|batch| batch.iter().any(calls))
    } else {
        serde_json::from_slice::<Method>(body).map(|message| calls(&message))
    };
    light.unwrap_or_else(
        |_| match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(serde_json::Value::Array(batch)) => {
                batch.iter().any(|m| m["method"] == "tools/call")
            }
            Ok(message) => message["method"] == "tools/call",
            Err(_) => false,
        },
    )
}

/// A per-client rate limit the call in this request is over, if any: the
/// whole request is then refused (HTTP 429) before it is read further.
/// Nothing is counted here; the call path counts the calls it admits.
/// Replicas sharing a store ask it (one round trip, and only when a
/// client rule counts the tool).
pub(crate) async fn over_client_limit(
    server: &GadgetServer,
    direct: Option<&DirectCall>,
    body: &[u8],
    client: &gadget_core::client::ClientId,
) -> Option<gadget_core::rate::RateLimited> {
    let rates = server.rates.as_ref()?;
    let name = match direct {
        Some(call) => std::borrow::Cow::Borrowed(call.tool_name()),
        None => std::borrow::Cow::Owned(tool_name(body)?),
    };
    match rates.shared() {
        Some(store) => rates
            .admit_shared(&**store, &[&name], client, true)
            .await
            .err(),
        None => rates
            .over_client_limit(&name, client, std::time::Instant::now())
            .err(),
    }
}

/// The tool a single `tools/call` body names (a batch: none; its calls
/// meet the limits in the call path).
fn tool_name(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Call {
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        name: Option<String>,
    }
    serde_json::from_slice::<Call>(body).ok()?.params?.name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_are_told_apart_from_other_requests() {
        assert!(is_tool_call(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#
        ));
        assert!(is_tool_call(
            br#"[{"method":"tools/list"},{"method":"tools/call"}]"#
        ));
        assert!(!is_tool_call(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!is_tool_call(b"not json"));
    }

    #[test]
    fn a_single_call_names_its_tool() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Calculator","arguments":{}}}"#;
        assert_eq!(tool_name(call).as_deref(), Some("Calculator"));
        assert_eq!(tool_name(br#"[{"params":{"name":"X"}}]"#), None);
        assert_eq!(tool_name(br#"{"params":{}}"#), None);
        assert_eq!(tool_name(b"not json"), None);
    }
}
