//! Builds the toolgate policy component: policy-component compiled for
//! `wasm32-unknown-unknown` (no WASI, so the component imports nothing) with
//! the size-tuned `guest` profile, then wrapped into a component with
//! `wit-component`. One build routine, used by toolgate's build script and by
//! `cargo run --bin component-build` for the JS and Python packages.

use std::path::{Path, PathBuf};
use std::process::Command;

/// toolgate's resource limits, defined once (toolgate includes this file; the
/// JavaScript and Python constants are generated from it: [`generated_limits`]).
pub mod faults;
pub mod limits;
pub mod meter;

pub const GUEST_TARGET: &str = "wasm32-unknown-unknown";
pub const GUEST_PROFILE: &str = "guest";

/// Environment a build script passes down that must not reach a nested cargo
/// building for another target.
const SCRUBBED_ENV: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "CARGO_BUILD_TARGET",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_MAKEFLAGS",
    "CARGO_PRIMARY_PACKAGE",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "CARGO_PROFILE_RELEASE_LTO",
    "TARGET",
    "HOST",
    "OPT_LEVEL",
    "PROFILE",
    "DEBUG",
    "OUT_DIR",
    "NUM_JOBS",
];

/// The policy component's guest crate.
pub const POLICY_PACKAGE: &str = "policy-component";

/// Compiles the policy guest module and returns the path of the core wasm module.
pub fn build_module(workspace_root: &Path) -> Result<PathBuf, String> {
    build_package_module(workspace_root, POLICY_PACKAGE)
}

/// Compiles a guest crate of this workspace (the policy component, or the
/// benchmark floor) and returns the path of its core wasm module.
pub fn build_package_module(workspace_root: &Path, package: &str) -> Result<PathBuf, String> {
    ensure_guest_target();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = workspace_root.join("target").join("guest");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root)
        .args([
            "build",
            "--quiet",
            "-p",
            package,
            "--lib",
            "--target",
            GUEST_TARGET,
            "--profile",
            GUEST_PROFILE,
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    let status = cmd.status().map_err(|e| format!("could not run cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the guest failed ({status}); is the target installed? run: rustup target add {GUEST_TARGET}"
        ));
    }
    Ok(target_dir
        .join(GUEST_TARGET)
        .join(GUEST_PROFILE)
        .join(format!("{}.wasm", package.replace('-', "_"))))
}

/// Adds the guest target to the active rustup toolchain when it lacks it.
///
/// Why here: `rust-toolchain.toml` names the target, but rustup installs the
/// targets it lists only when it installs the toolchain itself; a machine
/// that already has `stable` would fail a plain `cargo build` with "can't
/// find crate for `core`". Best effort and silent when it works: without
/// rustup (a distribution's Rust), the build below fails with its own hint.
fn ensure_guest_target() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let libdir = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", GUEST_TARGET])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    if libdir.is_some_and(|dir| dir.is_dir()) {
        return;
    }
    // RUSTUP_TOOLCHAIN (set by rustup's cargo proxy) picks the same toolchain.
    let _ = Command::new("rustup")
        .args(["target", "add", GUEST_TARGET])
        .stdout(std::process::Stdio::null())
        .status();
}

/// Meters a core module (with wit-bindgen's component-type section) with the
/// default budgets ([`meter`]) and wraps it into a validated component.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, String> {
    componentize_unmetered(&meter::instrument(module, meter::Budgets::DEFAULT)?)
}

/// Wraps a core module into a validated component as it is, without the
/// meter (to measure what the meter costs; never shipped).
pub fn componentize_unmetered(module: &[u8]) -> Result<Vec<u8>, String> {
    wit_component::ComponentEncoder::default()
        .module(module)
        .map_err(|e| format!("not a wit-bindgen module: {e:#}"))?
        .validate(true)
        .encode()
        .map_err(|e| format!("could not encode the component: {e:#}"))
}

/// Builds the policy component and writes it to `out`. Returns its bytes.
pub fn build(workspace_root: &Path, out: &Path) -> Result<Vec<u8>, String> {
    build_package(workspace_root, POLICY_PACKAGE, out)
}

