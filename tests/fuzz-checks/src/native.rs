//! The native checks: `load_policy`, `load_catalog`, `evaluate`, and the
//! decision and listing invariants they share.

use crate::fixtures::{SEED_CATALOG, fixtures, native_rules, seed_policy};
use crate::input::Input;
use policy_core::context::Surface;
use policy_core::evaluate::{
    CONFIRMATION_FIELDS, IDEMPOTENCY_FIELD, call_from_value, is_valid_idempotency_key, parse_call,
};
use policy_core::json;
use policy_core::{Code, Context, Decision, OperationType, Origin, Problem, ProblemCode, Rules, expose};
use serde_json::{Map, Value, json};

/// A problem message longer than this echoes an input it should have cut
/// short (names are shortened to 64 bytes in messages).
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// At most this many tools get a probe call each after a fuzzed load.
const MAX_PROBED_TOOLS: usize = 64;

/// A context under which every tool is hidden.
const NOTHING_ALLOWED: &str = r#"{"allowed_tools":[]}"#;

/// `load_policy`: the bytes as a policy with the seed catalog, then as a
/// catalog without a policy.
pub fn check_load_policy(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    check_load(Some(&text), SEED_CATALOG, Origin::Policy, &text);
    check_load(None, &text, Origin::Catalog, &text);
}

/// `load_catalog`: the bytes as a catalog, without a policy and with the
/// seed-like policy.
pub fn check_load_catalog(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    check_load(None, &text, Origin::Catalog, &text);
    check_load(Some(seed_policy()), &text, Origin::Catalog, &text);
}

/// `evaluate`: a call and a context against a fixed rule set (or, in policy
/// mode, a fuzzed policy with a fixed catalog), every decision invariant.
pub fn check_evaluate(data: &[u8]) {
    let Some(input) = Input::split(data, fixtures().len()) else {
        return;
    };
    match &input.policy {
        None => {
            let rules = &native_rules()[input.fixture];
            check_decision(rules, input.call, &input.context);
            check_list(rules, &input.context);
        }
        Some(policy) => {
            let catalog = &fixtures()[input.fixture].catalog;
            match Rules::load(Some(policy), catalog) {
                Ok(rules) => {
                    check_decision(&rules, input.call, &input.context);
                    check_list(&rules, &input.context);
                }
                Err(problem) => check_problem(&problem, Origin::Policy, policy),
            }
        }
    }
}

/// Loads and checks what comes out: a problem from the expected input, or
/// rules that answer every probe within the invariants.
pub fn check_load(policy: Option<&str>, catalog: &str, origin: Origin, text: &str) {
    match Rules::load(policy, catalog) {
        Ok(rules) => check_loaded(&rules),
        Err(problem) => {
            check_problem(&problem, origin, text);
            // Loading is deterministic: the same problem again, at the same
            // place. Only the message may differ for a schema that does not
            // compile: it carries jsonschema's own text, which names the first
            // unresolvable `$ref` it meets, and natively jsonschema's maps are
            // seeded per process (in the component they are not).
            let again = Rules::load(policy, catalog).err();
            let place = |p: &Problem| (p.code, p.origin, p.path.clone(), p.line, p.column);
            assert_eq!(
                again.as_ref().map(place),
                Some(place(&problem)),
                "a second load gave another result: {again:?} after {problem:?}"
            );
            if problem.code != ProblemCode::InvalidSchema {
                assert_eq!(again.as_ref(), Some(&problem), "a second load gave another message");
            }
        }
    }
}

/// A load error is a typed problem about the input it is in, with a bounded
/// message and a position inside the text.
pub fn check_problem(problem: &Problem, origin: Origin, text: &str) {
    assert_eq!(
        problem.origin,
        origin,
        "problem from the wrong input: {problem} (expected origin {})",
        origin.as_str()
    );
    let code = problem.full_code();
    assert!(
        code.starts_with(&format!("{}_", origin.as_str().to_ascii_uppercase())),
        "code {code} does not name its origin"
    );
    assert!(!problem.message.is_empty(), "empty message: {problem:?}");
    assert!(
        problem.message.len() <= MAX_MESSAGE_BYTES,
        "a {}-byte message (echoes input?): {:.300}",
        problem.message.len(),
        problem.message
    );
    assert!(
        problem.path.len() <= MAX_MESSAGE_BYTES,
        "a {}-byte path: {:.300}",
        problem.path.len(),
        problem.path
    );
    if problem.line == 0 {
        assert_eq!(problem.column, 0, "a column without a line: {problem:?}");
    }
    // An upper bound on the lines whichever breaks a parser counts (YAML 1.2:
    // LF, CR, CRLF; YAML 1.1 also NEL, LS, PS; JSON: LF).
    let lines = text
        .chars()
        .filter(|c| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}'))
        .count()
        + 1;
    assert!(
        problem.line as usize <= lines + 1,
        "line {} of a {lines}-line text: {problem:?}",
        problem.line
    );
    let _ = problem.to_string();
}

