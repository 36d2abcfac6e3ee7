//! SPEC §5: the decision and its one canonical writer. Key order is part of
//! the contract: `ok`, `error`, `metadata`; inside `error`: `code`, `message`,
//! `retryable`, `outcome`, then `details`; inside `metadata`: `tool`,
//! `blocked_by_policy`, then the classification, `confirmation_received`,
//! `policy_revision`.

use crate::classify::Classification;
use crate::json::write_str;

/// The decision codes, each once: its name, whether a retry can succeed and
/// its message (short, says what to do next, never echoes a value). The
/// `error` object's fixed head is derived from the same row at compile time,
/// so a decision is written from a few pieces (#17).
macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, retryable: $retryable:literal, $message:literal;)*) => {
        /// Stable decision codes. The seed catalog's names are reused where one fits.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $($(#[$doc])* $variant,)*
        }

        impl Code {
            /// Every decision code the engine emits (docs/codes.md is
            /// generated from this list).
            pub const ALL: [Code; [$(Code::$variant),*].len()] = [$(Code::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $name,)*
                }
            }

            /// Short, says what to do next, never echoes a value.
            pub fn message(self) -> &'static str {
                match self {
                    $(Code::$variant => $message,)*
                }
            }

            pub fn retryable(self) -> bool {
                match self {
                    $(Code::$variant => $retryable,)*
                }
            }

            /// `{"code":…,"message":…,"retryable":…,"outcome":"rejected"`:
            /// the `error` object up to its `details`. The message is written
            /// as it is: every message is text JSON needs no escape for (a
            /// test checks it against serde_json).
            fn error_head(self) -> &'static str {
                match self {
                    $(Code::$variant => concat!(
                        "{\"code\":\"", $name,
                        "\",\"message\":\"", $message,
                        "\",\"retryable\":", $retryable,
                        ",\"outcome\":\"rejected\""
                    ),)*
                }
            }
        }
    };
}

