//! The built component itself: what it imports, how big it is, which
//! contract it speaks, and how the host fails closed around it.

// Test code: panicking on a broken expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::time::Duration;
use toolgate::{COMPONENT, Context, Engine, Error, Fuel, Limits, faults};

/// The component must run in wasmtime, jco, wasmtime-py and workerd without
/// any shim: it imports nothing. An entry here needs a reason next to it.
const ALLOWED_IMPORTS: &[&str] = &[];

/// Size budget, gzipped (what an edge worker's limit counts): the
/// performance issue's 1 MB. The guest at opt-level "s" (twice as fast as
/// "z") was 1.15 MB with serde-saphyr reading YAML; the tree built from
/// granit-parser's events instead (`policy-core/src/yaml/tree.rs`) brought it
/// to 0.996 MB.
const GZIP_BUDGET_BYTES: usize = 1_000_000;

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
    assert_eq!(
        exports,
        vec![format!("toolgate:policy/engine@{}", toolgate::CONTRACT_VERSION)]
    );
}

#[test]
fn component_fits_its_size_budget() {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(COMPONENT).unwrap();
    let gzipped = gz.finish().unwrap().len();
    assert!(
        gzipped <= GZIP_BUDGET_BYTES,
        "component is {gzipped} bytes gzipped ({} raw), budget {GZIP_BUDGET_BYTES}",
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

const SMALL_CALL: &[u8] = br#"{"name":"lookup","arguments":{"q":"x"}}"#;
const SMALL_TURN: &str = r#"{"context":{},"calls":[{"name":"send","arguments":{}}]}"#;

/// A call of about 3.9 MB: copying it into the guest grows its memory, and
/// parsing it (a 1 MB string, an array of 900 000 numbers) needs far more
/// than 24 MiB and far more than 10 million fuel.
fn huge_call() -> String {
    format!(
        r#"{{"name":"lookup","arguments":{{"q":"{}","r":[{}]}}}}"#,
        "x".repeat(1_000_000),
        "1,".repeat(900_000) + "1"
    )
}

/// A context of about 3.6 MB: 900 000 scopes, each its own allocation.
fn huge_context() -> String {
    format!(r#"{{"scopes":[{}"s"]}}"#, r#""s","#.repeat(900_000))
}

/// A turn input of about 3.6 MB (one call carrying 1.8 million numbers).
fn huge_turn() -> String {
    format!(
        r#"{{"context":{{}},"calls":[{{"name":"lookup","arguments":{{"r":[{}1]}}}}]}}"#,
        "1,".repeat(1_800_000)
    )
}

/// What a rule set answers when nothing fails: every fault test compares
/// the call after the fault with these bytes.
struct KnownGood {
    decision: String,
    list: String,
    turn: String,
}

fn known_good(rules: &toolgate::RuleSet) -> KnownGood {
    let decision = rules.evaluate(SMALL_CALL, &Context::default());
    assert!(decision.ok, "{}", decision.json);
    KnownGood {
        decision: decision.json,
        list: rules.list_exposable(&Context::default()).unwrap(),
        turn: rules.turn("", SMALL_TURN).unwrap(),
    }
}

fn assert_served(rules: &toolgate::RuleSet, good: &KnownGood) {
    assert_eq!(rules.evaluate(SMALL_CALL, &Context::default()).json, good.decision);
    assert_eq!(rules.list_exposable(&Context::default()).unwrap(), good.list);
    assert_eq!(rules.turn("", SMALL_TURN).unwrap(), good.turn);
}

fn assert_fault<T: std::fmt::Debug>(result: Result<T, Error>, code: &str) {
    match result {
        Err(Error::Fault { code: got }) => assert_eq!(got, code),
        other => panic!("expected Error::Fault {{ code: {code} }}, got {other:?}"),
    }
}

#[test]
fn injected_trap_denies_with_engine_trap_and_the_next_call_is_served() {
    let engine = Engine::cached().unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    let good = known_good(&rules);
    // A trap raised inside the component (at its next `memory.grow`, which
    // copying a 3.9 MB call into the guest needs), not a limit.
    rules.inject_trap();
    let trapped = rules.evaluate(huge_call().as_bytes(), &Context::default());
    assert_eq!(trapped.json, faults::ENGINE_TRAP);
    assert_eq!(trapped.code.as_deref(), Some("ENGINE_TRAP"));
    assert_served(&rules, &good);
    rules.inject_trap();
    assert_fault(rules.list_exposable_raw(&huge_context()), "ENGINE_TRAP");
    assert_served(&rules, &good);
    rules.inject_trap();
    assert_fault(rules.turn("", &huge_turn()), "ENGINE_TRAP");
    assert_served(&rules, &good);
}

#[test]
fn a_passed_deadline_denies_with_its_own_code_and_the_next_call_is_served() {
    let engine = Engine::cached().unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    let good = known_good(&rules);
    // Zero: the epoch deadline has passed at the guest's first check.
    let late = rules.evaluate_with_deadline(SMALL_CALL, "{}", Duration::ZERO);
    assert!(!late.ok);
    assert_eq!(late.code.as_deref(), Some("ENGINE_LIMIT"));
    assert_eq!(late.json, faults::ENGINE_LIMIT);
    assert_served(&rules, &good);
    // Fuel is compiled into the code: a deadline engine refuses a fuel budget.
    assert_eq!(
        rules.evaluate_with_fuel(SMALL_CALL, "{}", u64::MAX).json,
        faults::ENGINE_LIMIT
    );
    assert_served(&rules, &good);
}

#[test]
fn exhausted_fuel_denies_with_its_own_code_and_the_next_call_is_served() {
    let limits = Limits {
        fuel: Some(Fuel::default()),
        ..Limits::default()
    };
    let engine = Engine::cached_with(limits).unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    let good = known_good(&rules);
    let starved = rules.evaluate_with_fuel(SMALL_CALL, "{}", 1_000);
    assert!(!starved.ok);
    assert_eq!(starved.code.as_deref(), Some("ENGINE_LIMIT"));
    assert_eq!(starved.json, faults::ENGINE_LIMIT);
    assert_served(&rules, &good);
}

#[test]
fn exhausted_fuel_on_list_and_turn_fails_with_engine_limit() {
    // Enough fuel for loading and for small calls, not for 3.6 MB inputs.
    let limits = Limits {
        fuel: Some(Fuel {
            call: 10_000_000,
            ..Fuel::default()
        }),
        ..Limits::default()
    };
    let engine = Engine::cached_with(limits).unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    let good = known_good(&rules);
    let decision = rules.evaluate(huge_call().as_bytes(), &Context::default());
    assert_eq!(decision.json, faults::ENGINE_LIMIT);
    assert_served(&rules, &good);
    assert_fault(rules.list_exposable_raw(&huge_context()), "ENGINE_LIMIT");
    assert_served(&rules, &good);
    assert_fault(rules.turn("", &huge_turn()), "ENGINE_LIMIT");
    assert_served(&rules, &good);
}

#[test]
fn a_load_past_its_deadline_fails_with_engine_limit() {
    let limits = Limits {
        load_deadline: Duration::ZERO,
        load_deadline_per_input_mib: Duration::ZERO,
        ..Limits::default()
    };
    let engine = Engine::cached_with(limits).unwrap();
    let err = engine.load(None, CATALOG).unwrap_err();
    assert_eq!(err.code(), "ENGINE_LIMIT");
}

#[test]
fn memory_cap_denies_with_its_own_code_and_the_next_call_is_served() {
    let limits = Limits {
        max_memory_bytes: 24 << 20,
        ..Limits::default()
    };
    let engine = Engine::cached_with(limits).unwrap();
    let rules = engine.load(None, CATALOG).unwrap();
    let good = known_good(&rules);
    // The guest's allocator aborts (`unreachable`) when the growth is
    // refused; the host knows its cap refused it: ENGINE_OUT_OF_MEMORY.
    let decision = rules.evaluate(huge_call().as_bytes(), &Context::default());
    assert!(!decision.ok);
    assert_eq!(decision.json, faults::ENGINE_OUT_OF_MEMORY);
    assert_eq!(decision.code.as_deref(), Some("ENGINE_OUT_OF_MEMORY"));
    assert_served(&rules, &good);
    assert_fault(rules.list_exposable_raw(&huge_context()), "ENGINE_OUT_OF_MEMORY");
    assert_served(&rules, &good);
    assert_fault(rules.turn("", &huge_turn()), "ENGINE_OUT_OF_MEMORY");
    assert_served(&rules, &good);
}

/// A catalog of `tools` tools, each with a schema of a few properties.
fn catalog_of(tools: usize) -> String {
    let tool = |i: usize| {
        format!(
            r#"{{"name":"tool_{i}","description":"tool number {i}","annotations":{{"readOnlyHint":{}}},"inputSchema":{{"type":"object","properties":{{"id":{{"type":"string","pattern":"^[a-z0-9_-]{{1,64}}$"}},"count":{{"type":"integer","minimum":0,"maximum":1000}},"note":{{"type":"string","maxLength":200}}}},"required":["id"],"additionalProperties":false}}}}"#,
            i.is_multiple_of(2)
        )
    };
    let tools: Vec<String> = (0..tools).map(tool).collect();
    format!(r#"{{"tools":[{}]}}"#, tools.join(","))
}

#[test]
fn a_large_load_grows_the_guest_memory_in_few_steps() {
    // The guest's allocator grows the memory ahead of need
    // (policy-component/src/grow_ahead.rs): a few dozen steps for tens of MB,
    // where growing by what each allocation needs took hundreds, and each
    // one can cost V8 a full garbage collection.
    let rules = Engine::cached().unwrap().load(None, &catalog_of(2_000)).unwrap();
    let (bytes, grows) = (rules.guest_memory_bytes(), rules.guest_memory_grows());
    assert!(bytes > 16 << 20, "the load used only {bytes} bytes: not a large load");
    assert!(grows <= 40, "{grows} memory grows for a load of {bytes} bytes");
    let decision = rules.evaluate(br#"{"name":"tool_4","arguments":{"id":"a-1"}}"#, &Context::default());
    assert!(decision.ok, "{}", decision.json);
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

/// The SDK builds the blocked result of a host fault itself (the component
/// never saw the call); it must be the engine's own shape, byte for byte.
#[test]
fn fault_blocked_results_are_the_engines_shape() {
    for (code, bytes) in toolgate::faults::ALL {
        let outcome = toolgate::Outcome::fault(code);
        assert_eq!(outcome.decision.json, bytes, "{code}");
        let engine = policy_core::pipeline::blocked_result(
            &policy_core::Decision {
                ok: false,
                code: None,
                json: bytes.to_owned(),
            },
            false,
        );
        assert_eq!(outcome.blocked_result.as_deref(), Some(engine.as_str()), "{code}");
    }
}

#[test]
fn decisions_reuse_the_memory_they_free_and_decide_alike_every_time() {
    // The guest keeps freed small blocks on lists by size and hands them
    // out again (policy-component/src/grow_ahead.rs): a decision loop must
    // neither grow the memory nor read a reused block's old contents.
    let rules = Engine::cached().unwrap().load(None, CATALOG).unwrap();
    let calls: Vec<String> = (0..40)
        .map(|i| {
            // Strings of every size class and past the largest kept one,
            // keys growing a map, an unknown tool, a wrong type.
            let text = "x".repeat(i * 37);
            match i % 4 {
                0 => format!(r#"{{"name":"lookup","arguments":{{"q":"{text}"}}}}"#),
                1 => format!(r#"{{"name":"lookup","arguments":{{"q":{i},"k{i}":"{text}"}}}}"#),
                2 => format!(r#"{{"name":"send","arguments":{{"confirmed":true,"note_{text}":1}}}}"#),
                _ => format!(r#"{{"name":"tool_{text}","arguments":{{}}}}"#),
            }
        })
        .collect();
    let context = Context::default();
    let first: Vec<String> = calls
        .iter()
        .map(|c| rules.evaluate(c.as_bytes(), &context).json)
        .collect();
    assert!(first.iter().any(|d| d.contains(r#""ok":true"#)), "{first:?}");
    assert!(first.iter().any(|d| d.contains(r#""ok":false"#)), "{first:?}");
    let warmed = rules.guest_memory_bytes();
    for round in 0..300 {
        for (call, expected) in calls.iter().zip(&first) {
            assert_eq!(
                &rules.evaluate(call.as_bytes(), &context).json,
                expected,
                "round {round}: {call}"
            );
        }
    }
    assert_eq!(
        rules.guest_memory_bytes(),
        warmed,
        "12 000 decisions grew the guest memory"
    );
}

#[test]
fn calls_freeing_many_blocks_of_one_size_after_another_do_not_pile_up_memory() {
    // Freed small blocks wait on a list per size (grow_ahead.rs) only up to
    // a bound: calls with tens of thousands of strings, each call of
    // another length, must not leave each length's blocks on its own list.
    let rules = Engine::cached().unwrap().load(None, CATALOG).unwrap();
    let call = |length: usize| {
        let item = format!("\"{}\"", "s".repeat(length));
        let items = vec![item; 20_000].join(",");
        format!(r#"{{"name":"lookup","arguments":{{"q":[{items}]}}}}"#)
    };
    // The longest first: every later call needs less memory than it did.
    let first = rules.evaluate(call(160).as_bytes(), &Context::default());
    assert_eq!(first.code.as_deref(), Some("BAD_REQUEST"), "{}", first.json);
    let after_one = rules.guest_memory_bytes();
    for length in (8..160).step_by(8).rev() {
        let decision = rules.evaluate(call(length).as_bytes(), &Context::default());
        assert_eq!(decision.json, first.json, "length {length}");
    }
    let after_all = rules.guest_memory_bytes();
    assert!(
        after_all <= after_one * 2,
        "20 calls of 20 000 strings each grew the guest memory from {after_one} to {after_all} bytes"
    );
}
