//! The three catalog forms (SPEC §1), detected from content, into one model.
//!
//! - an MCP `tools/list` result `{"tools": [...]}` or a bare array of tools;
//! - a published catalog (`formatVersion: 1`; tools also carry `effect`, `scopes`);
//! - a legacy `tools.yaml`: `tools:` mapping names to `tool_type`, `requires`,
//!   `confirmation_required`, `execution_policy`, `enabled`, `schema`, ...
//!
//! Catalogs come from servers: unknown keys on MCP tool objects are ignored
//! (the protocol grows), but a known key of the wrong type is an error. The
//! legacy file is operator-written and read strictly.

use crate::display;
use crate::error::{Origin, Problem, ProblemCode};
use crate::json;
use crate::policy::{OperationType, is_valid_effect};
use crate::yaml::{self, Node, NodeValue, Reader};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Largest catalog accepted, in bytes.
pub const MAX_CATALOG_BYTES: usize = 16 * 1024 * 1024;
/// Longest tool name accepted.
pub const MAX_TOOL_NAME_BYTES: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogForm {
    McpListResult,
    McpToolArray,
    Published,
    LegacyToolsYaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionPolicy {
    Auto,
    Confirm,
}

/// The legacy `tools.yaml` fields of one tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Legacy {
    pub tool_type: Option<OperationType>,
    pub requires: Option<Vec<String>>,
    pub confirmation_required: Option<bool>,
    pub execution_policy: Option<ExecutionPolicy>,
    pub enabled: Option<bool>,
}

/// MCP tool annotations that the engine reads; the rest pass through.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Annotations {
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
    /// Every other annotation, passed through to `tools/list` unchanged.
    pub other: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CatalogTool {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<Value>,
    pub output_schema: Option<Value>,
    /// The canonical text of `input_schema` and `output_schema`, kept from
    /// writing the tool's definition so `tools/list` does not write it again
    /// (`None`: not written yet; the listing writes it).
    pub schema_texts: SchemaTexts,
    pub annotations: Option<Annotations>,
    pub effect: Option<String>,
    pub scopes: Option<Vec<String>>,
    pub legacy: Option<Legacy>,
    /// The tool's definition in canonical JSON, whose hash a `pin` names.
    pub definition: Definition,
    /// Where the tool is: `tools[3]` or `tools.name`, and a line for YAML.
    pub path: String,
    pub line: u32,
    pub column: u32,
}

/// A tool's definition, hashed only for a tool its policy pins
/// (`Rules::from_parts`): hashing every tool of a catalog the policy pins
/// none of was a tenth of reading it in the component (#17).
#[derive(Debug, Clone, PartialEq)]
pub enum Definition {
    /// Its canonical text is this span of [`Catalog::canonical`].
    Span(std::ops::Range<usize>),
    /// Its own canonical text (a legacy `tools.yaml` entry, which the
    /// catalog's text holds in another form).
    Text(String),
    /// `sha256:<hex>` of that text.
    Hash(String),
}

