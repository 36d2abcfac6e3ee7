//! Properties of the engine over generated catalogs, policies and calls.

// Test code: panicking on a broken expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use policy_core::{Code, Context, Rules, Surface};
use proptest::prelude::*;
use serde_json::{Value, json};

fn tool_strategy() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop::sample::select(vec!["read", "mutation", "external_message"])),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec!["r", "w"])),
    )
        .prop_map(|(effect, ro, destructive, declares_confirmed, scope)| {
            let mut tool = json!({"inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}});
            if let Some(e) = effect {
                tool["effect"] = json!(e);
            }
            let mut annotations = serde_json::Map::new();
            if let Some(b) = ro {
                annotations.insert("readOnlyHint".into(), json!(b));
            }
            if let Some(b) = destructive {
                annotations.insert("destructiveHint".into(), json!(b));
            }
            tool["annotations"] = Value::Object(annotations);
            if declares_confirmed {
                tool["inputSchema"]["properties"]["confirmed"] = json!({"type": "boolean"});
            }
            if let Some(s) = scope {
                tool["scopes"] = json!([s]);
            }
            tool
        })
}

fn catalog_strategy() -> impl Strategy<Value = (String, Vec<String>)> {
    prop::collection::vec(tool_strategy(), 1..8).prop_map(|tools| {
        let names: Vec<String> = (0..tools.len()).map(|i| format!("t{i}")).collect();
        let tools: Vec<Value> = tools
            .into_iter()
            .zip(&names)
            .map(|(mut t, n)| {
                t["name"] = json!(n);
                t
            })
            .collect();
        (json!({"tools": tools}).to_string(), names)
    })
}

fn policy_strategy() -> impl Strategy<Value = Option<String>> {
    prop::option::of(
        (
            prop::option::of(prop::sample::select(vec!["read_only", "transactional"])),
            prop::option::of(any::<bool>()),
            any::<bool>(),
            prop::option::of(prop::sample::select(vec!["t0", "t1"])),
        )
            .prop_map(|(op, confirm, trust, held)| {
                let mut text = String::from("version: 1\ndefaults:\n");
                if let Some(op) = op {
                    text.push_str(&format!("  operation_type: {op}\n"));
                }
                if let Some(c) = confirm {
                    text.push_str(&format!("  require_confirmation: {c}\n"));
                }
                text.push_str(&format!("trust_catalog_hints: {trust}\n"));
                if let Some(h) = held {
                    text.push_str(&format!("tool_policies:\n  {h}:\n    hold: testing\n"));
                }
                text
            }),
    )
}

fn context_strategy() -> impl Strategy<Value = Context> {
    (
        any::<bool>(),
        prop::option::of(prop::sample::subsequence(vec!["r".to_string(), "w".to_string()], 0..=2)),
        prop::option::of(prop::sample::subsequence(
            vec!["t0".to_string(), "t2".to_string(), "t3".to_string()],
            0..=3,
        )),
    )
        .prop_map(|(direct, scopes, allowed_tools)| Context {
            surface: if direct { Surface::Direct } else { Surface::Confirming },
            scopes,
            allowed_tools,
        })
}

fn not_confirmation() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("true")),
        Just(json!("TRUE")),
        Just(json!(1)),
        Just(json!([true])),
        Just(json!({"value": true})),
        Just(Value::Null),
        Just(json!(false)),
        any::<String>().prop_map(Value::String),
        any::<i64>().prop_map(|n| json!(n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// tools/list and tools/call use one rule: a listed tool never gets
    /// NOT_FOUND or SCOPE_DENIED, an unlisted one always does.
    #[test]
    fn list_and_call_never_disagree((catalog, names) in catalog_strategy(), policy in policy_strategy(), ctx in context_strategy()) {
        let rules = Rules::load(policy.as_deref(), &catalog).unwrap();
        let listed = rules.listed_names(&ctx);
        for name in &names {
            let decision = rules.evaluate(name, Some(&json!({"x": "a", "confirmed": true})), &ctx);
            let denied_by_exposure = matches!(decision.code, Some(Code::NotFound | Code::ScopeDenied));
            prop_assert_eq!(listed.contains(&name.as_str()), !denied_by_exposure, "{}: {}", name, decision.json);
        }
    }

    /// A hidden tool's decision is byte for byte an unknown tool's decision.
    #[test]
    fn hidden_tool_answers_like_unknown((catalog, names) in catalog_strategy(), policy in policy_strategy(), ctx in context_strategy()) {
        let rules = Rules::load(policy.as_deref(), &catalog).unwrap();
        let mut without: Value = serde_json::from_str(&catalog).unwrap();
        for name in &names {
            let decision = rules.evaluate(name, Some(&json!({})), &ctx);
            if decision.code == Some(Code::NotFound) {
                without["tools"].as_array_mut().unwrap().retain(|t| t["name"] != json!(name));
                let other = Rules::load(policy.as_deref(), &without.to_string()).unwrap();
                let unknown = other.evaluate(name, Some(&json!({})), &ctx);
                prop_assert_eq!(&decision.json, &unknown.json);
            }
        }
    }

    /// Nothing but the JSON boolean `true` satisfies confirmation, and no call
    /// needing confirmation is allowed without it.
    #[test]
    fn only_literal_true_confirms((catalog, names) in catalog_strategy(), policy in policy_strategy(), value in not_confirmation(), field in prop::sample::select(vec!["confirmed", "confirmation"])) {
        let rules = Rules::load(policy.as_deref(), &catalog).unwrap();
        let ctx = Context::default();
        for name in &names {
            let needs = rules.tool(name).is_some_and(|t| t.class.confirmation_required);
            let mut args = json!({"x": "a"});
            args[field] = value.clone();
            let decision = rules.evaluate(name, Some(&args), &ctx);
            if needs {
                prop_assert!(!decision.ok, "{} allowed with {} = {}", name, field, value);
            }
            let unconfirmed = rules.evaluate(name, Some(&json!({"x": "a"})), &ctx);
            if needs {
                prop_assert!(!unconfirmed.ok);
            }
        }
    }

    /// A catalog hint never loosens: with a transactional default and no
    /// trust, no tool is read-only unless the policy says so explicitly.
    #[test]
    fn hints_never_loosen_a_transactional_default((catalog, _names) in catalog_strategy()) {
        let rules = Rules::load(Some("version: 1\ndefaults:\n  operation_type: transactional\n"), &catalog).unwrap();
        for tool in rules.tools() {
            prop_assert_eq!(tool.class.operation_type, policy_core::OperationType::Transactional);
        }
        let direct = Context { surface: Surface::Direct, ..Context::default() };
        prop_assert!(rules.listed_names(&direct).is_empty());
    }

    /// `defaults.require_confirmation` speaks only for the tools `defaults`
    /// typed: under any policy without entries (the held tool aside), every
    /// transactional tool whose schema does not declare `confirmed` is typed
    /// by the catalog or the builtin rule, or by `defaults`; only in the last
    /// case can it run unconfirmed, and an unconfirmed call to any other is
    /// `CONFIRMATION_REQUIRED`.
    #[test]
    fn defaults_never_switch_confirmation_off_for_hinted_or_builtin_writes((catalog, names) in catalog_strategy(), policy in policy_strategy()) {
        let Some(policy) = policy else { return Ok(()) };
        let rules = Rules::load(Some(&policy), &catalog).unwrap();
        for name in &names {
            let tool = rules.tool(name).unwrap();
            let class = &tool.class;
            if class.operation_type != policy_core::OperationType::Transactional
                || class.held.is_some()
                || class.policy_source == policy_core::PolicySource::Defaults
            {
                continue;
            }
            prop_assert!(class.confirmation_required, "{name}: {:?}", class);
            let call = json!({"name": name, "arguments": {}}).to_string();
            let d = rules.evaluate_json(call.as_bytes(), "{}");
            prop_assert_eq!(d.code, Some(Code::ConfirmationRequired), "{}", d.json);
        }
    }

    /// Same inputs, same bytes.
    #[test]
    fn decisions_are_deterministic((catalog, names) in catalog_strategy(), policy in policy_strategy(), ctx in context_strategy()) {
        let a = Rules::load(policy.as_deref(), &catalog).unwrap();
        let b = Rules::load(policy.as_deref(), &catalog).unwrap();
        prop_assert_eq!(a.revision(), b.revision());
        for name in &names {
            let call = json!({"name": name, "arguments": {"x": "y"}}).to_string();
            let ctx_json = serde_json::to_string(&json!({
                "surface": if ctx.surface == Surface::Direct { "direct" } else { "confirming" },
                "scopes": ctx.scopes, "allowed_tools": ctx.allowed_tools,
            })).unwrap();
            prop_assert_eq!(a.evaluate_json(call.as_bytes(), &ctx_json).json, b.evaluate_json(call.as_bytes(), &ctx_json).json);
        }
        prop_assert_eq!(a.list_exposable(&ctx), b.list_exposable(&ctx));
    }

    /// Arbitrary bytes as a call never panic and never allow.
    #[test]
    fn arbitrary_call_bytes_never_allow(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let rules = Rules::load(None, r#"{"tools":[{"name":"t","inputSchema":{"type":"object","properties":{"confirmed":{"const":true}},"required":["confirmed"]}}]}"#).unwrap();
        let decision = rules.evaluate_json(&bytes, "{}");
        prop_assert!(!decision.ok || bytes.windows(4).any(|w| w == b"true"));
    }

    /// Arbitrary policy text never panics: it loads or it is a positioned error.
    #[test]
    fn arbitrary_policy_text_never_panics(text in "[ -~\n\t]{0,200}") {
        let _ = Rules::load(Some(&text), r#"{"tools":[]}"#);
    }
}