/// Rules that loaded from fuzzed text: a sane revision, a listing that
/// agrees with evaluate on two surfaces, and probe calls to each tool that
/// keep every decision invariant.
pub fn check_loaded(rules: &Rules) {
    let revision = rules.revision();
    let hex = revision.strip_prefix("sha256:").unwrap_or_default();
    assert!(
        hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "revision is not sha256:<lowercase hex>: {revision:?}"
    );
    let names: Vec<&str> = rules.tools().iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "tools not sorted and unique: {names:?}"
    );
    for context in ["", r#"{"surface":"direct"}"#] {
        check_list(rules, context);
    }
    for tool in rules.tools().iter().take(MAX_PROBED_TOOLS) {
        for arguments in [json!({}), json!({"confirmed": true})] {
            let call = serde_json::to_vec(&json!({"name": tool.name, "arguments": arguments})).unwrap();
            check_decision(rules, &call, "");
        }
    }
    for finding in rules.findings() {
        assert!(!finding.message.is_empty(), "empty finding message: {finding:?}");
    }
}

fn obj<'a>(value: &'a Value, what: &str, json: &str) -> &'a Map<String, Value> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("{what} is not an object in {json}"))
}

/// Every invariant of one decision; returns it.
pub fn check_decision(rules: &Rules, call: &[u8], context: &str) -> Decision {
    let decision = rules.evaluate_json(call, context);
    let again = rules.evaluate_json(call, context);
    assert_eq!(decision, again, "evaluating twice gave two decisions");
    let json = decision.json.as_str();

    // The decision is JSON, its head agrees with the Rust fields, and the
    // canonical key order starts with `ok`.
    let value: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("decision is not JSON ({e}): {json}"));
    assert!(json.starts_with(r#"{"ok":"#), "decision does not start with ok: {json}");
    let top = obj(&value, "the decision", json);
    let mut keys: Vec<&str> = top.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["error", "metadata", "ok"], "decision keys: {json}");
    assert_eq!(top["ok"], Value::Bool(decision.ok), "ok disagrees: {json}");
    assert_eq!(decision.ok, decision.code.is_none(), "ok and code disagree: {json}");
    let code = value.pointer("/error/code").and_then(Value::as_str);
    assert_eq!(code, decision.code.map(Code::as_str), "code disagrees: {json}");
    if decision.ok {
        assert!(top["error"].is_null(), "allowed with an error: {json}");
    } else {
        let error = obj(&top["error"], "error", json);
        assert_eq!(error.get("outcome"), Some(&json!("rejected")), "outcome: {json}");
        assert_eq!(
            error.get("retryable").and_then(Value::as_bool),
            decision.code.map(Code::retryable),
            "retryable: {json}"
        );
    }
    let meta = obj(&top["metadata"], "metadata", json);
    assert_eq!(
        meta.get("blocked_by_policy"),
        Some(&Value::Bool(!decision.ok)),
        "blocked_by_policy disagrees with ok: {json}"
    );

    // An unreadable context is INVALID_CONTEXT, for any call.
    let ctx = match Context::parse(context) {
        Ok(ctx) => ctx,
        Err(_) => {
            assert_eq!(decision.code, Some(Code::InvalidContext), "bad context, but: {json}");
            assert_eq!(meta.get("tool"), Some(&Value::Null), "bad context names a tool: {json}");
            return decision;
        }
    };
    assert_ne!(
        decision.code,
        Some(Code::InvalidContext),
        "valid context refused: {json}"
    );

    // A call that is not even lenient JSON is a BAD_REQUEST.
    let lenient: Option<Value> = serde_json::from_slice(call).ok();
    if lenient.is_none() {
        assert_eq!(
            decision.code,
            Some(Code::BadRequest),
            "a call that is not JSON, but: {json}"
        );
    }

    // A decision about a tool is about an existing tool exposed here, with
    // its classification and this rule set's revision.
    if meta.contains_key("operation_type") {
        let name = meta
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("decision about a tool without its name: {json}"));
        let tool = rules
            .tool(name)
            .unwrap_or_else(|| panic!("decision about a tool not in the catalog: {json}"));
        assert!(
            expose::is_exposed(&tool.name, &tool.class, &ctx),
            "decision about a hidden tool: {json}"
        );
        assert_eq!(
            meta["operation_type"],
            json!(tool.class.operation_type.as_str()),
            "{json}"
        );
        assert_eq!(meta["effect"], json!(tool.class.effect), "{json}");
        assert_eq!(
            meta["policy_source"],
            json!(tool.class.policy_source.as_str()),
            "{json}"
        );
        assert_eq!(meta["policy_revision"], json!(rules.revision()), "{json}");
        if tool.class.confirmation_required {
            assert_eq!(meta["confirmation_required"], json!(true), "{json}");
        }
    } else {
        assert!(!decision.ok, "allowed without a classification: {json}");
    }

    // The one-pass call reader takes a text only as the general reader
    // (strict parse, then the call's shape) reads it, and leaves the rest,
    // errors and their wording included, to it.
    let read = parse_call(call);
    let general = json::parse_strict(call)
        .map_err(|e| (None, e.to_string()))
        .and_then(call_from_value);
    assert_eq!(read, general, "the call readers disagree");

    // Where the engine reads the call, a tool that is not there or not
    // exposed is NOT_FOUND and nothing else; an exposed one never is.
    if let Ok(parsed) = read {
        let exposed = rules
            .tool(&parsed.name)
            .is_some_and(|t| expose::is_exposed(&t.name, &t.class, &ctx));
        assert_eq!(
            decision.code == Some(Code::NotFound),
            !exposed,
            "exposed = {exposed}, but: {json}"
        );
    }

    if decision.code == Some(Code::NotFound) {
        check_not_found(rules, &decision, meta);
    }
    if decision.ok {
        check_allowed(rules, &ctx, lenient.as_ref(), meta, json);
    }
    decision
}

