//! The guest meter: a pass over the core module, before it is wrapped into a
//! component, that makes the component count its own work so that every
//! runtime (wasmtime in Rust and Python, V8 in Node) stops a runaway call at
//! the same point and gives the same decision.
//!
//! - A mutable `i64` global, the budget, is added (and exported as
//!   [`BUDGET_EXPORT`], for tests; the component does not expose it).
//! - Every exported function is wrapped: the wrapper sets the budget, then
//!   calls the original. Each entry from a host (`evaluate`, `cabi_realloc`,
//!   a post-return, ...) starts with a full budget, whatever the previous call
//!   left. The `load` export's budget scales with its input
//!   ([`Budgets::load_per_input_byte`]).
//! - Cost model: the code of a function is cut into regions, the function's
//!   top level and each `loop` body (nested loops are regions of their own).
//!   A region's cost is the number of instructions in it (every arm of an
//!   `if` counted, the `loop` instruction of a nested loop counted once),
//!   plus [`CHECK_COST`] for the check itself, rounded up to a power of two.
//!   On entry of the region (the function's start: a call to one of 63
//!   shared charge functions; the start of every iteration of the loop: the
//!   same check in place) the cost is subtracted from the budget; when the
//!   budget goes negative the guest calls the meter's one trap function,
//!   an integer division by zero (`i32.const 1; i32.const 0;
//!   i32.div_u`), which Rust-compiled code never executes (Rust checks
//!   divisors and panics, an `unreachable`), so hosts tell the meter's trap
//!   apart from every other one: it is `ENGINE_LIMIT`.
//! - A function that is not exported, never referenced as a value (tables,
//!   `ref.func`), not recursive, and whose top level costs at most
//!   [`INLINE_CAP`] with what it calls there, has no entry check: a direct
//!   call to it costs the caller's region `1 +` that cost (its loops still
//!   check themselves).
//!
//! The units are static, so the count is the same in every runtime and
//! bounds the work: every instruction that runs belongs to a region whose
//! cost was paid on entry (a loop's body once per iteration), or to the top
//! level of a function whose cost its caller's region paid. Wasmtime's fuel for a call is therefore at
//! most its meter units (plus the few instructions of the wrappers).

use std::collections::HashSet;

use wasm_encoder::{
    CodeSection, ConstExpr, Encode, ExportKind, ExportSection, Function, FunctionSection, GlobalSection, GlobalType,
    Instruction, Module, RawSection, ValType,
};
use wasmparser::{ExternalKind, Operator, Parser, Payload, TypeRef};

/// The budget global's export name (read by tests through a core instance;
/// wit-component does not lift it, so the component does not show it).
pub const BUDGET_EXPORT: &str = "toolgate_meter_budget";

/// The instructions a check executes when the budget is not exhausted (a
/// `call` to a charge function whose body is `global.get`, `i64.const`,
/// `i64.sub`, `global.set`, `global.get`, `i64.const`, `i64.lt_s`, `if`,
/// `end`, `end`; the in-place form at a loop head is two fewer): charged with
/// the region.
pub const CHECK_COST: i64 = 11;

/// What the wrappers put in the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// Every exported function but `load`.
    pub call: i64,
    /// `load`: at least this much ...
    pub load: i64,
    /// ... or this much per byte of its string arguments, whichever is more.
    pub load_per_input_byte: i64,
}

impl Budgets {
    /// The budgets of [`crate::limits`].
    pub const DEFAULT: Budgets = Budgets {
        call: crate::limits::CALL_BUDGET,
        load: crate::limits::LOAD_BUDGET,
        load_per_input_byte: crate::limits::LOAD_BUDGET_PER_INPUT_BYTE,
    };
}

/// The core export whose budget scales with its input: WIT
/// `load: static func(policy: option<string>, catalog: string)`, flattened by
/// the canonical ABI to `(i32 is_some, i32 ptr, i32 len, i32 ptr, i32 len) -> i32`.
pub const LOAD_EXPORT_SUFFIX: &str = "#[static]rule-set.load";

