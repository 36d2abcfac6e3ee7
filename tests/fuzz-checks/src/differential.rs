//! `differential`: the same input through policy-core natively and through
//! the component under wasmtime (toolgate); any difference in decision bytes,
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

    // The call pipeline: every confirmation path gives the same decision,
    // the same arguments to forward, blocked result and digest.
    for (native_confirmation, wasm_confirmation) in [
        (policy_core::Confirmation::None, toolgate::Confirmation::None),
        (policy_core::Confirmation::Argument, toolgate::Confirmation::Argument),
        (policy_core::Confirmation::Person, toolgate::Confirmation::Person),
        (policy_core::Confirmation::Invalid, toolgate::Confirmation::Invalid),
    ] {
        let n = native.decide(call, context, native_confirmation);
        let w = wasm.decide(call, context, wasm_confirmation);
        assert_eq!(
            (&n.decision.json, &n.forward, &n.blocked_result, &n.digest),
            (&w.decision.json, &w.forward, &w.blocked_result, &w.digest),
            "decide ({}) differs (native, component) for call {:?} context {context:?}",
            native_confirmation.as_str(),
            String::from_utf8_lossy(call)
        );
    }
}