/// Builds a guest crate into a component at `out`. Returns its bytes.
pub fn build_package(workspace_root: &Path, package: &str, out: &Path) -> Result<Vec<u8>, String> {
    let module_path = build_package_module(workspace_root, package)?;
    let module = std::fs::read(&module_path).map_err(|e| format!("{}: {e}", module_path.display()))?;
    let component = componentize(&module)?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(out, &component).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(component)
}

/// The component's top-level imports and exports, by name.
pub fn interface(component: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        use wasmparser::Payload;
        match payload.map_err(|e| e.to_string())? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    imports.push(import.map_err(|e| e.to_string())?.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    exports.push(export.map_err(|e| e.to_string())?.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

/// Where the generated tables go: (file, line comment, block name).
const GENERATED_BLOCKS: &[(&str, &str, &str)] = &[
    ("bindings-js/src/faults.js", "//", "limits"),
    ("bindings-js/src/faults.js", "//", "faults"),
    ("bindings-js/src/core.js", "//", "limits"),
    ("bindings-js/src/contract.js", "//", "contract"),
    ("bindings-py/src/mcp_toolgate/_faults.py", "#", "limits"),
    ("bindings-py/src/mcp_toolgate/_faults.py", "#", "faults"),
];

/// The contract version, read from the WIT package line
/// (`package toolgate:policy@X.Y.Z;`): the one place it is written.
pub fn wit_contract_version(workspace_root: &Path) -> Result<String, String> {
    let path = workspace_root.join("wit/toolgate.wit");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("package toolgate:policy@"))
        .and_then(|rest| rest.strip_suffix(';'))
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: no `package toolgate:policy@VERSION;` line", path.display()))
}

/// A string as a JavaScript / Python single-quoted literal (the fault bytes
/// hold no quote, backslash or non-ASCII character; checked).
fn quoted(text: &str) -> Result<String, String> {
    if text
        .chars()
        .any(|c| c == '\'' || c == '\\' || !c.is_ascii() || c.is_ascii_control())
    {
        return Err(format!("cannot quote {text:?} simply"));
    }
    Ok(format!("'{text}'"))
}

/// The generated block of one bindings file, between its marker lines.
fn generated_block(path: &str, comment: &str, block: &str, contract: &str) -> Result<String, String> {
    use limits::*;
    let begin = format!(
        "{comment} BEGIN {block}: generated from component-build/src by\n{comment} `cargo run --release --locked --bin component-build -- --write-limits`; do not edit.\n"
    );
    let end = format!("{comment} END {block}\n");
    let js = path.ends_with(".js");
    let body = match (block, js) {
        ("contract", _) => format!(
            "/** The WIT contract version this package speaks (wit/toolgate.wit); checked on every load. */\n\
             export const CONTRACT_VERSION = '{contract}';\n"
        ),
        ("faults", true) => {
            let mut body = String::from(
                "/**\n * The decisions a host builds itself (docs/spec.md §7), exact bytes.\n * @type {Readonly<Record<HostFaultCode, string>>}\n */\nexport const HOST_FAULTS = Object.freeze({\n",
            );
            for (code, bytes) in faults::ALL {
                body.push_str(&format!("  {code}: {},\n", quoted(bytes)?));
            }
            body.push_str("});\n");
            body
        }
        ("faults", false) => {
            let mut body = String::from(
                "#: The decisions a host builds itself (docs/spec.md §7), exact bytes.\nFAULTS: dict[str, str] = {\n",
            );
            for (code, bytes) in faults::ALL {
                body.push_str(&format!("    \"{code}\": (\n        {}\n    ),\n", quoted(bytes)?));
            }
            body.push_str("}\n");
            body
        }
        (_, true) if path.ends_with("faults.js") => format!(
            "/** Calls and contexts over this many bytes never reach the component. */\n\
             export const MAX_INPUT_BYTES = {MAX_INPUT_BYTES};\n"
        ),
        (_, true) => format!(
            "/**\n \
             * Default cap on the component's linear memory, per Toolgate, in bytes. Plain\n \
             * WebAssembly cannot refuse the guest's `memory.grow` here (the memory is the\n \
             * core module's own, with no maximum), so the cap is checked after each call:\n \
             * over it, the call is denied `ENGINE_OUT_OF_MEMORY` and the instance replaced.\n \
             */\n\
             export const DEFAULT_MAX_MEMORY_BYTES = {MAX_MEMORY_BYTES};\n\
             /** The guest meter's budget per call, compiled into the component (for reference). */\n\
             export const CALL_BUDGET = {CALL_BUDGET};\n"
        ),
        (_, false) => format!(
            "#: Calls and contexts over this many bytes never reach the component.\n\
             MAX_INPUT_BYTES = {MAX_INPUT_BYTES}\n\
             #: Default cap on the component's linear memory per rule set, in bytes.\n\
             MAX_MEMORY_BYTES = {MAX_MEMORY_BYTES}\n\
             #: The guest meter's budgets, compiled into the component (for reference\n\
             #: and to size the fuel backstop).\n\
             CALL_BUDGET = {CALL_BUDGET}\n\
             LOAD_BUDGET = {LOAD_BUDGET}\n\
             LOAD_BUDGET_PER_INPUT_BYTE = {LOAD_BUDGET_PER_INPUT_BYTE}\n\
             #: Wasmtime fuel is this many times the guest budget: a backstop the meter\n\
             #: always reaches first.\n\
             FUEL_BACKSTOP_FACTOR = {FUEL_BACKSTOP_FACTOR}\n\
             #: The WIT contract version this package speaks (wit/toolgate.wit).\n\
             CONTRACT_VERSION = \"{contract}\"\n"
        ),
    };
    Ok(format!("{begin}{body}{end}"))
}

/// `tests/vectors/host-faults.json`, whole.
fn host_faults_file() -> Result<String, String> {
    // Inserted in sorted order: the file's bytes then do not depend on
    // whether serde_json's `preserve_order` feature is on in this build
    // (the bench's peer turns it on; a build of this crate alone does not).
    let mut sorted = faults::ALL.to_vec();
    sorted.sort_unstable();
    let mut faults = serde_json::Map::new();
    for (code, bytes) in sorted {
        faults.insert(code.to_owned(), serde_json::Value::String(bytes.to_owned()));
    }
    let doc = serde_json::json!({
        "description": "Decisions a host builds itself when the component cannot decide (docs/spec.md §7), generated from component-build/src/faults.rs. tool is always null: the host cannot know which tool the call names without parsing it, which is the engine's job.",
        "faults": faults,
        "limits": {
            "max_input_bytes": limits::MAX_INPUT_BYTES,
            "note": "Calls and contexts over max_input_bytes get INPUT_TOO_LARGE without reaching the component."
        }
    });
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// Each generated file as it should be: `(path, current text, expected
/// text)`: the bindings' generated blocks and tests/vectors/host-faults.json.
pub fn generated_limits(workspace_root: &Path) -> Result<Vec<(PathBuf, String, String)>, String> {
    let contract = wit_contract_version(workspace_root)?;
    let mut files: Vec<(PathBuf, String, String)> = Vec::new();
    for (rel, comment, block) in GENERATED_BLOCKS {
        let path = workspace_root.join(rel);
        let index = match files.iter().position(|(p, _, _)| *p == path) {
            Some(i) => i,
            None => {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                files.push((path.clone(), text.clone(), text));
                files.len() - 1
            }
        };
        let Some((_, _, expected)) = files.get_mut(index) else {
            continue;
        };
        let begin = format!("{comment} BEGIN {block}");
        let end = format!("{comment} END {block}\n");
        let (Some(start), Some(stop)) = (expected.find(&begin), expected.find(&end)) else {
            return Err(format!(
                "{}: no `{begin}` ... `{}` block",
                path.display(),
                end.trim_end()
            ));
        };
        let (Some(head), Some(tail)) = (expected.get(..start), expected.get(stop + end.len()..)) else {
            return Err(format!("{}: misplaced {block} block", path.display()));
        };
        *expected = format!("{head}{}{tail}", generated_block(rel, comment, block, &contract)?);
    }
    let path = workspace_root.join("tests/vectors/host-faults.json");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    files.push((path, text, host_faults_file()?));
    Ok(files)
}

/// Rewrites the generated limits blocks; returns the files that changed.
pub fn write_generated_limits(workspace_root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut changed = Vec::new();
    for (path, text, expected) in generated_limits(workspace_root)? {
        if text != expected {
            std::fs::write(&path, expected).map_err(|e| format!("{}: {e}", path.display()))?;
            changed.push(path);
        }
    }
    Ok(changed)
}