/// NOT_FOUND says nothing but the name, and is byte for byte what a hidden
/// tool gets (whatever hid it), whatever the arguments and context.
fn check_not_found(rules: &Rules, decision: &Decision, meta: &Map<String, Value>) {
    let json = decision.json.as_str();
    let mut keys: Vec<&str> = meta.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["blocked_by_policy", "tool"],
        "NOT_FOUND metadata says more: {json}"
    );
    let error: Value = serde_json::from_str::<Value>(json).unwrap()["error"].take();
    let mut error_keys: Vec<&str> = obj(&error, "error", json).keys().map(String::as_str).collect();
    error_keys.sort_unstable();
    assert_eq!(
        error_keys,
        ["code", "message", "outcome", "retryable"],
        "NOT_FOUND error says more: {json}"
    );
    let name = meta["tool"]
        .as_str()
        .unwrap_or_else(|| panic!("NOT_FOUND without a tool name: {json}"));
    // The same name, no arguments, everything hidden.
    let probe = serde_json::to_vec(&json!({ "name": name })).unwrap();
    let hidden = rules.evaluate_json(&probe, NOTHING_ALLOWED);
    assert_eq!(hidden.json, json, "NOT_FOUND depends on more than the name");
    // A catalog tool hidden by the allowlist, with the name swapped in.
    if let Some(tool) = rules.tools().first() {
        let known = serde_json::to_vec(&json!({ "name": tool.name })).unwrap();
        let hidden_known = rules.evaluate_json(&known, NOTHING_ALLOWED);
        let swapped = hidden_known.json.replacen(
            &format!(r#""tool":{}"#, tool.name_json),
            &format!(r#""tool":{}"#, serde_json::to_string(name).unwrap()),
            1,
        );
        assert_eq!(
            swapped, json,
            "an unknown tool and a hidden one answer differently (hidden: {})",
            hidden_known.json
        );
    }
}

/// An allowed call: a readable call to an exposed catalog tool, with every
/// scope, required argument, idempotency key and confirmation it needs,
/// checked here from the call's JSON (read with plain serde_json).
fn check_allowed(rules: &Rules, ctx: &Context, call: Option<&Value>, meta: &Map<String, Value>, json: &str) {
    let call = call.unwrap_or_else(|| panic!("allowed a call that is not JSON: {json}"));
    let name = call
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("allowed a call without a string name: {json}"));
    assert_eq!(meta.get("tool"), Some(&json!(name)), "allowed another tool: {json}");
    let tool = rules
        .tool(name)
        .unwrap_or_else(|| panic!("allowed a tool not in the catalog: {json}"));
    let empty = Map::new();
    let args = match call.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(other) => panic!("allowed with arguments {other}: {json}"),
    };
    let is_true = |field: &str| args.get(field) == Some(&Value::Bool(true));
    let confirmed = CONFIRMATION_FIELDS.iter().any(|f| is_true(f));
    if tool.class.confirmation_required || meta.get("confirmation_required") == Some(&json!(true)) {
        assert!(
            confirmed,
            "allowed a tool that needs confirmation without confirmed/confirmation = true: {json}"
        );
    }
    if meta.get("confirmation_received") == Some(&json!(true)) {
        assert!(confirmed, "confirmation_received without a true field: {json}");
        for field in CONFIRMATION_FIELDS {
            assert!(
                args.get(field).is_none_or(|v| *v == Value::Bool(true)),
                "confirmation received despite {field} = {}: {json}",
                args[field]
            );
        }
    }
    assert!(
        tool.class.enabled && tool.class.held.is_none(),
        "allowed a disabled or held tool: {json}"
    );
    if let Some(granted) = &ctx.scopes {
        for scope in &tool.class.scopes {
            assert!(granted.contains(scope), "allowed without scope {scope}: {json}");
        }
    }
    if let Some(allowed) = &ctx.allowed_tools {
        assert!(
            allowed.iter().any(|a| a == name),
            "allowed a tool off the allowlist: {json}"
        );
    }
    if ctx.surface == Surface::Direct {
        assert!(
            tool.class.operation_type == OperationType::ReadOnly && !tool.class.confirmation_required,
            "allowed a confirming tool on the direct surface: {json}"
        );
    }
    for required in &tool.class.requires {
        assert!(
            args.get(required).is_some_and(|v| !v.is_null()),
            "allowed without required argument {required}: {json}"
        );
    }
    if tool.class.idempotency_key_required {
        assert!(
            args.get(IDEMPOTENCY_FIELD)
                .and_then(Value::as_str)
                .is_some_and(is_valid_idempotency_key),
            "allowed without a valid idempotency key: {json}"
        );
    }
    if let Some(validator) = &tool.validator {
        let mut instance = args.clone();
        for field in &tool.strip_fields {
            instance.remove(*field);
        }
        assert!(
            validator.is_valid(&Value::Object(instance)),
            "allowed arguments its schema refuses: {json}"
        );
    }
}