codes! {
    NotFound = "NOT_FOUND", retryable: false,
        "Unknown tool. Call tools/list to see the tools available here.";
    ScopeDenied = "SCOPE_DENIED", retryable: false,
        "This tool needs a scope you were not granted. Ask for the scopes in details.missing_scopes.";
    BadRequest = "BAD_REQUEST", retryable: false,
        "The arguments are not valid for this tool. Fix what details lists and call again.";
    IdempotencyKeyInvalid = "IDEMPOTENCY_KEY_INVALID", retryable: false,
        "Send an idempotency_key of 8 to 128 characters from A-Z, a-z, 0-9, '.', '_', ':' and '-'.";
    ConfirmationRequired = "CONFIRMATION_REQUIRED", retryable: true,
        "This call changes something and needs a person's confirmation. Ask them, and repeat the same call only once they agree.";
    /// A seal or approval that does not hold for this call (expired, already
    /// used, altered, another key, another call): never forwarded.
    ConfirmationInvalid = "CONFIRMATION_INVALID", retryable: true,
        "This confirmation does not hold for this call (expired, already used, altered, or given for another call); it was not run. Call again without it to be asked again.";
    /// The host's context was malformed: a host bug, denied.
    InvalidContext = "INVALID_CONTEXT", retryable: false,
        "The host sent an invalid policy context; the call was not allowed. Fix the host's context.";
    /// Turn runtime: a second transactional call in one turn.
    TransactionLimit = "TRANSACTION_LIMIT", retryable: true,
        "Only one transactional call runs per turn. Propose this call again in a later turn.";
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

/// Joins a decision's pieces into a string of exactly their length. Why
/// exact: a host takes the decision as a boxed slice, and a string with room
/// to spare is shrunk (reallocated) on its way out of the component (#17).
fn join(parts: &[&[&str]]) -> String {
    // Plain loops: an iterator chain here was not inlined in the size-built
    // component and cost as much as the copying.
    let mut len = 0;
    for part in parts {
        for piece in *part {
            len += piece.len();
        }
    }
    let mut out = String::with_capacity(len);
    for part in parts {
        for piece in *part {
            out.push_str(piece);
        }
    }
    out
}

/// The `error` object of a denial, as pieces.
fn error_pieces(denial: &Denial) -> [&str; 4] {
    match &denial.details {
        Some(details) => [denial.code.error_head(), ",\"details\":", details, "}"],
        None => [denial.code.error_head(), "}", "", ""],
    }
}

/// `NOT_FOUND`: only `tool` and `blocked_by_policy`, identical for a tool
/// that does not exist and one that is hidden, whatever the reason.
pub fn not_found(name_json: &str) -> Decision {
    Decision {
        ok: false,
        code: Some(Code::NotFound),
        json: join(&[
            &["{\"ok\":false,\"error\":"],
            &error_pieces(&Denial::new(Code::NotFound)),
            &[",\"metadata\":{\"tool\":", name_json, ",\"blocked_by_policy\":true}}"],
        ]),
    }
}

/// A decision about a call that could not be tied to a tool (unparseable
/// call, bad context): `tool` is the name if it could be read, else null.
pub fn unattributed(name_json: Option<&str>, denial: &Denial, revision_json: &str) -> Decision {
    Decision {
        ok: false,
        code: Some(denial.code),
        json: join(&[
            &["{\"ok\":false,\"error\":"],
            &error_pieces(denial),
            &[
                ",\"metadata\":{\"tool\":",
                name_json.unwrap_or("null"),
                ",\"blocked_by_policy\":true,\"policy_revision\":",
                revision_json,
                "}}",
            ],
        ]),
    }
}

/// The classification's members of a decision's `metadata`
/// (`,"operation_type":…,"effect":…,"policy_source":…`): the same for every
/// decision about a tool, so a tool writes them once, at load (#17).
pub fn classification_members(class: &Classification) -> String {
    let mut effect = String::new();
    write_str(&mut effect, &class.effect);
    join(&[&[
        ",\"operation_type\":\"",
        class.operation_type.as_str(),
        "\",\"effect\":",
        &effect,
        ",\"policy_source\":\"",
        class.policy_source.as_str(),
        "\"",
    ]])
}

/// A decision about a known, exposed tool: allowed when `denial` is `None`.
/// `name_json`, `class_members` (from [`classification_members`]) and
/// `revision_json` are the pieces the rule set wrote at load.
pub fn about_tool(
    name_json: &str,
    class_members: &str,
    confirmation_required: bool,
    confirmation_received: bool,
    denial: Option<&Denial>,
    revision_json: &str,
) -> Decision {
    let error = denial.map(error_pieces);
    let (head, error): (&str, &[&str]) = match &error {
        Some(pieces) => ("{\"ok\":false,\"error\":", pieces),
        None => ("{\"ok\":true,\"error\":null", &[]),
    };
    // The booleans pick whole pieces, each spelled from one template.
    macro_rules! blocked {
        ($blocked:literal) => {
            concat!(",\"blocked_by_policy\":", $blocked)
        };
    }
    macro_rules! confirmation {
        ($required:literal, $received:literal) => {
            concat!(
                ",\"confirmation_required\":",
                $required,
                ",\"confirmation_received\":",
                $received,
                ",\"policy_revision\":"
            )
        };
    }
    let blocked_by_policy = if denial.is_some() {
        blocked!(true)
    } else {
        blocked!(false)
    };
    let confirmation = match (confirmation_required, confirmation_received) {
        (false, false) => confirmation!(false, false),
        (false, true) => confirmation!(false, true),
        (true, false) => confirmation!(true, false),
        (true, true) => confirmation!(true, true),
    };
    Decision {
        ok: denial.is_none(),
        code: denial.map(|d| d.code),
        json: join(&[
            &[head],
            error,
            &[
                ",\"metadata\":{\"tool\":",
                name_json,
                blocked_by_policy,
                class_members,
                confirmation,
                revision_json,
                "}}",
            ],
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_written_by_json_as_it_is() {
        for code in Code::ALL {
            let message = code.message();
            assert_eq!(
                serde_json::to_string(message).ok(),
                Some(format!("\"{message}\"")),
                "{code:?}"
            );
        }
    }
}
