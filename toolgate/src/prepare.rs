//! Prepared components: the embedded component with one rule set already
//! loaded in its memory (Wizer's pre-initialization), so the first load of
//! those texts in any runtime is ready at once (#17, docs/performance.md).
//!
//! Nothing here decides: the guest remembers the texts of its last load and
//! what they loaded (`policy-component`, `LastLoad`); preparing runs that load
//! and snapshots the guest's memory (for the JavaScript package's core
//! module, after loading the same texts again so that the guest packs the
//! rules onto few pages: `RulesLayout`). A host then loads the prepared
//! component like the shipped one and calls `load` with the same texts. The
//! same texts return the rules loaded at preparation, byte for byte the
//! decisions of a fresh load; any other text is loaded as ever. A prepared
//! component is therefore only ever faster, never different.

use super::{
    COMPONENT, COMPONENT_SHA256, Engine, Error, HostState, Limits, bindings, component_digest, component_error,
    wasmtime_engine,
};
use std::future::Future;
use std::task::{Context as TaskContext, Poll, Waker};
use wasmtime::component::{Component, Instance, Lift, Linker, WasmList};
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wizer::{ComponentInstanceState, Wizer};

/// The custom section naming the component a prepared one was made from:
/// its SHA-256 ([`COMPONENT_SHA256`]), on the prepared component and on the
/// core module [`prepare_into`] writes, so the Node and Python packages
/// refuse one made from another build as this SDK does.
pub const PREPARED_FROM: &str = "toolgate:prepared-from";

/// The embedded component with `policy` and `catalog` loaded into its
/// memory: a portable component (any runtime loads it as it loads
/// [`COMPONENT`]) whose first load of exactly these texts costs an
/// instantiation instead of a load. Load problems are returned as
/// [`Error::Load`], exactly as [`Engine::load`] returns them.
///
/// Preparing compiles the component (seconds on a small machine) and
/// loads once; do it at build or deploy time. Ship the result with the
/// binary that prepared it: [`Engine::from_prepared`] refuses a component
/// prepared from another build's engine.
pub fn prepare(policy: Option<&str>, catalog: &str) -> Result<Vec<u8>, Error> {
    snapshot(policy, catalog, RulesLayout::AsLoaded)
}

/// How the rules lie in a snapshot's memory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RulesLayout {
    /// As a load leaves them. wasmtime maps such a snapshot copy-on-write
    /// (its data covers at least half the memory it spans, or the memory is
    /// under 16 MiB): instantiating costs microseconds whatever its pages.
    AsLoaded,
    /// Packed onto as few pages as they need (`policy-component`, `pack.rs`):
    /// V8 copies a snapshot into every instance and pays by the page (at
    /// 1 000 tools, 4 351 pages touched instead of 1 516: 10.8 against 4.5 ms).
    /// Packing loads twice more, and the memory ends up larger than the data
    /// warrants for wasmtime's mapping (37 MB for 4.8 MB at 1 000 tools:
    /// 3.5 ms to copy on each instantiation instead of 0.02 ms), so only the
    /// core module for the JavaScript package is packed.
    Packed,
}

