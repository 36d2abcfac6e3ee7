//! The call pipeline (docs/spec.md §8): a call, the context and how the host
//! obtained a confirmation in; the decision, the call exactly as it is to be
//! forwarded, and the answer for a blocked call out. Every rule about the
//! confirmation fields lives here and in `evaluate`: hosts never add, remove
//! or read `confirmed` / `confirmation` themselves.
//!
//! Seals: the engine writes the payload a stateless host seals with its key,
//! and checks an opened payload against the retried call. The host does the
//! keyed crypto, the clock, fresh ids and one-time use.

use crate::context::Context;
use crate::decision::{self, Code, Decision, Denial};
use crate::error::{Origin, Problem, ProblemCode};
use crate::evaluate::{CONFIRMATION_FIELDS, parse_call};
use crate::expose;
use crate::json::{self, write_str};
use crate::rules::{Rules, Tool};
use serde_json::{Map, Value};

/// Domain tag of the call digest: a digest of anything else never equals one.
const DIGEST_DOMAIN: &str = "toolgate-call-1\n";

/// How the host obtained the confirmation for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation<'a> {
    /// Nothing but the call: confirmation fields the model wrote are removed
    /// and never count.
    None,
    /// The model's literal `confirmed: true` counts (a host set up to trust it).
    Argument,
    /// The person was asked about this very call and accepted.
    Person,
    /// A seal the host authenticated with its key; checked here against the
    /// call, the caller and the clock.
    Seal(OpenedSeal<'a>),
    /// A seal the host could not accept (bad key, altered, already used).
    Invalid,
}

impl Confirmation<'_> {
    /// The name audit lines use for this path.
    pub fn as_str(&self) -> &'static str {
        match self {
            Confirmation::None => "none",
            Confirmation::Argument => "argument",
            Confirmation::Person => "person",
            Confirmation::Seal(_) => "seal",
            Confirmation::Invalid => "invalid",
        }
    }
}

/// A seal's payload after the host verified it was made with its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenedSeal<'a> {
    pub payload: &'a str,
    /// The authenticated caller now calling (empty when none).
    pub caller: &'a str,
    /// The host's clock, milliseconds since the Unix epoch.
    pub now_ms: u64,
}

/// What `decide` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    /// Allowed: the arguments to forward, as canonical JSON.
    pub forward: Option<String>,
    /// Denied about a tool the caller may see (or an unreadable call): the
    /// MCP `CallToolResult` to answer with. `None` when allowed and for
    /// `NOT_FOUND`, which a host answers as its server answers an unknown tool.
    pub blocked_result: Option<String>,
    /// The call digest (what approvals and seals bind) when a confirmation
    /// is pending (`CONFIRMATION_REQUIRED`), refused (`CONFIRMATION_INVALID`)
    /// or was given (person, seal) for a visible tool: not computed for
    /// other decisions, so an ordinary call does not pay for a hash.
    pub digest: Option<String>,
}

impl Outcome {
    /// The outcome's JSON, as the conformance vectors write it:
    /// `{"decision":…,"forward":…,"blocked_result":…,"digest":…}` with each
    /// text field as a JSON string or `null`.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"decision\":");
        write_str(&mut out, &self.decision.json);
        for (key, value) in [
            ("forward", &self.forward),
            ("blocked_result", &self.blocked_result),
            ("digest", &self.digest),
        ] {
            out.push_str(",\"");
            out.push_str(key);
            out.push_str("\":");
            match value {
                Some(v) => write_str(&mut out, v),
                None => out.push_str("null"),
            }
        }
        out.push('}');
        out
    }
}

/// The MCP `CallToolResult` for a blocked call: the decision's JSON as text
/// and, unless the tool declares an `outputSchema` (clients validate
/// `structuredContent` against it even on error results), as
/// `structuredContent`.
pub fn blocked_result(decision: &Decision, tool_has_output_schema: bool) -> String {
    let mut out = String::with_capacity(2 * decision.json.len() + 80);
    out.push_str("{\"content\":[{\"type\":\"text\",\"text\":");
    write_str(&mut out, &decision.json);
    out.push_str("}]");
    if !tool_has_output_schema {
        out.push_str(",\"structuredContent\":");
        out.push_str(&decision.json);
    }
    out.push_str(",\"isError\":true}");
    out
}

