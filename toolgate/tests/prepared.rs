//! Prepared components (`toolgate::prepare`): the prepared texts load without
//! loading again, every other text loads as ever, and the decisions are the
//! shipped component's, byte for byte.

// Test code: panicking on a broken expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::sync::OnceLock;
use toolgate::{COMPONENT, Context, Engine, Error, Fuel, Limits};

const POLICY: &str = "version: 1\ntool_policies:\n  send:\n    require_confirmation: true\n";

const CATALOG: &str = r#"{"tools":[
  {"name":"lookup","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"q":{"type":"string","pattern":"^[a-z]+$"}}}},
  {"name":"send","annotations":{"destructiveHint":true},"inputSchema":{"type":"object","properties":{"to":{"type":"string","format":"email"},"confirmed":{"type":"boolean"}},"required":["to"]}}
]}"#;

const OTHER_CATALOG: &str = r#"{"tools":[
  {"name":"lookup","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"q":{"type":"integer"}}}}
]}"#;

const CALLS: &[&str] = &[
    r#"{"name":"lookup","arguments":{"q":"abc"}}"#,
    r#"{"name":"lookup","arguments":{"q":"ABC"}}"#,
    r#"{"name":"lookup","arguments":{"q":7}}"#,
    r#"{"name":"send","arguments":{"to":"a@example.com"}}"#,
    r#"{"name":"send","arguments":{"to":"a@example.com","confirmed":true}}"#,
    r#"{"name":"send","arguments":{}}"#,
    r#"{"name":"nope","arguments":{}}"#,
    r#"{"name":"lookup""#,
];

/// Prepared once for the whole file (preparing compiles the component).
fn prepared() -> &'static [u8] {
    static PREPARED: OnceLock<Vec<u8>> = OnceLock::new();
    PREPARED.get_or_init(|| toolgate::prepare(Some(POLICY), CATALOG).unwrap())
}

fn prepared_engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::from_prepared(prepared(), Limits::default()).unwrap())
}

/// Everything a host reads from a rule set, for byte comparison.
fn answers(rules: &toolgate::RuleSet) -> Vec<String> {
    let mut out = vec![rules.revision().to_owned()];
    for context in [
        Context::default(),
        Context::from_flags(toolgate::Surface::Direct, None, None),
    ] {
        out.push(rules.list_exposable(&context).unwrap());
        for call in CALLS {
            out.push(rules.evaluate(call.as_bytes(), &context).json);
        }
    }
    out.extend(rules.findings().unwrap().iter().map(|f| format!("{f:?}")));
    out
}

#[test]
fn the_prepared_texts_decide_as_the_shipped_component_does() {
    let shipped = Engine::cached().unwrap();
    let expected = answers(&shipped.load(Some(POLICY), CATALOG).unwrap());
    assert_eq!(
        answers(&prepared_engine().load(Some(POLICY), CATALOG).unwrap()),
        expected
    );
    // Twice from one engine: each rule set is its own instance of the snapshot.
    assert_eq!(
        answers(&prepared_engine().load(Some(POLICY), CATALOG).unwrap()),
        expected
    );
}

#[test]
fn other_texts_load_as_ever_in_a_prepared_component() {
    let shipped = Engine::cached().unwrap();
    for (policy, catalog) in [(None, CATALOG), (Some(POLICY), OTHER_CATALOG), (None, OTHER_CATALOG)] {
        assert_eq!(
            answers(&prepared_engine().load(policy, catalog).unwrap()),
            answers(&shipped.load(policy, catalog).unwrap()),
            "{policy:?} {catalog}"
        );
    }
    // A text the engine refuses is refused the same way.
    let bad = "version: 1\ntool_policies:\n  send:\n    require_confirmation: \"true\"\n";
    assert_eq!(
        prepared_engine().load(Some(bad), CATALOG).unwrap_err(),
        shipped.load(Some(bad), CATALOG).unwrap_err()
    );
}

/// A text as long as the prepared one and different in one byte is loaded
/// as ever: the guest's comparison (`same_text`, eight bytes a step) must
/// not take it for the prepared text, or it would hand out the prepared
/// rules (another revision, another pattern).
#[test]
fn a_text_of_the_prepared_length_differing_in_one_byte_loads_as_ever() {
    let changed = CATALOG.replacen("^[a-z]+$", "^[a-y]+$", 1);
    assert_eq!(changed.len(), CATALOG.len());
    assert_ne!(changed, CATALOG);
    let shipped = Engine::cached().unwrap();
    let from_prepared = answers(&prepared_engine().load(Some(POLICY), &changed).unwrap());
    assert_eq!(from_prepared, answers(&shipped.load(Some(POLICY), &changed).unwrap()));
    assert_ne!(from_prepared, answers(&shipped.load(Some(POLICY), CATALOG).unwrap()));
}