fn snapshot(policy: Option<&str>, catalog: &str, layout: RulesLayout) -> Result<Vec<u8>, Error> {
    let wizer = Wizer::new();
    let (context, instrumented) = wizer.instrument_component(COMPONENT).map_err(component_error)?;
    let engine = wasmtime_engine(false)?;
    let component = Component::new(&engine, &instrumented).map_err(component_error)?;
    let limits = Limits::default();
    let mut store = Store::new(&engine, HostState::new(limits.max_memory_bytes));
    store.limiter(|state| state as &mut dyn ResourceLimiter);
    let input_bytes = (catalog.len() + policy.map_or(0, str::len)) as u64;
    limits.load_backstop(input_bytes).arm(&mut store)?;
    // The instrumented component imports nothing more than the shipped one.
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &component)
        .map_err(component_error)?;
    let engine_api = bindings::Toolgate::new(&mut store, &instance).map_err(component_error)?;
    let rules = engine_api.toolgate_policy_engine().rule_set();
    // What every load builds on first use and keeps for the instance's life
    // (jsonschema's parsed meta-schemas, some 45 KB of small blocks) is built
    // here, by a load of a two-tool catalog, while the heap is still empty:
    // left to the real load, those blocks filled the holes its transient
    // ones left and lay on about 160 pages of 4 KiB each a few percent full,
    // a third of every page an instance of a prepared seed copies in (#17,
    // docs/performance.md). Where blocks lie never changes a decision.
    limits.load_backstop(WARM_UP_CATALOG.len() as u64).arm(&mut store)?;
    match rules.call_load(&mut store, None, WARM_UP_CATALOG) {
        Ok(Ok(handle)) => handle.resource_drop(&mut store).map_err(component_error)?,
        // The engine's own catalog, not the user's: refusing it is a fault
        // of this build, not a load problem to report against their texts.
        Ok(Err(problem)) => {
            return Err(Error::Component(format!(
                "the warm-up catalog was refused: {}",
                crate::Problem::from(problem)
            )));
        }
        Err(trap) => return Err(component_error(trap)),
    }
    // The guest keeps the rules of its last load. Loading the same texts a
    // second time, once every handle was dropped, asks it to pack them
    // (`RulesLayout::Packed`), so a snapshot left as loaded keeps its handle:
    // the host's handle table is not part of a snapshot, but the guest's
    // side of it is, and a host's first load of these texts then finds them
    // still held and takes them as they are.
    let passes = if layout == RulesLayout::Packed { 2 } else { 1 };
    for pass in 0..passes {
        // The packing call loads twice, and records the first.
        let budget = if pass == 0 {
            input_bytes
        } else {
            input_bytes.saturating_mul(4)
        };
        limits.load_backstop(budget).arm(&mut store)?;
        let handle = match rules.call_load(&mut store, policy, catalog) {
            Ok(Ok(handle)) => handle,
            Ok(Err(problem)) => return Err(Error::Load(problem.into())),
            Err(trap) => return Err(component_error(trap)),
        };
        if layout == RulesLayout::Packed {
            handle.resource_drop(&mut store).map_err(component_error)?;
        }
    }
    limits.call_backstop().arm(&mut store)?;
    // Wizer reads each memory whole through one call: allow up to the
    // memory cap (wasmtime's default, 128 MiB, is less than a large load's).
    store.set_hostcall_fuel(limits.max_memory_bytes);
    let mut state = GuestState {
        store: &mut store,
        instance,
        failure: None,
    };
    let snapshot = finish_now(wizer.snapshot_component(&context, &mut state))?;
    if let Some(failure) = state.failure {
        return Err(Error::Component(format!("reading the guest's state: {failure}")));
    }
    let mut prepared = snapshot.map_err(component_error)?;
    append_custom_section(&mut prepared, PREPARED_FROM, COMPONENT_SHA256);
    Ok(prepared)
}

/// A catalog whose load compiles two schemas through the shared schema
/// document (`policy-core`, `schemas.rs`): the path on which a load builds
/// what it keeps for good (see [`snapshot`]).
const WARM_UP_CATALOG: &str = r#"{"tools":[
  {"name":"warm_up_a","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}},
  {"name":"warm_up_b","inputSchema":{"type":"object","properties":{"count":{"type":"integer"}}}}
]}"#;

/// The prepared component's file in a directory [`prepare_into`] wrote.
pub const PREPARED_COMPONENT_FILE: &str = "toolgate_policy.wasm";
/// Its core module, for the JavaScript package (`Toolgate.load({ module })`
/// in Node and edge workers), which instantiates the core module itself.
pub const PREPARED_CORE_MODULE_FILE: &str = "toolgate_policy.core.wasm";

