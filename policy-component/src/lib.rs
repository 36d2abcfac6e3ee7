//! The component: the WIT world `toolgate:policy/toolgate` over policy-core.
//! Glue only: every rule lives in policy-core.

wit_bindgen::generate!({
    path: "../wit",
    world: "toolgate",
});

use std::cell::RefCell;
use std::rc::Rc;

use exports::toolgate::policy::engine::{
    Confirmation, Finding, Guest, GuestRuleSet, Origin, Outcome, Problem, RuleSet, Severity,
};

#[cfg(target_arch = "wasm32")]
mod grow_ahead;
#[cfg(target_arch = "wasm32")]
mod pack;
#[cfg(target_arch = "wasm32")]
use grow_ahead::{scrub_free_memory, zeroing_freed};
#[cfg(target_arch = "wasm32")]
use pack::{available as can_pack, packing};

/// Natively (the crate's own tests) the system allocator is used as it is.
#[cfg(not(target_arch = "wasm32"))]
fn zeroing_freed<T>(f: impl FnOnce() -> T) -> T {
    f()
}
#[cfg(not(target_arch = "wasm32"))]
fn scrub_free_memory() {}
#[cfg(not(target_arch = "wasm32"))]
fn can_pack() -> bool {
    false
}
#[cfg(not(target_arch = "wasm32"))]
fn packing<T, E>(load: impl Fn() -> Result<T, E>) -> Result<T, E> {
    load()
}

struct Component;

/// A loaded rule set and the last context it was called with (parsed once per
/// distinct context text: see `policy_core::context::ContextMemo`). A
/// `RefCell`: the component is single-threaded and never re-entered.
struct LoadedRules {
    rules: Rc<policy_core::Rules>,
    contexts: RefCell<policy_core::context::ContextMemo>,
}

/// The texts of this instance's last successful load and what they loaded.
///
/// Loading is a pure function of the two texts and rules are immutable, so
/// a load of the same texts may return the same rules: byte for byte the
/// decisions a fresh load gives. This is what makes a *prepared* component
/// (`toolgate prepare`, docs/performance.md) ready at once: the load ran
/// before the guest's memory was snapshotted, and the first `load` of the
/// snapshot's instance with the same texts finds it here. Any other text is
/// loaded as ever and replaces it (at most one rule set is kept that the
/// host may have dropped).
///
/// Loading the same texts again after the host dropped every handle to
/// them is how `toolgate prepare` asks for the rules *packed* (`pack`): laid
/// out on as few pages as they need, for a snapshot every instance copies.
/// The guest then loads them twice more and keeps the packed rules. Once
/// per instance; the hosts of this repository never load twice in one
/// instance, and a host that does gets the same decisions, the first time a
/// little later. A snapshot meant to stay as loaded is taken with its
/// handle still held (the guest's side of it is in the snapshot), so a
/// host's first load there takes the rules as they are.
struct LastLoad {
    policy: Option<String>,
    catalog: String,
    rules: Rc<policy_core::Rules>,
    packed: bool,
}

thread_local! {
    static LAST_LOAD: RefCell<Option<LastLoad>> = const { RefCell::new(None) };
}

