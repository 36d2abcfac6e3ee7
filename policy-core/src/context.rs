//! The per-call context a host supplies: surface, granted scopes, allowlist.

use crate::error::{Origin, Problem, ProblemCode};
use crate::text::same_text;
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
        if crate::json::is_blank(text) {
            return Ok(Context::default());
        }
        let value = crate::json::parse_strict_text(text).map_err(|e| {
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
                    // A `null` is refused, not read as the default: the
                    // default is the surface that publishes more.
                    ctx.surface = value
                        .as_str()
                        .and_then(Surface::parse)
                        .ok_or_else(|| bad("`surface` must be confirming or direct"))?
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

/// The last context text a host passed and what it parsed to.
///
/// Why: hosts pass the same context call after call (one per session or
/// surface), and parsing it was about a quarter of a decision in the
/// component. Parsing is a pure function of the text, so reusing the result
/// for identical text cannot change a decision; an unreadable context is
/// remembered as the same error.
#[derive(Debug, Default)]
pub struct ContextMemo {
    last: Option<(String, Result<Context, Problem>)>,
}

impl ContextMemo {
    /// [`Context::parse`], reusing the previous result when `text` is the
    /// same as last time.
    pub fn parse(&mut self, text: &str) -> Result<&Context, &Problem> {
        if !matches!(&self.last, Some((last, _)) if same_text(last, text)) {
            self.last = None;
        }
        let (_, parsed) = self.last.get_or_insert_with(|| (text.to_owned(), Context::parse(text)));
        parsed.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memo_answers_as_parse_does_for_every_text_in_turn() {
        let texts = [
            r#"{"surface":"direct"}"#,
            r#"{"surface":"direct"}"#,
            r#"{"scopes":["a"]}"#,
            "{not json",
            "{not json",
            r#"{"surface":"direct"}"#,
            "",
        ];
        let mut memo = ContextMemo::default();
        for text in texts {
            let fresh = Context::parse(text);
            assert_eq!(
                memo.parse(text).cloned().map_err(ToString::to_string),
                fresh.map_err(|p| p.to_string()),
                "{text}"
            );
        }
    }
}
