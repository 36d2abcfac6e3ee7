//! Builds the toolgate policy component: policy-component compiled for
//! `wasm32-unknown-unknown` (no WASI, so the component imports nothing) with
//! the size-tuned `guest` profile, then wrapped into a component with
//! `wit-component`. One build routine, used by host-rs's build script and by
//! `cargo run -p component-build` for the JS and Python packages.

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Wraps a core module (with wit-bindgen's component-type section) into a
/// validated component.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, String> {
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