/// The meter's trap, as the hosts see it: wasmtime's
/// `Trap::IntegerDivisionByZero` (Rust), "integer divide by zero"
/// (wasmtime-py), "divide by zero" (V8's `WebAssembly.RuntimeError`).
fn trap_instructions() -> [Instruction<'static>; 4] {
    [
        Instruction::I32Const(1),
        Instruction::I32Const(0),
        Instruction::I32DivU,
        Instruction::Drop,
    ]
}

fn err(e: impl std::fmt::Display) -> String {
    format!("meter: {e}")
}

/// A function whose callers pay for it costs them at most this many units
/// per call; a costlier one pays on entry. The charge is an upper bound (every
/// branch counted), so a rarely taken call to a big function would inflate a
/// hot loop's count: the cap keeps the units close to the work.
pub const INLINE_CAP: i64 = 256;

struct FuncInfo {
    /// Instructions at the function's top level (outside every loop body;
    /// a `loop` instruction itself counted), the final `end` included.
    top: i64,
    /// Direct calls (`call`, `return_call`) at the top level, one entry per
    /// call site.
    callees: Vec<u32>,
}

/// What the pass decided, for the build's report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub functions: usize,
    /// Functions whose callers pay for them (no check on entry).
    pub paid_by_callers: usize,
    /// Checks on function entry.
    pub entry_checks: usize,
    /// Checks at the start of a loop body.
    pub loop_checks: usize,
}

/// Per defined function: `Some(units)` when its callers pay for its top level
/// (not exported, never referenced as a value, not recursive among such
/// functions, at most [`INLINE_CAP`] units with what it calls there), else
/// `None`. Its loops pay for themselves either way.
fn paid_by_callers(infos: &[FuncInfo], imported: u32, entered_otherwise: &HashSet<u32>) -> Vec<Option<i64>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    struct Walk<'a> {
        infos: &'a [FuncInfo],
        imported: u32,
        entered_otherwise: &'a HashSet<u32>,
        state: Vec<State>,
        in_cycle: Vec<bool>,
        cost: Vec<Option<i64>>,
    }
    impl Walk<'_> {
        fn defined(&self, f: u32) -> Option<usize> {
            usize::try_from(f.checked_sub(self.imported)?)
                .ok()
                .filter(|&i| i < self.infos.len())
        }
        fn visit(&mut self, i: usize) {
            let Some(info) = self.infos.get(i) else { return };
            let f = u32::try_from(i).unwrap_or(u32::MAX).saturating_add(self.imported);
            if let Some(s) = self.state.get_mut(i) {
                *s = State::Open;
            }
            let candidate = !self.entered_otherwise.contains(&f);
            let mut units = info.top;
            for &g in &info.callees {
                let Some(j) = self.defined(g) else { continue };
                match self.state.get(j).copied() {
                    Some(State::New) => self.visit(j),
                    Some(State::Open) => {
                        // A cycle: the function it closes on pays on entry.
                        if let Some(c) = self.in_cycle.get_mut(j) {
                            *c = true;
                        }
                    }
                    _ => {}
                }
                units = units.saturating_add(self.cost.get(j).copied().flatten().unwrap_or(0));
            }
            let cycle = self.in_cycle.get(i).copied().unwrap_or(true);
            let paid = (candidate && !cycle && units <= INLINE_CAP).then_some(units);
            if let Some(c) = self.cost.get_mut(i) {
                *c = paid;
            }
            if let Some(s) = self.state.get_mut(i) {
                *s = State::Done;
            }
        }
    }
    let n = infos.len();
    let mut walk = Walk {
        infos,
        imported,
        entered_otherwise,
        state: vec![State::New; n],
        in_cycle: vec![false; n],
        cost: vec![None; n],
    };
    for i in 0..n {
        if walk.state.get(i) == Some(&State::New) {
            walk.visit(i);
        }
    }
    walk.cost
}

/// Adds the meter to a core module (see the module docs). The result is
/// validated.
pub fn instrument(module: &[u8], budgets: Budgets) -> Result<Vec<u8>, String> {
    instrument_with_stats(module, budgets).map(|(bytes, _)| bytes)
}

