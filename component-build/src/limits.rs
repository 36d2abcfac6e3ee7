// toolgate's resource limits, defined once for every host.
//
// This file is `component-build`'s `limits` module, and toolgate includes it
// as is (`include!`): plain `//` comments only (an included file cannot
// carry inner doc comments), no `use`, only constants.
//
// The budgets are the guest meter's (SPEC-silent decision, docs/decisions.md
// "Compute budget"): component-build compiles them into the component, so every
// runtime (wasmtime in Rust and Python, V8 in Node) counts the same units and
// stops at the same point; hosts need no constant for them. The rest are host
// limits: the JavaScript and Python constants are generated from this file
// (`cargo run --release --locked --bin component-build -- --write-limits`) and
// a test checks they are fresh.

/// Guest budget, in meter units, for one call into the component other than
/// `load`: `evaluate`, `list-exposable`, `turn`, `revision`, `strip-fields`,
/// `findings`, `contract-version`, and the canonical ABI's own
/// `cabi_realloc` / post-return calls. A unit is one wasm instruction of a
/// region charged on entry with every branch counted (component-build's
/// `meter` module), an upper bound of the work: parser-heavy code runs
/// 10⁷–10⁸ units per ms on this 2-core machine. The heaviest calls the
/// tests make (3.6 MB: 900 000 scopes in a context, 1.8 million numbers in a
/// turn) use 2.2·10¹⁰; a 4 MiB string argument 8·10⁹. A runaway call stops
/// after 0.5–4 s (tests/vectors/budget-exponential-anyof.json: ~4 s in Node,
/// where schema validation runs ~1.3·10⁷ units per ms).
pub const CALL_BUDGET: i64 = 50_000_000_000;

/// Guest budget for `load` (parsing and compiling every schema): at least
/// this much (the plans fixture, 0.4 s of parsing and compiling, uses
/// 4·10⁸) ...
pub const LOAD_BUDGET: i64 = 100_000_000_000;

/// ... or this much per byte of policy and catalog text, whichever is more:
/// loading costs in proportion to the tools it compiles, so a 10 000-tool
/// catalog loads under the defaults while a hang still runs out.
pub const LOAD_BUDGET_PER_INPUT_BYTE: i64 = 100_000;

/// Hosts with wasmtime fuel (Rust, Python) give a call this many times the
/// guest budget in fuel, as a backstop only: a call's fuel never exceeds its
/// meter units (the meter charges every instruction it lets run, its own
/// included; in practice fuel is 10–100 times less), so the meter always stops
/// a call first and every runtime gives the same decision. The factor covers
/// the canonical ABI's extra entries in one host call (`cabi_realloc`, the
/// post-return running on what fuel is left).
pub const FUEL_BACKSTOP_FACTOR: u64 = 2;

/// Cap on the component's linear memory per rule set, in bytes.
pub const MAX_MEMORY_BYTES: u64 = 1 << 30;

/// Calls and contexts over this many bytes never reach the component
/// (`INPUT_TOO_LARGE`); the same number is in tests/vectors/host-faults.json.
pub const MAX_INPUT_BYTES: u64 = 4 << 20;

// Checked when either crate compiles: positive budgets, load at least a call,
// a backstop at least twice the budget, and fuel for the largest load that
// stays far from overflowing.
const _: () = assert!(CALL_BUDGET > 0 && LOAD_BUDGET >= CALL_BUDGET && LOAD_BUDGET_PER_INPUT_BYTE > 0);
const _: () = assert!(FUEL_BACKSTOP_FACTOR >= 2);
const _: () =
    assert!((LOAD_BUDGET_PER_INPUT_BYTE as u64) * MAX_INPUT_BYTES * 4 * FUEL_BACKSTOP_FACTOR < u64::MAX / 1024);