/// What the listing check reads of a `tools/list` result (the rest is
/// skipped, though still parsed).
#[derive(Debug, serde::Deserialize)]
struct Listed {
    tools: Vec<ListedTool>,
}

#[derive(Debug, serde::Deserialize)]
struct ListedTool {
    name: String,
    annotations: ListedAnnotations,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedAnnotations {
    read_only_hint: bool,
    destructive_hint: bool,
}

/// `tools/list` for a context: JSON, deterministic, sorted, the same names
/// as `listed_names`, annotations that match the classification; every
/// listed tool is callable here (not NOT_FOUND, not SCOPE_DENIED) and every
/// tool not listed is NOT_FOUND or SCOPE_DENIED.
pub fn check_list(rules: &Rules, context: &str) {
    let Ok(ctx) = Context::parse(context) else {
        return;
    };
    let list = rules.list_exposable(&ctx);
    assert_eq!(list, rules.list_exposable(&ctx), "listing twice gave two lists");
    // Read without building the schemas' trees (most of the bytes): still
    // every byte parsed, at a fraction of the cost of a `Value`.
    let listed: Listed = serde_json::from_str(&list).unwrap_or_else(|e| panic!("list is not JSON ({e}): {list}"));
    let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, rules.listed_names(&ctx), "list and listed_names disagree");
    assert!(names.windows(2).all(|w| w[0] < w[1]), "list not sorted: {names:?}");
    for entry in &listed.tools {
        let name = entry.name.as_str();
        let tool = rules
            .tool(name)
            .unwrap_or_else(|| panic!("listed {name}, not in the catalog"));
        let read_only = tool.class.operation_type == OperationType::ReadOnly;
        assert_eq!(
            entry.annotations.read_only_hint, read_only,
            "readOnlyHint contradicts the classification of {name}"
        );
        assert!(
            !(read_only && entry.annotations.destructive_hint),
            "a read-only tool listed as destructive: {name}"
        );
    }
    for tool in rules.tools() {
        // Arguments that are not an object: exposure and scopes are checked
        // (NOT_FOUND, SCOPE_DENIED), then BAD_REQUEST without the cost of
        // schema validation (NOT_FOUND does not depend on the arguments:
        // `check_not_found`).
        let call = serde_json::to_vec(&json!({"name": tool.name, "arguments": []})).unwrap();
        let decision = rules.evaluate_json(&call, context);
        let listed = names.binary_search(&tool.name.as_str()).is_ok();
        let hidden = matches!(decision.code, Some(Code::NotFound | Code::ScopeDenied));
        assert_eq!(
            listed, !hidden,
            "listed = {listed}, but evaluate says {} for {} in context {context}",
            decision.json, tool.name
        );
    }
}
