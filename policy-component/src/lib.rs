//! The component: the WIT world `toolgate:policy/toolgate` over policy-core.
//! Glue only: every rule lives in policy-core.

wit_bindgen::generate!({
    path: "../wit",
    world: "toolgate",
});

use exports::toolgate::policy::engine::{Finding, Guest, GuestRuleSet, Problem, RuleSet};

struct Component;

struct LoadedRules(policy_core::Rules);

fn problem(p: policy_core::Problem) -> Problem {
    Problem {
        code: p.full_code(),
        message: p.message,
        origin: p.origin.as_str().to_owned(),
        path: p.path,
        line: p.line,
        column: p.column,
    }
}

impl Guest for Component {
    type RuleSet = LoadedRules;

    fn contract_version() -> String {
        policy_core::CONTRACT_VERSION.to_owned()
    }
}

impl GuestRuleSet for LoadedRules {
    fn load(policy: Option<String>, catalog: String) -> Result<RuleSet, Problem> {
        policy_core::Rules::load(policy.as_deref(), &catalog)
            .map(|rules| RuleSet::new(LoadedRules(rules)))
            .map_err(problem)
    }

    fn evaluate(&self, call: Vec<u8>, context: String) -> String {
        self.0.evaluate_json(&call, &context).json
    }

    fn list_exposable(&self, context: String) -> Result<String, Problem> {
        let ctx = policy_core::Context::parse(&context).map_err(problem)?;
        Ok(self.0.list_exposable(&ctx))
    }

    fn turn(&self, state: String, input: String) -> Result<String, Problem> {
        self.0.turn_json(&state, &input).map_err(problem)
    }

    fn revision(&self) -> String {
        self.0.revision().to_owned()
    }

    fn findings(&self) -> Vec<Finding> {
        self.0
            .findings()
            .into_iter()
            .map(|f| Finding {
                severity: f.severity.as_str().to_owned(),
                problem: Problem {
                    code: f.code.to_owned(),
                    message: f.message,
                    origin: f.origin.as_str().to_owned(),
                    path: f.path,
                    line: f.line,
                    column: f.column,
                },
            })
            .collect()
    }

    fn strip_fields(&self, tool: String) -> Vec<String> {
        self.0.strip_fields(&tool).iter().map(|f| (*f).to_owned()).collect()
    }
}

export!(Component);

/// The component's only "random" source: fixed bytes. The engine's output
/// never depends on hash-map order (it sorts), and a component that reads no
/// randomness gives the same bytes in every runtime.
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
unsafe extern "Rust" fn __getrandom_v03_custom(dest: *mut u8, len: usize) -> Result<(), getrandom::Error> {
    // SAFETY: getrandom passes a writable buffer of `len` bytes.
    unsafe { core::ptr::write_bytes(dest, 0x5a, len) };
    Ok(())
}
