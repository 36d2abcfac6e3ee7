//! Loaded rules: everything a call needs, built once (parse, classify every
//! tool, compile its argument validator, index by name), then immutable.

use crate::catalog::{self, Catalog, CatalogTool};
use crate::classify::{self, CatalogHint, Classification, declares_property};
use crate::context::Context;
use crate::decision;
use crate::error::{self, Finding, Origin, Problem, ProblemCode, Severity};
use crate::evaluate::{CONFIRMATION_FIELDS, IDEMPOTENCY_FIELD};
use crate::expose;
use crate::json::{self, write_str};
use crate::policy::{self, OperationType, Policy};
use crate::schemas;
use serde_json::Value;

#[derive(Debug)]
pub struct Tool {
    pub name: String,
    /// The name as a JSON string literal, written once.
    pub name_json: String,
    pub class: Classification,
    /// `class` as a decision writes it (`decision::classification_members`),
    /// written once.
    pub class_members: String,
    /// What is kept of the catalog's entry once the tool is built.
    pub source: ToolSource,
    pub validator: Option<jsonschema::Validator>,
    pub declares_idempotency_key: bool,
    /// Engine fields this tool's schema does not declare: ignored by
    /// validation and removed by hosts before forwarding.
    pub strip_fields: Vec<&'static str>,
    /// Arguments the tool is made to require (`requires`, the idempotency
    /// key) that its schema does not declare: a `check` finding.
    pub undeclared_required: Vec<String>,
    /// This tool's `tools/list` entry, rendered once.
    pub list_entry: String,
}

/// The facts about a tool's catalog entry that outlive the load: where it
/// is, its definition's hash, what it hints and whether it has an output
/// schema. The entry itself (its schemas as parsed values, their canonical
/// texts, title and description) is dropped once the validator and the
/// `tools/list` entry are built from it: a decision reads neither, and
/// keeping them was a third of a rule set's memory (#17: every byte of a
/// prepared engine is copied into each new instance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSource {
    /// `sha256:<hex>` of the tool's definition in canonical JSON, for a tool
    /// the policy pins (the only reader; see [`catalog::Definition`]).
    pub definition_hash: Option<String>,
    /// Where the tool is: `tools[3]` or `tools.name`, and a line for YAML.
    pub path: String,
    pub line: u32,
    pub column: u32,
    /// What the catalog says about the tool's effect.
    pub hint: CatalogHint,
    pub has_output_schema: bool,
}

impl ToolSource {
    fn of(tool: CatalogTool) -> ToolSource {
        ToolSource {
            hint: classify::catalog_hint(&tool),
            has_output_schema: tool.output_schema.is_some(),
            definition_hash: tool.definition.hash().map(str::to_owned),
            path: tool.path,
            line: tool.line,
            column: tool.column,
        }
    }
}

/// Tools by name: an open-addressing table of positions in the tool list,
/// with each name's hash beside its position, so a look-up hashes the name
/// once and compares it with one tool's name (#17: a binary search compared
/// it with five or six, and in the component `memcmp` is a byte loop, a
/// twentieth of a decision). No copy of the names; the hash is fixed, so a
/// rule set is the same in every process and snapshot.
#[derive(Debug, Default)]
struct NameIndex {
    /// `hash << 32 | position + 1`, 0 when empty. A power-of-two length at
    /// least twice the number of tools, so a probe always reaches an empty
    /// slot.
    slots: Vec<u64>,
}

impl NameIndex {
    fn new(tools: &[Tool]) -> NameIndex {
        let len = tools.len().saturating_mul(2).max(8).next_power_of_two();
        let mut slots = vec![0u64; len];
        let mask = len - 1;
        for (position, tool) in (1u64..).zip(tools) {
            let hash = name_hash(&tool.name);
            let mut at = hash as usize & mask;
            // Twice as many slots as tools: this walks over taken slots to
            // an empty one.
            while let Some(slot) = slots.get_mut(at) {
                if *slot == 0 {
                    *slot = u64::from(hash) << 32 | position;
                    break;
                }
                at = (at + 1) & mask;
            }
        }
        NameIndex { slots }
    }

    fn find<'t>(&self, tools: &'t [Tool], name: &str) -> Option<&'t Tool> {
        let mask = self.slots.len().checked_sub(1)?;
        let hash = name_hash(name);
        let mut at = hash as usize & mask;
        loop {
            let slot = *self.slots.get(at)?;
            let position = slot as u32 as usize;
            if position == 0 {
                return None;
            }
            if (slot >> 32) as u32 == hash
                && let Some(tool) = tools.get(position - 1)
                && tool.name == name
            {
                return Some(tool);
            }
            at = (at + 1) & mask;
        }
    }
}

