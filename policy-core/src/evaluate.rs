//! SPEC §4: the ordered checks. The first that fails decides.

use crate::context::Context;
use crate::decision::{self, Code, Decision, Denial};
use crate::error::Problem;
use crate::expose;
use crate::json::{self, write_str};
use crate::rules::{Rules, Tool};
use jsonschema::error::ValidationErrorKind;
use jsonschema::paths::LocationSegment;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The argument fields that belong to the engine, not to the tool.
pub const CONFIRMATION_FIELDS: [&str; 2] = ["confirmed", "confirmation"];
pub const IDEMPOTENCY_FIELD: &str = "idempotency_key";
/// At most this many schema errors are reported in `details`.
const MAX_REPORTED_ERRORS: usize = 16;

/// A parsed `tools/call` request.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    /// `None` when absent or null (both mean `{}`).
    pub arguments: Option<Value>,
}

/// Reads a call line: `{"name": "...", "arguments": {...}}` (MCP's `_meta`
/// is allowed and ignored). `Err` carries the name if it could be read.
pub fn parse_call(bytes: &[u8]) -> Result<Call, (Option<String>, String)> {
    if let Some(call) = read_well_formed_call(bytes) {
        return Ok(call);
    }
    let value = json::parse_strict(bytes).map_err(|e| (None, e.to_string()))?;
    call_from_value(value)
}

/// Reads a call in one pass, straight into a [`Call`]: no top-level map, no
/// key strings (#17: building and taking apart that map was a fifth of a
/// decision in the component). `None` for anything it does not take, and
/// [`parse_call`] then reads the text the general way, which alone words the
/// errors. It takes a text only when the general way would take it too, with
/// the same result: the same strict values (no duplicate key at any depth),
/// the keys `name`, `arguments` and `_meta` at most once each, a string name.
///
/// The text's UTF-8 is checked once, whole, rather than string by string as
/// a reader of bytes does (#17: a byte loop per string in the component).
fn read_well_formed_call(bytes: &[u8]) -> Option<Call> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    let call = serde::Deserializer::deserialize_map(&mut de, CallVisitor).ok()?;
    de.end().ok()?;
    Some(call)
}

struct CallVisitor;

/// A top-level key of a call, read without allocating.
enum CallKey {
    Name,
    Arguments,
    Meta,
}

impl<'de> serde::Deserialize<'de> for CallKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = CallKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("name, arguments or _meta")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<CallKey, E> {
                match key {
                    "name" => Ok(CallKey::Name),
                    "arguments" => Ok(CallKey::Arguments),
                    "_meta" => Ok(CallKey::Meta),
                    _ => Err(E::custom("unknown call key")),
                }
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> serde::de::Visitor<'de> for CallVisitor {
    type Value = Call;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a call object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Call, A::Error> {
        use serde::de::Error as _;
        let mut name: Option<String> = None;
        let mut arguments: Option<Value> = None;
        let mut meta_seen = false;
        while let Some(key) = map.next_key::<CallKey>()? {
            let first = match key {
                CallKey::Name => name.replace(map.next_value()?).is_none(),
                CallKey::Arguments => {
                    let json::StrictValue(value) = map.next_value()?;
                    arguments.replace(value).is_none()
                }
                CallKey::Meta => {
                    let json::StrictValue(_) = map.next_value()?;
                    !std::mem::replace(&mut meta_seen, true)
                }
            };
            if !first {
                return Err(A::Error::custom("duplicate call key"));
            }
        }
        let name = name.ok_or_else(|| A::Error::custom("a call needs a name"))?;
        Ok(Call {
            name,
            arguments: arguments.filter(|a| !a.is_null()),
        })
    }
}

