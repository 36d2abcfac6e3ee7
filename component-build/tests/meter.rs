//! The meter pass on a small hand-made module: it validates, every export is
//! wrapped, loops and non-leaf functions are checked, leaves are paid by
//! their callers.

use component_build::meter::{self, BUDGET_EXPORT, Budgets};
use wasm_encoder::{
    BlockType, CodeSection, ExportKind, ExportSection, Function, FunctionSection, Module, TypeSection, ValType,
};

fn module() -> Vec<u8> {
    let mut types = TypeSection::new();
    types.ty().function([], []); // 0: [] -> []
    types.ty().function([ValType::I32], [ValType::I32]); // 1
    types.ty().function([ValType::I32; 5], [ValType::I32]); // 2: like load
    let mut funcs = FunctionSection::new();
    funcs.function(1); // 0: leaf helper
    funcs.function(1); // 1: loops forever, calling the leaf
    funcs.function(2); // 2: "load"
    funcs.function(1); // 3: cabi_post for load (a leaf, exported)
    let mut exports = ExportSection::new();
    exports.export("spin", ExportKind::Func, 1);
    exports.export(
        "toolgate:policy/engine@0.1.0#[static]rule-set.load",
        ExportKind::Func,
        2,
    );
    exports.export(
        "cabi_post_toolgate:policy/engine@0.1.0#[static]rule-set.load",
        ExportKind::Func,
        3,
    );
    let mut code = CodeSection::new();
    let mut leaf = Function::new(Vec::<(u32, ValType)>::new());
    leaf.instructions().local_get(0).i32_const(1).i32_add().end();
    code.function(&leaf);
    let mut spin = Function::new(Vec::<(u32, ValType)>::new());
    spin.instructions()
        .loop_(BlockType::Empty)
        .local_get(0)
        .call(0)
        .local_set(0)
        .br(0)
        .end()
        .local_get(0)
        .end();
    code.function(&spin);
    let mut load = Function::new(Vec::<(u32, ValType)>::new());
    load.instructions().local_get(4).call(1).end();
    code.function(&load);
    let mut post = Function::new(Vec::<(u32, ValType)>::new());
    post.instructions().local_get(0).end();
    code.function(&post);
    let mut m = Module::new();
    m.section(&types).section(&funcs).section(&exports).section(&code);
    m.finish()
}

#[test]
fn the_pass_wraps_exports_checks_loops_and_validates() {
    let (bytes, stats) = meter::instrument_with_stats(&module(), Budgets::DEFAULT).unwrap();
    assert_eq!(stats.functions, 4);
    // The leaf is paid by its caller; `spin` (a loop), `load` (exported) and
    // the exported leaf check on entry; `spin`'s loop checks per iteration.
    assert_eq!(stats.paid_by_callers, 1);
    assert_eq!(stats.entry_checks, 3);
    assert_eq!(stats.loop_checks, 1);
    let mut exports = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(&bytes) {
        if let wasmparser::Payload::ExportSection(reader) = payload.unwrap() {
            for e in reader {
                let e = e.unwrap();
                exports.push((e.name.to_owned(), e.index));
            }
        }
    }
    // 4 functions, then 3 wrappers in order of the exported indices.
    assert!(exports.contains(&("spin".to_owned(), 4)));
    assert!(exports.contains(&("toolgate:policy/engine@0.1.0#[static]rule-set.load".to_owned(), 5)));
    assert!(exports.iter().any(|(name, _)| name == BUDGET_EXPORT));
}

#[test]
fn a_module_without_a_nullary_type_is_refused_not_miscompiled() {
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    let mut exports = ExportSection::new();
    exports.export("f", ExportKind::Func, 0);
    let mut code = CodeSection::new();
    let mut f = Function::new(Vec::<(u32, ValType)>::new());
    f.instructions().local_get(0).end();
    code.function(&f);
    let mut m = Module::new();
    m.section(&types).section(&funcs).section(&exports).section(&code);
    assert!(meter::instrument(&m.finish(), Budgets::DEFAULT).is_err());
}