impl Definition {
    /// The hash, once [`Catalog::hash_definition`] wrote it: a pin compared
    /// with a definition not hashed never matches, so it holds the tool back.
    pub fn hash(&self) -> Option<&str> {
        match self {
            Definition::Hash(hash) => Some(hash),
            Definition::Span(_) | Definition::Text(_) => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchemaTexts {
    pub input: Option<String>,
    pub output: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Catalog {
    pub form: CatalogForm,
    pub tools: Vec<CatalogTool>,
    /// The catalog as canonical JSON, for the revision hash.
    pub canonical: String,
}

impl Catalog {
    /// Hashes `tool`'s definition (one of this catalog's tools).
    pub fn hash_definition(&self, tool: &mut CatalogTool) {
        let text = match &tool.definition {
            Definition::Span(span) => self.canonical.get(span.clone()).unwrap_or_default(),
            Definition::Text(text) => text,
            Definition::Hash(_) => return,
        };
        tool.definition = Definition::Hash(sha256_hex(text.as_bytes()));
    }
}

/// Whether `text` is spelled as [`sha256_hex`] writes a digest: `sha256:`
/// and 64 lower-case hex digits (pins, turn questions).
pub fn is_sha256_hex(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    let nibble = |n: u8| char::from_digit(u32::from(n), 16).unwrap_or('0');
    for b in digest {
        out.push(nibble(b >> 4));
        out.push(nibble(b & 0x0f));
    }
    out
}

/// A tool name is 1..=256 bytes with no control characters, spaces or
/// invisible characters ([`crate::display::is_invisible`]: format characters,
/// separators, default-ignorable and blank-rendering characters). A policy
/// entry `alterar_plano` followed by a zero-width joiner looks like the real
/// tool to a reviewer and silently names another one. Names are compared
/// byte for byte: a look-alike is a different (unknown) tool.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a tool name must not be empty".into());
    }
    if name.len() > MAX_TOOL_NAME_BYTES {
        return Err(format!("a tool name must be at most {MAX_TOOL_NAME_BYTES} bytes"));
    }
    if name.chars().any(char::is_control) {
        return Err("a tool name must not contain control characters".into());
    }
    if let Some(c) = name.chars().find(|&c| c.is_whitespace() || display::is_invisible(c)) {
        return Err(format!(
            "a tool name must not contain spaces or invisible characters (found U+{:04X}: zero-width, bidirectional controls, BOM, format characters, fillers, blanks)",
            u32::from(c)
        ));
    }
    Ok(())
}

fn problem(code: ProblemCode, path: &str, message: impl Into<String>) -> Problem {
    Problem::new(code, Origin::Catalog, message).with_path(path)
}

/// Reads a catalog in any of the accepted forms.
pub fn parse(text: &str) -> Result<Catalog, Problem> {
    if text.len() > MAX_CATALOG_BYTES {
        return Err(problem(
            ProblemCode::TooLarge,
            "",
            format!("the catalog is larger than {MAX_CATALOG_BYTES} bytes"),
        ));
    }
    let body = yaml::without_bom(text);
    let trimmed = body.trim_start();
    let looks_json = trimmed.starts_with('{') || trimmed.starts_with('[');
    let (mut value, node) = if looks_json {
        let value = json::parse_strict_text(body).map_err(|e| {
            Problem::new(ProblemCode::Syntax, Origin::Catalog, json_error_message(&e))
                .at(e.line() as u64, e.column() as u64)
        })?;
        (value, None)
    } else {
        let node = yaml::parse(text, Origin::Catalog)?;
        (node.to_json(), Some(node))
    };
    // Each tool's canonical text is written once: its hash is the tool's pin,
    // and the catalog's canonical text (the revision) is built from it. The
    // tools are moved out of the parsed document (their schemas are kept,
    // not copied); the catalog's text takes the tools' text in their place.
    let mut tools_text = String::new();
    let (form, tools) = match &mut value {
        Value::Array(items) => (
            CatalogForm::McpToolArray,
            mcp_tools(std::mem::take(items), "", &mut tools_text)?,
        ),
        Value::Object(map) => match (map.get("formatVersion"), map.get("tools")) {
            (Some(version), _) => {
                if version.as_u64() != Some(1) {
                    return Err(problem(
                        ProblemCode::UnsupportedVersion,
                        "formatVersion",
                        "unsupported catalog formatVersion; this engine reads 1",
                    ));
                }
                let Some(Value::Array(items)) = map.get_mut("tools") else {
                    return Err(problem(
                        ProblemCode::MissingKey,
                        "tools",
                        "a published catalog needs a `tools` array",
                    ));
                };
                (
                    CatalogForm::Published,
                    mcp_tools(std::mem::take(items), "tools", &mut tools_text)?,
                )
            }
            (None, Some(Value::Array(_))) => {
                let items = match map.get_mut("tools") {
                    Some(Value::Array(items)) => std::mem::take(items),
                    _ => Vec::new(),
                };
                (CatalogForm::McpListResult, mcp_tools(items, "tools", &mut tools_text)?)
            }
            (None, Some(Value::Object(_))) => {
                // Legacy: read from the YAML tree for positions. A JSON-written
                // legacy catalog is re-read as YAML (JSON is YAML) for the same.
                let node = match node {
                    Some(node) => node,
                    None => yaml::parse(body, Origin::Catalog)?,
                };
                (CatalogForm::LegacyToolsYaml, legacy_tools(&node)?)
            }
            _ => {
                return Err(problem(
                    ProblemCode::UnknownCatalogForm,
                    "",
                    "not a catalog: expected an MCP tools/list result, an array of tools, a published catalog (formatVersion: 1) or a tools.yaml with a `tools:` mapping",
                ));
            }
        },
        _ => {
            return Err(problem(
                ProblemCode::UnknownCatalogForm,
                "",
                "not a catalog: expected a JSON object or array, or a tools.yaml mapping",
            ));
        }
    };
    let mut tools = tools;
    let canonical = match (&value, form) {
        (Value::Array(_), _) => tools_text,
        (Value::Object(map), CatalogForm::Published | CatalogForm::McpListResult) => {
            let mut out = String::with_capacity(tools_text.len() + 64);
            let mut tools_at = 0;
            json::write_canonical_object(&mut out, map, |out, key, v| {
                if key == "tools" {
                    tools_at = out.len();
                    out.push_str(&tools_text);
                } else {
                    json::write_canonical(out, v);
                }
            });
            // The tools' spans were taken in the tools' own text.
            for tool in &mut tools {
                if let Definition::Span(span) = &mut tool.definition {
                    *span = span.start + tools_at..span.end + tools_at;
                }
            }
            out
        }
        _ => json::canonical(&value),
    };
    let mut seen = std::collections::BTreeMap::new();
    for tool in &tools {
        if let Some(first) = seen.insert(tool.name.as_str(), tool.path.as_str()) {
            return Err(Problem::new(
                ProblemCode::Duplicate,
                Origin::Catalog,
                format!(
                    "tool `{}` is defined twice (first at {first})",
                    json::truncate_for_message(&tool.name)
                ),
            )
            .with_path(tool.path.clone())
            .at(u64::from(tool.line), u64::from(tool.column)));
        }
    }
    Ok(Catalog { form, tools, canonical })
}

/// serde_json appends " at line L column C"; the position travels separately.
pub fn json_error_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text.get(..at).unwrap_or(&text).to_owned(),
        None => text,
    }
}

