//! How the gateway obtains a person's confirmation, by protocol era:
//! - handshake era (a session, `initialize`): an `elicitation/create` sent to
//!   the client in the middle of the call;
//! - MCP 2026-07-28 (no session): an `input_required` result carrying one
//!   form elicitation and a sealed `requestState`; the client retries the
//!   same call with the person's answer and the state, possibly on another
//!   replica.
//!
//! What counts and what a seal binds is decided by the engine
//! (`decide`, `seal-payload`); this module does the keyed crypto, the
//! clock, fresh ids and one-time use.

use rmcp::model::{ErrorData, InputRequiredResult, RequestMetaObject};
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use toolgate::RuleSet;

use crate::ledger::Ledger;
use crate::seal::KeyRing;

/// The key of the gateway's one input request in `inputRequests`.
pub const INPUT_KEY: &str = "toolgate_confirm";

/// What sealed confirmations need, shared by every session and replica.
#[derive(Debug)]
pub struct Sealing {
    pub keys: KeyRing,
    pub ledger: Ledger,
    /// How long a person's pending confirmation stays valid.
    pub ttl: Duration,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// Whether the request speaks MCP 2026-07-28 or later (per-request
/// metadata, no session, no server-to-client requests).
pub fn is_stateless(meta: &RequestMetaObject) -> bool {
    meta.protocol_version().is_some_and(|v| !v.has_initialize())
}

// What the person is asked, the form it is asked with, and whether a
// 2026-07-28 request declared it can be asked: as for an rmcp server guarded
// in process.
pub use toolgate_rmcp::{MAX_SHOWN_ARGUMENTS, ask_person, declares_form_elicitation, elicitation_params, prompt};

fn random_id() -> Result<String, String> {
    use base64::Engine as _;
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

fn internal(message: String) -> ErrorData {
    ErrorData::internal_error(message, Some(json!({ "toolgate": "PROXY_ERROR" })))
}

impl Sealing {
    /// The `input_required` result for a call that needs a person's
    /// confirmation, and the seal id it carries.
    pub fn input_required(
        &self,
        rules: &RuleSet,
        call: &str,
        caller: &str,
        message: &str,
    ) -> Result<(InputRequiredResult, String), ErrorData> {
        let id = random_id().map_err(|e| internal(format!("toolgate proxy: no randomness for a seal id: {e}")))?;
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let expires_ms = now_ms().saturating_add(ttl_ms);
        let payload = rules
            .seal_payload(call.as_bytes(), caller, &id, expires_ms)
            .map_err(|e| internal(format!("toolgate proxy: the engine could not seal this call: {e}")))?;
        let state = self
            .keys
            .seal(payload.as_bytes())
            .map_err(|e| internal(format!("toolgate proxy: could not seal the request state: {e}")))?;
        let result = serde_json::from_value(json!({
            "resultType": "input_required",
            "inputRequests": {
                INPUT_KEY: { "method": "elicitation/create", "params": elicitation_params(message) }
            },
            "requestState": state,
        }))
        .map_err(|e| internal(format!("toolgate proxy: could not build input_required: {e}")))?;
        Ok((result, id))
    }
}

/// The person's answer in a retry's `inputResponses`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Accept,
    /// `decline` or `cancel`.
    Refuse,
    /// No answer to the gateway's request, or one it cannot read.
    Missing,
}

pub fn answer(responses: Option<&std::collections::BTreeMap<String, Value>>) -> Answer {
    match responses
        .and_then(|r| r.get(INPUT_KEY))
        .and_then(|r| r.get("action"))
        .and_then(Value::as_str)
    {
        Some("accept") => Answer::Accept,
        Some("decline" | "cancel") => Answer::Refuse,
        _ => Answer::Missing,
    }
}

/// The id and expiry of an opened payload (the engine checked the rest).
pub fn seal_id(payload: &str) -> Option<(String, u64)> {
    let value: Value = serde_json::from_str(payload).ok()?;
    Some((
        value.get("id")?.as_str()?.to_owned(),
        value.get("expires_ms")?.as_u64()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_ids() {
        let mut r = std::collections::BTreeMap::new();
        assert_eq!(answer(None), Answer::Missing);
        assert_eq!(answer(Some(&r)), Answer::Missing);
        r.insert(INPUT_KEY.to_owned(), json!({"action": "accept", "content": {}}));
        assert_eq!(answer(Some(&r)), Answer::Accept);
        r.insert(INPUT_KEY.to_owned(), json!({"action": "cancel"}));
        assert_eq!(answer(Some(&r)), Answer::Refuse);
        r.insert(INPUT_KEY.to_owned(), json!({"action": "ACCEPT"}));
        assert_eq!(answer(Some(&r)), Answer::Missing);
        assert_eq!(
            seal_id(r#"{"v":"0.2.0","id":"abc","expires_ms":5}"#),
            Some(("abc".to_owned(), 5))
        );
        assert_eq!(seal_id("{}"), None);
        let a = random_id().unwrap();
        assert_eq!(a.len(), 22);
        assert_ne!(a, random_id().unwrap());
    }
}
