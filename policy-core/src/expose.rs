//! SPEC §3 in one place: whether a tool is exposed on a surface. Both
//! `tools/list` and `tools/call` ask this function, so they cannot disagree.

use crate::classify::Classification;
use crate::context::{Context, Surface};
use crate::policy::OperationType;

/// Exposed: enabled, not held back, in the allowlist, and on a `direct`
/// surface read-only and needing no confirmation. Derived, never enumerated.
pub fn is_exposed(name: &str, class: &Classification, ctx: &Context) -> bool {
    class.enabled
        && class.held.is_none()
        && ctx
            .allowed_tools
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|a| a == name))
        && match ctx.surface {
            Surface::Confirming => true,
            Surface::Direct => class.operation_type == OperationType::ReadOnly && !class.confirmation_required,
        }
}

/// The tool's scopes that the context does not grant. Empty when the context
/// has no scope list (no scope check) or grants them all. A write scope never
/// implies a read scope: names are compared exactly.
pub fn missing_scopes<'a>(class: &'a Classification, ctx: &Context) -> Vec<&'a str> {
    match &ctx.scopes {
        None => Vec::new(),
        Some(granted) => class
            .scopes
            .iter()
            .filter(|s| !granted.iter().any(|g| g == *s))
            .map(String::as_str)
            .collect(),
    }
}

/// What `tools/list` shows: exposed, with every scope granted.
pub fn is_listed(name: &str, class: &Classification, ctx: &Context) -> bool {
    is_exposed(name, class, ctx) && missing_scopes(class, ctx).is_empty()
}