/// Reads the tools of an array and writes the array's canonical text to
/// `canonical`, each tool's definition a span of it.
fn mcp_tools(items: Vec<Value>, base: &str, canonical: &mut String) -> Result<Vec<CatalogTool>, Problem> {
    canonical.push('[');
    let mut tools = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            canonical.push(',');
        }
        let start = canonical.len();
        let mut spans = (None, None);
        match &item {
            Value::Object(map) => json::write_canonical_object(canonical, map, |out, key, value| {
                let from = out.len();
                json::write_canonical(out, value);
                match key {
                    "inputSchema" => spans.0 = Some(from..out.len()),
                    "outputSchema" => spans.1 = Some(from..out.len()),
                    _ => {}
                }
            }),
            other => json::write_canonical(canonical, other),
        }
        let text = |span: Option<std::ops::Range<usize>>| span.and_then(|s| canonical.get(s)).map(str::to_owned);
        let schema_texts = SchemaTexts {
            input: text(spans.0),
            output: text(spans.1),
        };
        let definition = Definition::Span(start..canonical.len());
        let mut tool = mcp_tool(item, &format!("{base}[{i}]"), definition)?;
        // Kept only for a schema the tool has (an object; `null` is none).
        tool.schema_texts = SchemaTexts {
            input: schema_texts.input.filter(|_| tool.input_schema.is_some()),
            output: schema_texts.output.filter(|_| tool.output_schema.is_some()),
        };
        tools.push(tool);
    }
    canonical.push(']');
    Ok(tools)
}

fn opt_string(map: &mut Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, Problem> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(problem(
            ProblemCode::InvalidValue,
            &format!("{path}.{key}"),
            format!("`{key}` must be a string"),
        )),
    }
}

fn opt_schema(map: &mut Map<String, Value>, key: &str, path: &str) -> Result<Option<Value>, Problem> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v)),
        Some(_) => Err(problem(
            ProblemCode::InvalidValue,
            &format!("{path}.{key}"),
            format!("`{key}` must be a JSON Schema object"),
        )),
    }
}

