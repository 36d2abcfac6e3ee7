//! The benchmark workload, one definition for every runtime: the seed catalog
//! (grown to 1 000 and 10 000 tools for the scale runs), toolgate's policy
//! for it, the same rules compiled into Cedar entities, and a fixed mix of
//! calls with the allow/deny both engines must reach. `bench gen DIR` writes
//! it as plain JSON so the Node and Python harnesses read the very same data.

use serde_json::{Map, Value, json};

pub const SEED_CATALOG: &str = include_str!("../../tests/vectors/fixtures/seed-catalog.json");
pub const CEDAR_POLICIES: &str = include_str!("../cedar/policies.cedar");
pub const CEDAR_SCHEMA: &str = include_str!("../cedar/schema.cedarschema");

/// Catalog sizes the scale runs use.
pub const SCALES: [usize; 3] = [34, 1_000, 10_000];

/// toolgate's policy for the seed catalog: read-only by default (the catalog's
/// effects and hints tighten it: every writing tool becomes transactional),
/// confirmation where the catalog's schemas declare it, and one explicit
/// entry that adds a required argument beyond the schema's.
pub const POLICY: &str = "\
version: 1
defaults:
  operation_type: read_only
  require_confirmation: false
tool_policies:
  send_whatsapp:
    operation_type: transactional
    require_confirmation: true
    requires: [to, text]
";

/// The context every call of the mix carries: a confirming surface and the
/// WhatsApp scopes, not Bob's.
pub const SCOPES: [&str; 2] = ["mcp:read", "mcp:write"];

const CONFIRMATION_FIELDS: [&str; 2] = ["confirmed", "confirmation"];
const UUID: &str = "0b7c1a52-8e0e-4b8e-9d43-4d5a0c7f1e21";

/// One call of the mix.
#[derive(Debug, Clone)]
pub struct MixCall {
    pub label: &'static str,
    /// The MCP `tools/call` params, as the host receives them.
    pub call: Value,
    pub expect_allowed: bool,
}

/// The fixed mix: allowed reads, an allowed confirmed write, confirmation
/// required (absent, and the string "true"), scope denied, bad request,
/// unknown tool.
pub fn mix() -> Vec<MixCall> {
    vec![
        MixCall {
            label: "read allowed",
            call: json!({"name": "wa_list_chats", "arguments": {"limit": 20, "status": "open"}}),
            expect_allowed: true,
        },
        MixCall {
            label: "read allowed",
            call: json!({"name": "get_conversation", "arguments": {"conversation_id": UUID}}),
            expect_allowed: true,
        },
        MixCall {
            label: "confirmed write allowed",
            call: json!({"name": "send_whatsapp", "arguments": {"to": "+5511999990000", "text": "Olá", "idempotency_key": "send-0001", "confirmed": true}}),
            expect_allowed: true,
        },
        MixCall {
            label: "confirmation required",
            call: json!({"name": "send_whatsapp", "arguments": {"to": "+5511999990000", "text": "Olá", "idempotency_key": "send-0001"}}),
            expect_allowed: false,
        },
        MixCall {
            label: "confirmation is the string \"true\"",
            call: json!({"name": "resolve_conversation", "arguments": {"conversation_id": UUID, "expected_status": "open", "idempotency_key": "resolve-0001", "confirmed": "true"}}),
            expect_allowed: false,
        },
        MixCall {
            label: "scope denied",
            call: json!({"name": "draft_reply", "arguments": {"conversation_id": UUID}}),
            expect_allowed: false,
        },
        MixCall {
            label: "bad request (required argument missing)",
            call: json!({"name": "wa_get_chat", "arguments": {}}),
            expect_allowed: false,
        },
        MixCall {
            label: "unknown tool",
            call: json!({"name": "no_such_tool", "arguments": {}}),
            expect_allowed: false,
        },
    ]
}

/// toolgate's context for the mix, as JSON text.
pub fn context_json() -> String {
    json!({"surface": "confirming", "scopes": SCOPES}).to_string()
}