/// [`parse_call`] for an already parsed value.
pub fn call_from_value(value: Value) -> Result<Call, (Option<String>, String)> {
    let Value::Object(mut map) = value else {
        return Err((None, "a call must be a JSON object with `name` and `arguments`".into()));
    };
    let name = match map.remove("name") {
        Some(Value::String(s)) => s,
        Some(_) => return Err((None, "`name` must be a string".into())),
        None => return Err((None, "a call needs a `name`".into())),
    };
    if let Some(key) = map.keys().find(|k| !matches!(k.as_str(), "arguments" | "_meta")) {
        let message = format!(
            "unknown call key `{}`; expected name, arguments, _meta",
            json::truncate_for_message(key)
        );
        return Err((Some(name), message));
    }
    let arguments = map.remove("arguments").filter(|a| !a.is_null());
    Ok(Call { name, arguments })
}

fn reason_details(reason: &str) -> String {
    let mut out = String::from("{\"reason\":");
    write_str(&mut out, reason);
    out.push('}');
    out
}

impl Rules {
    /// Decides a call given as JSON bytes. Never fails: an unreadable call or
    /// context is a deny with its own code.
    pub fn evaluate_json(&self, call: &[u8], context: &str) -> Decision {
        self.evaluate_json_in(call, Context::parse(context).as_ref())
    }

    /// [`Rules::evaluate_json`] with the context already parsed (by a
    /// [`crate::context::ContextMemo`], say).
    pub fn evaluate_json_in(&self, call: &[u8], context: Result<&Context, &Problem>) -> Decision {
        let ctx = match context {
            Ok(ctx) => ctx,
            Err(problem) => {
                let denial = Denial::with_details(Code::InvalidContext, reason_details(&problem.to_string()));
                return decision::unattributed(None, &denial, self.revision_json());
            }
        };
        match parse_call(call) {
            Ok(call) => self.evaluate_args(&call.name, call.arguments.map(Cow::Owned), ctx),
            Err((name, reason)) => {
                let name_json = name.map(|n| {
                    let mut s = String::new();
                    write_str(&mut s, &n);
                    s
                });
                let denial = Denial::with_details(Code::BadRequest, reason_details(&reason));
                decision::unattributed(name_json.as_deref(), &denial, self.revision_json())
            }
        }
    }

    /// Decides one call (SPEC §4).
    pub fn evaluate(&self, name: &str, arguments: Option<&Value>, ctx: &Context) -> Decision {
        self.evaluate_args(name, arguments.map(Cow::Borrowed), ctx)
    }

    /// [`Rules::evaluate`] on arguments it may own: a call read from text
    /// hands its arguments over, and the fields validation must not see are
    /// then removed in place instead of from a copy (#17: every confirmed
    /// call to a tool whose schema does not declare `confirmed` copied its
    /// whole argument map).
    fn evaluate_args(&self, name: &str, arguments: Option<Cow<'_, Value>>, ctx: &Context) -> Decision {
        // 1. Known and exposed; anything else answers exactly like an unknown tool.
        let Some(tool) = self.tool(name).filter(|t| expose::is_exposed(&t.name, &t.class, ctx)) else {
            let mut name_json = String::with_capacity(name.len() + 2);
            write_str(&mut name_json, name);
            return decision::not_found(&name_json);
        };
        // An empty BTreeMap does not allocate: `{}` costs nothing here.
        let empty_value = Value::Object(Map::new());
        let mut args_value = arguments.unwrap_or(Cow::Borrowed(&empty_value));
        let Some(args) = args_value.as_object() else {
            // Scopes are checked before argument shape (check 2 before 3).
            if let Some(d) = self.scope_denial(tool, ctx) {
                return self.about(tool, tool.class.confirmation_required, false, Some(&d));
            }
            let d = Denial::with_details(Code::BadRequest, reason_details("`arguments` must be a JSON object"));
            return self.about(tool, tool.class.confirmation_required, false, Some(&d));
        };
        let received = confirmation_received(args);
        // 2. Scopes.
        if let Some(d) = self.scope_denial(tool, ctx) {
            return self.about(tool, tool.class.confirmation_required, received, Some(&d));
        }
        // 3. Arguments: schema and `requires`. Schema failures that concern
        // only the confirmation fields or only the idempotency key are left to
        // checks 5 and 4. What the later checks read of the arguments is read
        // first: validation may remove the engine's fields from them.
        let missing: Vec<&str> = tool
            .class
            .requires
            .iter()
            .filter(|r| args.get(r.as_str()).is_none_or(Value::is_null))
            .map(String::as_str)
            .collect();
        let idempotency_key_ok = idempotency_key_ok(tool, args);
        let concerns = schema_concerns(tool, &mut args_value);
        if !concerns.general.is_empty() || !missing.is_empty() {
            let d = Denial::with_details(Code::BadRequest, bad_request_details(&concerns.general, &missing));
            return self.about(tool, tool.class.confirmation_required, received, Some(&d));
        }
        // 4. Idempotency key.
        if concerns.idempotency || !idempotency_key_ok {
            let d = Denial::new(Code::IdempotencyKeyInvalid);
            return self.about(tool, tool.class.confirmation_required, received, Some(&d));
        }
        // 5. Confirmation: only the JSON boolean `true` counts.
        let required = tool.class.confirmation_required || concerns.confirmation;
        if (required && !received) || concerns.confirmation {
            let d = Denial::new(Code::ConfirmationRequired);
            return self.about(tool, required, received, Some(&d));
        }
        // 6. Allowed.
        self.about(tool, required, received, None)
    }