/// [`prepare`], written into `dir` (created if missing): the prepared
/// component ([`PREPARED_COMPONENT_FILE`]), its core module
/// ([`PREPARED_CORE_MODULE_FILE`]) and, with `native`, its code for this
/// machine under the name [`Engine::from_prepared_dir`] looks for. Returns
/// the files written.
pub fn prepare_into(
    dir: &std::path::Path,
    policy: Option<&str>,
    catalog: &str,
    native: bool,
) -> Result<Vec<std::path::PathBuf>, Error> {
    let prepared = prepare(policy, catalog)?;
    let mut core = core_module(&snapshot(policy, catalog, RulesLayout::Packed)?)?;
    append_custom_section(&mut core, PREPARED_FROM, COMPONENT_SHA256);
    let mut files = vec![
        (dir.join(PREPARED_COMPONENT_FILE), prepared.clone()),
        (dir.join(PREPARED_CORE_MODULE_FILE), core),
    ];
    let code_path = dir.join(prepared_code_file_name(&wasmtime_engine(false)?));
    if native {
        files.push((code_path, Engine::precompile_prepared(&prepared)?));
    } else {
        // An earlier `--native` run's code would be taken over the component
        // written now (the same decisions, but not ready at once).
        match std::fs::remove_file(&code_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Component(format!("cannot remove {}: {e}", code_path.display())));
            }
            _ => {}
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::Component(format!("cannot create {}: {e}", dir.display())))?;
    let mut written = Vec::new();
    for (path, bytes) in files {
        super::write_atomically(&path, &bytes)
            .map_err(|e| Error::Component(format!("cannot write {}: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}

/// The name of a prepared component's native code for `engine`: this
/// build's component digest and wasmtime's compatibility hash, so code
/// another build or wasmtime made is never picked up.
fn prepared_code_file_name(engine: &wasmtime::Engine) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    component_digest().hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("toolgate_policy-prepared-{:016x}.cwasm", hasher.finish())
}

/// The component's main core module (the first), verbatim: what jco
/// transpiles into `toolgate_policy.core.wasm`.
fn core_module(component: &[u8]) -> Result<Vec<u8>, Error> {
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        if let Ok(wasmparser::Payload::ModuleSection { unchecked_range, .. }) = payload {
            return component
                .get(unchecked_range)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| Error::Component("a core module outside the component".into()));
        }
    }
    Err(Error::Component("the component has no core module".into()))
}

impl Engine {
    /// The engine of a directory [`prepare_into`] wrote: its native code
    /// when it was written for this build and machine (`native`), else the
    /// prepared component, checked and compiled (seconds). Native code runs
    /// unchecked, so it is taken only as the cache's is (a regular file of
    /// this user or root that no one else may write, in a folder no one else
    /// can swap it in); otherwise the prepared component is compiled.
    pub fn from_prepared_dir(dir: &std::path::Path, limits: Limits) -> Result<Engine, Error> {
        if limits.fuel.is_none() {
            let code = dir.join(prepared_code_file_name(&wasmtime_engine(false)?));
            if super::trusted_native_code(&code)
                && let Ok(engine) = Engine::from_precompiled_file(&code, limits)
            {
                return Ok(engine);
            }
        }
        let path = dir.join(PREPARED_COMPONENT_FILE);
        let prepared =
            std::fs::read(&path).map_err(|e| Error::Component(format!("cannot read {}: {e}", path.display())))?;
        Engine::from_prepared(&prepared, limits)
    }

    /// Compiles a component [`prepare`] made (seconds: prefer
    /// [`Engine::precompile_prepared`] at deploy time and
    /// [`Engine::from_precompiled_file`] at start). Refused with
    /// [`Error::Component`] unless it was prepared from this build's
    /// embedded component: another build's engine could decide otherwise.
    pub fn from_prepared(prepared: &[u8], limits: Limits) -> Result<Engine, Error> {
        check_prepared_here(prepared)?;
        Engine::from_component_bytes(prepared, limits)
    }

    /// The native code of a component [`prepare`] made, for this machine
    /// and wasmtime version (the checks of [`Engine::from_prepared`] first).
    pub fn precompile_prepared(prepared: &[u8]) -> Result<Vec<u8>, Error> {
        check_prepared_here(prepared)?;
        wasmtime_engine(false)?
            .precompile_component(prepared)
            .map_err(component_error)
    }
}

/// Whether `prepared` names this build's component as its origin.
fn check_prepared_here(prepared: &[u8]) -> Result<(), Error> {
    let mut found = None;
    for payload in wasmparser::Parser::new(0).parse_all(prepared) {
        if let Ok(wasmparser::Payload::CustomSection(section)) = payload
            && section.name() == PREPARED_FROM
        {
            found = Some(section.data().to_vec());
        }
    }
    match found {
        Some(digest) if digest == COMPONENT_SHA256 => Ok(()),
        Some(_) => Err(Error::Component(
            "prepared from another build's component: prepare it again with this build".into(),
        )),
        None => Err(Error::Component("not a component `toolgate prepare` made".into())),
    }
}

/// Appends a custom section to a component or module (valid at the end of
/// either).
fn append_custom_section(wasm: &mut Vec<u8>, name: &str, data: &[u8]) {
    let mut body = Vec::new();
    leb128(&mut body, name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(data);
    wasm.push(0);
    leb128(wasm, body.len());
    wasm.extend_from_slice(&body);
}

fn leb128(out: &mut Vec<u8>, mut value: usize) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Drives a future that never waits: the snapshot's reads below finish
/// synchronously. One that would wait is an error, never a spin.
fn finish_now<F: Future>(future: F) -> Result<F::Output, Error> {
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut TaskContext::from_waker(Waker::noop())) {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => Err(Error::Component("the snapshot did not finish".into())),
    }
}

/// Wizer's view of the instrumented instance: its accessor functions,
/// called synchronously. Wizer's trait cannot fail, so the first failure is
/// kept and [`prepare`] refuses the snapshot.
struct GuestState<'a> {
    store: &'a mut Store<HostState>,
    instance: Instance,
    failure: Option<String>,
}

