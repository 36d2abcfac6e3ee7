//! toolgate's Rust SDK: the policy component on wasmtime.
//!
//! Load once, evaluate many. An [`Engine`] compiles the component once (or
//! loads a precompiled artifact); each [`RuleSet`] is one instance holding one
//! loaded policy + catalog. Every call runs under the component's own compute
//! budget (the guest meter, the same in every runtime; a wall-clock deadline,
//! or wasmtime fuel, is only a backstop: [`Limits`]) and a memory cap; a trap or an exhausted limit is a deny
//! with its own code (never an allow), and the rule set re-instantiates itself
//! so the next call is served.
//!
//! ```no_run
//! let engine = toolgate::Engine::new()?;
//! let rules = engine.load(None, r#"{"tools":[{"name":"lookup","annotations":{"readOnlyHint":true}}]}"#)?;
//! // The model's own `confirmed: true` never counts here: no person was asked.
//! let context = toolgate::Context::default().to_json();
//! let outcome = rules.decide(br#"{"name":"lookup","arguments":{}}"#, &context, toolgate::Confirmation::None);
//! assert!(outcome.forward.is_some()); // the arguments to run the tool with
//! # Ok::<(), toolgate::Error>(())
//! ```

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "toolgate",
    });
}

mod prepare;
pub use prepare::{PREPARED_COMPONENT_FILE, PREPARED_CORE_MODULE_FILE, PREPARED_FROM, prepare, prepare_into};

use bindings::exports::toolgate::policy::engine::{
    Confirmation as WitConfirmation, OpenedSeal as WitOpenedSeal, Origin as WitOrigin, Problem as WitProblem,
    Severity as WitSeverity,
};
use serde::Serialize;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use wasmtime::component::{Component, Linker, ResourceAny};
use wasmtime::{ResourceLimiter, Store, Trap};

/// The component built from this workspace, embedded at build time.
pub static COMPONENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolgate_policy.wasm"));

/// The SHA-256 of [`COMPONENT`] (computed at build time): the origin a
/// prepared component names in its `toolgate:prepared-from` section, the
/// same bytes in every runtime's check.
pub static COMPONENT_SHA256: &[u8; 32] = include_bytes!(concat!(env!("OUT_DIR"), "/toolgate_policy.sha256"));

/// The WIT contract version this host speaks; checked against the component.
pub const CONTRACT_VERSION: &str = "0.2.0";

/// The host-built decisions for faults, byte for byte as every host builds
/// them: defined once in `component-build/src/faults.rs` (included here as
/// is, through the link `src/tables/faults.rs`; generated into the JavaScript and Python packages and into
/// `tests/vectors/host-faults.json`).
pub mod faults {
    include!("tables/faults.rs");
}

/// Errors of the SDK. Every variant has a stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The component implements another contract version than this host
    /// (`CONTRACT_VERSION_MISMATCH`, the same code in every SDK).
    ContractVersion { found: String },
    /// The policy or catalog was refused by the engine.
    Load(Problem),
    /// The context, turn state or turn input was refused by the engine.
    Invalid(Problem),
    /// The component could not be compiled or instantiated, or speaks
    /// another contract version.
    Component(String),
    /// The engine trapped or hit a limit; `code` is a fault code.
    Fault { code: &'static str },
    /// An input over the host's size limit.
    TooLarge,
}

impl Error {
    pub fn code(&self) -> String {
        match self {
            Error::Load(p) | Error::Invalid(p) => p.code.clone(),
            Error::Component(_) => "COMPONENT_INVALID".into(),
            Error::ContractVersion { .. } => "CONTRACT_VERSION_MISMATCH".into(),
            Error::Fault { code } => (*code).into(),
            Error::TooLarge => "INPUT_TOO_LARGE".into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Load(p) | Error::Invalid(p) => write!(f, "{p}"),
            Error::Component(why) => write!(f, "the policy component is unusable: {why}"),
            Error::ContractVersion { found } => write!(
                f,
                "the policy component implements contract {found}; this host speaks {CONTRACT_VERSION} (CONTRACT_VERSION_MISMATCH)"
            ),
            Error::Fault { code } => write!(f, "the policy engine failed ({code})"),
            Error::TooLarge => write!(f, "input larger than the host accepts (INPUT_TOO_LARGE)"),
        }
    }
}

impl std::error::Error for Error {}

/// A problem reported by the engine, with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub code: String,
    pub message: String,
    /// `policy`, `catalog`, `call`, `context`, `state` or `input`.
    pub origin: &'static str,
    pub path: String,
    pub line: u32,
    pub column: u32,
}

impl From<WitProblem> for Problem {
    fn from(p: WitProblem) -> Self {
        Problem {
            code: p.code,
            message: p.message,
            origin: match p.origin {
                WitOrigin::Policy => "policy",
                WitOrigin::Catalog => "catalog",
                WitOrigin::Call => "call",
                WitOrigin::Context => "context",
                WitOrigin::State => "state",
                WitOrigin::Input => "input",
            },
            path: p.path,
            line: p.line,
            column: p.column,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: ", self.line, self.column)?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// A lint from `findings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `error` or `warning`.
    pub severity: &'static str,
    pub problem: Problem,
}

/// Per-call context (SPEC §1). `scopes: None` means no scope check;
/// `allowed_tools: None` means every tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Context {
    pub surface: Surface,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    /// The caller can carry a human confirmation (the default).
    #[default]
    Confirming,
    /// No confirmation round-trip: only read-only tools that need none.
    Direct,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Confirming => "confirming",
            Surface::Direct => "direct",
        }
    }
}

impl Context {
    /// The context from command-line flags: `--scopes a,b` and `--allow t1,t2`
    /// are comma-separated lists (absent: no check; `""`: an empty list).
    pub fn from_flags(surface: Surface, scopes: Option<&str>, allowed_tools: Option<&str>) -> Context {
        let list = |s: &str| {
            s.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        };
        Context {
            surface,
            scopes: scopes.map(list),
            allowed_tools: allowed_tools.map(list),
        }
    }

    /// The context as the JSON the component reads.
    pub fn to_json(&self) -> String {
        // Unreachable (the fields are strings and lists), but never `{}`:
        // that is the widest context. A context the engine cannot read is
        // refused (`INVALID_CONTEXT`).
        serde_json::to_string(self).unwrap_or_else(|_| r#"{"surface":0}"#.into())
    }
}

/// A decision: its canonical bytes (SPEC §5), plus the parts a caller
/// branches on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub ok: bool,
    /// `None` when allowed.
    pub code: Option<String>,
    /// The exact decision bytes, identical in every runtime.
    pub json: String,
}

