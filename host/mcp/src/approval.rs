//! Approvals over MCP: a call that waits for a person's approval asks the
//! client's user through elicitation.
//!
//! - Protocol 2026-07-28 and later: stateless. The call's result is
//!   `input_required` with one form elicitation (key [`APPROVAL_KEY`]) and
//!   a `requestState` that carries the call: the gadget, the SHA-256 of its
//!   validated arguments (canonical JSON), when it was asked, and an
//!   HMAC-SHA256 over them with the server's key. The client asks its
//!   person and calls again with the same arguments, the person's answer
//!   and the echoed state; any replica holding the same key
//!   ([`APPROVAL_KEY_ENV`]) checks the state and runs the call. A state
//!   the server did not sign, one for another gadget or other arguments,
//!   or one older than the approval timeout approves nothing.
//! - Older protocols over stdio: `elicitation/create` while the call waits.
//! - A client without elicitation (or stateless HTTP on an older
//!   protocol): the call is denied, saying it needs approval.
//!
//! A state can be replayed within its lifetime to run the same call with
//! the same arguments again (stateless servers keep no record of it); the
//! approval timeout bounds that window.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gadget_core::client::ClientId;
use hmac::{Hmac, Mac};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use gadget_core::approval::{
    ApprovalRequest, Approver, Decider, Verdict, VerdictFuture, canonical_json, shown,
};

/// The key of the input request an approval makes, and of the answer the
/// client sends back.
pub const APPROVAL_KEY: &str = "approval";

/// The field of the approval form: whether the person approves.
pub const APPROVE_FIELD: &str = "approve";

/// The environment variable holding the key that signs approval states:
/// set the same secret on every replica behind one load balancer, so any
/// of them can finish a round trip another began. Unset: a random key per
/// process (a round trip must come back to the same process).
pub const APPROVAL_KEY_ENV: &str = "GADGET_APPROVAL_KEY";

/// Longest approval state a client may echo, in bytes: a state this
/// server writes is a few hundred bytes.
pub const MAX_STATE_BYTES: usize = 4096;

type HmacSha256 = Hmac<Sha256>;

/// The secret that signs approval states.
#[derive(Clone)]
pub struct ApprovalKey(Arc<[u8; 32]>);

/// Never printed: a key in a log would let anyone sign approvals.
impl std::fmt::Debug for ApprovalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApprovalKey(..)")
    }
}

impl ApprovalKey {
    /// From [`APPROVAL_KEY_ENV`] (any text, hashed to 32 bytes), else
    /// random. `Err` when the variable is set but empty.
    pub fn from_env() -> Result<ApprovalKey, String> {
        match std::env::var(APPROVAL_KEY_ENV) {
            Ok(secret) if secret.trim().is_empty() => Err(format!(
                "{APPROVAL_KEY_ENV} is set but empty: set it to a long random secret (the same on every replica), or unset it"
            )),
            Ok(secret) => Ok(ApprovalKey::from_secret(secret.trim().as_bytes())),
            Err(_) => Ok(ApprovalKey::random()),
        }
    }

    pub fn from_secret(secret: &[u8]) -> ApprovalKey {
        ApprovalKey(Arc::new(Sha256::digest(secret).into()))
    }

    pub fn random() -> ApprovalKey {
        let mut key = [0u8; 32];
        // No randomness at all is not a state to run in: the key would be
        // guessable.
        getrandom::fill(&mut key).expect("the operating system's random source");
        ApprovalKey(Arc::new(key))
    }

    /// HMAC-SHA256 of `text` under this key, for `purpose` (so that a
    /// signature made for one kind of state never verifies another), hex.
    pub(crate) fn sign(&self, purpose: &str, text: &str) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.0[..]).expect("HMAC takes any key length");
        mac.update(purpose.as_bytes());
        mac.update(b"\n");
        mac.update(text.as_bytes());
        hex(&mac.finalize().into_bytes())
    }

    /// Whether `signature` is this key's [`Self::sign`] of `text` for
    /// `purpose` (compared in constant time).
    pub(crate) fn verify(&self, purpose: &str, text: &str, signature: &str) -> bool {
        let Some(signature) = decode_hex(signature) else {
            return false;
        };
        let mut mac = HmacSha256::new_from_slice(&self.0[..]).expect("HMAC takes any key length");
        mac.update(purpose.as_bytes());
        mac.update(b"\n");
        mac.update(text.as_bytes());
        mac.verify_slice(&signature).is_ok()
    }

    fn mac(&self, fields: &StateFields) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0[..]).expect("HMAC takes any key length");
        mac.update(fields.signed_text().as_bytes());
        mac
    }
}