fn mcp_tool(item: Value, path: &str, definition: Definition) -> Result<CatalogTool, Problem> {
    let Value::Object(mut map) = item else {
        return Err(problem(ProblemCode::InvalidValue, path, "a tool must be an object"));
    };
    let name = match map.get("name") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(problem(
                ProblemCode::InvalidValue,
                &format!("{path}.name"),
                "`name` must be a string",
            ));
        }
        None => return Err(problem(ProblemCode::MissingKey, path, "a tool needs a `name`")),
    };
    check_tool_name(&name).map_err(|why| problem(ProblemCode::InvalidValue, &format!("{path}.name"), why))?;
    let annotations = match map.get("annotations") {
        None | Some(Value::Null) => None,
        Some(Value::Object(a)) => Some(annotations(a, &format!("{path}.annotations"))?),
        Some(_) => {
            return Err(problem(
                ProblemCode::InvalidValue,
                &format!("{path}.annotations"),
                "`annotations` must be an object",
            ));
        }
    };
    let effect = opt_string(&mut map, "effect", path)?;
    if let Some(e) = &effect
        && !is_valid_effect(e)
    {
        return Err(problem(
            ProblemCode::InvalidValue,
            &format!("{path}.effect"),
            "`effect` must be a lower-case identifier",
        ));
    }
    let scopes = match map.get("scopes") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, s) in items.iter().enumerate() {
                let at = || format!("{path}.scopes[{i}]");
                let Value::String(s) = s else {
                    return Err(problem(ProblemCode::InvalidValue, &at(), "a scope must be a string"));
                };
                // The rules a policy's `scopes` keep, in one place.
                if let Some((code, message)) = yaml::refused_entry(s, &out, "scopes") {
                    return Err(problem(code, &at(), message));
                }
                out.push(s.clone());
            }
            Some(out)
        }
        Some(_) => {
            return Err(problem(
                ProblemCode::InvalidValue,
                &format!("{path}.scopes"),
                "`scopes` must be an array of strings",
            ));
        }
    };
    Ok(CatalogTool {
        title: opt_string(&mut map, "title", path)?,
        description: opt_string(&mut map, "description", path)?,
        input_schema: opt_schema(&mut map, "inputSchema", path)?,
        output_schema: opt_schema(&mut map, "outputSchema", path)?,
        schema_texts: SchemaTexts::default(),
        annotations,
        effect,
        scopes,
        legacy: None,
        definition,
        name,
        path: path.to_owned(),
        line: 0,
        column: 0,
    })
}