/// The first bytes of every decision the engine writes (SPEC §5 fixes the key
/// order): an allow, and a deny up to its code.
const ALLOW_HEAD: &str = "{\"ok\":true,\"error\":null,\"metadata\":{";
const DENY_HEAD: &str = "{\"ok\":false,\"error\":{\"code\":\"";

impl Decision {
    fn from_json(json: String) -> Decision {
        // Read from the decision's fixed head: parsing the whole decision
        // to find two fields was 6-10 % of a decision's time on this host.
        // Anything else is parsed in full, as before.
        if let Some((ok, code)) = Decision::read_head(&json) {
            return Decision { ok, code, json };
        }
        #[derive(serde::Deserialize)]
        struct Head {
            ok: bool,
            error: Option<ErrorHead>,
        }
        #[derive(serde::Deserialize)]
        struct ErrorHead {
            code: String,
        }
        match serde_json::from_str::<Head>(&json) {
            Ok(head) if head.ok == head.error.is_none() => Decision {
                ok: head.ok,
                code: head.error.map(|e| e.code),
                json,
            },
            // Unparseable output from the engine is itself a fault: deny.
            _ => Decision::fault("ENGINE_TRAP"),
        }
    }

    fn read_head(json: &str) -> Option<(bool, Option<String>)> {
        if !json.ends_with("}}") {
            return None;
        }
        if json.starts_with(ALLOW_HEAD) {
            return Some((true, None));
        }
        let (code, _) = json.strip_prefix(DENY_HEAD)?.split_once('"')?;
        let is_code = !code.is_empty()
            && code
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        is_code.then(|| (false, Some(code.to_owned())))
    }

    fn fault(code: &'static str) -> Decision {
        let json = match code {
            "ENGINE_LIMIT" => faults::ENGINE_LIMIT,
            "ENGINE_OUT_OF_MEMORY" => faults::ENGINE_OUT_OF_MEMORY,
            "INPUT_TOO_LARGE" => faults::INPUT_TOO_LARGE,
            "STORE_UNAVAILABLE" => faults::STORE_UNAVAILABLE,
            _ => faults::ENGINE_TRAP,
        };
        Decision {
            ok: false,
            code: Some(code.to_owned()),
            json: json.to_owned(),
        }
    }
}

/// How the host obtained the confirmation for a call (docs/spec.md §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Confirmation<'a> {
    /// Nothing but the call: the model's confirmation fields never count.
    None,
    /// The model's literal `confirmed: true` counts (the host opted in).
    Argument,
    /// The person was asked about this very call and accepted.
    Person,
    /// A seal this host opened with its key; the engine checks the payload
    /// against the call, the caller and the clock.
    Seal {
        payload: &'a str,
        caller: &'a str,
        now_ms: u64,
    },
    /// A seal this host could not accept (wrong key, altered, already used).
    Invalid,
}

impl Confirmation<'_> {
    /// The name audit lines use for this path.
    pub fn as_str(&self) -> &'static str {
        match self {
            Confirmation::None => "none",
            Confirmation::Argument => "argument",
            Confirmation::Person => "person",
            Confirmation::Seal { .. } => "seal",
            Confirmation::Invalid => "invalid",
        }
    }
}

/// What [`RuleSet::decide`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    /// Allowed: the arguments to forward (canonical JSON object text).
    pub forward: Option<String>,
    /// Denied about a visible tool: the MCP `CallToolResult` JSON to answer
    /// with. `None` when allowed and for `NOT_FOUND` (answer as the server
    /// answers an unknown tool).
    pub blocked_result: Option<String>,
    /// The call digest approvals and seals bind, when the call names a
    /// visible tool.
    pub digest: Option<String>,
}

impl Outcome {
    /// The outcome for a host fault (`ENGINE_TRAP`, `ENGINE_LIMIT`,
    /// `ENGINE_OUT_OF_MEMORY`, `INPUT_TOO_LARGE`, `STORE_UNAVAILABLE`; any
    /// other code is `ENGINE_TRAP`): the fixed decision and its blocked result.
    pub fn fault(code: &'static str) -> Outcome {
        let decision = Decision::fault(code);
        let blocked_result = Some(blocked_result(&decision.json));
        Outcome {
            decision,
            forward: None,
            blocked_result,
            digest: None,
        }
    }
}

/// The blocked result for a host-built decision, in the engine's shape
/// (`policy_core::pipeline::blocked_result` for a decision with no tool).
fn blocked_result(decision_json: &str) -> String {
    let text = serde_json::to_string(decision_json).unwrap_or_default();
    format!(r#"{{"content":[{{"type":"text","text":{text}}}],"structuredContent":{decision_json},"isError":true}}"#)
}

/// toolgate's limits, defined once for every host
/// (`component-build/src/limits.rs`, included here as is; the JavaScript and
/// Python constants are generated from it).
pub mod limits {
    include!("tables/limits.rs");
}

/// Per-call resource limits of this host.
///
/// The compute budget that decides `ENGINE_LIMIT` is not here: it is compiled
/// into the component (the guest meter, [`limits::CALL_BUDGET`] and the load
/// budgets), so Rust, Node and Python stop a runaway call at the same point.
/// What is here is the host's backstop behind that meter, for a meter that
/// failed: by default a wall-clock deadline (wasmtime epoch interruption,
/// checked at function entries and loop heads, nearly free), as Node's
/// `deadlineMs`. [`Limits::fuel`] swaps it for wasmtime fuel, a count of
/// instructions: deterministic, but it roughly doubles load time and adds
/// ~15 % to a decision (docs/performance.md). Either one, when it stops a
/// call, gives the same `ENGINE_LIMIT` decision as the meter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock backstop for one evaluate / decide / list / turn call.
    /// It fires between this and [`EPOCH_TICK`] later; zero stops every call.
    pub call_deadline: Duration,
    /// Wall-clock backstop for loading a rule set: at least this long ...
    pub load_deadline: Duration,
    /// ... and this much per MiB of policy and catalog text when that is
    /// longer (loading costs in proportion to the tools it compiles).
    pub load_deadline_per_input_mib: Duration,
    /// `Some`: wasmtime fuel is the backstop instead of the deadlines.
    pub fuel: Option<Fuel>,
    /// Linear memory cap per rule set, in bytes.
    pub max_memory_bytes: usize,
    /// Largest call, context, state or input accepted, in bytes.
    pub max_input_bytes: usize,
}

/// Wasmtime fuel (≈ wasm instructions) as the backstop ([`Limits::fuel`]).
/// The defaults are [`limits::FUEL_BACKSTOP_FACTOR`] times the guest budget,
/// so the meter always stops a call first; lowering them below the guest
/// budget (tests do) makes wasmtime stop calls earlier, with the same
/// `ENGINE_LIMIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fuel {
    /// Fuel for one evaluate / decide / list / turn call.
    pub call: u64,
    /// Fuel for loading a rule set: at least this much ...
    pub load: u64,
    /// ... and this much per byte of policy and catalog text when that is
    /// more (a 10 000-tool catalog must not hit a limit sized for 34).
    pub load_per_input_byte: u64,
}