/// What a state binds.
#[derive(serde::Serialize, serde::Deserialize)]
struct StateFields {
    gadget: String,
    /// Who was asked for ([`ClientId::binding`]): the approval holds for
    /// that caller's call only.
    client: String,
    /// SHA-256 of the canonical validated arguments, hex.
    arguments: String,
    /// The call that asked (for messages).
    call: String,
    /// When it was asked, ms since the Unix epoch.
    asked_ms: u64,
}

impl StateFields {
    fn signed_text(&self) -> String {
        format!(
            "gadget-host approval v2\n{}\n{}\n{}\n{}\n{}",
            self.gadget, self.client, self.arguments, self.call, self.asked_ms
        )
    }
}

/// The call an echoed approval state must approve: its gadget, its
/// validated arguments, and who makes it.
#[derive(Clone, Copy)]
pub struct ApprovedCall<'a> {
    pub gadget: &'a str,
    pub params: &'a Value,
    pub client: &'a ClientId,
}

/// A state as the client echoes it.
#[derive(serde::Serialize, serde::Deserialize)]
struct State {
    #[serde(flatten)]
    fields: StateFields,
    /// HMAC-SHA256 of the fields, hex.
    mac: String,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) fn digest(params: &Value) -> String {
    hex(&Sha256::digest(canonical_json(params).as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    gadget_core::audit::hex(bytes)
}

/// The `input_required` result that asks the client's person to approve
/// `request`, with the signed state that binds the answer to it.
pub fn input_required(
    key: &ApprovalKey,
    request: &ApprovalRequest,
    client: &ClientId,
) -> InputRequiredResult {
    let fields = StateFields {
        gadget: request.gadget.clone(),
        client: client.binding(),
        arguments: digest(&request.params),
        call: request.call_id.clone(),
        asked_ms: now_ms(),
    };
    let mac = hex(&key.mac(&fields).finalize().into_bytes());
    let state = serde_json::to_string(&State { fields, mac }).unwrap_or_default();
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_KEY.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(form(request))),
    );
    InputRequiredResult::new(Some(requests), Some(state))
}

/// Checks an echoed state against the call it came back with: signed by
/// this key, for this gadget and exactly these validated arguments, and
/// not older than `max_age`. `Err` says what does not hold.
pub fn check_state(
    key: &ApprovalKey,
    state: Option<&str>,
    call: &ApprovedCall<'_>,
    max_age: Duration,
) -> Result<(), String> {
    let ApprovedCall {
        gadget,
        params,
        client,
    } = *call;
    let state = state.ok_or("it has no requestState")?;
    if state.len() > MAX_STATE_BYTES {
        return Err(format!("its requestState is over {MAX_STATE_BYTES} bytes"));
    }
    let state: State = serde_json::from_str(state)
        .map_err(|_| "its requestState is not one this server writes".to_string())?;
    let mac = decode_hex(&state.mac).ok_or("its requestState carries no signature")?;
    key.mac(&state.fields).verify_slice(&mac).map_err(|_| {
        format!(
            "its requestState was not signed by this server (forged, changed, or from a replica with another {APPROVAL_KEY_ENV})"
        )
    })?;
    if !state.fields.gadget.eq_ignore_ascii_case(gadget) {
        return Err(format!(
            "it approves a call of '{}', not of '{gadget}'",
            state.fields.gadget
        ));
    }
    if state.fields.client != client.binding() {
        return Err(format!(
            "it approves another caller's call (call {})",
            state.fields.call
        ));
    }
    if state.fields.arguments != digest(params) {
        return Err(format!(
            "the arguments differ from the ones the person approved (call {})",
            state.fields.call
        ));
    }
    let age = now_ms().saturating_sub(state.fields.asked_ms);
    if age > max_age.as_millis() as u64 {
        return Err(format!(
            "it was asked {} s ago, past the approval timeout of {} s",
            age / 1000,
            max_age.as_secs()
        ));
    }
    Ok(())
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// The form a person approves a call with: what it is, why it waits, its
/// arguments and what it may touch (bounded, control characters escaped).
pub fn form(request: &ApprovalRequest) -> ElicitRequestParams {
    let schema = ElicitationSchema::builder()
        .required_bool_property(APPROVE_FIELD, |b| {
            b.title("Run this call").with_default(false)
        })
        .build_unchecked();
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "Approve {}? It waits for approval: {}\nArguments: {}\nMay touch: {}",
            shown(&request.gadget, 128),
            shown(&request.reasons.join("; "), 1024),
            request.shown_params(),
            request.shown_access()
        ),
        requested_schema: schema,
    }
}

