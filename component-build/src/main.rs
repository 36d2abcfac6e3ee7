//! `cargo run -p component-build -- [OUT]`: builds the component (default
//! `dist/toolgate_policy.wasm`) and prints its size, imports and exports.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| root.join("dist").join("toolgate_policy.wasm"), PathBuf::from);
    match component_build::build(&root, &out)
        .and_then(|bytes| component_build::interface(&bytes).map(|(imports, exports)| (bytes.len(), imports, exports)))
    {
        Ok((size, imports, exports)) => {
            println!(
                "{}: {size} bytes; imports: {imports:?}; exports: {exports:?}",
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("component-build: {e}");
            ExitCode::FAILURE
        }
    }
}
