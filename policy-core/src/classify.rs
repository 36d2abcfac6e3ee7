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
    /// A non-read effect, `readOnlyHint: false`, `destructiveHint: true`, or
    /// a hint MCP gives meaning only for tools that write
    /// (`destructiveHint`, `idempotentHint`) without `readOnlyHint: true`;
    /// carries the finer effect when the catalog names one.
    Writes(Option<String>),
    ReadOnly,
    Silent,
}

pub fn catalog_hint(tool: &CatalogTool) -> CatalogHint {
    let finer = tool.effect.as_deref().filter(|e| *e != READ_EFFECT);
    let annotations = tool.annotations.as_ref();
    // MCP's `destructiveHint` and `idempotentHint` are "meaningful only when
    // readOnlyHint == false", and `readOnlyHint` defaults to false: a server
    // that gives either without `readOnlyHint: true` describes a write
    // (`destructiveHint: false` is "only additive updates").
    let write_only_hints = |a: &crate::catalog::Annotations| {
        a.read_only_hint != Some(true) && (a.destructive_hint.is_some() || a.other.contains_key("idempotentHint"))
    };
    let hint_writes = annotations
        .is_some_and(|a| a.read_only_hint == Some(false) || a.destructive_hint == Some(true) || write_only_hints(a));
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

/// Whether a tool's input schema declares `name` as a property of the
/// arguments object: in its own `properties` or `required`, or in those of
/// a subschema that applies to the same object (`allOf`, `anyOf`, `oneOf`,
/// `if`/`then`/`else`, `dependentSchemas`), or of a local `$ref`'s target
/// (`#/$defs/…`). A schema built from parts (a `confirmed` field declared
/// in an `allOf` branch) declares it as surely as one written flat: read
/// only at the top, such a tool lost its schema's call for confirmation,
/// and the field a person's yes sets was removed as undeclared.
///
/// A reference this walk cannot follow exactly (an anchor, a percent-encoded
/// or missing pointer, a base changed by a nested `$id`, `$dynamicRef`,
/// `$recursiveRef`) may lead to a declaration the validator applies, so it
/// counts as declaring: the tool asks for confirmation and a yes's field is
/// kept for its schema to judge, as for a declaration the walk found. Read
/// as "not declared", such a tool ran unconfirmed (review 10).
pub fn declares_property(schema: Option<&serde_json::Value>, name: &str) -> bool {
    use serde_json::Value;
    let Some(root) = schema else {
        return false;
    };
    // Each subschema is looked at once (by address), without recursion: a
    // server's schema may be hostile, and `$ref`s that fan out to the same
    // definitions level after level, or chain through thousands of them,
    // would otherwise cost exponential time or the stack.
    // A BTreeSet: a HashSet's random seed would need an import the engine
    // does not have.
    let mut visited = std::collections::BTreeSet::new();
    let mut pending = vec![root];
    while let Some(schema) = pending.pop() {
        let Some(object) = schema.as_object() else {
            continue;
        };
        if !visited.insert(std::ptr::from_ref(schema)) {
            continue;
        }
        let own = object
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(name))
            || object
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(name)));
        let unfollowed = ["$dynamicRef", "$recursiveRef"]
            .into_iter()
            .any(|k| object.contains_key(k))
            || (!std::ptr::eq(schema, root) && object.contains_key("$id"));
        if own || unfollowed {
            return true;
        }
        for key in ["dependentRequired", "dependencies"] {
            for value in object
                .get(key)
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|m| m.values())
            {
                match value {
                    Value::Array(names) if names.iter().any(|v| v.as_str() == Some(name)) => return true,
                    Value::Object(_) => pending.push(value),
                    _ => {}
                }
            }
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(list) = object.get(key).and_then(Value::as_array) {
                pending.extend(list);
            }
        }
        for key in ["if", "then", "else"] {
            pending.extend(object.get(key));
        }
        if let Some(map) = object.get("dependentSchemas").and_then(Value::as_object) {
            pending.extend(map.values());
        }
        if let Some(reference) = object.get("$ref") {
            let target = reference
                .as_str()
                .and_then(|reference| reference.strip_prefix('#'))
                .filter(|pointer| !pointer.contains('%'))
                .and_then(|pointer| root.pointer(pointer));
            match target {
                Some(target) => pending.push(target),
                None => return true,
            }
        }
    }
    false
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
    // `defaults.require_confirmation` speaks for the tools `defaults` typed.
    // A tool that a catalog hint or the builtin rule made transactional needs
    // confirmation unless its own entry or legacy fields say otherwise: a
    // defaults `false` must not switch it off. A defaults `true` only
    // tightens, so it still applies to every tool without its own setting.
    let default_confirmation = policy
        .and_then(|p| p.defaults.require_confirmation)
        .filter(|&required| required || policy_source == PolicySource::Defaults);
    let confirmation_required = entry
        .and_then(|e| e.require_confirmation)
        .or(legacy_confirmation)
        .or_else(|| {
            (declares_property(schema, "confirmed") || declares_property(schema, "confirmation")).then_some(true)
        })
        .or(default_confirmation)
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
            .filter(|pin| Some(*pin) != tool.definition.hash())
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

