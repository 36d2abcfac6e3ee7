//! The policy file (`tool_policies.yaml`, `version: 1`): its model and its
//! strict reader. Every unknown key, wrong type, unknown operation type and
//! duplicate tool is an error that names its line and column.

use crate::error::{Origin, Problem, ProblemCode};
use crate::yaml::{self, Key, Node, NodeValue, Reader};
use std::collections::BTreeMap;

/// The policy format versions this engine reads.
pub const POLICY_FORMAT_VERSION: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OperationType {
    ReadOnly,
    Transactional,
}

impl OperationType {
    pub fn as_str(self) -> &'static str {
        match self {
            OperationType::ReadOnly => "read_only",
            OperationType::Transactional => "transactional",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "read_only" => Some(OperationType::ReadOnly),
            "transactional" => Some(OperationType::Transactional),
            _ => None,
        }
    }
}

/// The effect a read-only tool always has.
pub const READ_EFFECT: &str = "read";
/// The effect of a transactional tool whose catalog names no finer one.
pub const WRITE_EFFECT: &str = "write";

/// An effect name: `read`, `write`, or a finer write class such as
/// `external_message`. Lower-case identifiers only, so a typo cannot smuggle
/// in whitespace or look-alike characters.
pub fn is_valid_effect(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Defaults {
    pub operation_type: Option<OperationType>,
    pub require_confirmation: Option<bool>,
}

/// One `tool_policies` entry. Every field is optional; a field that is set
/// always wins over the catalog (SPEC §2).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Entry {
    pub operation_type: Option<OperationType>,
    /// Finer effect (`external_message`, ...). Implies the operation type.
    pub effect: Option<String>,
    pub require_confirmation: Option<bool>,
    pub requires: Option<Vec<String>>,
    pub scopes: Option<Vec<String>>,
    /// Held back with a reason: never exposed, answers like an unknown tool.
    pub hold: Option<String>,
    pub require_idempotency_key: Option<bool>,
    /// `sha256:<hex>` of the tool's catalog definition; a changed definition
    /// holds the tool back.
    pub pin: Option<String>,
    pub line: u32,
    pub column: u32,
}