    fn scope_denial(&self, tool: &Tool, ctx: &Context) -> Option<Denial> {
        let missing = expose::missing_scopes(&tool.class, ctx);
        if missing.is_empty() {
            return None;
        }
        let mut details = String::from("{\"missing_scopes\":[");
        for (i, s) in missing.iter().enumerate() {
            if i > 0 {
                details.push(',');
            }
            write_str(&mut details, s);
        }
        details.push_str("]}");
        Some(Denial::with_details(Code::ScopeDenied, details))
    }

    /// A decision about `tool`, from the pieces it and the rule set wrote
    /// at load.
    pub(crate) fn about(&self, tool: &Tool, required: bool, received: bool, denial: Option<&Denial>) -> Decision {
        decision::about_tool(
            &tool.name_json,
            &tool.class_members,
            required,
            received,
            denial,
            self.revision_json(),
        )
    }
}

/// Received only when a confirmation field is the JSON boolean `true` and
/// no confirmation field says anything else (`confirmed: true` with
/// `confirmation: "no"` is a contradiction, and contradictions deny).
pub fn confirmation_received(args: &Map<String, Value>) -> bool {
    let mut any_true = false;
    for field in CONFIRMATION_FIELDS {
        match args.get(field) {
            None => {}
            Some(Value::Bool(true)) => any_true = true,
            Some(_) => return false,
        }
    }
    any_true
}

fn idempotency_key_ok(tool: &Tool, args: &Map<String, Value>) -> bool {
    let takes = tool.declares_idempotency_key;
    if !takes && !tool.class.idempotency_key_required {
        return true;
    }
    match args.get(IDEMPOTENCY_FIELD) {
        None | Some(Value::Null) => !tool.class.idempotency_key_required,
        Some(Value::String(key)) => is_valid_idempotency_key(key),
        Some(_) => false,
    }
}

