//! SPEC §5: the decision and its one canonical writer. Key order is part of
//! the contract: `ok`, `error`, `metadata`; inside `error`: `code`, `message`,
//! `retryable`, `outcome`, then `details`; inside `metadata`: `tool`,
//! `blocked_by_policy`, then the classification, `confirmation_received`,
//! `policy_revision`.

use crate::classify::Classification;
use crate::json::{write_bool, write_str};

/// Stable decision codes. The seed catalog's names are reused where one fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    NotFound,
    ScopeDenied,
    BadRequest,
    IdempotencyKeyInvalid,
    ConfirmationRequired,
    /// A seal or approval that does not hold for this call (expired, already
    /// used, altered, another key, another call): never forwarded.
    ConfirmationInvalid,
    /// The host's context was malformed: a host bug, denied.
    InvalidContext,
    /// Turn runtime: a second transactional call in one turn.
    TransactionLimit,
}

impl Code {
    /// Every decision code the engine emits (docs/codes.md is generated
    /// from this list).
    pub const ALL: [Code; 8] = [
        Code::NotFound,
        Code::ScopeDenied,
        Code::BadRequest,
        Code::IdempotencyKeyInvalid,
        Code::ConfirmationRequired,
        Code::ConfirmationInvalid,
        Code::InvalidContext,
        Code::TransactionLimit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::NotFound => "NOT_FOUND",
            Code::ScopeDenied => "SCOPE_DENIED",
            Code::BadRequest => "BAD_REQUEST",
            Code::IdempotencyKeyInvalid => "IDEMPOTENCY_KEY_INVALID",
            Code::ConfirmationRequired => "CONFIRMATION_REQUIRED",
            Code::ConfirmationInvalid => "CONFIRMATION_INVALID",
            Code::InvalidContext => "INVALID_CONTEXT",
            Code::TransactionLimit => "TRANSACTION_LIMIT",
        }
    }

    /// Short, says what to do next, never echoes a value.
    pub fn message(self) -> &'static str {
        match self {
            Code::NotFound => "Unknown tool. Call tools/list to see the tools available here.",
            Code::ScopeDenied => {
                "This tool needs a scope you were not granted. Ask for the scopes in details.missing_scopes."
            }
            Code::BadRequest => "The arguments are not valid for this tool. Fix what details lists and call again.",
            Code::IdempotencyKeyInvalid => {
                "Send an idempotency_key of 8 to 128 characters from A-Z, a-z, 0-9, '.', '_', ':' and '-'."
            }
            Code::ConfirmationRequired => {
                "This call changes something and needs a person's confirmation. Ask them, then repeat the same call with confirmed: true."
            }
            Code::ConfirmationInvalid => {
                "This confirmation does not hold for this call (expired, already used, altered, or given for another call); it was not run. Call again without it to be asked again."
            }
            Code::InvalidContext => {
                "The host sent an invalid policy context; the call was not allowed. Fix the host's context."
            }
            Code::TransactionLimit => {
                "Only one transactional call runs per turn. Propose this call again in a later turn."
            }
        }
    }

    pub fn retryable(self) -> bool {
        matches!(
            self,
            Code::ConfirmationRequired | Code::ConfirmationInvalid | Code::TransactionLimit
        )
    }
}

/// A decision: the canonical bytes plus what a Rust caller needs without
/// re-parsing them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub ok: bool,
    pub code: Option<Code>,
    pub json: String,
}

/// A failed check: its code and the `details` object (JSON text) if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub code: Code,
    pub details: Option<String>,
}

impl Denial {
    pub fn new(code: Code) -> Self {
        Denial { code, details: None }
    }
    pub fn with_details(code: Code, details: String) -> Self {
        Denial {
            code,
            details: Some(details),
        }
    }
}

fn write_error(out: &mut String, denial: &Denial) {
    out.push_str("{\"code\":\"");
    out.push_str(denial.code.as_str());
    out.push_str("\",\"message\":");
    write_str(out, denial.code.message());
    out.push_str(",\"retryable\":");
    write_bool(out, denial.code.retryable());
    out.push_str(",\"outcome\":\"rejected\"");
    if let Some(details) = &denial.details {
        out.push_str(",\"details\":");
        out.push_str(details);
    }
    out.push('}');
}

/// `NOT_FOUND`: only `tool` and `blocked_by_policy`, identical for a tool
/// that does not exist and one that is hidden, whatever the reason.
pub fn not_found(name_json: &str) -> Decision {
    let mut out = String::with_capacity(200 + name_json.len());
    out.push_str("{\"ok\":false,\"error\":");
    write_error(&mut out, &Denial::new(Code::NotFound));
    out.push_str(",\"metadata\":{\"tool\":");
    out.push_str(name_json);
    out.push_str(",\"blocked_by_policy\":true}}");
    Decision {
        ok: false,
        code: Some(Code::NotFound),
        json: out,
    }
}

/// A decision about a call that could not be tied to a tool (unparseable
/// call, bad context): `tool` is the name if it could be read, else null.
pub fn unattributed(name_json: Option<&str>, denial: &Denial, revision: &str) -> Decision {
    let mut out = String::with_capacity(300);
    out.push_str("{\"ok\":false,\"error\":");
    write_error(&mut out, denial);
    out.push_str(",\"metadata\":{\"tool\":");
    out.push_str(name_json.unwrap_or("null"));
    out.push_str(",\"blocked_by_policy\":true,\"policy_revision\":");
    write_str(&mut out, revision);
    out.push_str("}}");
    Decision {
        ok: false,
        code: Some(denial.code),
        json: out,
    }
}

/// A decision about a known, exposed tool: allowed when `denial` is `None`.
pub fn about_tool(
    name_json: &str,
    class: &Classification,
    confirmation_required: bool,
    confirmation_received: bool,
    denial: Option<&Denial>,
    revision: &str,
) -> Decision {
    // The fixed text is under 400 bytes; sized for the rest too, so the
    // decision is written without growing (half the vectors' decisions
    // outgrew a flat 400).
    let details = denial.and_then(|d| d.details.as_ref()).map_or(0, String::len);
    let mut out = String::with_capacity(400 + name_json.len() + class.effect.len() + revision.len() + details);
    match denial {
        None => out.push_str("{\"ok\":true,\"error\":null"),
        Some(d) => {
            out.push_str("{\"ok\":false,\"error\":");
            write_error(&mut out, d);
        }
    }
    out.push_str(",\"metadata\":{\"tool\":");
    out.push_str(name_json);
    out.push_str(",\"blocked_by_policy\":");
    write_bool(&mut out, denial.is_some());
    out.push_str(",\"operation_type\":\"");
    out.push_str(class.operation_type.as_str());
    out.push_str("\",\"effect\":");
    write_str(&mut out, &class.effect);
    out.push_str(",\"policy_source\":\"");
    out.push_str(class.policy_source.as_str());
    out.push_str("\",\"confirmation_required\":");
    write_bool(&mut out, confirmation_required);
    out.push_str(",\"confirmation_received\":");
    write_bool(&mut out, confirmation_received);
    out.push_str(",\"policy_revision\":");
    write_str(&mut out, revision);
    out.push_str("}}");
    Decision {
        ok: denial.is_none(),
        code: denial.map(|d| d.code),
        json: out,
    }
}