/// [`instrument`], and what it did.
pub fn instrument_with_stats(module: &[u8], budgets: Budgets) -> Result<(Vec<u8>, Stats), String> {
    // Pass 1: what the module has.
    let mut func_types: Vec<u32> = Vec::new(); // type index of every function, imports first
    let mut imported_funcs = 0u32;
    let mut imported_globals = 0u32;
    let mut defined_globals = 0u32;
    let mut params: Vec<Vec<wasmparser::ValType>> = Vec::new(); // per type index
    let mut nullary: Option<u32> = None; // a `[] -> []` type
    let mut address_taken: HashSet<u32> = HashSet::new();
    let mut exported: HashSet<u32> = HashSet::new();
    let mut infos: Vec<FuncInfo> = Vec::new(); // defined functions
    for payload in Parser::new(0).parse_all(module) {
        match payload.map_err(err)? {
            Payload::TypeSection(reader) => {
                for ty in reader.into_iter_err_on_gc_types() {
                    let ty = ty.map_err(err)?;
                    if nullary.is_none() && ty.params().is_empty() && ty.results().is_empty() {
                        nullary = Some(u32::try_from(params.len()).map_err(err)?);
                    }
                    params.push(ty.params().to_vec());
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    match import.map_err(err)?.ty {
                        TypeRef::Func(t) | TypeRef::FuncExact(t) => {
                            func_types.push(t);
                            imported_funcs += 1;
                        }
                        TypeRef::Global(_) => imported_globals += 1,
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for t in reader {
                    func_types.push(t.map_err(err)?);
                }
            }
            Payload::GlobalSection(reader) => defined_globals = reader.count(),
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(err)?;
                    if export.kind == ExternalKind::Func {
                        exported.insert(export.index);
                    }
                }
            }
            Payload::ElementSection(reader) => {
                for element in reader {
                    match element.map_err(err)?.items {
                        wasmparser::ElementItems::Functions(funcs) => {
                            for f in funcs {
                                address_taken.insert(f.map_err(err)?);
                            }
                        }
                        wasmparser::ElementItems::Expressions(_, exprs) => {
                            for expr in exprs {
                                let mut ops = expr.map_err(err)?.get_operators_reader();
                                while !ops.eof() {
                                    if let Operator::RefFunc { function_index } = ops.read().map_err(err)? {
                                        address_taken.insert(function_index);
                                    }
                                }
                            }
                        }
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let mut ops = body.get_operators_reader().map_err(err)?;
                let mut info = FuncInfo {
                    top: 0,
                    callees: Vec::new(),
                };
                // Open blocks (true: a loop) and how many loops are open.
                let mut blocks: Vec<bool> = Vec::new();
                let mut loops = 0usize;
                while !ops.eof() {
                    let op = ops.read().map_err(err)?;
                    if loops == 0 {
                        info.top += 1;
                    }
                    match op {
                        Operator::Loop { .. } => {
                            blocks.push(true);
                            loops += 1;
                        }
                        Operator::Block { .. }
                        | Operator::If { .. }
                        | Operator::Try { .. }
                        | Operator::TryTable { .. } => {
                            blocks.push(false);
                        }
                        Operator::End => loops -= usize::from(blocks.pop() == Some(true)),
                        Operator::Call { function_index } | Operator::ReturnCall { function_index } if loops == 0 => {
                            info.callees.push(function_index);
                        }
                        Operator::RefFunc { function_index } => {
                            address_taken.insert(function_index);
                        }
                        _ => {}
                    }
                }
                infos.push(info);
            }
            _ => {}
        }
    }
    let defined_funcs = u32::try_from(infos.len()).map_err(err)?;
    let budget_global = imported_globals + defined_globals;
    // Anything that can be entered otherwise than by a direct call
    // (exported, in a table, `ref.func`) pays on entry.
    let entered_otherwise: HashSet<u32> = exported.union(&address_taken).copied().collect();
    let paid = paid_by_callers(&infos, imported_funcs, &entered_otherwise);
    let inline_cost = |f: u32| -> Option<i64> {
        paid.get(usize::try_from(f.checked_sub(imported_funcs)?).ok()?)
            .copied()
            .flatten()
    };
    let mut stats = Stats {
        functions: infos.len(),
        paid_by_callers: paid.iter().filter(|p| p.is_some()).count(),
        ..Stats::default()
    };

    let first_charge = imported_funcs + defined_funcs + u32::try_from(exported.len()).map_err(err)?;

    // Pass 2: write the module.
    let mut out = Module::new();
    let mut code = CodeSection::new();
    let mut wrappers: Vec<(u32, u32)> = Vec::new(); // (original, wrapper)
    let mut export_names: Vec<(String, ExternalKind, u32)> = Vec::new();
    let mut global_written = false;
    let mut defined_index = 0u32;
    let mut exports_pending = true;
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.map_err(err)?;
        // The budget global goes into the global section (one is made if
        // the module has none, where the section order puts it).
        if !global_written
            && let Some((id, _)) = payload.as_section()
            && matches!(id, 7..=12)
        {
            let mut globals = GlobalSection::new();
            add_budget_global(&mut globals, budgets.call);
            out.section(&globals);
            global_written = true;
        }
        match payload {
            Payload::Version { .. } | Payload::End(_) => {}
            Payload::FunctionSection(reader) => {
                let mut section = FunctionSection::new();
                let mut exported_sorted: Vec<u32> = exported.iter().copied().collect();
                exported_sorted.sort_unstable();
                for t in reader {
                    section.function(t.map_err(err)?);
                }
                for (k, f) in exported_sorted.iter().enumerate() {
                    let ty = func_types
                        .get(usize::try_from(*f).map_err(err)?)
                        .copied()
                        .ok_or_else(|| err("bad export"))?;
                    section.function(ty);
                    let index = imported_funcs + defined_funcs + u32::try_from(k).map_err(err)?;
                    wrappers.push((*f, index));
                }
                let ty = nullary.ok_or_else(|| err("the module has no [] -> [] type"))?;
                // The charge functions, then the trap they share.
                for _ in 0..=CHARGE_CLASSES {
                    section.function(ty);
                }
                out.section(&section);
            }
            Payload::GlobalSection(reader) => {
                // The section's entries as they are, then the budget.
                let range = reader.range();
                let data = module
                    .get(range.start..range.end)
                    .ok_or_else(|| err("global section"))?;
                let mut entries = wasmparser::BinaryReader::new(data, range.start);
                let count = entries.read_var_u32().map_err(err)?;
                let rest = entries.read_bytes(entries.bytes_remaining()).map_err(err)?;
                let mut bytes = Vec::new();
                (count + 1).encode(&mut bytes);
                bytes.extend_from_slice(rest);
                budget_global_entry(budgets.call, &mut bytes);
                out.section(&RawSection { id: 6, data: &bytes });
                global_written = true;
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(err)?;
                    export_names.push((export.name.to_owned(), export.kind, export.index));
                }
                let mut section = ExportSection::new();
                for (name, kind, index) in &export_names {
                    let (kind, index) = match kind {
                        ExternalKind::Func => (
                            ExportKind::Func,
                            wrappers.iter().find(|(f, _)| f == index).map_or(*index, |(_, w)| *w),
                        ),
                        ExternalKind::Table => (ExportKind::Table, *index),
                        ExternalKind::Memory => (ExportKind::Memory, *index),
                        ExternalKind::Global => (ExportKind::Global, *index),
                        ExternalKind::Tag => (ExportKind::Tag, *index),
                        ExternalKind::FuncExact => return Err(err("exact function exports are not supported")),
                    };
                    section.export(name, kind, index);
                }
                section.export(BUDGET_EXPORT, ExportKind::Global, budget_global);
                out.section(&section);
                exports_pending = false;
            }
            Payload::CodeSectionStart { .. } => {}
            Payload::CodeSectionEntry(body) => {
                let f = imported_funcs + defined_index;
                defined_index += 1;
                code.raw(&metered_body(
                    &body,
                    &|cost, in_loop, sink: &mut Vec<u8>| check(cost, in_loop, first_charge, budget_global, sink),
                    inline_cost(f).is_none(),
                    &inline_cost,
                    &mut stats,
                )?);
                if defined_index == defined_funcs {
                    for (original, _) in &wrappers {
                        let ty = func_types
                            .get(usize::try_from(*original).map_err(err)?)
                            .copied()
                            .ok_or_else(|| err("bad export"))?;
                        let ty_params = params
                            .get(usize::try_from(ty).map_err(err)?)
                            .ok_or_else(|| err("bad type"))?;
                        let is_load = export_names.iter().any(|(name, kind, index)| {
                            *kind == ExternalKind::Func
                                && index == original
                                && name.ends_with(LOAD_EXPORT_SUFFIX)
                                && !name.starts_with("cabi_")
                        });
                        code.function(&wrapper(*original, ty_params, is_load, budget_global, budgets)?);
                    }
                    for k in 0..CHARGE_CLASSES {
                        let mut body = Vec::new();
                        0u32.encode(&mut body); // no locals
                        inline_check(1i64 << k, budget_global, first_charge + TRAP, &mut body);
                        Instruction::End.encode(&mut body);
                        code.raw(&body);
                    }
                    let mut trap = Vec::new();
                    0u32.encode(&mut trap); // no locals
                    for ins in trap_instructions() {
                        ins.encode(&mut trap);
                    }
                    Instruction::End.encode(&mut trap);
                    code.raw(&trap);
                    out.section(&code);
                }
            }
            other => {
                if let Some((id, range)) = other.as_section() {
                    let data = module.get(range.start..range.end).ok_or_else(|| err("section range"))?;
                    out.section(&RawSection { id, data });
                }
            }
        }
    }
    if exports_pending || defined_index != defined_funcs {
        return Err(err("the module has no export section or no code"));
    }
    let bytes = out.finish();
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&bytes)
        .map_err(|e| err(format!("the metered module does not validate: {e}")))?;
    Ok((bytes, stats))
}

