//! `cargo run --bin component-build -- [--package CRATE] [OUT]`: builds the
//! component (default: the policy component into `dist/toolgate_policy.wasm`;
//! `--package toolgate-floor` builds the benchmark floor) and prints its size,
//! imports and exports.
//!
//! `--from-module M.wasm OUT [--no-meter]` only wraps a built core module
//! (`--no-meter`: without the guest meter, to measure what it costs);
//! `--write-limits` rewrites the JavaScript and Python limit constants from
//! `src/limits.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.iter().any(|a| a == "--write-limits") {
        return match component_build::write_generated_limits(&root) {
            Ok(paths) => {
                for path in paths {
                    println!("{}", path.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("component-build: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let mut package = component_build::POLICY_PACKAGE.to_owned();
    if let Some(at) = args.iter().position(|a| a == "--package") {
        let Some(name) = args.get(at + 1).and_then(|n| n.to_str()) else {
            eprintln!("component-build: --package needs a crate name");
            return ExitCode::FAILURE;
        };
        package = name.to_owned();
        args.drain(at..at + 2);
    }
    // `--from-module M.wasm OUT`: only wrap an already built core module
    // (profile experiments build the guest themselves).
    let metered = match args.iter().position(|a| a == "--no-meter") {
        Some(at) => {
            args.remove(at);
            false
        }
        None => true,
    };
    if let Some(at) = args.iter().position(|a| a == "--from-module") {
        let (Some(module), Some(out)) = (args.get(at + 1), args.get(at + 2)) else {
            eprintln!("component-build: --from-module needs a module path and an output path");
            return ExitCode::FAILURE;
        };
        let wrapped = std::fs::read(module)
            .map_err(|e| e.to_string())
            .and_then(|m| {
                if metered {
                    let (metered, stats) =
                        component_build::meter::instrument_with_stats(&m, component_build::meter::Budgets::DEFAULT)?;
                    eprintln!("meter: {stats:?}");
                    component_build::componentize_unmetered(&metered)
                } else {
                    component_build::componentize_unmetered(&m)
                }
            })
            .and_then(|c| std::fs::write(out, &c).map(|()| c.len()).map_err(|e| e.to_string()));
        return match wrapped {
            Ok(len) => {
                println!("{}: {len} bytes", PathBuf::from(out).display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("component-build: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let out = args
        .first()
        .map_or_else(|| root.join("dist").join("toolgate_policy.wasm"), PathBuf::from);
    match component_build::build_package(&root, &package, &out)
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