fn seed() -> Result<Value, String> {
    serde_json::from_str(SEED_CATALOG).map_err(|e| format!("seed catalog: {e}"))
}

fn tools_mut(catalog: &mut Value) -> Result<&mut Vec<Value>, String> {
    catalog
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| "seed catalog has no tools array".to_owned())
}

/// What a generated copy keeps of a seed tool: everything a decision or a
/// listing reads. The seed's documentation fields (`outputSchema`,
/// `parameters`, `errors`) are left off the copies so 10 000 tools stay
/// under the engine's 16 MiB catalog limit.
const COPY_KEYS: [&str; 7] = [
    "name",
    "title",
    "description",
    "effect",
    "scopes",
    "annotations",
    "inputSchema",
];

/// The seed catalog grown to `size` tools: the 34 originals, then copies
/// named `<name>_<n>` (same input schemas, effects, scopes and hints).
pub fn catalog(size: usize) -> Result<Value, String> {
    let mut catalog = seed()?;
    let originals = tools_mut(&mut catalog)?.clone();
    let mut grown = Vec::with_capacity(size);
    for i in 0..size {
        let Some(original) = originals.get(i % originals.len()) else {
            return Err("empty seed catalog".to_owned());
        };
        let mut tool = original.clone();
        if i >= originals.len() {
            if let Some(obj) = tool.as_object_mut() {
                obj.retain(|k, _| COPY_KEYS.contains(&k.as_str()));
            }
            if let Some(Value::String(name)) = tool.get_mut("name") {
                name.push_str(&format!("_{i:05}"));
            }
        }
        grown.push(tool);
    }
    *tools_mut(&mut catalog)? = grown;
    if let Some(obj) = catalog.as_object_mut() {
        obj.insert("toolCount".to_owned(), json!(size));
    }
    Ok(catalog)
}

/// The same catalog with each `inputSchema` reduced to what Cedar can check:
/// an object with these property names and these required ones, no value
/// constraints. toolgate on this catalog is "toolgate with argument-value
/// validation off", the like-for-like comparison with Cedar.
pub fn structural_only(catalog: &Value) -> Value {
    let mut out = catalog.clone();
    if let Some(tools) = out.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools {
            let Some(schema) = tool.get_mut("inputSchema") else {
                continue;
            };
            let mut properties = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for name in props.keys() {
                    properties.insert(name.clone(), json!({}));
                }
            }
            let required = schema.get("required").cloned().unwrap_or_else(|| json!([]));
            *schema = json!({"type": "object", "properties": properties, "required": required});
        }
    }
    out
}

/// toolgate's classification of every tool, compiled into Cedar entities: one
/// `Tool` per exposed-able tool, plus the calling `Agent`. The required
/// arguments are read from `catalog` (the loaded rules keep no schemas).
pub fn cedar_entities(rules: &policy_core::Rules, catalog: &Value) -> Value {
    let schemas: std::collections::HashMap<&str, &Value> = catalog
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t.get("name")?.as_str()?, t.get("inputSchema")?)))
        .collect();
    let required_of = |name: &str| -> Vec<String> {
        schemas
            .get(name)
            .and_then(|s| s.get("required"))
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let mut entities = vec![agent_entity()];
    for tool in rules.tools() {
        let class = &tool.class;
        if !class.enabled || class.held.is_some() {
            continue;
        }
        let mut required = required_of(&tool.name);
        required.extend(class.requires.iter().cloned());
        required.retain(|r| !CONFIRMATION_FIELDS.contains(&r.as_str()));
        required.sort();
        required.dedup();
        entities.push(json!({
            "uid": {"type": "Tool", "id": tool.name},
            "attrs": {
                "readOnly": class.operation_type == policy_core::OperationType::ReadOnly,
                "needsConfirmation": class.confirmation_required,
                "scopes": class.scopes,
                "requiredArgs": required,
            },
            "parents": [],
        }));
    }
    Value::Array(entities)
}