/// `^[A-Za-z0-9._:-]+$`, 8..=128 characters.
pub fn is_valid_idempotency_key(key: &str) -> bool {
    (8..=128).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

#[derive(Debug, Default)]
struct Concerns {
    /// (instance path, keyword) of failures about the tool's own arguments.
    general: Vec<(String, &'static str)>,
    idempotency: bool,
    confirmation: bool,
}

fn schema_concerns(tool: &Tool, args_value: &mut Cow<'_, Value>) -> Concerns {
    let Some(validator) = &tool.validator else {
        return Concerns::default();
    };
    // Confirmation fields the schema does not declare belong to the engine:
    // validation does not see them. Arguments read from a call's text are
    // owned, and lose them in place; borrowed ones are copied (`to_mut`).
    let undeclared_present = match args_value.as_ref() {
        Value::Object(args) => tool.strip_fields.iter().any(|f| args.contains_key(*f)),
        _ => false,
    };
    if undeclared_present && let Value::Object(args) = args_value.to_mut() {
        for f in &tool.strip_fields {
            args.remove(*f);
        }
    }
    concerns_of(validator, args_value)
}

fn concerns_of(validator: &jsonschema::Validator, instance: &Value) -> Concerns {
    let mut concerns = Concerns::default();
    if validator.is_valid(instance) {
        return concerns;
    }
    for error in validator.iter_errors(instance) {
        let keyword = keyword_name(error.kind());
        let fields: Vec<String> = match error.instance_path().segments().next() {
            Some(LocationSegment::Property(p)) => vec![p.into_owned()],
            Some(LocationSegment::Index(_)) => vec![String::new()],
            None => match error.kind() {
                ValidationErrorKind::Required { property } => vec![property.as_str().unwrap_or_default().to_owned()],
                ValidationErrorKind::AdditionalProperties { unexpected }
                | ValidationErrorKind::UnevaluatedProperties { unexpected } => unexpected.clone(),
                _ => vec![String::new()],
            },
        };
        for field in fields {
            if CONFIRMATION_FIELDS.contains(&field.as_str()) {
                concerns.confirmation = true;
            } else if field == IDEMPOTENCY_FIELD {
                concerns.idempotency = true;
            } else {
                let path = match error.instance_path().as_str() {
                    "" if !field.is_empty() => pointer_to(&field),
                    p => p.to_owned(),
                };
                concerns.general.push((path, keyword));
            }
        }
    }
    // `is_valid` said no: a denial must follow even if the error walk
    // named nothing (the two walks are separate code in jsonschema).
    if concerns.general.is_empty() && !concerns.confirmation && !concerns.idempotency {
        concerns.general.push((String::new(), "schema"));
    }
    // The validator reports in the order it walks the schema's and the
    // arguments' maps, and that order depends on serde_json's
    // `preserve_order` feature, which any crate in a build can switch on:
    // sort before choosing which errors to report, so the bytes cannot.
    concerns.general.sort_unstable();
    concerns.general.truncate(MAX_REPORTED_ERRORS);
    concerns
}

/// The JSON Pointer to a top-level field (RFC 6901: `~` and `/` escaped).
fn pointer_to(field: &str) -> String {
    if field.contains(['~', '/']) {
        format!("/{}", field.replace('~', "~0").replace('/', "~1"))
    } else {
        let mut path = String::with_capacity(field.len() + 1);
        path.push('/');
        path.push_str(field);
        path
    }
}

fn bad_request_details(errors: &[(String, &'static str)], missing: &[&str]) -> String {
    let mut out = String::from("{");
    if !errors.is_empty() {
        out.push_str("\"schema_errors\":[");
        for (i, (path, keyword)) in errors.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"path\":");
            write_str(&mut out, &json::truncate_for_message(path));
            out.push_str(",\"keyword\":\"");
            out.push_str(keyword);
            out.push_str("\"}");
        }
        out.push(']');
    }
    if !missing.is_empty() {
        if !errors.is_empty() {
            out.push(',');
        }
        out.push_str("\"missing_arguments\":[");
        for (i, m) in missing.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(&mut out, m);
        }
        out.push(']');
    }
    out.push('}');
    out
}

/// The JSON Schema keyword that failed, spelled as in the schema.
fn keyword_name(kind: &ValidationErrorKind) -> &'static str {
    use ValidationErrorKind as K;
    match kind {
        K::AdditionalItems { .. } => "additionalItems",
        K::AdditionalProperties { .. } => "additionalProperties",
        K::AnyOf { .. } => "anyOf",
        K::Constant { .. } => "const",
        K::Contains => "contains",
        K::ContentEncoding { .. } => "contentEncoding",
        K::ContentMediaType { .. } => "contentMediaType",
        K::Enum { .. } => "enum",
        K::ExclusiveMaximum { .. } => "exclusiveMaximum",
        K::ExclusiveMinimum { .. } => "exclusiveMinimum",
        K::FalseSchema => "false",
        K::Format { .. } => "format",
        K::MaxItems { .. } => "maxItems",
        K::Maximum { .. } => "maximum",
        K::MaxLength { .. } => "maxLength",
        K::MaxProperties { .. } => "maxProperties",
        K::MinItems { .. } => "minItems",
        K::Minimum { .. } => "minimum",
        K::MinLength { .. } => "minLength",
        K::MinProperties { .. } => "minProperties",
        K::MultipleOf { .. } => "multipleOf",
        K::Not { .. } => "not",
        K::OneOfMultipleValid { .. } | K::OneOfNotValid { .. } => "oneOf",
        K::Pattern { .. } => "pattern",
        K::PropertyNames { .. } => "propertyNames",
        K::Required { .. } => "required",
        K::Type { .. } => "type",
        K::UnevaluatedItems { .. } => "unevaluatedItems",
        K::UnevaluatedProperties { .. } => "unevaluatedProperties",
        K::UniqueItems => "uniqueItems",
        _ => "schema",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn general_way(text: &str) -> Result<Call, (Option<String>, String)> {
        let value = json::parse_strict(text.as_bytes()).map_err(|e| (None, e.to_string()))?;
        call_from_value(value)
    }

    #[test]
    fn the_one_pass_reader_takes_a_call_only_as_the_general_way_reads_it() {
        let taken = [
            r#"{"name":"send","arguments":{"to":"+1","confirmed":true}}"#,
            r#"{"arguments":{"a":[1,2.5,{"b":null}]},"name":"caf\u00e9"}"#,
            r#"{"name":"x"}"#,
            r#"{"name":"x","arguments":null}"#,
            r#"{"name":"x","arguments":[]}"#,
            r#"{"name":"x","arguments":"text"}"#,
            r#"{"_meta":{"progressToken":1},"name":"x","arguments":{}}"#,
            r#" { "name" : "x" , "arguments" : { } } "#,
            r#"{"name":"","arguments":{"k":"\ud83d\ude00"}}"#,
        ];
        for text in taken {
            let fast = read_well_formed_call(text.as_bytes());
            assert!(fast.is_some(), "{text}");
            assert_eq!(fast.map(Ok), Some(general_way(text)), "{text}");
        }
        let left_to_the_general_way = [
            r#"{"name":"x","name":"y"}"#,
            r#"{"name":"x","arguments":{},"arguments":{}}"#,
            r#"{"name":"x","_meta":{},"_meta":{}}"#,
            r#"{"name":"x","_meta":{"a":1,"a":2}}"#,
            r#"{"name":"x","arguments":{"confirmed":false,"confirmed":true}}"#,
            r#"{"name":"x","extra":1}"#,
            r#"{"Name":"x"}"#,
            r#"{"name":1}"#,
            r#"{"name":null}"#,
            r#"{"arguments":{}}"#,
            r#"["name","x"]"#,
            r#"{"name":"x"} trailing"#,
            r#"{"name":"x","arguments":{"n":1e309}}"#,
            r#"{"name":"\ud800"}"#,
            "",
        ];
        for text in left_to_the_general_way {
            assert_eq!(read_well_formed_call(text.as_bytes()), None, "{text}");
        }
        // A key written with an escape is still the key it spells.
        let escaped = r#"{"na\u006de":"x","arguments":{}}"#;
        assert_eq!(
            read_well_formed_call(escaped.as_bytes()).map(Ok),
            Some(general_way(escaped))
        );
    }
}