/// FxHash's step over eight bytes at a time (the length first, then the
/// bytes as little-endian words, the last one short): a few instructions a
/// word, and no seed.
fn name_hash(name: &str) -> u32 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(K);
    let (words, rest) = name.as_bytes().as_chunks::<8>();
    let mut hash = step(0, name.len() as u64);
    for word in words {
        hash = step(hash, u64::from_le_bytes(*word));
    }
    let last = rest.iter().rev().fold(0u64, |word, &b| word << 8 | u64::from(b));
    hash = step(hash, last);
    (hash >> 32) as u32
}

#[derive(Debug)]
pub struct Rules {
    /// Sorted by name (names are unique).
    tools: Vec<Tool>,
    /// Where each name is in `tools`.
    by_name: NameIndex,
    revision: String,
    /// The revision as a JSON string literal, written once.
    revision_json: String,
    policy: Option<Policy>,
    catalog_form: catalog::CatalogForm,
}

impl Rules {
    /// Loads rules from policy text (`None`: legacy behaviour) and catalog text.
    pub fn load(policy_text: Option<&str>, catalog_text: &str) -> Result<Rules, Problem> {
        let policy = policy_text.map(policy::parse).transpose()?;
        let catalog = catalog::parse(catalog_text)?;
        Rules::from_parts(policy, catalog)
    }