impl Default for Fuel {
    fn default() -> Self {
        use limits::*;
        // The budgets are positive constants: `unsigned_abs` is the value.
        Fuel {
            call: CALL_BUDGET.unsigned_abs().saturating_mul(FUEL_BACKSTOP_FACTOR),
            load: LOAD_BUDGET.unsigned_abs().saturating_mul(FUEL_BACKSTOP_FACTOR),
            load_per_input_byte: LOAD_BUDGET_PER_INPUT_BYTE
                .unsigned_abs()
                .saturating_mul(FUEL_BACKSTOP_FACTOR),
        }
    }
}

impl Default for Limits {
    /// Deadlines far beyond what the guest meter lets run here (a runaway
    /// call stops after 0.5–4 s on a small machine, a maximal load well
    /// under a minute), so the meter decides and the deadline only catches a
    /// meter that failed.
    fn default() -> Self {
        use limits::*;
        Limits {
            call_deadline: Duration::from_secs(10),
            load_deadline: Duration::from_secs(60),
            load_deadline_per_input_mib: Duration::from_secs(30),
            fuel: None,
            max_memory_bytes: usize::try_from(MAX_MEMORY_BYTES).unwrap_or(usize::MAX),
            max_input_bytes: usize::try_from(MAX_INPUT_BYTES).unwrap_or(usize::MAX),
        }
    }
}

impl Limits {
    /// What bounds one call.
    fn call_backstop(&self) -> Backstop {
        match self.fuel {
            Some(fuel) => Backstop::Fuel(fuel.call),
            None => Backstop::Deadline(self.call_deadline),
        }
    }

    /// What bounds loading `input_bytes` of policy and catalog (and the
    /// instance's start-up around it).
    fn load_backstop(&self, input_bytes: u64) -> Backstop {
        match self.fuel {
            Some(fuel) => Backstop::Fuel(fuel.load.max(input_bytes.saturating_mul(fuel.load_per_input_byte))),
            None => {
                let per_mib = self
                    .load_deadline_per_input_mib
                    .mul_f64(input_bytes as f64 / f64::from(1u32 << 20));
                Backstop::Deadline(self.load_deadline.max(per_mib))
            }
        }
    }
}

/// The host's backstop for one call into the guest.
#[derive(Debug, Clone, Copy)]
enum Backstop {
    Deadline(Duration),
    Fuel(u64),
}

/// How often the deadline clock advances (one thread per process, started
/// with the first deadline engine).
pub const EPOCH_TICK: Duration = Duration::from_millis(50);

impl Backstop {
    fn arm(self, store: &mut Store<HostState>) -> Result<(), Error> {
        match self {
            Backstop::Deadline(deadline) => {
                // A deadline fires on the first tick at or after it: one tick
                // more than it spans, so it never fires early; zero is now.
                let ticks = if deadline.is_zero() {
                    0
                } else {
                    u64::try_from(deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos()))
                        .unwrap_or(u64::MAX / 2)
                        .saturating_add(1)
                };
                store.set_epoch_deadline(ticks);
                Ok(())
            }
            Backstop::Fuel(fuel) => store.set_fuel(fuel).map_err(component_error),
        }
    }
}

struct HostState {
    max_memory: usize,
    memory_exhausted: bool,
    /// Test hook ([`RuleSet::inject_trap`]): the next memory growth traps.
    inject_trap: bool,
    /// The guest's linear memory size, as last grown (for measurement).
    memory_bytes: usize,
    /// How many times the guest's memory grew (for measurement).
    memory_grows: usize,
}

impl HostState {
    /// A fresh instance's state under a memory cap of `max_memory` bytes.
    fn new(max_memory: usize) -> Self {
        HostState {
            max_memory,
            memory_exhausted: false,
            inject_trap: false,
            memory_bytes: 0,
            memory_grows: 0,
        }
    }
}

impl ResourceLimiter for HostState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if std::mem::take(&mut self.inject_trap) {
            return Err(wasmtime::Error::msg("trap injected by RuleSet::inject_trap"));
        }
        // The flag says whether the *last* growth was refused. The guest's
        // allocator also grows speculatively (policy-component's
        // grow_ahead.rs) and shrugs off a refusal; a real allocation that
        // is refused aborts right away, with no growth after it.
        self.memory_exhausted = desired > self.max_memory;
        if self.memory_exhausted {
            return Ok(false);
        }
        self.memory_bytes = self.memory_bytes.max(desired);
        self.memory_grows += 1;
        Ok(true)
    }
    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

struct EngineInner {
    engine: wasmtime::Engine,
    pre: bindings::ToolgatePre<HostState>,
    limits: Limits,
}

/// A compiled component, shared by every rule set loaded from it.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

fn component_error(e: impl fmt::Display) -> Error {
    Error::Component(e.to_string())
}

/// The wasmtime engine for a backstop kind: one per process and kind, so
/// every toolgate [`Engine`] shares its compiled-code registry and the one
/// deadline clock.
fn wasmtime_engine(fuel: bool) -> Result<wasmtime::Engine, Error> {
    static DEADLINE: OnceLock<Result<wasmtime::Engine, String>> = OnceLock::new();
    static FUEL: OnceLock<Result<wasmtime::Engine, String>> = OnceLock::new();
    let shared = if fuel { &FUEL } else { &DEADLINE };
    shared
        .get_or_init(|| {
            let engine = wasmtime::Engine::new(&engine_config(fuel)).map_err(|e| e.to_string())?;
            if !fuel {
                // No clock, no backstop: refuse to run rather than run unbounded.
                let clock = engine.weak();
                std::thread::Builder::new()
                    .name("toolgate-deadline".into())
                    .spawn(move || {
                        while let Some(engine) = clock.upgrade() {
                            engine.increment_epoch();
                            drop(engine);
                            std::thread::sleep(EPOCH_TICK);
                        }
                    })
                    .map_err(|e| format!("could not start the deadline clock: {e}"))?;
            }
            Ok(engine)
        })
        .clone()
        .map_err(Error::Component)
}

include!("engine_config.rs");

impl Engine {
    /// The embedded component with default limits, compiled now (seconds;
    /// [`Engine::cached`] compiles once per machine).
    pub fn new() -> Result<Engine, Error> {
        Engine::from_component_bytes(COMPONENT, Limits::default())
    }