/// A person's reply to the approval form: approved only when they
/// accepted with `approve` true.
pub fn verdict_of(reply: &Value) -> Verdict {
    let result: ElicitResult = match serde_json::from_value(reply.clone()) {
        Ok(result) => result,
        Err(error) => {
            return Verdict::Denied {
                by: Decider::McpClient,
                why: format!("the client's answer is not an elicitation result: {error}"),
            };
        }
    };
    match result.action {
        ElicitationAction::Accept => {
            let approve = result
                .content
                .as_ref()
                .and_then(|c| c.get(APPROVE_FIELD))
                .and_then(Value::as_bool);
            if approve == Some(true) {
                Verdict::Approved {
                    by: Decider::McpClient,
                    for_session: false,
                }
            } else {
                Verdict::Denied {
                    by: Decider::McpClient,
                    why: "the person at the client did not approve it".into(),
                }
            }
        }
        ElicitationAction::Decline => Verdict::Denied {
            by: Decider::McpClient,
            why: "the person at the client declined it".into(),
        },
        _ => Verdict::Denied {
            by: Decider::McpClient,
            why: "the person at the client dismissed the approval".into(),
        },
    }
}

/// How the person at this request's client can be asked.
pub enum ClientAsk {
    /// Stateless round trip (protocol 2026-07-28 and later).
    RoundTrip,
    /// `elicitation/create` while the call waits (older protocols, stdio).
    Request(Peer<RoleServer>),
    /// Not at all: why.
    Cannot(&'static str),
}

/// The approver of one MCP request.
pub enum McpApprover {
    /// Ask the client's person as the connection allows.
    Ask(ClientAsk),
    /// The person answered in this request (second half of a round trip).
    Answered(Verdict),
}

impl Approver for McpApprover {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> VerdictFuture<'a> {
        Box::pin(async move {
            match self {
                McpApprover::Answered(verdict) => verdict.clone(),
                McpApprover::Ask(ClientAsk::RoundTrip) => Verdict::Deferred,
                McpApprover::Ask(ClientAsk::Cannot(why)) => Verdict::Denied {
                    by: Decider::Nobody,
                    why: format!(
                        "it needs a person's approval ({}) and {why}: use a client that supports elicitation, or ask the operator to change the rule",
                        request.reasons.join("; ")
                    ),
                },
                McpApprover::Ask(ClientAsk::Request(peer)) => {
                    match peer.create_elicitation(form(request)).await {
                        Ok(result) => verdict_of(&serde_json::to_value(result).unwrap_or_default()),
                        Err(error) => Verdict::Denied {
                            by: Decider::Nobody,
                            why: format!(
                                "it needs a person's approval and the client could not ask one: {error}"
                            ),
                        },
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> ClientId {
        ClientId::subject("alice")
    }
    use serde_json::json;

    fn request(params: Value) -> ApprovalRequest {
        ApprovalRequest {
            call_id: "mcp_1".into(),
            gadget: "WriteFile".into(),
            params: Arc::new(params),
            access: Default::default(),
            reasons: vec!["[gadgets] approve = \"WriteFile\"".into()],
            declared: Default::default(),
            named: Vec::new(),
        }
    }

    fn state_of(result: &InputRequiredResult) -> String {
        serde_json::to_value(result).unwrap()["requestState"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_state_approves_only_its_own_call_and_arguments() {
        let key = ApprovalKey::from_secret(b"shared by the replicas");
        let params = json!({"path": "/out/a", "content": "x"});
        let state = state_of(&input_required(&key, &request(params.clone()), &alice()));
        let ok = |s: &str, gadget: &str, p: &Value| {
            let call = ApprovedCall {
                gadget,
                params: p,
                client: &alice(),
            };
            check_state(&key, Some(s), &call, Duration::from_secs(300))
        };
        // Another replica with the same key finishes it; key order is not
        // a difference.
        let replica = ApprovalKey::from_secret(b"shared by the replicas");
        let reordered = json!({"content": "x", "path": "/out/a"});
        assert_eq!(
            check_state(
                &replica,
                Some(&state),
                &ApprovedCall {
                    gadget: "writefile",
                    params: &reordered,
                    client: &alice(),
                },
                Duration::from_secs(300)
            ),
            Ok(())
        );
        let other_args = ok(
            &state,
            "WriteFile",
            &json!({"path": "/etc/passwd", "content": "x"}),
        );
        assert!(other_args.unwrap_err().contains("arguments differ"));
        assert!(
            ok(&state, "DeleteFile", &params)
                .unwrap_err()
                .contains("not of 'DeleteFile'")
        );
        // A forged state: the fields changed to the new arguments, the old
        // signature kept; or a signature made with another key.
        let mut forged: Value = serde_json::from_str(&state).unwrap();
        forged["arguments"] = json!(digest(&json!({"path": "/etc/passwd", "content": "x"})));
        let forged = forged.to_string();
        let refused = ok(
            &forged,
            "WriteFile",
            &json!({"path": "/etc/passwd", "content": "x"}),
        );
        assert!(refused.unwrap_err().contains("not signed by this server"));
        let stranger = ApprovalKey::from_secret(b"another key");
        let foreign = state_of(&input_required(
            &stranger,
            &request(params.clone()),
            &alice(),
        ));
        assert!(
            ok(&foreign, "WriteFile", &params)
                .unwrap_err()
                .contains("not signed")
        );
        assert!(ok("{}", "WriteFile", &params).is_err());
        let call = ApprovedCall {
            gadget: "WriteFile",
            params: &params,
            client: &alice(),
        };
        assert!(check_state(&key, None, &call, Duration::from_secs(1)).is_err());
        // Another caller's identical call is not approved by it.
        for other in [ClientId::subject("mallory"), ClientId::Anonymous(None)] {
            let theirs = ApprovedCall {
                client: &other,
                ..call
            };
            let refused = check_state(&key, Some(&state), &theirs, Duration::from_secs(300));
            assert!(refused.unwrap_err().contains("another caller"));
        }
        // Too old.
        let mut old: State = serde_json::from_str(&state).unwrap();
        old.fields.asked_ms -= 600_000;
        old.mac = hex(&key.mac(&old.fields).finalize().into_bytes());
        let old = serde_json::to_string(&old).unwrap();
        assert!(
            ok(&old, "WriteFile", &params)
                .unwrap_err()
                .contains("past the approval timeout")
        );
    }

    #[test]
    fn only_an_accepted_approve_true_approves() {
        let approved = |v: Value| matches!(verdict_of(&v), Verdict::Approved { .. });
        assert!(approved(
            json!({"action": "accept", "content": {"approve": true}})
        ));
        assert!(!approved(
            json!({"action": "accept", "content": {"approve": false}})
        ));
        assert!(!approved(
            json!({"action": "accept", "content": {"approve": "yes"}})
        ));
        assert!(!approved(json!({"action": "accept"})));
        assert!(!approved(json!({"action": "decline"})));
        assert!(!approved(json!({"action": "cancel"})));
        assert!(!approved(json!("nonsense")));
    }
}
