//! The per-call context a host supplies: surface, granted scopes, allowlist.

use crate::error::{Origin, Problem, ProblemCode};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Surface {
    /// The caller can carry a human confirmation (the default).
    #[default]
    Confirming,
    /// No confirmation round-trip: only read-only tools that need none.
    Direct,
}

impl Surface {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "confirming" => Some(Surface::Confirming),
            "direct" => Some(Surface::Direct),
            _ => None,
        }
    }
}

/// `scopes` absent: no scope check. `allowed_tools` absent: every tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub surface: Surface,
    pub scopes: Option<Vec<String>>,
    pub allowed_tools: Option<Vec<String>>,
}

const KEYS: &[&str] = &["surface", "scopes", "allowed_tools"];

fn bad(message: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidValue, Origin::Context, message)
}

fn string_list(value: &Value, key: &str) -> Result<Option<Vec<String>>, Problem> {
    match value {
        Value::Null => Ok(None),
        Value::Array(items) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad(format!("`{key}` must be an array of strings")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        _ => Err(bad(format!("`{key}` must be an array of strings or null"))),
    }
}

impl Context {
    /// Parses the context JSON. Empty text or `null` is the default context.
    pub fn parse(text: &str) -> Result<Context, Problem> {
        if text.trim().is_empty() {
            return Ok(Context::default());
        }
        let value = crate::json::parse_strict(text.as_bytes()).map_err(|e| {
            Problem::new(
                ProblemCode::Syntax,
                Origin::Context,
                crate::catalog::json_error_message(&e),
            )
            .at(e.line() as u64, e.column() as u64)
        })?;
        Context::from_value(&value)
    }

    pub fn from_value(value: &Value) -> Result<Context, Problem> {
        let map = match value {
            Value::Null => return Ok(Context::default()),
            Value::Object(map) => map,
            _ => return Err(bad("the context must be a JSON object")),
        };
        let mut ctx = Context::default();
        for (key, value) in map {
            match key.as_str() {
                "surface" => {
                    ctx.surface = match value {
                        Value::Null => Surface::default(),
                        Value::String(s) => {
                            Surface::parse(s).ok_or_else(|| bad("`surface` must be confirming or direct"))?
                        }
                        _ => return Err(bad("`surface` must be confirming or direct")),
                    }
                }
                "scopes" => ctx.scopes = string_list(value, "scopes")?,
                "allowed_tools" => ctx.allowed_tools = string_list(value, "allowed_tools")?,
                _ => {
                    return Err(Problem::new(
                        ProblemCode::UnknownKey,
                        Origin::Context,
                        format!(
                            "unknown context key `{}`; expected one of: {}",
                            crate::json::truncate_for_message(key),
                            KEYS.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(ctx)
    }
}
