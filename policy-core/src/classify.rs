//! SPEC §2 in one function: what a tool is (operation type, effect,
//! confirmation, required arguments, scopes) and which source said so.

use crate::catalog::{CatalogTool, ExecutionPolicy};
use crate::policy::{OperationType, Policy, READ_EFFECT, WRITE_EFFECT};

/// Where a classification's operation type came from, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicySource {
    ToolPolicies,
    ToolsYaml,
    Catalog,
    Defaults,
    Builtin,
}

impl PolicySource {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicySource::ToolPolicies => "tool_policies",
            PolicySource::ToolsYaml => "tools_yaml",
            PolicySource::Catalog => "catalog",
            PolicySource::Defaults => "defaults",
            PolicySource::Builtin => "builtin",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub operation_type: OperationType,
    pub effect: String,
    pub policy_source: PolicySource,
    pub confirmation_required: bool,
    pub requires: Vec<String>,
    pub scopes: Vec<String>,
    pub enabled: bool,
    /// Why the tool is held back, if it is.
    pub held: Option<String>,
    pub idempotency_key_required: bool,
}

/// What the catalog (a server, possibly untrusted) says about a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogHint {
    /// A non-read effect, `readOnlyHint: false` or `destructiveHint: true`;
    /// carries the finer effect when the catalog names one.
    Writes(Option<String>),
    ReadOnly,
    Silent,
}

pub fn catalog_hint(tool: &CatalogTool) -> CatalogHint {
    let finer = tool.effect.as_deref().filter(|e| *e != READ_EFFECT);
    let annotations = tool.annotations.as_ref();
    let hint_writes = annotations.is_some_and(|a| a.read_only_hint == Some(false) || a.destructive_hint == Some(true));
    if finer.is_some() || hint_writes {
        return CatalogHint::Writes(finer.map(str::to_owned));
    }
    let hint_reads =
        tool.effect.as_deref() == Some(READ_EFFECT) || annotations.is_some_and(|a| a.read_only_hint == Some(true));
    if hint_reads {
        CatalogHint::ReadOnly
    } else {
        CatalogHint::Silent
    }
}

/// The property names a JSON Schema object declares at its top level.
pub fn declares_property(schema: Option<&serde_json::Value>, name: &str) -> bool {
    schema
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.as_object())
        .is_some_and(|p| p.contains_key(name))
}

pub fn schema_requires(schema: Option<&serde_json::Value>, name: &str) -> bool {
    schema
        .and_then(|s| s.get("required"))
        .and_then(|r| r.as_array())
        .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(name)))
}

/// Classifies one tool. `policy` is `None` when no policy file is loaded
/// (legacy behaviour: the catalog's own fields and hints decide).
pub fn classify(tool: &CatalogTool, policy: Option<&Policy>) -> Classification {
    let entry = policy.and_then(|p| p.tool_policies.get(&tool.name));
    let legacy = tool.legacy.as_ref();
    let hint = catalog_hint(tool);
    use OperationType::{ReadOnly, Transactional};

    let (operation_type, policy_source) = if let Some(op) = entry.and_then(|e| e.stated_operation_type()) {
        (op, PolicySource::ToolPolicies)
    } else if let Some(op) = legacy.and_then(|l| l.tool_type) {
        (op, PolicySource::ToolsYaml)
    } else {
        match policy {
            // No policy file: the operator chose this server; its hints decide.
            None => match hint {
                CatalogHint::Writes(_) => (Transactional, PolicySource::Catalog),
                CatalogHint::ReadOnly => (ReadOnly, PolicySource::Catalog),
                CatalogHint::Silent => (Transactional, PolicySource::Builtin),
            },
            // A policy file: hints only tighten its defaults.
            Some(p) => {
                let default = p.defaults.operation_type;
                match hint {
                    CatalogHint::Writes(_) => (Transactional, PolicySource::Catalog),
                    CatalogHint::ReadOnly if default == Some(ReadOnly) || p.trust_catalog_hints => {
                        (ReadOnly, PolicySource::Catalog)
                    }
                    CatalogHint::ReadOnly | CatalogHint::Silent => match default {
                        Some(op) => (op, PolicySource::Defaults),
                        None => (Transactional, PolicySource::Builtin),
                    },
                }
            }
        }
    };

    let effect = match operation_type {
        ReadOnly => READ_EFFECT.to_owned(),
        Transactional => entry
            .and_then(|e| e.effect.clone())
            .filter(|e| e != READ_EFFECT)
            .or(match hint {
                CatalogHint::Writes(finer) => finer,
                _ => None,
            })
            .unwrap_or_else(|| WRITE_EFFECT.to_owned()),
    };

    let schema = tool.input_schema.as_ref();
    let legacy_confirmation = legacy.and_then(|l| match (l.confirmation_required, l.execution_policy) {
        (None, None) => None,
        // The two legacy fields tighten each other: either asking is enough.
        (cr, ep) => Some(cr == Some(true) || ep == Some(ExecutionPolicy::Confirm)),
    });
    let confirmation_required = entry
        .and_then(|e| e.require_confirmation)
        .or(legacy_confirmation)
        .or_else(|| {
            (declares_property(schema, "confirmed") || declares_property(schema, "confirmation")).then_some(true)
        })
        .or(policy.and_then(|p| p.defaults.require_confirmation))
        .unwrap_or(operation_type == Transactional);

    let requires = entry
        .and_then(|e| e.requires.clone())
        .or_else(|| legacy.and_then(|l| l.requires.clone()))
        .unwrap_or_default();
    let scopes = entry
        .and_then(|e| e.scopes.clone())
        .or_else(|| tool.scopes.clone())
        .unwrap_or_default();
    let held = entry.and_then(|e| e.hold.clone()).or_else(|| {
        entry
            .and_then(|e| e.pin.as_deref())
            .filter(|pin| *pin != tool.definition_hash)
            .map(|_| "the tool's definition changed since it was pinned".to_owned())
    });
    let idempotency_key_required = entry
        .and_then(|e| e.require_idempotency_key)
        .unwrap_or_else(|| schema_requires(schema, "idempotency_key"));

    Classification {
        operation_type,
        effect,
        policy_source,
        confirmation_required,
        requires,
        scopes,
        enabled: legacy.and_then(|l| l.enabled).unwrap_or(true),
        held,
        idempotency_key_required,
    }
}