#[cfg(test)]
mod tests {

    /// A schema whose `$ref`s fan out to the same definitions level after
    /// level (8 refs, 16 levels: 8^16 paths) is read once per definition,
    /// and a chain of 100 000 `$ref`s needs no stack.
    #[test]
    fn declarations_are_found_in_parts_and_a_fanned_out_schema_is_read_once() {
        let mut defs = serde_json::Map::new();
        for level in 0..16 {
            let refs: Vec<serde_json::Value> = (0..8)
                .map(|_| serde_json::json!({"$ref": format!("#/$defs/l{}", level + 1)}))
                .collect();
            defs.insert(format!("l{level}"), serde_json::json!({"anyOf": refs}));
        }
        defs.insert(
            "l16".into(),
            serde_json::json!({"properties": {"confirmed": {"type": "boolean"}}}),
        );
        let fanned = serde_json::json!({"$ref": "#/$defs/l0", "$defs": defs});
        assert!(declares_property(Some(&fanned), "confirmed"));
        assert!(!declares_property(Some(&fanned), "idempotency_key"));
        let parts = serde_json::json!({"allOf": [{"required": ["idempotency_key"]}]});
        assert!(declares_property(Some(&parts), "idempotency_key"));
        let cycle = serde_json::json!({"$ref": "#", "properties": {}});
        assert!(!declares_property(Some(&cycle), "confirmed"));
        let mut chain = serde_json::Map::new();
        for i in 0..100_000 {
            chain.insert(
                format!("c{i}"),
                serde_json::json!({"$ref": format!("#/$defs/c{}", i + 1)}),
            );
        }
        chain.insert("c100000".into(), serde_json::json!({"required": ["confirmed"]}));
        let chained = serde_json::json!({"$ref": "#/$defs/c0", "$defs": chain});
        assert!(declares_property(Some(&chained), "confirmed"));
    }

    /// References the walk cannot follow exactly count as declaring; the
    /// ones it follows still tell a declaration from its absence.
    #[test]
    fn a_reference_not_followed_exactly_counts_as_declaring() {
        let plain = serde_json::json!({"$defs": {"d": {"type": "string"}}});
        let unfollowed = [
            serde_json::json!({"$ref": "#d", "$defs": {"d": {"$anchor": "d"}}}),
            serde_json::json!({"$ref": "#/$defs/a%20b", "$defs": {"a b": {}}}),
            serde_json::json!({"$ref": "#/$defs/missing"}),
            serde_json::json!({"$ref": "https://example.com/s"}),
            serde_json::json!({"allOf": [{"$id": "https://example.com/inner", "$ref": "#/x"}]}),
            serde_json::json!({"$dynamicRef": "#m", "$defs": {"m": {"$dynamicAnchor": "m"}}}),
            serde_json::json!({"dependentRequired": {"id": ["confirmed"]}}),
            serde_json::json!({"dependencies": {"id": {"properties": {"confirmed": {}}}}}),
        ];
        for schema in &unfollowed {
            assert!(declares_property(Some(schema), "confirmed"), "{schema}");
        }
        let followed = [
            serde_json::json!({"$ref": "#/$defs/d", "$defs": plain["$defs"].clone()}),
            serde_json::json!({"$id": "https://example.com/root", "$ref": "#/$defs/d", "$defs": plain["$defs"].clone()}),
            serde_json::json!({"dependentRequired": {"id": ["other"]}}),
            serde_json::json!({"dependencies": {"id": {"properties": {"other": {}}}}}),
        ];
        for schema in &followed {
            assert!(!declares_property(Some(schema), "confirmed"), "{schema}");
        }
    }
    use super::*;

    fn tool(json: &str) -> CatalogTool {
        let catalog = crate::catalog::parse(&format!("[{json}]")).unwrap_or_else(|e| unreachable!("{e}"));
        catalog.tools.into_iter().next().unwrap_or_else(|| unreachable!())
    }

    fn policy(text: &str) -> Policy {
        crate::policy::parse(text).unwrap_or_else(|e| unreachable!("{e}"))
    }

    const SEED_DEFAULTS: &str = "version: 1\ndefaults:\n  operation_type: read_only\n  require_confirmation: false\n";

