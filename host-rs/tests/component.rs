//! The built component itself: what it imports, how big it is, which
//! contract it speaks, and how the host fails closed around it.

// Test code: panicking on a broken expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use toolgate::{COMPONENT, Context, Engine, Error, Limits, faults};

/// The component must run in wasmtime, jco, wasmtime-py and workerd without
/// any shim: it imports nothing. An entry here needs a reason next to it.
const ALLOWED_IMPORTS: &[&str] = &[];

/// Raw size budget in bytes. The engine issue set 3 MB to start; the guest
/// is built at opt-level "z" and is 3.19 MB today (jsonschema + regex +
/// serde-saphyr); `wasm-opt -Oz` takes it to 2.69 MB and is the next step
/// (see CHANGELOG). This test stops it from growing meanwhile.
const SIZE_BUDGET_BYTES: usize = 3_250_000;

const CATALOG: &str = r#"{"tools":[
  {"name":"lookup","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}},
  {"name":"send","annotations":{"destructiveHint":true},"inputSchema":{"type":"object","properties":{"confirmed":{"type":"boolean"}}}}
]}"#;

#[test]
fn component_imports_nothing_and_exports_the_versioned_interface() {
    let (imports, exports) = component_build::interface(COMPONENT).unwrap();
    let unexpected: Vec<&String> = imports
        .iter()
        .filter(|i| !ALLOWED_IMPORTS.contains(&i.as_str()))
        .collect();
    assert!(unexpected.is_empty(), "unexpected imports: {unexpected:?}");
    assert_eq!(exports, vec!["toolgate:policy/engine@0.1.0".to_string()]);
}

#[test]
fn component_fits_its_size_budget() {
    assert!(
        COMPONENT.len() <= SIZE_BUDGET_BYTES,
        "component is {} bytes, budget {SIZE_BUDGET_BYTES}",
        COMPONENT.len()
    );
}

#[test]
fn a_component_that_is_not_ours_is_refused_on_load() {
    let err = Engine::from_component_bytes(b"\0asm\x0d\0\x01\0", Limits::default()).unwrap_err();
    assert_eq!(err.code(), "COMPONENT_INVALID");
    let err = Engine::from_component_bytes(b"not wasm", Limits::default()).unwrap_err();
    assert!(matches!(err, Error::Component(_)));
}

#[test]
fn precompiled_component_loads_and_decides_the_same() {
    let precompiled = Engine::precompile().unwrap();
    let fast = Engine::from_precompiled(&precompiled, Limits::default()).unwrap();
    let slow = Engine::cached().unwrap();
    let call = br#"{"name":"send","arguments":{}}"#;
    let a = fast.load(None, CATALOG).unwrap().evaluate(call, &Context::default());
    let b = slow.load(None, CATALOG).unwrap().evaluate(call, &Context::default());
    assert_eq!(a, b);
    assert_eq!(a.code.as_deref(), Some("CONFIRMATION_REQUIRED"));
}

#[test]
fn load_errors_carry_code_and_position() {
    let engine = Engine::cached().unwrap();
    let err = engine
        .load(
            Some("version: 1\ntool_policies:\n  send:\n    require_confirmation: \"true\"\n"),
            CATALOG,
        )
        .unwrap_err();
    let Error::Load(problem) = err else {
        panic!("not a load error: {err:?}")
    };
    assert_eq!(
        (problem.code.as_str(), problem.line, problem.column),
        ("POLICY_INVALID_VALUE", 4, 27)
    );
}

#[test]
fn exhausted_fuel_denies_with_its_own_code_and_the_next_call_is_served() {
    let engine = Engine::cached().unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    let call = br#"{"name":"lookup","arguments":{"q":"x"}}"#;
    let starved = rules.evaluate_with_fuel(call, "{}", 1_000);
    assert!(!starved.ok);
    assert_eq!(starved.code.as_deref(), Some("ENGINE_LIMIT"));
    assert_eq!(starved.json, faults::ENGINE_LIMIT);
    let next = rules.evaluate(call, &Context::default());
    assert!(next.ok, "{}", next.json);
}

#[test]
fn memory_cap_denies_with_its_own_code_and_the_next_call_is_served() {
    let limits = Limits {
        max_memory_bytes: 24 << 20,
        ..Limits::default()
    };
    let engine = Engine::cached_with(limits).unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    // 3.9 MB of string: parsing it needs more than the 24 MiB cap allows
    // once copied into the guest, the parsed value and the schema check.
    let huge = format!(
        r#"{{"name":"lookup","arguments":{{"q":"{}","r":[{}]}}}}"#,
        "x".repeat(1_000_000),
        "1,".repeat(900_000) + "1"
    );
    let decision = rules.evaluate(huge.as_bytes(), &Context::default());
    assert!(!decision.ok);
    assert_eq!(
        decision.code.as_deref(),
        Some("ENGINE_OUT_OF_MEMORY"),
        "{}",
        decision.json
    );
    let next = rules.evaluate(br#"{"name":"lookup","arguments":{"q":"x"}}"#, &Context::default());
    assert!(next.ok, "{}", next.json);
}

#[test]
fn oversized_input_never_reaches_the_component() {
    let engine = Engine::cached().unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    let big = vec![b' '; engine.limits().max_input_bytes + 1];
    let decision = rules.evaluate(&big, &Context::default());
    assert_eq!(decision.json, faults::INPUT_TOO_LARGE);
}

#[test]
fn host_fault_templates_match_the_shared_vectors() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/vectors/host-faults.json"
    ))
    .unwrap();
    let file: serde_json::Value = serde_json::from_str(&text).unwrap();
    let faults_json = &file["faults"];
    assert_eq!(faults_json["ENGINE_TRAP"], faults::ENGINE_TRAP);
    assert_eq!(faults_json["ENGINE_LIMIT"], faults::ENGINE_LIMIT);
    assert_eq!(faults_json["ENGINE_OUT_OF_MEMORY"], faults::ENGINE_OUT_OF_MEMORY);
    assert_eq!(faults_json["INPUT_TOO_LARGE"], faults::INPUT_TOO_LARGE);
    assert_eq!(file["limits"]["max_input_bytes"], Limits::default().max_input_bytes);
}

#[test]
fn native_and_component_agree_on_the_revision() {
    let engine = Engine::cached().unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    let native = policy_core::Rules::load(None, CATALOG).unwrap();
    assert_eq!(rules.revision(), native.revision());
}