    /// The embedded component ready to run, without compiling where that can
    /// be avoided. Native code is looked for, in order:
    /// 1. **shipped beside the running executable**: the file named
    ///    [`Engine::native_code_file_name`] in the executable's directory,
    ///    written there by `toolgate precompile` when the binary is packaged
    ///    (the npm platform package, the platform wheel, `./test`), so a
    ///    fresh machine's first start loads code instead of compiling;
    /// 2. **the machine's cache** (`TOOLGATE_CACHE_DIR`, default the
    ///    platform's cache folder + `toolgate`: `$XDG_CACHE_HOME` or
    ///    `~/.cache`, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on
    ///    Windows; `off` disables it);
    /// 3. otherwise the component is compiled (seconds on a small machine)
    ///    and the code kept in the cache for the next start.
    ///
    /// The name carries a digest of this build's component and of the
    /// wasmtime version and configuration, so code for another build is
    /// never picked up; code wasmtime refuses (another CPU, a damaged file)
    /// means compiling, never running without the engine. Both places are
    /// trusted like the binary itself: on Unix a shipped file is used only
    /// when the executable's owner owns it and not everyone may write it, and
    /// cached code only when this process's user owns it, no one else may
    /// write it, and it lies in a folder no one else can swap it in (a
    /// shared `TOOLGATE_CACHE_DIR` means compiling, never running another
    /// user's code). `TOOLGATE_CACHE_DIR` set to `off`, `0` or empty
    /// disables the cache.
    pub fn cached() -> Result<Engine, Error> {
        Engine::cached_with(Limits::default())
    }

    /// [`Engine::cached`] with explicit limits.
    pub fn cached_with(limits: Limits) -> Result<Engine, Error> {
        let engine = wasmtime_engine(limits.fuel.is_some())?;
        let name = code_file_name(&engine);
        if let Ok(exe) = std::env::current_exe()
            && let Some(shipped) = exe.parent().map(|dir| dir.join(&name))
            && shipped_with(&exe, &shipped)
            && let Ok(engine) = Engine::from_precompiled_file(&shipped, limits)
        {
            return Ok(engine);
        }
        let Some(dir) = cache_dir() else {
            return Engine::from_component_bytes(COMPONENT, limits);
        };
        let path = dir.join(&name);
        if trusted_native_code(&path)
            && let Ok(engine) = Engine::from_precompiled_file(&path, limits)
        {
            return Ok(engine);
        }
        let bytes = engine.precompile_component(COMPONENT).map_err(component_error)?;
        // Best effort: a cache that cannot be written only costs speed.
        let _ = write_cache(&path, &bytes);
        Engine::from_precompiled(&bytes, limits)
    }

    /// The file name under which [`Engine::cached`] looks for this build's
    /// native code (beside the executable, then in the cache) with
    /// default limits: `toolgate_policy-<contract>-<digest>.cwasm`.
    pub fn native_code_file_name() -> Result<String, Error> {
        Ok(code_file_name(&wasmtime_engine(false)?))
    }

    /// Compiles the embedded component for this machine and writes it to
    /// `dir` under [`Engine::native_code_file_name`], where
    /// [`Engine::cached`] finds it when `dir` is the executable's own
    /// directory. Returns the file written.
    pub fn precompile_into(dir: &std::path::Path) -> Result<std::path::PathBuf, Error> {
        let path = dir.join(Engine::native_code_file_name()?);
        Engine::precompile_to(&path)?;
        Ok(path)
    }

    /// [`Engine::precompile`] written to `path` whole or not at all (a new
    /// file renamed over it): a host that has the old file mapped
    /// ([`Engine::from_precompiled_file`]) keeps reading the old code.
    pub fn precompile_to(path: &std::path::Path) -> Result<(), Error> {
        let bytes = Engine::precompile()?;
        write_atomically(path, &bytes).map_err(|e| Error::Component(format!("cannot write {}: {e}", path.display())))
    }

    /// Compiles a component (seconds for this one on a small machine; see
    /// [`Engine::cached`]). Prefer [`Engine::precompile`] once
    /// and [`Engine::from_precompiled`] at start-up where that matters.
    pub fn from_component_bytes(bytes: &[u8], limits: Limits) -> Result<Engine, Error> {
        let engine = wasmtime_engine(limits.fuel.is_some())?;
        let component = Component::new(&engine, bytes).map_err(component_error)?;
        Engine::from_component(engine, component, limits)
    }

    /// The embedded component compiled for this machine and wasmtime
    /// version, to be stored and loaded with [`Engine::from_precompiled`]
    /// (for limits without [`Limits::fuel`]: fuel is compiled into the code).
    pub fn precompile() -> Result<Vec<u8>, Error> {
        wasmtime_engine(false)?
            .precompile_component(COMPONENT)
            .map_err(component_error)
    }

    /// Loads a precompiled component (~0.1 ms instead of compiling).
    ///
    /// Only pass bytes produced by [`Engine::precompile`] from a trusted
    /// location: precompiled code is native code and is not validated.
    #[allow(unsafe_code)]
    pub fn from_precompiled(bytes: &[u8], limits: Limits) -> Result<Engine, Error> {
        let engine = wasmtime_engine(limits.fuel.is_some())?;
        // SAFETY: wasmtime checks the artifact's header (engine configuration
        // and version) and refuses mismatches; the caller vouches for origin.
        let component = unsafe { Component::deserialize(&engine, bytes) }.map_err(component_error)?;
        Engine::from_component(engine, component, limits)
    }

    /// [`Engine::from_precompiled`] from a file, mapped rather than read
    /// (the code is about 12 MB): same trust rules.
    #[allow(unsafe_code)]
    pub fn from_precompiled_file(path: &std::path::Path, limits: Limits) -> Result<Engine, Error> {
        let engine = wasmtime_engine(limits.fuel.is_some())?;
        // SAFETY: as in `from_precompiled`; the file must not change while
        // mapped, which holds for files written once by rename.
        let component = unsafe { Component::deserialize_file(&engine, path) }.map_err(component_error)?;
        Engine::from_component(engine, component, limits)
    }