impl GuestState<'_> {
    fn call<R: Lift + 'static, T>(
        &mut self,
        interface: &str,
        func: &str,
        read: impl FnOnce(&Store<HostState>, R) -> T,
    ) -> Option<T> {
        let result = (|| {
            let (_, parent) = self
                .instance
                .get_export(&mut *self.store, None, interface)
                .ok_or_else(|| format!("no export {interface}"))?;
            let (_, index) = self
                .instance
                .get_export(&mut *self.store, Some(&parent), func)
                .ok_or_else(|| format!("no export {interface}#{func}"))?;
            let typed = self
                .instance
                .get_typed_func::<(), (R,)>(&mut *self.store, index)
                .map_err(|e| e.to_string())?;
            let (value,) = typed.call(&mut *self.store, ()).map_err(|e| e.to_string())?;
            Ok::<T, String>(read(self.store, value))
        })();
        match result {
            Ok(value) => Some(value),
            Err(why) => {
                self.failure.get_or_insert(why);
                None
            }
        }
    }
}

impl ComponentInstanceState for GuestState<'_> {
    async fn call_func_ret_list_u8(&mut self, instance: &str, func: &str, contents: impl FnOnce(&[u8]) + Send) {
        let mut contents = Some(contents);
        self.call(instance, func, |store, list: WasmList<u8>| {
            if let Some(contents) = contents.take() {
                contents(list.as_le_slice(store));
            }
        });
        // A failed read still answers, with nothing: `failure` refuses it.
        if let Some(contents) = contents {
            contents(&[]);
        }
    }

    async fn call_func_ret_s32(&mut self, instance: &str, func: &str) -> i32 {
        self.call(instance, func, |_, value: i32| value).unwrap_or_default()
    }

    async fn call_func_ret_s64(&mut self, instance: &str, func: &str) -> i64 {
        self.call(instance, func, |_, value: i64| value).unwrap_or_default()
    }

    async fn call_func_ret_f32(&mut self, instance: &str, func: &str) -> u32 {
        self.call(instance, func, |_, value: f32| value.to_bits())
            .unwrap_or_default()
    }

    async fn call_func_ret_f64(&mut self, instance: &str, func: &str) -> u64 {
        self.call(instance, func, |_, value: f64| value.to_bits())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A later `prepare` without native code removes an earlier run's, which
    /// `from_prepared_dir` would otherwise take over the new component.
    #[test]
    fn preparing_without_native_code_removes_an_earlier_runs() {
        let dir = std::env::temp_dir().join(format!("toolgate-prepared-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stale = dir.join(prepared_code_file_name(&wasmtime_engine(false).unwrap()));
        std::fs::write(&stale, b"an earlier run's code").unwrap();
        let catalog = r#"{"tools":[{"name":"lookup","annotations":{"readOnlyHint":true}}]}"#;
        let written = prepare_into(&dir, None, catalog, false).unwrap();
        assert_eq!(written.len(), 2);
        assert!(!stale.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