impl Entry {
    /// The operation type this entry states, directly or through its effect.
    pub fn stated_operation_type(&self) -> Option<OperationType> {
        self.operation_type.or_else(|| {
            self.effect.as_deref().map(|e| {
                if e == READ_EFFECT {
                    OperationType::ReadOnly
                } else {
                    OperationType::Transactional
                }
            })
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    pub defaults: Defaults,
    /// Let catalog read-only hints loosen a transactional default.
    pub trust_catalog_hints: bool,
    pub tool_policies: BTreeMap<String, Entry>,
    /// The policy as canonical JSON, for the revision hash.
    pub canonical: String,
}

const TOP_KEYS: &[&str] = &["version", "defaults", "trust_catalog_hints", "tool_policies"];
const DEFAULT_KEYS: &[&str] = &["operation_type", "require_confirmation"];
const ENTRY_KEYS: &[&str] = &[
    "operation_type",
    "effect",
    "require_confirmation",
    "requires",
    "scopes",
    "hold",
    "require_idempotency_key",
    "pin",
];

/// Parses and validates a policy file.
pub fn parse(text: &str) -> Result<Policy, Problem> {
    let root = yaml::parse(text, Origin::Policy)?;
    let r = Reader { origin: Origin::Policy };
    if matches!(root.value, NodeValue::Null) {
        return Err(r.error(
            1,
            1,
            ProblemCode::MissingKey,
            "the policy is empty; it needs at least `version: 1`",
        ));
    }
    let entries = r.map(&root, "policy")?;
    let mut policy = Policy {
        canonical: crate::json::canonical(&root.to_json()),
        ..Policy::default()
    };
    let mut version_seen = false;
    for (key, value) in entries {
        match key.name.as_str() {
            "version" => {
                version_seen = true;
                match &value.value {
                    NodeValue::Number(n) if n.as_u64() == Some(POLICY_FORMAT_VERSION) => {}
                    NodeValue::Number(_) => {
                        return Err(r.error(
                            value.line,
                            value.column,
                            ProblemCode::UnsupportedVersion,
                            format!("unsupported policy version; this engine reads version {POLICY_FORMAT_VERSION}"),
                        ));
                    }
                    _ => return Err(r.wrong_type(value, "version", "the number 1")),
                }
            }
            "defaults" => policy.defaults = parse_defaults(&r, value)?,
            "trust_catalog_hints" => policy.trust_catalog_hints = r.bool(value, "trust_catalog_hints")?,
            "tool_policies" => {
                if matches!(value.value, NodeValue::Null) {
                    continue;
                }
                for (name, entry) in r.map(value, "tool_policies")? {
                    crate::catalog::check_tool_name(&name.name)
                        .map_err(|why| r.error(name.line, name.column, ProblemCode::InvalidValue, why))?;
                    policy
                        .tool_policies
                        .insert(name.name.clone(), parse_entry(&r, name, entry)?);
                }
            }
            _ => return Err(r.unknown_key(key, TOP_KEYS)),
        }
    }
    if !version_seen {
        return Err(r.error(root.line, root.column, ProblemCode::MissingKey, "missing `version: 1`"));
    }
    Ok(policy)
}

fn operation_type(r: &Reader, node: &Node) -> Result<OperationType, Problem> {
    let s = r.string(node, "operation_type")?;
    OperationType::parse(s).ok_or_else(|| {
        r.error(
            node.line,
            node.column,
            ProblemCode::InvalidValue,
            format!(
                "unknown operation type `{}`; expected read_only or transactional",
                crate::json::truncate_for_message(s)
            ),
        )
    })
}

fn parse_defaults(r: &Reader, node: &Node) -> Result<Defaults, Problem> {
    let mut defaults = Defaults::default();
    if matches!(node.value, NodeValue::Null) {
        return Ok(defaults);
    }
    for (key, value) in r.map(node, "defaults")? {
        match key.name.as_str() {
            "operation_type" => defaults.operation_type = Some(operation_type(r, value)?),
            "require_confirmation" => defaults.require_confirmation = Some(r.bool(value, "require_confirmation")?),
            _ => return Err(r.unknown_key(key, DEFAULT_KEYS)),
        }
    }
    Ok(defaults)
}

fn parse_entry(r: &Reader, name: &Key, node: &Node) -> Result<Entry, Problem> {
    let mut entry = Entry {
        line: u32::try_from(name.line).unwrap_or(u32::MAX),
        column: u32::try_from(name.column).unwrap_or(u32::MAX),
        ..Entry::default()
    };
    if matches!(node.value, NodeValue::Null) {
        return Ok(entry);
    }
    let mut effect_node: Option<&Node> = None;
    for (key, value) in r.map(node, "tool_policies entry")? {
        match key.name.as_str() {
            "operation_type" => entry.operation_type = Some(operation_type(r, value)?),
            "effect" => {
                let s = r.string(value, "effect")?;
                if !is_valid_effect(s) {
                    return Err(r.error(
                        value.line,
                        value.column,
                        ProblemCode::InvalidValue,
                        "`effect` must be a lower-case identifier such as read, write or external_message",
                    ));
                }
                entry.effect = Some(s.to_owned());
                effect_node = Some(value);
            }
            "require_confirmation" => entry.require_confirmation = Some(r.bool(value, "require_confirmation")?),
            "requires" => entry.requires = Some(r.string_list(value, "requires")?),
            "scopes" => entry.scopes = Some(r.string_list(value, "scopes")?),
            "hold" => {
                let reason = r.string(value, "hold")?;
                if reason.trim().is_empty() {
                    return Err(r.error(
                        value.line,
                        value.column,
                        ProblemCode::InvalidValue,
                        "`hold` needs a reason",
                    ));
                }
                entry.hold = Some(reason.to_owned());
            }
            "require_idempotency_key" => {
                entry.require_idempotency_key = Some(r.bool(value, "require_idempotency_key")?);
            }
            "pin" => {
                let pin = r.string(value, "pin")?;
                if !crate::catalog::is_sha256_hex(pin) {
                    return Err(r.error(
                        value.line,
                        value.column,
                        ProblemCode::InvalidValue,
                        "`pin` must be `sha256:` followed by 64 lower-case hex digits (see `toolgate check`)",
                    ));
                }
                entry.pin = Some(pin.to_owned());
            }
            _ => return Err(r.unknown_key(key, ENTRY_KEYS)),
        }
    }
    if let (Some(op), Some(effect), Some(at)) = (entry.operation_type, entry.effect.as_deref(), effect_node) {
        let effect_op = if effect == READ_EFFECT {
            OperationType::ReadOnly
        } else {
            OperationType::Transactional
        };
        if op != effect_op {
            return Err(r.error(
                at.line,
                at.column,
                ProblemCode::InvalidValue,
                format!("effect `{effect}` contradicts operation_type {}", op.as_str()),
            ));
        }
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> Problem {
        parse(text).err().unwrap_or_else(|| unreachable!("accepted: {text}"))
    }

    #[test]
    fn seed_example_loads() {
        let p = parse(
            "version: 1\ndefaults:\n  operation_type: read_only\n  require_confirmation: false\ntool_policies:\n  consultar_plano: { operation_type: read_only }\n  alterar_plano:   { operation_type: transactional, require_confirmation: true, requires: [new_plan_id] }\n",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(p.defaults.operation_type, Some(OperationType::ReadOnly));
        let alterar = &p.tool_policies["alterar_plano"];
        assert_eq!(alterar.require_confirmation, Some(true));
        assert_eq!(alterar.requires.as_deref(), Some(&["new_plan_id".to_string()][..]));
        assert_eq!((alterar.line, alterar.column), (7, 3));
    }

    #[test]
    fn quoted_boolean_is_an_error_at_its_position() {
        let e = err("version: 1\ntool_policies:\n  a:\n    require_confirmation: \"true\"\n");
        assert_eq!((e.code, e.line, e.column), (ProblemCode::InvalidValue, 4, 27));
    }

    #[test]
    fn unknown_keys_types_and_duplicates_are_errors() {
        assert_eq!(err("version: 1\nfoo: 1\n").code, ProblemCode::UnknownKey);
        let e = err("version: 1\ntool_policies:\n  a: {operation_type: readonly}\n");
        assert_eq!((e.code, e.line), (ProblemCode::InvalidValue, 3));
        assert_eq!(err("version: 1\ntool_policies:\n  a: {}\n  a: {}\n").line, 4);
        assert_eq!(err("version: \"1\"\n").code, ProblemCode::InvalidValue);
        assert_eq!(err("version: 2\n").code, ProblemCode::UnsupportedVersion);
        assert_eq!(err("defaults: {}\n").code, ProblemCode::MissingKey);
        assert_eq!(err("").code, ProblemCode::MissingKey);
        assert_eq!(
            err("version: 1\ntool_policies:\n  a: {effect: read, operation_type: transactional}\n").code,
            ProblemCode::InvalidValue
        );
    }
}

/// The JSON Schema of the policy file, for editors with a YAML language
/// server. Built from the same key tables the reader checks against, so a key
/// cannot be added to one and forgotten in the other (a test covers both).
pub fn json_schema() -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let object = |keys: &[&str], field: &dyn Fn(&str) -> Value| {
        let properties: Map<String, Value> = keys.iter().map(|k| ((*k).to_owned(), field(k))).collect();
        json!({"type": "object", "additionalProperties": false, "properties": properties})
    };
    let operation_type = json!({"enum": ["read_only", "transactional"]});
    let entry_field = |key: &str| match key {
        "operation_type" => {
            json!({"description": "read_only or transactional; always wins over the catalog.", "enum": ["read_only", "transactional"]})
        }
        "effect" => {
            json!({"description": "A finer effect (read, write, external_message, ...). Implies the operation type.", "type": "string", "pattern": "^[a-z][a-z0-9_]*$", "maxLength": 64})
        }
        "require_confirmation" => {
            json!({"description": "Whether a call needs the literal boolean confirmed: true.", "type": "boolean"})
        }
        "requires" => {
            json!({"description": "Arguments that must be present and not null.", "type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": true})
        }
        "scopes" => {
            json!({"description": "Scopes a caller must be granted (replace the catalog's).", "type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": true})
        }
        "hold" => {
            json!({"description": "Hold the tool back with a reason: it is never exposed and answers like an unknown tool.", "type": "string", "pattern": "\\S"})
        }
        "require_idempotency_key" => {
            json!({"description": "Require an idempotency_key argument (8..128 of A-Za-z0-9._:-).", "type": "boolean"})
        }
        "pin" => {
            json!({"description": "sha256 of the tool's catalog definition; a changed definition holds the tool back.", "type": "string", "pattern": "^sha256:[0-9a-f]{64}$"})
        }
        _ => Value::Null,
    };
    let default_field = |key: &str| match key {
        "operation_type" => operation_type.clone(),
        "require_confirmation" => json!({"type": "boolean"}),
        _ => Value::Null,
    };
    let entry = object(ENTRY_KEYS, &entry_field);
    let top_field = |key: &str| match key {
        "version" => json!({"const": POLICY_FORMAT_VERSION}),
        "defaults" => object(DEFAULT_KEYS, &default_field),
        "trust_catalog_hints" => {
            json!({"description": "Let catalog read-only hints loosen a transactional default.", "type": "boolean"})
        }
        "tool_policies" => json!({"type": "object", "additionalProperties": entry.clone()}),
        _ => Value::Null,
    };
    let mut schema = object(TOP_KEYS, &top_field);
    if let Value::Object(map) = &mut schema {
        map.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
        map.insert("title".into(), json!("toolgate tool_policies.yaml, version 1"));
        map.insert("required".into(), json!(["version"]));
    }
    schema
}

#[cfg(test)]
mod schema_tests {
    use super::*;

    #[test]
    fn every_key_the_reader_accepts_has_a_schema() {
        let schema = json_schema();
        for key in TOP_KEYS {
            assert!(!schema["properties"][key].is_null(), "{key}");
        }
        for key in ENTRY_KEYS {
            assert!(
                !schema["properties"]["tool_policies"]["additionalProperties"]["properties"][key].is_null(),
                "{key}"
            );
        }
        for key in DEFAULT_KEYS {
            assert!(!schema["properties"]["defaults"]["properties"][key].is_null(), "{key}");
        }
    }

    #[test]
    fn committed_schema_is_fresh() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../schema/tool_policies.schema.json");
        let generated = serde_json::to_string_pretty(&json_schema()).unwrap_or_default() + "\n";
        if std::env::var_os("TOOLGATE_WRITE_SCHEMA").is_some() {
            std::fs::write(path, &generated).unwrap_or_else(|e| unreachable!("{e}"));
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        // Compared as values: the file's key order follows serde_json's
        // `preserve_order` feature, which other crates in a build may enable.
        let committed: serde_json::Value = serde_json::from_str(&committed).unwrap_or_default();
        assert!(
            committed == json_schema(),
            "schema/tool_policies.schema.json is stale: run TOOLGATE_WRITE_SCHEMA=1 cargo test -p toolgate-policy-core"
        );
    }

    #[test]
    fn the_examples_validate_against_the_schema() {
        let validator = jsonschema::validator_for(&json_schema()).unwrap_or_else(|e| unreachable!("{e}"));
        for text in [
            include_str!("../../examples/plans/tool_policies.yaml"),
            include_str!("../../examples/retail/tool_policies.yaml"),
        ] {
            let node = crate::yaml::parse(text, Origin::Policy).unwrap_or_else(|e| unreachable!("{e}"));
            assert!(validator.is_valid(&node.to_json()));
        }
        let bad = crate::yaml::parse(
            "version: 1\ntool_policies:\n  a: {require_confirmation: \"true\"}\n",
            Origin::Policy,
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(!validator.is_valid(&bad.to_json()));
    }
}