    pub fn from_parts(policy: Option<Policy>, mut catalog: Catalog) -> Result<Rules, Problem> {
        let revision = {
            let mut canonical = String::from("toolgate-revision-1\npolicy:");
            canonical.push_str(policy.as_ref().map_or("null", |p| p.canonical.as_str()));
            canonical.push_str("\ncatalog:");
            canonical.push_str(&catalog.canonical);
            catalog::sha256_hex(canonical.as_bytes())
        };
        let mut sources = std::mem::take(&mut catalog.tools);
        for source in &mut sources {
            let pinned = policy
                .as_ref()
                .and_then(|p| p.tool_policies.get(&source.name))
                .is_some_and(|e| e.pin.is_some());
            if pinned {
                catalog.hash_definition(source);
            }
        }
        sources.sort_by(|a, b| a.name.cmp(&b.name));
        let mut tools = Vec::with_capacity(sources.len());
        let empty_schema: Value =
            serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false});
        // A tool without a schema publishes the empty-object schema
        // (SPEC §3), and calls are checked against what is published.
        let mut missing: Vec<Value> = sources
            .iter()
            .filter(|source| source.input_schema.is_none())
            .map(|_| empty_schema.clone())
            .collect();
        let mut missing = missing.iter_mut();
        let mut input_schemas: Vec<&mut Value> = Vec::with_capacity(sources.len());
        for source in &mut sources {
            match source.input_schema.as_mut() {
                Some(schema) => input_schemas.push(schema),
                None => input_schemas.extend(missing.next()),
            }
        }
        let compiled = schemas::compile_all(&mut input_schemas);
        for (source, compiled) in sources.into_iter().zip(compiled) {
            let class = classify::classify(&source, policy.as_ref());
            let validator = Some(compiled.map_err(|why| {
                Problem::new(
                    ProblemCode::InvalidSchema,
                    Origin::Catalog,
                    format!(
                        "the inputSchema of `{}` cannot be compiled: {why}",
                        json::truncate_for_message(&source.name)
                    ),
                )
                .with_path(format!("{}.inputSchema", source.path))
                .at(u64::from(source.line), u64::from(source.column))
            })?);
            let schema = source.input_schema.as_ref();
            let strip_fields = CONFIRMATION_FIELDS
                .into_iter()
                .filter(|f| !declares_property(schema, f))
                .collect();
            let declares_idempotency_key = declares_property(schema, IDEMPOTENCY_FIELD);
            // Once, though `requires` may name the key too.
            let key = (class.idempotency_key_required
                && !declares_idempotency_key
                && !class.requires.iter().any(|r| r == IDEMPOTENCY_FIELD))
            .then_some(IDEMPOTENCY_FIELD);
            let undeclared_required = class
                .requires
                .iter()
                .map(String::as_str)
                .filter(|name| !declares_property(schema, name))
                .chain(key)
                .map(str::to_owned)
                .collect();
            let mut name_json = String::new();
            write_str(&mut name_json, &source.name);
            let list_entry = list_entry(&source, &class);
            tools.push(Tool {
                name: source.name.clone(),
                name_json,
                class_members: decision::classification_members(&class),
                declares_idempotency_key,
                undeclared_required,
                class,
                validator,
                strip_fields,
                list_entry,
                source: ToolSource::of(source),
            });
        }
        let mut revision_json = String::new();
        write_str(&mut revision_json, &revision);
        let by_name = NameIndex::new(&tools);
        Ok(Rules {
            tools,
            by_name,
            revision,
            revision_json,
            policy,
            catalog_form: catalog.form,
        })
    }

    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// [`Rules::revision`] as a JSON string literal.
    pub fn revision_json(&self) -> &str {
        &self.revision_json
    }

    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.by_name.find(&self.tools, name)
    }

    /// Every tool, sorted by name.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub fn catalog_form(&self) -> catalog::CatalogForm {
        self.catalog_form
    }

    /// Engine fields a host removes from `arguments` before forwarding a call
    /// to this tool (those its schema does not declare). Unknown tool: both.
    pub fn strip_fields(&self, name: &str) -> &[&'static str] {
        self.tool(name)
            .map_or(&CONFIRMATION_FIELDS[..], |t| t.strip_fields.as_slice())
    }

    /// The MCP `tools/list` result for this context (SPEC §3): the listed
    /// tools, sorted by name.
    pub fn list_exposable(&self, ctx: &Context) -> String {
        let mut out = String::from("{\"tools\":[");
        let mut first = true;
        for tool in self.tools.iter().filter(|t| expose::is_listed(&t.name, &t.class, ctx)) {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&tool.list_entry);
        }
        out.push_str("]}");
        out
    }

    /// Names of the listed tools, sorted.
    pub fn listed_names(&self, ctx: &Context) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|t| expose::is_listed(&t.name, &t.class, ctx))
            .map(|t| t.name.as_str())
            .collect()
    }

    /// Lints for `toolgate check`: things that load but deserve a look.
    pub fn findings(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        let Some(policy) = &self.policy else {
            return out;
        };
        for (name, entry) in &policy.tool_policies {
            let warn = |code: &'static str, message: String| Finding {
                severity: Severity::Warning,
                code,
                origin: Origin::Policy,
                message,
                path: format!("tool_policies.{name}"),
                line: entry.line,
                column: entry.column,
            };
            let shown = json::truncate_for_message(name);
            let Some(tool) = self.tool(name) else {
                out.push(warn(
                    error::TOOL_NOT_IN_CATALOG,
                    format!("`{shown}` is in the policy but not in the catalog"),
                ));
                continue;
            };
            match (entry.stated_operation_type(), &tool.source.hint) {
                (Some(OperationType::ReadOnly), CatalogHint::Writes(_)) => out.push(warn(
                    error::CONTRADICTS_HINT,
                    format!("`{shown}` is read_only in the policy, but the catalog says it writes"),
                )),
                (Some(OperationType::Transactional), CatalogHint::ReadOnly) => out.push(warn(
                    error::CONTRADICTS_HINT,
                    format!("`{shown}` is transactional in the policy, but the catalog says it only reads"),
                )),
                _ => {}
            }
            if let Some(pin) = &entry.pin
                && tool.source.definition_hash.as_deref() != Some(pin.as_str())
            {
                out.push(warn(
                    error::PIN_MISMATCH,
                    format!(
                        "`{shown}` changed since it was pinned; it is held back. Its definition is now {}",
                        // Hashed for every pinned tool (`from_parts`).
                        tool.source.definition_hash.as_deref().unwrap_or("unknown")
                    ),
                ));
            }
        }
        for tool in &self.tools {
            // Said at the tool's policy entry if it has one, else in the catalog.
            let entry = policy.tool_policies.get(&tool.name);
            let (line, column) = entry.map_or((tool.source.line, tool.source.column), |e| (e.line, e.column));
            let warn = |code: &'static str, message: String| Finding {
                severity: Severity::Warning,
                code,
                origin: if entry.is_some() {
                    Origin::Policy
                } else {
                    Origin::Catalog
                },
                message,
                path: match entry {
                    Some(_) => format!("tool_policies.{}", tool.name),
                    None => tool.source.path.clone(),
                },
                line,
                column,
            };
            let shown = json::truncate_for_message(&tool.name);
            if tool.class.operation_type == OperationType::Transactional && !tool.class.confirmation_required {
                out.push(warn(
                    error::TRANSACTIONAL_WITHOUT_CONFIRMATION,
                    format!(
                        "`{shown}` is transactional ({}) and runs without confirmation",
                        tool.class.effect
                    ),
                ));
            }
            // A required argument its schema does not declare is most often
            // a typo, and the tool cannot run when the schema takes no other
            // arguments (or there is none): every call is BAD_REQUEST.
            for argument in &tool.undeclared_required {
                out.push(warn(
                    error::REQUIRED_ARGUMENT_UNDECLARED,
                    format!(
                        "`{shown}` requires `{}`, which its input schema does not declare: unless the schema takes arguments it does not name, no call can pass it",
                        json::truncate_for_message(argument)
                    ),
                ));
            }
        }
        out
    }
}

