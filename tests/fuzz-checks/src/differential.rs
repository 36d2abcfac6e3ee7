//! `differential`: the same input through policy-core natively and through
//! the component under wasmtime (host-rs); any difference in decision bytes,
//! `tools/list` bytes, `strip_fields`, revision or load problem fails.

use crate::fixtures::{fixtures, native_rules};
use crate::input::Input;
use policy_core::{Context, Problem, Rules};
use std::sync::OnceLock;
use toolgate::{Engine, Error, RuleSet};

#[derive(Debug)]
struct Component {
    engine: Engine,
    /// The fixed rule sets, loaded once, in [`fixtures`] order.
    rule_sets: Vec<RuleSet>,
}

fn component() -> &'static Component {
    static COMPONENT: OnceLock<Component> = OnceLock::new();
    COMPONENT.get_or_init(|| {
        let engine = Engine::cached().unwrap_or_else(|e| panic!("the component: {e}"));
        let rule_sets = fixtures()
            .iter()
            .map(|f| {
                engine
                    .load(f.policy.as_deref(), &f.catalog)
                    .unwrap_or_else(|e| panic!("{} in the component: {e}", f.name))
            })
            .collect();
        Component { engine, rule_sets }
    })
}

/// A problem as both sides report it: full code, message, path, line, column.
type Reported = (String, String, String, u32, u32);

fn native_problem(p: &Problem) -> Reported {
    (p.full_code(), p.message.clone(), p.path.clone(), p.line, p.column)
}

fn component_problem(e: &Error) -> Reported {
    match e {
        Error::Load(p) | Error::Invalid(p) => (p.code.clone(), p.message.clone(), p.path.clone(), p.line, p.column),
        other => panic!(
            "the component failed where native did not fail that way: {other} ({})",
            other.code()
        ),
    }
}

pub fn check_differential(data: &[u8]) {
    let Some(input) = Input::split(data, fixtures().len()) else {
        return;
    };
    let component = component();
    match &input.policy {
        None => compare(
            &native_rules()[input.fixture],
            &component.rule_sets[input.fixture],
            input.call,
            &input.context,
        ),
        Some(policy) => {
            let catalog = &fixtures()[input.fixture].catalog;
            let native = Rules::load(Some(policy), catalog);
            let wasm = component.engine.load(Some(policy), catalog);
            match (native, wasm) {
                (Ok(native), Ok(wasm)) => compare(&native, &wasm, input.call, &input.context),
                (Err(n), Err(w)) => assert_eq!(
                    native_problem(&n),
                    component_problem(&w),
                    "load problems differ (native, component)"
                ),
                (Ok(_), Err(w)) => panic!("loads natively, the component refuses it: {w} ({})", w.code()),
                (Err(n), Ok(_)) => panic!("the component loads it, native refuses it: {n}"),
            }
        }
    }
}

fn compare(native: &Rules, wasm: &RuleSet, call: &[u8], context: &str) {
    assert_eq!(native.revision(), wasm.revision(), "revisions differ");
    let n = native.evaluate_json(call, context);
    let w = wasm.evaluate_raw(call, context);
    assert_eq!(
        n.json,
        w.json,
        "decisions differ (native, component) for call {:?} context {context:?}",
        String::from_utf8_lossy(call)
    );
    assert_eq!((n.ok, n.code.map(|c| c.as_str().to_owned())), (w.ok, w.code));

    let n_list = Context::parse(context)
        .map(|ctx| native.list_exposable(&ctx))
        .map_err(|p| native_problem(&p));
    let w_list = wasm.list_exposable_raw(context).map_err(|e| component_problem(&e));
    assert_eq!(
        n_list, w_list,
        "lists differ (native, component) for context {context:?}"
    );

    // The name the call gives, if any: both sides strip the same fields.
    if let Ok(call) = policy_core::evaluate::parse_call(call) {
        let n_strip: Vec<String> = native.strip_fields(&call.name).iter().map(|&s| s.to_owned()).collect();
        let w_strip = wasm
            .strip_fields(&call.name)
            .unwrap_or_else(|e| panic!("strip_fields: {e}"));
        assert_eq!(n_strip, w_strip, "strip_fields differ for {:?}", call.name);
    }
}