/// Whether two optional texts are equal (`policy_core::text::same_text`,
/// eight bytes a step: a prepared engine's first load compares its whole
/// catalog).
fn same_text(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => policy_core::text::same_text(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

fn load_remembered(policy: Option<String>, catalog: String) -> Result<Rc<policy_core::Rules>, policy_core::Problem> {
    let remembered = LAST_LOAD.with_borrow(|last| {
        last.as_ref()
            .filter(|last| {
                same_text(last.policy.as_deref(), policy.as_deref()) && same_text(Some(&last.catalog), Some(&catalog))
            })
            .map(|last| (Rc::clone(&last.rules), last.packed))
    });
    let pack = match remembered {
        // Held by `LAST_LOAD` and here only: every handle was dropped.
        Some((rules, false)) if Rc::strong_count(&rules) == 2 && can_pack() => true,
        Some((rules, _)) => return Ok(rules),
        None => false,
    };
    let load = || policy_core::Rules::load(policy.as_deref(), &catalog);
    // Whatever this drops (the rules being replaced or packed) is zeroed
    // too: a snapshot carries no freed bytes.
    let loaded = zeroing_freed(|| {
        if pack {
            LAST_LOAD.set(None);
            packing(load)
        } else {
            load()
        }
    });
    let rules = Rc::new(loaded?);
    zeroing_freed(|| {
        LAST_LOAD.set(Some(LastLoad {
            policy,
            catalog,
            rules: Rc::clone(&rules),
            packed: pack,
        }))
    });
    if pack {
        scrub_free_memory();
    }
    Ok(rules)
}

impl LoadedRules {
    fn with_context<T>(
        &self,
        text: &str,
        f: impl FnOnce(Result<&policy_core::Context, &policy_core::Problem>) -> T,
    ) -> T {
        // Borrowed in place, not moved out and back (two copies of the memo
        // per call). The component is never re-entered, so the borrow is
        // always free; were it not, a fresh parse gives the same answer.
        match self.contexts.try_borrow_mut() {
            Ok(mut memo) => f(memo.parse(text)),
            Err(_) => f(policy_core::Context::parse(text).as_ref()),
        }
    }
}

fn origin(o: policy_core::Origin) -> Origin {
    match o {
        policy_core::Origin::Policy => Origin::Policy,
        policy_core::Origin::Catalog => Origin::Catalog,
        policy_core::Origin::Call => Origin::Call,
        policy_core::Origin::Context => Origin::Context,
        policy_core::Origin::State => Origin::State,
        policy_core::Origin::Input => Origin::Input,
    }
}

fn problem(p: policy_core::Problem) -> Problem {
    Problem {
        code: p.full_code(),
        message: p.message,
        origin: origin(p.origin),
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
        load_remembered(policy, catalog)
            .map(|rules| {
                RuleSet::new(LoadedRules {
                    rules,
                    contexts: Default::default(),
                })
            })
            .map_err(problem)
    }

    fn evaluate(&self, call: Vec<u8>, context: String) -> String {
        self.with_context(&context, |ctx| self.rules.evaluate_json_in(&call, ctx).json)
    }

    fn list_exposable(&self, context: String) -> Result<String, Problem> {
        self.with_context(&context, |ctx| match ctx {
            Ok(ctx) => Ok(self.rules.list_exposable(ctx)),
            Err(p) => Err(problem(p.clone())),
        })
    }

    fn turn(&self, state: String, input: String) -> Result<String, Problem> {
        self.rules.turn_json(&state, &input).map_err(problem)
    }

    fn revision(&self) -> String {
        self.rules.revision().to_owned()
    }

    fn findings(&self) -> Vec<Finding> {
        self.rules
            .findings()
            .into_iter()
            .map(|f| Finding {
                severity: match f.severity {
                    policy_core::Severity::Error => Severity::Error,
                    policy_core::Severity::Warning => Severity::Warning,
                },
                problem: Problem {
                    code: f.code.to_owned(),
                    message: f.message,
                    origin: origin(f.origin),
                    path: f.path,
                    line: f.line,
                    column: f.column,
                },
            })
            .collect()
    }

    fn decide(&self, call: Vec<u8>, context: String, confirmation: Confirmation) -> Outcome {
        use policy_core::Confirmation as C;
        let confirmation = match &confirmation {
            Confirmation::None => C::None,
            Confirmation::Argument => C::Argument,
            Confirmation::Person => C::Person,
            Confirmation::Invalid => C::Invalid,
            Confirmation::Seal(seal) => C::Seal(policy_core::OpenedSeal {
                payload: &seal.payload,
                caller: &seal.caller,
                now_ms: seal.now_ms,
            }),
        };
        let outcome = self.with_context(&context, |ctx| self.rules.decide_in(&call, ctx, confirmation));
        Outcome {
            decision: outcome.decision.json,
            forward: outcome.forward,
            blocked_result: outcome.blocked_result,
            digest: outcome.digest,
        }
    }

    fn seal_payload(&self, call: Vec<u8>, caller: String, id: String, expires_ms: u64) -> Result<String, Problem> {
        self.rules
            .seal_payload(&call, &caller, &id, expires_ms)
            .map_err(problem)
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