const BUDGET_TYPE: GlobalType = GlobalType {
    val_type: ValType::I64,
    mutable: true,
    shared: false,
};

fn add_budget_global(globals: &mut GlobalSection, initial: i64) {
    globals.global(BUDGET_TYPE, &ConstExpr::i64_const(initial));
}

fn budget_global_entry(initial: i64, sink: &mut Vec<u8>) {
    BUDGET_TYPE.encode(sink);
    ConstExpr::i64_const(initial).encode(sink);
}

/// Charge functions for 2^0 ..= 2^62 units.
const CHARGE_CLASSES: u32 = 63;
/// The function after them, counted from the first: the meter's trap, which
/// every check calls when the budget is spent (3 bytes a check instead of
/// the 7 of the division in place; it runs once, so it costs nothing).
const TRAP: u32 = CHARGE_CLASSES;

/// Writes one check of `cost` units, rounded up to a power of two. At a loop
/// body's start, in place (`budget -= 2^k; if budget < 0 { trap() }`, ~18
/// bytes, on the hot path); on a function's entry, a call to the shared
/// `k`th charge function, which is that same check (3 bytes: with ~5 000
/// entries the in-place form would not fit the component's gzip budget).
/// Rounding makes the checks nearly all alike, which is what gzip needs.
fn check(cost: i64, in_loop: bool, first_charge: u32, budget: u32, sink: &mut Vec<u8>) {
    let class = (64 - (cost.max(1) - 1).leading_zeros()).min(CHARGE_CLASSES - 1); // 2^class >= cost
    if in_loop {
        inline_check(1i64 << class, budget, first_charge + TRAP, sink);
    } else {
        Instruction::Call(first_charge + class).encode(sink);
    }
}

