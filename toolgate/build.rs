//! Builds the policy component and embeds it: `cargo build --release` alone
//! gives a self-contained `toolgate` binary.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("..");
    for watched in [
        "policy-core/src",
        "policy-core/Cargo.toml",
        "policy-component",
        "wit",
        "Cargo.lock",
        // The guest profile lives in the workspace manifest.
        "Cargo.toml",
        ".cargo/config.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("toolgate_policy.wasm");
    if let Err(e) = component_build::build(&root, &out) {
        println!("cargo:warning=toolgate: {e}");
        std::process::exit(1);
    }
}