/// The prepared texts cost no load: under a fuel budget far below what
/// loading them takes, the prepared component is ready and the shipped one
/// stops with ENGINE_LIMIT. (Fuel counts instructions: no clock involved.)
#[test]
fn the_prepared_texts_are_not_loaded_again() {
    let limits = Limits {
        fuel: Some(Fuel {
            load: 3_000_000,
            load_per_input_byte: 0,
            ..Fuel::default()
        }),
        ..Limits::default()
    };
    let shipped = Engine::from_component_bytes(COMPONENT, limits).unwrap();
    let err = shipped.load(Some(POLICY), CATALOG).unwrap_err();
    assert_eq!(err.code(), "ENGINE_LIMIT", "{err}");
    let prepared = Engine::from_prepared(prepared(), limits).unwrap();
    let rules = prepared.load(Some(POLICY), CATALOG).unwrap();
    let expected = Engine::cached().unwrap().load(Some(POLICY), CATALOG).unwrap();
    for call in CALLS {
        assert_eq!(
            rules.evaluate(call.as_bytes(), &Context::default()).json,
            expected.evaluate(call.as_bytes(), &Context::default()).json
        );
    }
    // Other texts are really loaded, so they hit the same budget.
    let err = prepared.load(None, CATALOG).unwrap_err();
    assert_eq!(err.code(), "ENGINE_LIMIT", "{err}");
}

#[test]
fn a_prepared_rule_set_recovers_from_a_fault_with_the_same_answers() {
    let rules = prepared_engine().load(Some(POLICY), CATALOG).unwrap();
    let before = answers(&rules);
    rules.inject_trap();
    // A call large enough to grow the guest's memory, where the trap fires.
    let call = format!(r#"{{"name":"lookup","arguments":{{"q":"{}"}}}}"#, "a".repeat(3 << 20));
    let decision = rules.evaluate(call.as_bytes(), &Context::default());
    assert_eq!(decision.code.as_deref(), Some("ENGINE_TRAP"), "{}", decision.json);
    assert_eq!(answers(&rules), before);
}

#[test]
fn only_components_this_build_prepared_are_accepted() {
    let err = Engine::from_prepared(COMPONENT, Limits::default()).unwrap_err();
    assert!(
        matches!(&err, Error::Component(why) if why.contains("not a component")),
        "{err}"
    );
    // The origin is the section's last 32 bytes: another build's SHA-256.
    let mut other = prepared().to_vec();
    let last = other.len() - 1;
    other[last] ^= 0xff;
    let err = Engine::from_prepared(&other, Limits::default()).unwrap_err();
    assert!(
        matches!(&err, Error::Component(why) if why.contains("another build")),
        "{err}"
    );
    assert!(Engine::precompile_prepared(&other).is_err());
}

/// The `toolgate:prepared-from` sections of a component or core module.
fn origins(wasm: &[u8]) -> Vec<Vec<u8>> {
    wasmparser::Parser::new(0)
        .parse_all(wasm)
        .filter_map(|payload| match payload {
            Ok(wasmparser::Payload::CustomSection(s)) if s.name() == toolgate::PREPARED_FROM => Some(s.data().to_vec()),
            _ => None,
        })
        .collect()
}

#[test]
fn both_prepared_files_name_the_shipped_components_sha256() {
    use sha2::{Digest, Sha256};
    let sha256 = Sha256::digest(COMPONENT).to_vec();
    assert_eq!(&sha256[..], &toolgate::COMPONENT_SHA256[..]);
    let dir = std::env::temp_dir().join(format!("toolgate-prepared-origin-{}", std::process::id()));
    let written = toolgate::prepare_into(&dir, Some(POLICY), CATALOG, false).unwrap();
    let component = std::fs::read(dir.join(toolgate::PREPARED_COMPONENT_FILE)).unwrap();
    let core = std::fs::read(dir.join(toolgate::PREPARED_CORE_MODULE_FILE)).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(written.len(), 2);
    // The component's section is its own (the core module inside carries
    // none); the core module written beside it carries one as well.
    assert_eq!(origins(&component), vec![sha256.clone()]);
    assert_eq!(origins(&core), vec![sha256]);
    assert!(origins(COMPONENT).is_empty());
}

#[test]
fn preparing_rules_the_engine_refuses_fails_like_loading_them() {
    let bad = "version: 1\nunknown_key: 1\n";
    let shipped = Engine::cached().unwrap();
    let Error::Load(expected) = shipped.load(Some(bad), CATALOG).unwrap_err() else {
        panic!("not a load error")
    };
    match toolgate::prepare(Some(bad), CATALOG) {
        Err(Error::Load(problem)) => assert_eq!(problem, expected),
        other => panic!("{other:?}"),
    }
}

#[test]
fn precompiled_prepared_code_loads_the_prepared_texts() {
    let code = Engine::precompile_prepared(prepared()).unwrap();
    let engine = Engine::from_precompiled(&code, Limits::default()).unwrap();
    let shipped = Engine::cached().unwrap();
    assert_eq!(
        answers(&engine.load(Some(POLICY), CATALOG).unwrap()),
        answers(&shipped.load(Some(POLICY), CATALOG).unwrap())
    );
}

/// What a load frees is zeroed before it is freed, so the snapshot carries
/// only what the rules keep (#17: a prepared engine's every instance copies
/// it). The catalog's text is kept (to recognize the same texts again), so
/// its marker is there once; the load's parsed copy of it is not.
#[test]
fn what_the_load_freed_is_not_in_the_snapshot() {
    const MARKER: &[u8] = b"MARKER-freed-after-load-0123456789";
    let catalog = r#"{"tools":[{"name":"lookup","annotations":{"readOnlyHint":true},
      "_meta":{"vendor":"MARKER-freed-after-load-0123456789"},
      "inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}]}"#;
    let prepared = toolgate::prepare(None, catalog).unwrap();
    let copies = prepared.windows(MARKER.len()).filter(|w| *w == MARKER).count();
    assert_eq!(copies, 1);
}

/// The first core module of a component, as `toolgate prepare` writes it
/// for the JavaScript package.
fn core_module(component: &[u8]) -> &[u8] {
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        if let Ok(wasmparser::Payload::ModuleSection { unchecked_range, .. }) = payload {
            return &component[unchecked_range];
        }
    }
    panic!("no core module")
}