    fn from_component(engine: wasmtime::Engine, component: Component, limits: Limits) -> Result<Engine, Error> {
        // Another contract's component exports the engine interface under
        // another version: say so, rather than "unusable".
        const INTERFACE: &str = "toolgate:policy/engine@";
        let expected = format!("{INTERFACE}{CONTRACT_VERSION}");
        let exports: Vec<String> = component
            .component_type()
            .exports(&engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        if !exports.contains(&expected)
            && let Some(other) = exports.iter().find_map(|n| n.strip_prefix(INTERFACE))
        {
            return Err(Error::ContractVersion {
                found: other.to_owned(),
            });
        }
        // The component imports nothing: an empty linker is the whole host.
        let linker: Linker<HostState> = Linker::new(&engine);
        let instance_pre = linker.instantiate_pre(&component).map_err(component_error)?;
        let pre = bindings::ToolgatePre::new(instance_pre).map_err(component_error)?;
        let engine = Engine {
            inner: Arc::new(EngineInner { engine, pre, limits }),
        };
        // Check the contract version once, on a throwaway instance.
        let (mut store, instance) = engine.instantiate()?;
        engine.inner.limits.call_backstop().arm(&mut store)?;
        let version = instance
            .toolgate_policy_engine()
            .call_contract_version(&mut store)
            .map_err(component_error)?;
        if version != CONTRACT_VERSION {
            return Err(Error::ContractVersion { found: version });
        }
        Ok(engine)
    }

    fn instantiate(&self) -> Result<(Store<HostState>, bindings::Toolgate), Error> {
        let mut store = Store::new(&self.inner.engine, HostState::new(self.inner.limits.max_memory_bytes));
        store.limiter(|state| state as &mut dyn ResourceLimiter);
        // Instantiation runs the component's start code: bounded like a call.
        self.inner.limits.call_backstop().arm(&mut store)?;
        let instance = self.inner.pre.instantiate(&mut store).map_err(component_error)?;
        Ok((store, instance))
    }

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Loads a policy (`None`: legacy behaviour) and a catalog.
    pub fn load(&self, policy: Option<&str>, catalog: &str) -> Result<RuleSet, Error> {
        let live = self.load_live(policy, catalog)?;
        Ok(RuleSet {
            engine: self.clone(),
            policy: policy.map(str::to_owned),
            catalog: catalog.to_owned(),
            revision: live.revision.clone(),
            live: Mutex::new(Some(live)),
        })
    }

    fn load_live(&self, policy: Option<&str>, catalog: &str) -> Result<Live, Error> {
        let (mut store, instance) = self.instantiate()?;
        let limits = self.inner.limits;
        let input_bytes = (catalog.len() + policy.map_or(0, str::len)) as u64;
        limits.load_backstop(input_bytes).arm(&mut store)?;
        let rules = instance.toolgate_policy_engine().rule_set();
        let loaded = rules.call_load(&mut store, policy, catalog);
        let handle = match loaded {
            Ok(Ok(handle)) => handle,
            Ok(Err(problem)) => return Err(Error::Load(problem.into())),
            Err(trap) => {
                return Err(Error::Fault {
                    code: fault_code(&trap, &store),
                });
            }
        };
        limits.call_backstop().arm(&mut store)?;
        let revision = rules.call_revision(&mut store, handle).map_err(|trap| Error::Fault {
            code: fault_code(&trap, &store),
        })?;
        Ok(Live {
            store,
            instance,
            handle,
            revision,
        })
    }
}

/// The name of the native code of [`COMPONENT`] for `engine`: the
/// component's digest (computed once per process) and wasmtime's own
/// compatibility hash (its version and configuration).
fn code_file_name(engine: &wasmtime::Engine) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    component_digest().hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("toolgate_policy-{CONTRACT_VERSION}-{:016x}.cwasm", hasher.finish())
}

/// A digest of [`COMPONENT`], computed once per process: names its native
/// code and the origin of the components prepared from it.
fn component_digest() -> u64 {
    use std::hash::{Hash, Hasher};
    static COMPONENT_DIGEST: OnceLock<u64> = OnceLock::new();
    *COMPONENT_DIGEST.get_or_init(|| {
        let mut hasher = std::hash::DefaultHasher::new();
        COMPONENT.hash(&mut hasher);
        hasher.finish()
    })
}

/// Whether `code` beside the executable `exe` came with it: on Unix, a
/// regular file (not a link) owned by the executable's owner and not
/// writable by everyone, in a folder where no one else can swap it (not
/// writable by everyone, or sticky). Native code runs unchecked, so a binary
/// in a shared directory (a sticky `/tmp`, where anyone may add a file but
/// not replace another's) must not load code another user put beside it,
/// nor follow a link whose owner can point it elsewhere between this check
/// and the load; refused code means compiling.
#[cfg(unix)]
fn shipped_with(exe: &std::path::Path, code: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let dir = code.parent().unwrap_or(std::path::Path::new("."));
    match (
        std::fs::metadata(exe),
        std::fs::symlink_metadata(code),
        std::fs::metadata(dir),
    ) {
        (Ok(exe), Ok(code), Ok(dir)) => {
            // Group-writable code only beside a group-writable executable:
            // who may rewrite the one could rewrite the other anyway.
            let writable_by_others = if exe.mode() & 0o020 != 0 { 0o002 } else { 0o022 };
            code.file_type().is_file()
                && code.uid() == exe.uid()
                && code.mode() & writable_by_others == 0
                && no_one_else_swaps(&dir)
        }
        _ => false,
    }
}

#[cfg(not(unix))]
fn shipped_with(_exe: &std::path::Path, code: &std::path::Path) -> bool {
    code.is_file()
}

/// Whether native code at `code` (cached, or in a prepared directory) may
/// run: a regular file (not a link); on Unix also owned by this process's
/// (effective) user or by root, not writable by group or others, in a
/// folder only they can swap it in ([`only_this_user_swaps`]). The code
/// runs unchecked, so on a host
/// where the cache path is shared (`TOOLGATE_CACHE_DIR=/tmp/…`,
/// `XDG_CACHE_HOME` on a shared volume, `sudo -E` keeping another user's
/// `HOME`), a file someone else put or could edit there is compiled over
/// instead, never loaded. The Python package keeps the same rule.
#[cfg(unix)]
fn trusted_native_code(code: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let dir = code.parent().unwrap_or(std::path::Path::new("."));
    match (std::fs::symlink_metadata(code), std::fs::metadata(dir)) {
        (Ok(code), Ok(dir)) => {
            code.file_type().is_file()
                && (code.uid() == effective_uid() || code.uid() == 0)
                && code.mode() & 0o022 == 0
                && only_this_user_swaps(&dir)
        }
        _ => false,
    }
}

#[cfg(not(unix))]
fn trusted_native_code(code: &std::path::Path) -> bool {
    std::fs::symlink_metadata(code).is_ok_and(|m| m.file_type().is_file())
}

/// A folder where no one but the executable's owner can replace a file
/// (for code beside the executable, whose owner could replace it anyway):
/// not writable by everyone, or sticky (each may then replace only their own).
#[cfg(unix)]
fn no_one_else_swaps(dir: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    dir.mode() & 0o002 == 0 || dir.mode() & 0o1000 != 0
}

/// A folder where no one but this user or root can rename or replace a
/// file: owned by one of them, and writable by neither group nor others or
/// sticky (`/tmp`: the others may then replace only their own files). The
/// owner of a folder, or a member of a group that may write it, could rename
/// another build's code to this build's name (review 11: a cache folder of
/// another user's `HOME` loaded a stale engine's code).
#[cfg(unix)]
fn only_this_user_swaps(dir: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let owner_trusted = dir.uid() == effective_uid() || dir.uid() == 0;
    owner_trusted && (dir.mode() & 0o022 == 0 || dir.mode() & 0o1000 != 0)
}