fn annotations(map: &Map<String, Value>, path: &str) -> Result<Annotations, Problem> {
    let mut out = Annotations::default();
    for (key, value) in map {
        match key.as_str() {
            "readOnlyHint" | "destructiveHint" => {
                let Value::Bool(b) = value else {
                    return Err(problem(
                        ProblemCode::InvalidValue,
                        &format!("{path}.{key}"),
                        format!("`{key}` must be true or false"),
                    ));
                };
                if key == "readOnlyHint" {
                    out.read_only_hint = Some(*b);
                } else {
                    out.destructive_hint = Some(*b);
                }
            }
            _ => {
                out.other.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(out)
}

const LEGACY_KEYS: &[&str] = &[
    "title",
    "description",
    "tool_type",
    "requires",
    "confirmation_required",
    "execution_policy",
    "enabled",
    "schema",
    "endpoint",
    "cache",
];

fn legacy_tools(root: &Node) -> Result<Vec<CatalogTool>, Problem> {
    let r = Reader {
        origin: Origin::Catalog,
    };
    let mut tools = Vec::new();
    for (key, value) in r.map(root, "catalog")? {
        if key.name != "tools" {
            return Err(r.unknown_key(key, &["tools"]));
        }
        for (name, entry) in r.map(value, "tools")? {
            check_tool_name(&name.name)
                .map_err(|why| r.error(name.line, name.column, ProblemCode::InvalidValue, why))?;
            tools.push(legacy_tool(&r, &name.name, name.line, name.column, entry)?);
        }
    }
    Ok(tools)
}

fn legacy_tool(r: &Reader, name: &str, line: u64, column: u64, node: &Node) -> Result<CatalogTool, Problem> {
    let mut legacy = Legacy::default();
    let mut tool = CatalogTool {
        name: name.to_owned(),
        title: None,
        description: None,
        input_schema: None,
        output_schema: None,
        schema_texts: SchemaTexts::default(),
        annotations: None,
        effect: None,
        scopes: None,
        legacy: None,
        definition: Definition::Text(json::canonical(&node.to_json())),
        path: format!("tools.{name}"),
        line: u32::try_from(line).unwrap_or(u32::MAX),
        column: u32::try_from(column).unwrap_or(u32::MAX),
    };
    if !matches!(node.value, NodeValue::Null) {
        for (key, value) in r.map(node, "tool")? {
            match key.name.as_str() {
                "title" => tool.title = Some(r.string(value, "title")?.to_owned()),
                "description" => tool.description = Some(r.string(value, "description")?.to_owned()),
                "tool_type" => {
                    let s = r.string(value, "tool_type")?;
                    legacy.tool_type = Some(OperationType::parse(s).ok_or_else(|| {
                        r.error(
                            value.line,
                            value.column,
                            ProblemCode::InvalidValue,
                            "`tool_type` must be read_only or transactional",
                        )
                    })?);
                }
                "requires" => legacy.requires = Some(r.string_list(value, "requires")?),
                "confirmation_required" => legacy.confirmation_required = Some(r.bool(value, "confirmation_required")?),
                "execution_policy" => {
                    legacy.execution_policy = Some(match r.string(value, "execution_policy")? {
                        "auto" => ExecutionPolicy::Auto,
                        "confirm" => ExecutionPolicy::Confirm,
                        _ => {
                            return Err(r.error(
                                value.line,
                                value.column,
                                ProblemCode::InvalidValue,
                                "`execution_policy` must be auto or confirm",
                            ));
                        }
                    });
                }
                "enabled" => legacy.enabled = Some(r.bool(value, "enabled")?),
                "schema" => {
                    r.map(value, "schema")?;
                    tool.input_schema = Some(value.to_json());
                }
                "endpoint" => {
                    r.string(value, "endpoint")?;
                }
                "cache" => {}
                _ => return Err(r.unknown_key(key, LEGACY_KEYS)),
            }
        }
    }
    tool.legacy = Some(legacy);
    Ok(tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_text_built_from_its_tools_is_the_canonical_text_of_the_whole() {
        let tool_a = r#"{"name":"b_tool","description":"é \"q\"","inputSchema":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}}"#;
        let tool_b = r#"{"name":"a_tool","annotations":{"readOnlyHint":true},"inputSchema":null,"outputSchema":{"type":"object"}}"#;
        for text in [
            format!("[{tool_a},{tool_b}]"),
            format!(r#"{{"tools":[{tool_a},{tool_b}],"nextCursor":"c","_meta":{{"z":1,"a":[true,null]}}}}"#),
            format!(r#"{{"formatVersion":1,"tools":[{tool_a}],"server":{{"name":"s"}}}}"#),
        ] {
            let catalog = parse(&text).unwrap_or_else(|p| panic!("{p}"));
            let whole = json::parse_strict(text.as_bytes()).unwrap_or_default();
            assert_eq!(catalog.canonical, json::canonical(&whole), "{text}");
            let items = whole
                .as_array()
                .or_else(|| whole.get("tools").and_then(Value::as_array));
            for (tool, item) in catalog.tools.iter().zip(items.into_iter().flatten()) {
                let mut hashed = tool.clone();
                catalog.hash_definition(&mut hashed);
                assert_eq!(
                    hashed.definition.hash(),
                    Some(sha256_hex(json::canonical(item).as_bytes()).as_str())
                );
                let schema_text = |key: &str| item.get(key).filter(|s| s.is_object()).map(json::canonical);
                assert_eq!(tool.schema_texts.input, schema_text("inputSchema"), "{text}");
                assert_eq!(tool.schema_texts.output, schema_text("outputSchema"), "{text}");
            }
        }
    }

    #[test]
    fn forms_are_detected_from_content() {
        let t = r#"{"name":"a","inputSchema":{"type":"object"}}"#;
        let list = parse(&format!(r#"{{"tools":[{t}]}}"#)).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(list.form, CatalogForm::McpListResult);
        let arr = parse(&format!("[{t}]")).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(arr.form, CatalogForm::McpToolArray);
        let published =
            parse(&format!(r#"{{"formatVersion":1,"tools":[{t}]}}"#)).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(published.form, CatalogForm::Published);
        let legacy = parse("tools:\n  a:\n    tool_type: read_only\n").unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(legacy.form, CatalogForm::LegacyToolsYaml);
        assert_eq!(legacy.tools[0].line, 2);
    }

    #[test]
    fn duplicate_and_malformed_tools_are_errors() {
        assert_eq!(
            parse(r#"[{"name":"a"},{"name":"a"}]"#).err().map(|e| e.code),
            Some(ProblemCode::Duplicate)
        );
        assert_eq!(parse(r#"[{"name":5}]"#).err().map(|e| e.path), Some("[0].name".into()));
        assert_eq!(
            parse(r#"[{"name":"a","annotations":{"readOnlyHint":"true"}}]"#)
                .err()
                .map(|e| e.code),
            Some(ProblemCode::InvalidValue)
        );
        assert_eq!(
            parse("tools:\n  a:\n    enabled: \"yes\"\n")
                .err()
                .map(|e| (e.line, e.column)),
            Some((3, 14))
        );
        assert_eq!(
            parse("tools:\n  a:\n    colour: red\n").err().map(|e| e.code),
            Some(ProblemCode::UnknownKey)
        );
        assert_eq!(
            parse(r#"{"formatVersion":2,"tools":[]}"#).err().map(|e| e.code),
            Some(ProblemCode::UnsupportedVersion)
        );
        assert_eq!(
            parse(r#"{"x":1}"#).err().map(|e| e.code),
            Some(ProblemCode::UnknownCatalogForm)
        );
        assert_eq!(parse("[\u{1}]").err().map(|e| e.code), Some(ProblemCode::Syntax));
    }
}