pub fn agent_entity() -> Value {
    json!({"uid": {"type": "Agent", "id": "agent"}, "attrs": {"scopes": SCOPES}, "parents": []})
}

/// What a gateway's adapter hands Cedar for one call: principal, action,
/// resource and context, in the JSON form every Cedar binding accepts.
pub fn cedar_request(call: &Value) -> Value {
    let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
    let arguments = call.get("arguments").and_then(Value::as_object);
    let mut context = Map::new();
    context.insert("surface".to_owned(), json!("confirming"));
    let args: Vec<&String> = arguments.map(|a| a.keys().collect()).unwrap_or_default();
    context.insert("args".to_owned(), json!(args));
    for field in CONFIRMATION_FIELDS {
        if let Some(value) = arguments.and_then(|a| a.get(field)) {
            context.insert(field.to_owned(), value.clone());
        }
    }
    json!({
        "principal": {"type": "Agent", "id": "agent"},
        "action": {"type": "Action", "id": "call"},
        "resource": {"type": "Tool", "id": name},
        "context": context,
    })
}

/// The entities one call needs (the agent, and the tool if it exists): what
/// a stateful Cedar binding is handed per call.
pub fn cedar_call_entities(entities: &Value, call: &Value) -> Value {
    let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
    let mut out = vec![agent_entity()];
    if let Some(all) = entities.as_array() {
        out.extend(
            all.iter()
                .filter(|e| {
                    e.pointer("/uid/type") == Some(&json!("Tool")) && e.pointer("/uid/id") == Some(&json!(name))
                })
                .cloned(),
        );
    }
    Value::Array(out)
}

/// Writes the workload for every scale under `dir`:
/// `policy.yaml`, `policies.cedar`, `schema.cedarschema`, `mix.json`, and per
/// scale `<n>/catalog.json`, `<n>/catalog-structural.json`, `<n>/entities.json`.
pub fn write(dir: &std::path::Path, scales: &[usize]) -> Result<(), String> {
    let io = |p: &std::path::Path, e: std::io::Error| format!("{}: {e}", p.display());
    let put = |p: std::path::PathBuf, text: &str| std::fs::write(&p, text).map_err(|e| io(&p, e));
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    put(dir.join("policy.yaml"), POLICY)?;
    put(dir.join("policies.cedar"), CEDAR_POLICIES)?;
    put(dir.join("schema.cedarschema"), CEDAR_SCHEMA)?;
    let seed_rules = policy_core::Rules::load(Some(POLICY), SEED_CATALOG).map_err(|e| e.to_string())?;
    let seed_catalog: Value = serde_json::from_str(SEED_CATALOG).map_err(|e| e.to_string())?;
    let seed_entities = cedar_entities(&seed_rules, &seed_catalog);
    let calls: Vec<Value> = mix()
        .iter()
        .map(|m| {
            json!({
                "label": m.label,
                "call": m.call,
                "call_json": m.call.to_string(),
                "context_json": context_json(),
                "cedar_request": cedar_request(&m.call),
                "cedar_entities": cedar_call_entities(&seed_entities, &m.call),
                "expect_allowed": m.expect_allowed,
            })
        })
        .collect();
    put(dir.join("mix.json"), &json!({"calls": calls}).to_string())?;
    for &size in scales {
        let sub = dir.join(size.to_string());
        std::fs::create_dir_all(&sub).map_err(|e| io(&sub, e))?;
        let catalog = catalog(size)?;
        let catalog_text = catalog.to_string();
        let rules = policy_core::Rules::load(Some(POLICY), &catalog_text).map_err(|e| e.to_string())?;
        put(sub.join("catalog.json"), &catalog_text)?;
        put(
            sub.join("catalog-structural.json"),
            &structural_only(&catalog).to_string(),
        )?;
        put(sub.join("entities.json"), &cedar_entities(&rules, &catalog).to_string())?;
    }
    Ok(())
}