/// A module's active data segments: (offset, bytes).
fn data_segments(module: &[u8]) -> Vec<(usize, &[u8])> {
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        if let Ok(wasmparser::Payload::DataSection(reader)) = payload {
            for data in reader {
                let data = data.unwrap();
                if let wasmparser::DataKind::Active { offset_expr, .. } = data.kind {
                    let offset = match offset_expr.get_operators_reader().read().unwrap() {
                        wasmparser::Operator::I32Const { value } => value as u32 as usize,
                        other => panic!("offset {other:?}"),
                    };
                    out.push((offset, data.data));
                }
            }
        }
    }
    out
}

/// Above `from`: the number of non-zero bytes on each 4 KiB page that holds
/// one, by page.
fn non_zero_bytes_by_page_above(module: &[u8], from: usize) -> std::collections::BTreeMap<usize, usize> {
    let mut pages = std::collections::BTreeMap::new();
    for (offset, data) in data_segments(module) {
        for (i, byte) in data.iter().enumerate() {
            if *byte != 0 && offset + i >= from {
                *pages.entry((offset + i) / 4096).or_insert(0) += 1;
            }
        }
    }
    pages
}

/// The core module `prepare_into` writes for the JavaScript package holds
/// the rules packed (`policy-component/src/pack.rs`): what the snapshot
/// holds above the shipped component's own data lies on about as many pages
/// as its bytes fill, not spread over the memory the load used.
/// Unpacked, these 300 tools touched 1 078 pages, 6.3 times what their
/// bytes fill; packed, 303 pages, 2.4 times (the arena holds the rules'
/// zero bytes too, and the catalog's text is kept beside them).
///
/// Nor are a few blocks left alone on a page: what a load builds once and
/// keeps for the instance's life (jsonschema's parsed meta-schemas) is built
/// by a warm-up load on an empty heap (`prepare.rs`). Left to the real load,
/// it filled the holes of the load's transient blocks: 54 pages here held
/// 17 to 256 non-zero bytes (the prepared seed, 112 of its 284), against 11
/// now. Pages with a few bytes only are the allocator's headers of free
/// memory (about 20), which no public call clears.
#[test]
fn a_prepared_rule_set_lies_on_few_pages() {
    let tools: Vec<String> = (0..300)
        .map(|i| {
            format!(
                r#"{{"name":"tool_{i}","annotations":{{"readOnlyHint":true}},"description":"tool number {i}",
                   "inputSchema":{{"type":"object","properties":{{"q":{{"type":"string","pattern":"^[a-z]+$","maxLength":{}}},
                   "n":{{"type":"integer","minimum":0}},"when":{{"type":"string","format":"date"}}}},"required":["q"]}}}}"#,
                10 + i
            )
        })
        .collect();
    let catalog = format!(r#"{{"tools":[{}]}}"#, tools.join(","));
    let dir = std::env::temp_dir().join(format!("toolgate-prepared-pages-{}", std::process::id()));
    toolgate::prepare_into(&dir, None, &catalog, false).unwrap();
    let core = std::fs::read(dir.join(toolgate::PREPARED_CORE_MODULE_FILE)).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let shipped_data_end = data_segments(core_module(COMPONENT))
        .iter()
        .map(|(offset, data)| offset + data.len())
        .max()
        .unwrap();
    let by_page = non_zero_bytes_by_page_above(&core, shipped_data_end);
    let pages = by_page.len();
    let bytes: usize = by_page.values().sum();
    let filled = bytes.div_ceil(4096);
    let nearly_empty = by_page.values().filter(|&&n| (17..=256).contains(&n)).count();
    println!("{pages} pages touched for {bytes} non-zero bytes ({filled} pages' worth), {nearly_empty} nearly empty");
    assert!(pages <= filled * 3, "{pages} pages for {filled} pages' worth of bytes");
    assert!(nearly_empty <= 20, "{nearly_empty} pages hold only a few blocks");
}