    #[test]
    fn defaults_confirmation_false_does_not_reach_tools_a_hint_made_transactional() {
        let p = policy(SEED_DEFAULTS);
        for hinted in [
            r#"{"name":"t","annotations":{"readOnlyHint":false}}"#,
            r#"{"name":"t","annotations":{"destructiveHint":true}}"#,
            r#"{"name":"t","annotations":{"readOnlyHint":true,"destructiveHint":true}}"#,
            r#"{"name":"t","effect":"external_message"}"#,
            r#"{"name":"t","effect":"write"}"#,
        ] {
            let c = classify(&tool(hinted), Some(&p));
            assert_eq!(
                (c.operation_type, c.policy_source, c.confirmation_required),
                (OperationType::Transactional, PolicySource::Catalog, true),
                "{hinted}"
            );
        }
        // A silent tool is typed by defaults: their `false` applies.
        let c = classify(&tool(r#"{"name":"t"}"#), Some(&p));
        assert_eq!(
            (c.policy_source, c.confirmation_required),
            (PolicySource::Defaults, false)
        );
        // Defaults that type tools transactional and switch confirmation off
        // are the operator's explicit choice for those tools.
        let p = policy("version: 1\ndefaults:\n  operation_type: transactional\n  require_confirmation: false\n");
        let c = classify(&tool(r#"{"name":"t"}"#), Some(&p));
        assert_eq!(
            (c.operation_type, c.policy_source, c.confirmation_required),
            (OperationType::Transactional, PolicySource::Defaults, false)
        );
        let c = classify(&tool(r#"{"name":"t","annotations":{"readOnlyHint":false}}"#), Some(&p));
        assert_eq!(
            (c.policy_source, c.confirmation_required),
            (PolicySource::Catalog, true)
        );
    }

    #[test]
    fn builtin_transactional_needs_confirmation_whatever_defaults_say() {
        let p = policy("version: 1\ndefaults:\n  require_confirmation: false\n");
        let c = classify(&tool(r#"{"name":"t"}"#), Some(&p));
        assert_eq!(
            (c.operation_type, c.policy_source, c.confirmation_required),
            (OperationType::Transactional, PolicySource::Builtin, true)
        );
    }

    #[test]
    fn only_the_tools_own_entry_or_legacy_fields_switch_confirmation_off() {
        let hinted = tool(r#"{"name":"t","annotations":{"destructiveHint":true}}"#);
        let p = policy(&format!(
            "{SEED_DEFAULTS}tool_policies:\n  t: {{require_confirmation: false}}\n"
        ));
        let c = classify(&hinted, Some(&p));
        assert_eq!(
            (c.policy_source, c.confirmation_required),
            (PolicySource::Catalog, false)
        );
        // An entry that types the tool but says nothing about confirmation:
        // the builtin rule, not the defaults, decides.
        let p = policy(&format!(
            "{SEED_DEFAULTS}tool_policies:\n  t: {{operation_type: transactional}}\n"
        ));
        let c = classify(&hinted, Some(&p));
        assert_eq!(
            (c.policy_source, c.confirmation_required),
            (PolicySource::ToolPolicies, true)
        );
        let p = policy(&format!(
            "{SEED_DEFAULTS}tool_policies:\n  t: {{operation_type: read_only}}\n"
        ));
        let c = classify(&hinted, Some(&p));
        assert_eq!(
            (c.operation_type, c.confirmation_required),
            (OperationType::ReadOnly, false)
        );
        // Legacy per-tool fields are the tool's own.
        let legacy = |fields: &str| {
            let catalog =
                crate::catalog::parse(&format!("tools:\n  t:\n{fields}")).unwrap_or_else(|e| unreachable!("{e}"));
            catalog.tools.into_iter().next().unwrap_or_else(|| unreachable!())
        };
        let p = policy(SEED_DEFAULTS);
        let c = classify(
            &legacy("    tool_type: transactional\n    confirmation_required: false\n"),
            Some(&p),
        );
        assert_eq!(
            (c.policy_source, c.confirmation_required),
            (PolicySource::ToolsYaml, false)
        );
        let c = classify(
            &legacy("    execution_policy: auto\n    tool_type: transactional\n"),
            Some(&p),
        );
        assert!(!c.confirmation_required);
        let c = classify(&legacy("    tool_type: transactional\n"), Some(&p));
        assert_eq!(
            (c.policy_source, c.confirmation_required),
            (PolicySource::ToolsYaml, true)
        );
    }

    #[test]
    fn defaults_confirmation_true_still_tightens_every_tool_without_its_own_setting() {
        let p = policy("version: 1\ndefaults:\n  operation_type: read_only\n  require_confirmation: true\n");
        for json in [
            r#"{"name":"t","annotations":{"readOnlyHint":true}}"#,
            r#"{"name":"t","annotations":{"readOnlyHint":false}}"#,
            r#"{"name":"t"}"#,
        ] {
            assert!(classify(&tool(json), Some(&p)).confirmation_required, "{json}");
        }
        let p = policy(
            "version: 1\ndefaults:\n  require_confirmation: true\ntool_policies:\n  t: {operation_type: read_only}\n",
        );
        assert!(classify(&tool(r#"{"name":"t"}"#), Some(&p)).confirmation_required);
    }

    #[test]
    fn without_a_policy_the_catalog_decides() {
        let c = classify(&tool(r#"{"name":"t","annotations":{"readOnlyHint":false}}"#), None);
        assert_eq!(
            (c.policy_source, c.confirmation_required),
            (PolicySource::Catalog, true)
        );
        let c = classify(&tool(r#"{"name":"t","annotations":{"readOnlyHint":true}}"#), None);
        assert_eq!(
            (c.policy_source, c.confirmation_required),
            (PolicySource::Catalog, false)
        );
    }
}