/// The arguments without the engine's fields, which are the confirmation
/// and not part of what is confirmed.
fn without_engine_fields(args: &Map<String, Value>) -> Map<String, Value> {
    let mut copy = args.clone();
    for field in CONFIRMATION_FIELDS {
        copy.remove(field);
    }
    copy
}

/// SHA-256 over the tool name and the canonical arguments, engine fields
/// removed: `sha256:<hex>`.
pub fn call_digest(name: &str, args: &Map<String, Value>) -> String {
    let mut text = String::from(DIGEST_DOMAIN);
    text.push_str("{\"arguments\":");
    let mut sorted_args = String::new();
    json::write_canonical(&mut sorted_args, &Value::Object(without_engine_fields(args)));
    text.push_str(&sorted_args);
    text.push_str(",\"name\":");
    write_str(&mut text, name);
    text.push('}');
    crate::catalog::sha256_hex(text.as_bytes())
}

/// A seal id: 16 to 128 characters of `A-Z a-z 0-9 _ -` (base64url), so it
/// fits any ledger key and cannot smuggle JSON.
fn is_valid_seal_id(id: &str) -> bool {
    (16..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn write_payload(out: &mut String, tool: &Tool, digest: &str, revision: &str, caller: &str, id: &str, expires_ms: u64) {
    out.push_str("{\"v\":\"");
    out.push_str(crate::CONTRACT_VERSION);
    out.push_str("\",\"tool\":");
    out.push_str(&tool.name_json);
    out.push_str(",\"digest\":");
    write_str(out, digest);
    out.push_str(",\"revision\":");
    write_str(out, revision);
    out.push_str(",\"caller\":");
    write_str(out, caller);
    out.push_str(",\"id\":");
    write_str(out, id);
    out.push_str(",\"expires_ms\":");
    out.push_str(&expires_ms.to_string());
    out.push('}');
}

fn call_problem(message: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidValue, Origin::Call, message)
}

impl Rules {
    /// The call pipeline. Never fails: every failure is a deny with its code.
    pub fn decide(&self, call: &[u8], context: &str, confirmation: Confirmation<'_>) -> Outcome {
        self.decide_in(call, Context::parse(context).as_ref(), confirmation)
    }

    /// [`Rules::decide`] with the context already parsed (by a
    /// [`crate::context::ContextMemo`], say).
    pub fn decide_in(
        &self,
        call: &[u8],
        context: Result<&Context, &Problem>,
        confirmation: Confirmation<'_>,
    ) -> Outcome {
        let ctx = match context {
            Ok(ctx) => ctx,
            // evaluate_json answers an unreadable context or call.
            Err(_) => return self.unattributed(call, context),
        };
        let parsed = match parse_call(call) {
            Ok(parsed) => parsed,
            Err(_) => return self.unattributed(call, context),
        };
        let Some(tool) = self
            .tool(&parsed.name)
            .filter(|t| expose::is_exposed(&t.name, &t.class, ctx))
        else {
            let mut name_json = String::new();
            write_str(&mut name_json, &parsed.name);
            return Outcome {
                decision: decision::not_found(&name_json),
                forward: None,
                blocked_result: None,
                digest: None,
            };
        };
        let has_output_schema = tool.source.has_output_schema;
        let empty = Map::new();
        let args = match &parsed.arguments {
            None => &empty,
            Some(Value::Object(map)) => map,
            Some(other) => {
                // Not an object: evaluate says why (scopes first, then shape).
                let decision = self.evaluate(&parsed.name, Some(other), ctx);
                return self.denied(decision, has_output_schema, None);
            }
        };
        // The digest costs a hash: computed where a confirmation is pending
        // or presented, not on every allowed call.
        let digest = || call_digest(&tool.name, args);
        let decided_args = match confirmation {
            Confirmation::Argument => args.clone(),
            Confirmation::None => without_engine_fields(args),
            Confirmation::Person => confirmed_by_person(tool, args),
            Confirmation::Seal(seal) if self.seal_matches(tool, &digest(), seal) => confirmed_by_person(tool, args),
            Confirmation::Seal(_) | Confirmation::Invalid => {
                let decision = self.about(
                    tool,
                    tool.class.confirmation_required,
                    false,
                    Some(&Denial::new(Code::ConfirmationInvalid)),
                );
                return self.denied(decision, has_output_schema, Some(digest()));
            }
        };
        let decided = Value::Object(decided_args);
        let decision = self.evaluate(&tool.name, Some(&decided), ctx);
        if !decision.ok {
            let pending = decision.code == Some(Code::ConfirmationRequired);
            return self.denied(decision, has_output_schema, pending.then(digest));
        }
        let Value::Object(mut forward) = decided else {
            // Built as an object above.
            return self.denied(decision, has_output_schema, None);
        };
        for field in &tool.strip_fields {
            forward.remove(*field);
        }
        Outcome {
            decision,
            forward: Some(json::canonical(&Value::Object(forward))),
            blocked_result: None,
            digest: (!matches!(confirmation, Confirmation::None | Confirmation::Argument)).then(digest),
        }
    }

    fn unattributed(&self, call: &[u8], context: Result<&Context, &Problem>) -> Outcome {
        let decision = self.evaluate_json_in(call, context);
        self.denied(decision, false, None)
    }

    fn denied(&self, decision: Decision, has_output_schema: bool, digest: Option<String>) -> Outcome {
        let blocked = (decision.code != Some(Code::NotFound)).then(|| blocked_result(&decision, has_output_schema));
        Outcome {
            decision,
            forward: None,
            blocked_result: blocked,
            digest,
        }
    }

    /// The payload a host seals to carry a pending confirmation of `call`
    /// through the client. Fails when the call is unreadable, names no tool,
    /// or has non-object arguments, and when the id is not 16 to 128
    /// base64url characters.
    pub fn seal_payload(&self, call: &[u8], caller: &str, id: &str, expires_ms: u64) -> Result<String, Problem> {
        let parsed = parse_call(call).map_err(|(_, why)| call_problem(why))?;
        // A held or disabled tool answers as one that does not exist (§4).
        let tool = self
            .tool(&parsed.name)
            .filter(|t| t.class.enabled && t.class.held.is_none())
            .ok_or_else(|| call_problem("the call names no tool of these rules"))?;
        let empty = Map::new();
        let args = match &parsed.arguments {
            None => &empty,
            Some(Value::Object(map)) => map,
            Some(_) => return Err(call_problem("`arguments` must be a JSON object")),
        };
        if !is_valid_seal_id(id) {
            return Err(call_problem(
                "a seal id is 16 to 128 characters of A-Z, a-z, 0-9, '_' and '-'",
            ));
        }
        let mut out = String::with_capacity(256 + caller.len());
        write_payload(
            &mut out,
            tool,
            &call_digest(&tool.name, args),
            self.revision(),
            caller,
            id,
            expires_ms,
        );
        Ok(out)
    }

    /// The opened payload is exactly the one these rules would write for
    /// this call, this caller, its own id and expiry, and it has not expired.
    fn seal_matches(&self, tool: &Tool, digest: &str, seal: OpenedSeal<'_>) -> bool {
        let Ok(Value::Object(payload)) = json::parse_strict(seal.payload.as_bytes()) else {
            return false;
        };
        let (Some(Value::String(id)), Some(expires)) = (payload.get("id"), payload.get("expires_ms")) else {
            return false;
        };
        let Some(expires_ms) = expires.as_u64() else {
            return false;
        };
        if !is_valid_seal_id(id) || seal.now_ms >= expires_ms {
            return false;
        }
        let mut expected = String::with_capacity(seal.payload.len());
        write_payload(
            &mut expected,
            tool,
            digest,
            self.revision(),
            seal.caller,
            id,
            expires_ms,
        );
        expected == seal.payload
    }
}

/// The arguments as confirmed by a person: whatever the model wrote in the
/// confirmation fields is removed, and the field the tool's schema declares
/// (`confirmed`, else `confirmation`; `confirmed` when it declares neither,
/// then removed before forwarding) is set to `true`.
pub(crate) fn confirmed_by_person(tool: &Tool, args: &Map<String, Value>) -> Map<String, Value> {
    let mut confirmed = without_engine_fields(args);
    let field = CONFIRMATION_FIELDS
        .into_iter()
        .find(|f| !tool.strip_fields.contains(f))
        .unwrap_or("confirmed");
    confirmed.insert(field.to_owned(), Value::Bool(true));
    confirmed
}