/// The user this process acts as: the owner of the files it writes.
#[cfg(unix)]
#[allow(unsafe_code)]
fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing, cannot fail, and touches no memory.
    unsafe { libc::geteuid() }
}

/// Puts native code in the cache: a folder this creates is this user's
/// alone (0700), a folder others could swap files in is not written (its
/// code would never be loaded), and the file is written private (0600) under
/// a new name and renamed into place.
fn write_cache(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    #[cfg(unix)]
    if !only_this_user_swaps(&std::fs::metadata(dir)?) {
        return Err(std::io::Error::other(
            "the cache folder belongs to another user or others may write it",
        ));
    }
    write_new(path, bytes, 0o600)
}

/// Writes a file whole or not at all (a temporary file, then a rename), so a
/// reader never maps half of it; 0644 whatever the umask: native code that
/// its group may write is never loaded (`umask 002` made every prepared or
/// precompiled file compile again at each start, review 11).
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    write_new(path, bytes, 0o644)
}

/// Temporary files written by this process: unique per process and per
/// write, so two threads that both missed the cache never share one.
static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The temporary file is created new (`O_EXCL`: never through a link or
/// over a file someone put under its name) with `mode` (Unix; the umask may
/// only take bits away).
fn write_new(path: &std::path::Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{write}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(&tmp)?;
    file.write_all(bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

fn cache_dir() -> Option<std::path::PathBuf> {
    // As the Python package reads it: `off`, `0` and empty disable it.
    match std::env::var_os("TOOLGATE_CACHE_DIR") {
        Some(v) if v == "off" || v == "0" || v.is_empty() => None,
        Some(v) => Some(v.into()),
        None => platform_cache_base().map(|base| base.join("toolgate")),
    }
}

/// The platform's per-user cache folder: `$XDG_CACHE_HOME` or `~/.cache` on
/// Linux and other Unix, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on
/// Windows.
fn platform_cache_base() -> Option<std::path::PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        var("HOME").map(|h| h.join("Library").join("Caches"))
    } else {
        var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))
    }
}

fn fault_code(error: &wasmtime::Error, store: &Store<HostState>) -> &'static str {
    // A budget's own trap names itself whatever the memory did before it: a
    // refused speculative growth earlier in the call must not relabel it.
    match error.downcast_ref::<Trap>() {
        // The guest meter's trap (component-build/src/meter.rs): Rust code
        // never divides by zero (it checks and panics), so this is the
        // budget running out, as in every other runtime.
        Some(Trap::IntegerDivisionByZero) => "ENGINE_LIMIT",
        Some(Trap::OutOfFuel) | Some(Trap::Interrupt) => "ENGINE_LIMIT",
        _ if store.data().memory_exhausted => "ENGINE_OUT_OF_MEMORY",
        _ => "ENGINE_TRAP",
    }
}

struct Live {
    store: Store<HostState>,
    instance: bindings::Toolgate,
    handle: ResourceAny,
    revision: String,
}

/// One loaded policy + catalog in its own instance. Calls are serialized on
/// the instance; load one rule set per thread for parallelism.
pub struct RuleSet {
    engine: Engine,
    policy: Option<String>,
    catalog: String,
    revision: String,
    /// `None` after a fault that could not be recovered from.
    live: Mutex<Option<Live>>,
}