/// `budget -= cost; if budget < 0 { trap() }`, where `trap` divides by zero.
fn inline_check(cost: i64, budget: u32, trap: u32, sink: &mut Vec<u8>) {
    for ins in [
        Instruction::GlobalGet(budget),
        Instruction::I64Const(cost),
        Instruction::I64Sub,
        Instruction::GlobalSet(budget),
        Instruction::GlobalGet(budget),
        Instruction::I64Const(0),
        Instruction::I64LtS,
        Instruction::If(wasm_encoder::BlockType::Empty),
    ] {
        ins.encode(sink);
    }
    Instruction::Call(trap).encode(sink);
    Instruction::End.encode(sink);
}

/// The body with a check at its start (unless its callers pay for it) and at
/// the start of every loop body.
fn metered_body(
    body: &wasmparser::FunctionBody<'_>,
    check: &dyn Fn(i64, bool, &mut Vec<u8>),
    check_entry: bool,
    inline_cost: &dyn Fn(u32) -> Option<i64>,
    stats: &mut Stats,
) -> Result<Vec<u8>, String> {
    let bytes = body.as_bytes();
    let base = body.range().start;
    let mut ops = body.get_operators_reader().map_err(err)?;
    // Regions in the order they open: (insert at, cost).
    let mut regions: Vec<(usize, i64)> = Vec::new();
    // Control stack: Some(region) for a loop, None for other blocks; the
    // function's own region is the bottom.
    let mut stack: Vec<Option<usize>> = Vec::new();
    let first = ops.original_position() - base;
    regions.push((first, CHECK_COST));
    let mut current = 0usize;
    let mut depth_regions: Vec<usize> = vec![0];
    while !ops.eof() {
        let (op, _) = ops.read_with_offset().map_err(err)?;
        let after = ops.original_position() - base;
        let cost = match &op {
            Operator::Call { function_index } | Operator::ReturnCall { function_index } => {
                1 + inline_cost(*function_index).unwrap_or(0)
            }
            _ => 1,
        };
        if let Some(region) = regions.get_mut(current) {
            region.1 += cost;
        }
        match op {
            Operator::Loop { .. } => {
                regions.push((after, CHECK_COST));
                current = regions.len() - 1;
                stack.push(Some(current));
                depth_regions.push(current);
            }
            Operator::Block { .. } | Operator::If { .. } | Operator::Try { .. } | Operator::TryTable { .. } => {
                stack.push(None);
            }
            Operator::End => {
                if let Some(Some(_)) = stack.pop() {
                    depth_regions.pop();
                    current = depth_regions.last().copied().unwrap_or(0);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::with_capacity(bytes.len() + regions.len() * 24);
    let mut copied = 0usize;
    for (k, (at, cost)) in regions.iter().enumerate() {
        if k == 0 {
            if !check_entry {
                continue;
            }
            stats.entry_checks += 1;
        } else {
            stats.loop_checks += 1;
        }
        out.extend_from_slice(bytes.get(copied..*at).ok_or_else(|| err("body range"))?);
        check(*cost, k > 0, &mut out);
        copied = *at;
    }
    out.extend_from_slice(bytes.get(copied..).ok_or_else(|| err("body range"))?);
    Ok(out)
}

/// `budget = B; return original(params...)`, where B is the call budget, or
/// for `load` `max(load, (policy_len + catalog_len) * per_byte)`.
fn wrapper(
    original: u32,
    params: &[wasmparser::ValType],
    is_load: bool,
    budget: u32,
    budgets: Budgets,
) -> Result<Function, String> {
    let n = u32::try_from(params.len()).map_err(err)?;
    let mut f = Function::new(if is_load { vec![(1, ValType::I64)] } else { vec![] });
    if is_load {
        if params != [wasmparser::ValType::I32; 5] {
            return Err(err(format!(
                "load's core signature is not (i32, i32, i32, i32, i32): {params:?}"
            )));
        }
        let total = n; // the i64 local
        f.instructions()
            // policy length, or 0 when the option is none
            .local_get(2)
            .i64_extend_i32_u()
            .i64_const(0)
            .local_get(0)
            .select()
            .local_get(4)
            .i64_extend_i32_u()
            .i64_add()
            .i64_const(budgets.load_per_input_byte)
            .i64_mul()
            .local_tee(total)
            .i64_const(budgets.load)
            .local_get(total)
            .i64_const(budgets.load)
            .i64_gt_u()
            .select()
            .global_set(budget);
    } else {
        f.instructions().i64_const(budgets.call).global_set(budget);
    }
    for i in 0..n {
        f.instructions().local_get(i);
    }
    f.instructions().call(original).end();
    Ok(f)
}