/// The `tools/list` entry: the catalog's name, title, description and
/// schemas, and annotations derived from the classification so they can
/// never contradict it.
fn list_entry(tool: &CatalogTool, class: &Classification) -> String {
    let mut out = String::from("{\"name\":");
    write_str(&mut out, &tool.name);
    if let Some(title) = &tool.title {
        out.push_str(",\"title\":");
        write_str(&mut out, title);
    }
    if let Some(description) = &tool.description {
        out.push_str(",\"description\":");
        write_str(&mut out, description);
    }
    out.push_str(",\"inputSchema\":");
    match (&tool.input_schema, &tool.schema_texts.input) {
        (Some(_), Some(text)) => out.push_str(text),
        (Some(schema), None) => json::write_canonical(&mut out, schema),
        (None, _) => out.push_str("{\"additionalProperties\":false,\"properties\":{},\"type\":\"object\"}"),
    }
    match (&tool.output_schema, &tool.schema_texts.output) {
        (Some(_), Some(text)) => {
            out.push_str(",\"outputSchema\":");
            out.push_str(text);
        }
        (Some(schema), None) => {
            out.push_str(",\"outputSchema\":");
            json::write_canonical(&mut out, schema);
        }
        (None, _) => {}
    }
    let read_only = class.operation_type == OperationType::ReadOnly;
    let catalog_destructive = tool.annotations.as_ref().and_then(|a| a.destructive_hint);
    out.push_str(",\"annotations\":{\"readOnlyHint\":");
    json::write_bool(&mut out, read_only);
    out.push_str(",\"destructiveHint\":");
    json::write_bool(&mut out, !read_only && catalog_destructive.unwrap_or(true));
    if let Some(annotations) = &tool.annotations {
        let mut keys: Vec<&String> = annotations.other.keys().collect();
        keys.sort();
        for key in keys {
            out.push(',');
            write_str(&mut out, key);
            out.push(':');
            if let Some(v) = annotations.other.get(key) {
                json::write_canonical(&mut out, v);
            }
        }
    }
    out.push_str("}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pin is the hash of the tool's canonical definition in every catalog
    /// form: the right one keeps the tool, any other holds it back with a
    /// finding that names the right one; unpinned tools carry no hash.
    #[test]
    fn a_pin_holds_back_exactly_the_tools_whose_definition_changed() {
        let send = r#"{"name":"send","inputSchema":{"type":"object","properties":{"to":{"type":"string"}}}}"#;
        let read = r#"{"name":"read","annotations":{"readOnlyHint":true}}"#;
        let legacy = "tools:\n  send:\n    tool_type: transactional\n  read:\n    tool_type: read_only\n";
        let legacy_send = crate::yaml::parse(legacy, Origin::Catalog)
            .ok()
            .and_then(|node| node.to_json().get("tools").and_then(|t| t.get("send")).cloned())
            .unwrap();
        for (catalog, send_text) in [
            (format!("[{send},{read}]"), send.to_owned()),
            (
                format!(r#"{{"tools":[{read},{send}],"nextCursor":"x"}}"#),
                send.to_owned(),
            ),
            (
                format!(r#"{{"formatVersion":1,"tools":[{send},{read}],"server":{{"a":1}}}}"#),
                send.to_owned(),
            ),
            (legacy.to_owned(), json::canonical(&legacy_send)),
        ] {
            let definition: Value = serde_json::from_str(&send_text).unwrap();
            let right = catalog::sha256_hex(json::canonical(&definition).as_bytes());
            let wrong = format!("sha256:{}", "0".repeat(64));
            for (pin, kept) in [(&right, true), (&wrong, false)] {
                let policy = format!("version: 1\ntool_policies:\n  send:\n    pin: \"{pin}\"\n");
                let rules = Rules::load(Some(&policy), &catalog).unwrap_or_else(|p| panic!("{p}"));
                let tool = |name| rules.tool(name).unwrap();
                assert_eq!(tool("send").class.held.is_none(), kept, "{catalog}");
                assert_eq!(tool("send").source.definition_hash.as_deref(), Some(right.as_str()));
                assert_eq!(tool("read").source.definition_hash, None);
                let mismatch: Vec<String> = rules
                    .findings()
                    .into_iter()
                    .filter(|f| f.code == error::PIN_MISMATCH)
                    .map(|f| f.message)
                    .collect();
                assert_eq!(mismatch.len(), usize::from(!kept), "{catalog}");
                assert!(mismatch.iter().all(|m| m.ends_with(&right)), "{mismatch:?}");
            }
        }
    }

    /// A required argument the schema does not declare is a finding at the
    /// entry that requires it, whether the schema is open, closed or absent;
    /// a declared one, through `$ref` too, is not.
    #[test]
    fn a_required_argument_the_schema_does_not_declare_is_a_finding() {
        let catalog = r##"{"tools":[
            {"name":"none"},
            {"name":"open","inputSchema":{"type":"object","properties":{"z":{}}}},
            {"name":"closed","inputSchema":{"type":"object","properties":{"z":{}},"additionalProperties":false}},
            {"name":"by_ref","inputSchema":{"type":"object","$ref":"#/$defs/a","$defs":{"a":{"properties":{"x":{},"idempotency_key":{}}}}}},
            {"name":"twice","inputSchema":{"type":"object"}}
        ]}"##;
        let policy = "version: 1\ntool_policies:\n  none: {requires: [x]}\n  open: {requires: [x, z]}\n  closed: {require_idempotency_key: true}\n  by_ref: {requires: [x], require_idempotency_key: true}\n  twice: {requires: [idempotency_key], require_idempotency_key: true}\n";
        let rules = Rules::load(Some(policy), catalog).unwrap_or_else(|p| panic!("{p}"));
        let found: Vec<(String, u32, String)> = rules
            .findings()
            .into_iter()
            .filter(|f| f.code == error::REQUIRED_ARGUMENT_UNDECLARED)
            .map(|f| (f.message, f.line, f.path))
            .collect();
        let said = |tool: &str, argument: &str, line: u32| {
            (
                format!(
                    "`{tool}` requires `{argument}`, which its input schema does not declare: unless the schema takes arguments it does not name, no call can pass it"
                ),
                line,
                format!("tool_policies.{tool}"),
            )
        };
        let mut want = vec![
            said("none", "x", 3),
            said("open", "x", 4),
            said("closed", "idempotency_key", 5),
            said("twice", "idempotency_key", 7),
        ];
        want.sort();
        let mut found = found;
        found.sort();
        assert_eq!(found, want);
    }

    #[test]
    fn every_tool_is_found_by_its_exact_name_and_no_other() {
        let names = ["send", "B", "a", "é", "a_b", "ab", "A", "a.b", "zz", "aa", "a-b"];
        let tools: Vec<String> = names.iter().map(|n| format!(r#"{{"name":{n:?}}}"#)).collect();
        let catalog = format!(r#"{{"tools":[{}]}}"#, tools.join(","));
        let rules = Rules::load(None, &catalog).unwrap();
        for name in names {
            assert_eq!(rules.tool(name).map(|t| t.name.as_str()), Some(name), "{name:?}");
        }
        for unknown in ["s", "sendx", "b", "É", "a_", "ZZ", " "] {
            assert!(rules.tool(unknown).is_none(), "{unknown:?}");
        }
    }

    #[test]
    fn the_name_index_finds_every_tool_among_many_with_shared_prefixes() {
        // Lengths on both sides of every eight-byte word, shared prefixes,
        // names one byte apart: the hash reads the length and every byte.
        let mut names: Vec<String> = Vec::new();
        for i in 0..300 {
            names.push(format!("t{i}"));
            names.push(format!("server__tool_{i:04}"));
            names.push(format!("{}{i}", "x".repeat(i % 19)));
        }
        names.sort();
        names.dedup();
        let tools: Vec<String> = names.iter().map(|n| format!(r#"{{"name":{n:?}}}"#)).collect();
        let rules = Rules::load(None, &format!(r#"{{"tools":[{}]}}"#, tools.join(","))).unwrap();
        for name in &names {
            assert_eq!(rules.tool(name).map(|t| t.name.as_str()), Some(name.as_str()));
        }
        for name in &names {
            for unknown in [format!("{name}x"), format!("{name}\0"), name.to_uppercase()] {
                if !names.contains(&unknown) {
                    assert!(rules.tool(&unknown).is_none(), "{unknown:?}");
                }
            }
        }
        // Some names share a home slot, so look-ups walk past taken slots.
        let slots = &rules.by_name.slots;
        let mask = slots.len() - 1;
        let displaced = slots
            .iter()
            .enumerate()
            .filter(|&(at, &slot)| slot != 0 && ((slot >> 32) as usize & mask) != at)
            .count();
        assert!(displaced > 0 && slots.len() >= 2 * names.len());
    }
}