impl fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleSet")
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl RuleSet {
    /// The `policy_revision` every decision from this rule set carries.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The guest's linear memory, in bytes, as grown by loading and calls so
    /// far: what this rule set costs in memory (0 after an unrecovered fault).
    pub fn guest_memory_bytes(&self) -> usize {
        let guard = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.as_ref().map_or(0, |live| live.store.data().memory_bytes)
    }

    /// How many times the guest's memory has grown, by loading and calls so
    /// far (0 after an unrecovered fault). The guest grows ahead of need, so
    /// this stays in the tens for any load: a measure, and what a test of
    /// that growth reads.
    pub fn guest_memory_grows(&self) -> usize {
        let guard = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.as_ref().map_or(0, |live| live.store.data().memory_grows)
    }

    /// Runs `f` on the live instance under `backstop`. A trap
    /// poisons the instance; it is replaced before the next call.
    fn with_instance<T>(
        &self,
        backstop: Backstop,
        f: impl FnOnce(&mut Store<HostState>, &bindings::Toolgate, ResourceAny) -> wasmtime::Result<T>,
    ) -> Result<T, Error> {
        let mut guard = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            *guard = self.engine.load_live(self.policy.as_deref(), &self.catalog).ok();
        }
        let Some(live) = guard.as_mut() else {
            return Err(Error::Fault { code: "ENGINE_TRAP" });
        };
        live.store.data_mut().memory_exhausted = false;
        backstop.arm(&mut live.store)?;
        match f(&mut live.store, &live.instance, live.handle) {
            Ok(value) => Ok(value),
            Err(trap) => {
                let code = fault_code(&trap, &live.store);
                *guard = None;
                Err(Error::Fault { code })
            }
        }
    }

    /// Decides one call (the JSON bytes of `{"name", "arguments"}`). Never
    /// fails: every failure, including the engine's own, is a deny.
    ///
    /// This is the contract's `evaluate` (docs/spec.md §4): the call's own
    /// `confirmed: true` (or `confirmation: true`) counts as the person's
    /// confirmation. In front of a model, which can write that field itself,
    /// gate with [`RuleSet::decide`] and the confirmation the host obtained
    /// ([`Confirmation::None`] where it asked no one).
    pub fn evaluate(&self, call: &[u8], context: &Context) -> Decision {
        self.evaluate_raw(call, &context.to_json())
    }

    /// [`RuleSet::evaluate`] with the context as JSON text.
    pub fn evaluate_raw(&self, call: &[u8], context: &str) -> Decision {
        self.evaluate_within(call, context, self.engine.inner.limits.call_backstop())
    }

    /// [`RuleSet::evaluate_raw`] under a tighter deadline than
    /// [`Limits::call_deadline`] (callers with a latency budget; fault tests).
    /// With [`Limits::fuel`] set, the engine's fuel bounds the call instead.
    pub fn evaluate_with_deadline(&self, call: &[u8], context: &str, deadline: Duration) -> Decision {
        let backstop = match self.engine.inner.limits.fuel {
            Some(fuel) => Backstop::Fuel(fuel.call),
            None => Backstop::Deadline(deadline),
        };
        self.evaluate_within(call, context, backstop)
    }

    /// [`RuleSet::evaluate_raw`] under an explicit fuel budget. Fuel is
    /// compiled into the code: on an engine without [`Limits::fuel`] nothing
    /// runs and the decision is `ENGINE_LIMIT` (refused, never unbounded).
    pub fn evaluate_with_fuel(&self, call: &[u8], context: &str, fuel: u64) -> Decision {
        if self.engine.inner.limits.fuel.is_none() {
            return Decision::fault("ENGINE_LIMIT");
        }
        self.evaluate_within(call, context, Backstop::Fuel(fuel))
    }

    fn evaluate_within(&self, call: &[u8], context: &str, backstop: Backstop) -> Decision {
        let max = self.engine.inner.limits.max_input_bytes;
        if call.len() > max || context.len() > max {
            return Decision::fault("INPUT_TOO_LARGE");
        }
        let result = self.with_instance(backstop, |store, instance, handle| {
            instance
                .toolgate_policy_engine()
                .rule_set()
                .call_evaluate(store, handle, call, context)
        });
        match result {
            Ok(json) => Decision::from_json(json),
            Err(Error::Fault { code }) => Decision::fault(code),
            Err(_) => Decision::fault("ENGINE_TRAP"),
        }
    }

    /// The `tools/list` result this context may see.
    pub fn list_exposable(&self, context: &Context) -> Result<String, Error> {
        self.list_exposable_raw(&context.to_json())
    }

    pub fn list_exposable_raw(&self, context: &str) -> Result<String, Error> {
        if context.len() > self.engine.inner.limits.max_input_bytes {
            return Err(Error::TooLarge);
        }
        self.with_instance(self.engine.inner.limits.call_backstop(), |store, instance, handle| {
            instance
                .toolgate_policy_engine()
                .rule_set()
                .call_list_exposable(store, handle, context)
        })?
        .map_err(|p| Error::Invalid(p.into()))
    }

    /// One turn of the transactional runtime (SPEC §6): JSON state and input
    /// in, the next state out.
    pub fn turn(&self, state: &str, input: &str) -> Result<String, Error> {
        let max = self.engine.inner.limits.max_input_bytes;
        if state.len() > max || input.len() > max {
            return Err(Error::TooLarge);
        }
        self.with_instance(self.engine.inner.limits.call_backstop(), |store, instance, handle| {
            instance
                .toolgate_policy_engine()
                .rule_set()
                .call_turn(store, handle, state, input)
        })?
        .map_err(|p| Error::Invalid(p.into()))
    }

    /// The call pipeline (docs/spec.md §8): decides `call` given how the
    /// confirmation was obtained and returns the call exactly as it is to be
    /// forwarded, or the result to answer with. Never fails: a fault is a
    /// deny with its code and the same blocked result every host gives.
    pub fn decide(&self, call: &[u8], context: &str, confirmation: Confirmation<'_>) -> Outcome {
        let max = self.engine.inner.limits.max_input_bytes;
        if call.len() > max || context.len() > max {
            return Outcome::fault("INPUT_TOO_LARGE");
        }
        let wit = match confirmation {
            Confirmation::None => WitConfirmation::None,
            Confirmation::Argument => WitConfirmation::Argument,
            Confirmation::Person => WitConfirmation::Person,
            Confirmation::Invalid => WitConfirmation::Invalid,
            Confirmation::Seal {
                payload,
                caller,
                now_ms,
            } => WitConfirmation::Seal(WitOpenedSeal {
                payload: payload.to_owned(),
                caller: caller.to_owned(),
                now_ms,
            }),
        };
        let result = self.with_instance(self.engine.inner.limits.call_backstop(), |store, instance, handle| {
            instance
                .toolgate_policy_engine()
                .rule_set()
                .call_decide(store, handle, call, context, &wit)
        });
        match result {
            Ok(outcome) => {
                let decision = Decision::from_json(outcome.decision);
                // An allow must come with the call to forward; anything else
                // from the engine is a fault, and faults deny.
                if decision.ok != outcome.forward.is_some() || decision.code.as_deref() == Some("ENGINE_TRAP") {
                    return Outcome::fault("ENGINE_TRAP");
                }
                Outcome {
                    decision,
                    forward: outcome.forward,
                    blocked_result: outcome.blocked_result,
                    digest: outcome.digest,
                }
            }
            Err(Error::Fault { code }) => Outcome::fault(code),
            Err(_) => Outcome::fault("ENGINE_TRAP"),
        }
    }

    /// The payload to seal for a pending confirmation of `call`
    /// (docs/spec.md §8): the host encrypts it with its key.
    pub fn seal_payload(&self, call: &[u8], caller: &str, id: &str, expires_ms: u64) -> Result<String, Error> {
        let max = self.engine.inner.limits.max_input_bytes;
        if call.len() > max || caller.len() > max {
            return Err(Error::TooLarge);
        }
        self.with_instance(self.engine.inner.limits.call_backstop(), |store, instance, handle| {
            instance
                .toolgate_policy_engine()
                .rule_set()
                .call_seal_payload(store, handle, call, caller, id, expires_ms)
        })?
        .map_err(|p| Error::Invalid(p.into()))
    }

    /// Lints on the loaded rules.
    pub fn findings(&self) -> Result<Vec<Finding>, Error> {
        let found = self.with_instance(self.engine.inner.limits.call_backstop(), |store, instance, handle| {
            instance
                .toolgate_policy_engine()
                .rule_set()
                .call_findings(store, handle)
        })?;
        Ok(found
            .into_iter()
            .map(|f| Finding {
                severity: match f.severity {
                    WitSeverity::Error => "error",
                    WitSeverity::Warning => "warning",
                },
                problem: f.problem.into(),
            })
            .collect())
    }

    /// Test hook for fault tests, not API: the next call that grows the
    /// guest's memory traps inside the component (wasmtime raises the
    /// growth's error as a trap at `memory.grow`). That call fails with
    /// `ENGINE_TRAP` and the instance is replaced, as for any trap.
    #[doc(hidden)]
    pub fn inject_trap(&self) {
        let mut guard = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            *guard = self.engine.load_live(self.policy.as_deref(), &self.catalog).ok();
        }
        if let Some(live) = guard.as_mut() {
            live.store.data_mut().inject_trap = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Code beside the executable is taken only as a regular file of the
    /// executable's owner, not writable by others, in a folder no one else
    /// can swap it in: never through a link.
    #[cfg(unix)]
    #[test]
    fn shipped_code_is_a_regular_file_and_never_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("toolgate-shipped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = dir.join("toolgate");
        let code = dir.join("code.cwasm");
        std::fs::write(&exe, b"exe").unwrap();
        std::fs::write(&code, b"code").unwrap();
        assert!(super::shipped_with(&exe, &code));
        let link = dir.join("link.cwasm");
        std::os::unix::fs::symlink(&code, &link).unwrap();
        assert!(!super::shipped_with(&exe, &link));
        std::fs::set_permissions(&code, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(!super::shipped_with(&exe, &code));
        // Group-writable code only beside a group-writable executable.
        std::fs::set_permissions(&code, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(!super::shipped_with(&exe, &code));
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(super::shipped_with(&exe, &code));
        std::fs::set_permissions(&code, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!super::shipped_with(&exe, &code));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(super::shipped_with(&exe, &code));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The limiter's view after a growth of `desired` bytes under a 1 MiB cap.
    fn grown(state: &mut super::HostState, desired: usize) {
        use wasmtime::ResourceLimiter;
        let _ = state.memory_growing(0, desired, None);
    }

    /// A refused step ahead (the guest shrugs it off) followed by a budget
    /// trap is the budget, not memory; a refusal right before a plain trap
    /// (the allocator's abort) is memory; a growth granted after a refusal
    /// clears it.
    #[test]
    fn a_fault_is_out_of_memory_only_when_the_last_growth_was_refused() {
        let engine = wasmtime::Engine::default();
        let mut store = wasmtime::Store::new(&engine, super::HostState::new(1 << 20));
        let code = |store: &wasmtime::Store<super::HostState>, trap: wasmtime::Trap| {
            super::fault_code(&wasmtime::Error::new(trap), store)
        };
        grown(store.data_mut(), 2 << 20);
        assert_eq!(code(&store, wasmtime::Trap::OutOfFuel), "ENGINE_LIMIT");
        assert_eq!(code(&store, wasmtime::Trap::Interrupt), "ENGINE_LIMIT");
        assert_eq!(code(&store, wasmtime::Trap::IntegerDivisionByZero), "ENGINE_LIMIT");
        assert_eq!(
            code(&store, wasmtime::Trap::UnreachableCodeReached),
            "ENGINE_OUT_OF_MEMORY"
        );
        grown(store.data_mut(), 512 << 10);
        assert_eq!(code(&store, wasmtime::Trap::UnreachableCodeReached), "ENGINE_TRAP");
    }

    /// The full parse `Decision::from_json` falls back to.
    fn parsed(json: &str) -> Option<(bool, Option<String>)> {
        let value: serde_json::Value = serde_json::from_str(json).ok()?;
        let ok = value.get("ok")?.as_bool()?;
        let code = value
            .get("error")?
            .get("code")
            .and_then(|c| c.as_str())
            .map(str::to_owned);
        Some((ok, code))
    }

    #[test]
    fn the_head_read_agrees_with_the_full_parse_on_every_vector_decision() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
        let mut decisions = vec![
            r#"{"ok":false,"error":{"code":"ENGINE_LIMIT","message":"m"},"metadata":{}}"#.to_owned(),
            r#"{"ok":false,"error":{"code":"not a code","message":"m"},"metadata":{}}"#.to_owned(),
            r#"{"ok":true,"error":null,"metadata":{"tool":"t"}"#.to_owned(),
        ];
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let Ok(vector) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue;
            };
            let cases = vector
                .get("cases")
                .and_then(|c| c.as_array())
                .cloned()
                .unwrap_or_default();
            decisions.extend(
                cases
                    .iter()
                    .filter_map(|c| c.get("expect")?.as_str().map(str::to_owned)),
            );
        }
        // (A crate unpacked from crates.io has no vectors beside it.)
        if dir.is_dir() {
            let read = decisions.iter().filter(|d| Decision::read_head(d).is_some()).count();
            assert!(
                read > 100,
                "the head read served {read} of {} decisions",
                decisions.len()
            );
        }
        for decision in &decisions {
            if let Some(head) = Decision::read_head(decision) {
                assert_eq!(Some(head), parsed(decision), "{decision}");
            }
        }
    }

    /// Cached native code runs only when this user wrote it where no one
    /// else could change it; the cache is written so that it stays so.
    #[cfg(unix)]
    #[test]
    fn cached_code_runs_only_when_this_user_owns_it_alone() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let set_mode = |path: &std::path::Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let root = std::env::temp_dir().join(format!("toolgate-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("toolgate");
        let code = dir.join("code.cwasm");
        write_cache(&code, b"native code").unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&code).unwrap().mode() & 0o777, 0o600);
        assert!(trusted_native_code(&code));

        // Writable by the group or by everyone: someone else could have
        // changed it.
        for mode in [0o620, 0o602, 0o666] {
            set_mode(&code, mode);
            assert!(!trusted_native_code(&code), "{mode:o}");
        }
        set_mode(&code, 0o600);

        // A link, even to this user's own file.
        let link = dir.join("link.cwasm");
        std::os::unix::fs::symlink(&code, &link).unwrap();
        assert!(!trusted_native_code(&link));

        // A folder everyone may write (not sticky): neither loaded nor written.
        set_mode(&dir, 0o777);
        assert!(!trusted_native_code(&code));
        assert!(write_cache(&dir.join("other.cwasm"), b"x").is_err());
        set_mode(&dir, 0o1777);
        assert!(trusted_native_code(&code));
        set_mode(&dir, 0o700);

        // A folder its group may write: a member could rename another
        // build's code to this one's name.
        set_mode(&dir, 0o770);
        assert!(!trusted_native_code(&code));
        assert!(write_cache(&dir.join("other.cwasm"), b"x").is_err());
        set_mode(&dir, 0o700);

        // Another user's file, or this user's file in another user's folder
        // (as root, the CI's user, the test can make them).
        if effective_uid() == 0 {
            std::os::unix::fs::chown(&code, Some(65534), None).unwrap();
            assert!(!trusted_native_code(&code));
            std::os::unix::fs::chown(&code, Some(0), None).unwrap();
            assert!(trusted_native_code(&code));
            std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
            assert!(!trusted_native_code(&code));
            assert!(write_cache(&dir.join("other.cwasm"), b"x").is_err());
            set_mode(&dir, 0o1777);
            assert!(!trusted_native_code(&code), "sticky, but another user's folder");
            set_mode(&dir, 0o700);
            std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
            assert!(trusted_native_code(&code));
        }

        // Written whole with 0644 whatever the umask (a group-writable file
        // would never be loaded).
        let written = dir.join("written.cwasm");
        write_atomically(&written, b"code").unwrap();
        assert_eq!(std::fs::metadata(&written).unwrap().mode() & 0o022, 0);

        // A link planted at the temporary file's name is not written through.
        let victim = root.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let target = dir.join("planted.cwasm");
        let next = WRITES.load(std::sync::atomic::Ordering::Relaxed);
        for n in next..next + 8 {
            let tmp = dir.join(format!(".planted.cwasm.{}.{n}.tmp", std::process::id()));
            std::os::unix::fs::symlink(&victim, tmp).unwrap();
        }
        assert!(write_cache(&target, b"attacker-chosen path").is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!target.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
