//! Embeds the policy component, so `cargo build --release` alone gives a
//! self-contained `toolgate` binary.
//!
//! Two sources, decided by what is on disk:
//! - **in the workspace** (the guest crate `policy-component` is next to this
//!   crate): the component is built from source, as every developer and CI
//!   build does; a stale copy in `component/` is never used there;
//! - **from a packaged crate** (crates.io, `cargo install`): the component
//!   the package carries in `component/` is copied into `OUT_DIR`; nothing is
//!   built and nothing is written outside `OUT_DIR`.
//!
//! Then, for a release build for the machine it runs on, the component is
//! compiled to native code here, once (`toolgate_policy.cwasm`), so the first
//! start of a fresh binary on a fresh machine loads code instead of spending
//! seconds in Cranelift (issue #17's cold start). Only with
//! `TOOLGATE_PRECOMPILE=1`, which the workspace's `.cargo/config.toml` sets; a
//! debug build, a cross-build or a build without it (`cargo install` from
//! crates.io) embeds nothing and compiles at first use (then from the cache).

use std::path::{Path, PathBuf};

const SHIPPED: &str = "component/toolgate_policy.wasm";

// The SDK's wasmtime configuration: the code compiled here must match it.
include!("src/engine_config.rs");

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let out = out_dir.join("toolgate_policy.wasm");
    let root = manifest.join("..");
    let result = if root.join("policy-component").join("Cargo.toml").is_file() {
        from_source(&root, &out)
    } else {
        shipped(&manifest, &out)
    }
    .and_then(|()| precompile(&out, &out_dir.join("toolgate_policy.cwasm")));
    if let Err(e) = result {
        println!("cargo:warning=toolgate: {e}");
        std::process::exit(1);
    }
}

fn from_source(root: &Path, out: &Path) -> Result<(), String> {
    for watched in [
        "policy-core/src",
        "policy-core/Cargo.toml",
        "policy-component",
        "component-build/src",
        "wit",
        "Cargo.lock",
        // The guest profile lives in the workspace manifest.
        "Cargo.toml",
        ".cargo/config.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    component_build::build(root, out).map(drop)
}

fn shipped(manifest: &Path, out: &Path) -> Result<(), String> {
    let source = manifest.join(SHIPPED);
    println!("cargo:rerun-if-changed={}", source.display());
    let bytes = std::fs::read(&source).map_err(|e| {
        format!(
            "{}: {e}; a packaged toolgate crate carries its component (scripts/package-crates writes it)",
            source.display()
        )
    })?;
    // The SDK checks the WIT contract version on load; here, only that the
    // bytes are a component at all, so a broken package fails at build time.
    if !bytes.starts_with(b"\0asm") {
        return Err(format!("{} is not a WebAssembly component", source.display()));
    }
    std::fs::write(out, bytes).map_err(|e| format!("{}: {e}", out.display()))
}

/// Writes the component's native code for this machine, or an empty file
/// when this build should not carry it (the SDK then compiles at first use).
fn precompile(component: &Path, out: &Path) -> Result<(), String> {
    println!("cargo:rerun-if-env-changed=TOOLGATE_PRECOMPILE");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    // Native code runs only where it was made: not for another target, and
    // a debug build's unoptimized Cranelift would take minutes.
    // Opt-in (`TOOLGATE_PRECOMPILE=1`; this repository's .cargo/config.toml
    // sets it): outside the workspace, as in `cargo install`, the build
    // script's wasmtime is built unoptimized (a package's profile does not
    // travel with it) and compiling the component with it would take minutes.
    let wanted = var("TARGET") == var("HOST") && var("PROFILE") == "release" && var("TOOLGATE_PRECOMPILE") == "1";
    let code = if wanted {
        let bytes = std::fs::read(component).map_err(|e| format!("{}: {e}", component.display()))?;
        let engine = wasmtime::Engine::new(&engine_config(false)).map_err(|e| format!("wasmtime: {e}"))?;
        engine
            .precompile_component(&bytes)
            .map_err(|e| format!("precompiling the component: {e}"))?
    } else {
        Vec::new()
    };
    std::fs::write(out, code).map_err(|e| format!("{}: {e}", out.display()))
}
