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
//! The component's native code is not made here: a build script that links
//! wasmtime would compile Cranelift a second time for the build machine in
//! every check, cross-build and `cargo install`. `toolgate precompile`
//! writes it beside the packaged binary instead (`Engine::cached`).

use std::path::{Path, PathBuf};

const SHIPPED: &str = "component/toolgate_policy.wasm";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let out = out_dir.join("toolgate_policy.wasm");
    let root = manifest.join("..");
    let result = if root.join("policy-component").join("Cargo.toml").is_file() {
        from_source(&root, &out)
    } else {
        shipped(&manifest, &out)
    };
    if let Err(e) = result.and_then(|()| write_digest(&out, &out_dir.join("toolgate_policy.sha256"))) {
        println!("cargo:warning=toolgate: {e}");
        std::process::exit(1);
    }
}

/// The component's SHA-256, embedded beside it: prepared components name
/// their origin by it (`toolgate:prepared-from`), a digest the npm and
/// Python packages compute the same way for the component they carry.
fn write_digest(component: &Path, out: &Path) -> Result<(), String> {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(component).map_err(|e| format!("{}: {e}", component.display()))?;
    std::fs::write(out, Sha256::digest(&bytes)).map_err(|e| format!("{}: {e}", out.display()))
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
