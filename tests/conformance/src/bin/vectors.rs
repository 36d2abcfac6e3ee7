//! `cargo run -p conformance --bin vectors -- --write`: fills every case's
//! `expect` from the native engine (review the diff); without `--write`,
//! checks and prints a summary.

use conformance::{Native, Runner, check_file, read_file, vector_files};
use std::process::ExitCode;

fn main() -> ExitCode {
    let write = std::env::args().any(|a| a == "--write");
    let files = match vector_files() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("vectors: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut cases, mut failures) = (0usize, 0usize);
    for path in files {
        if write && let Err(e) = rewrite(&path) {
            eprintln!("{}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        let file = match read_file(&path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        cases += file.cases.len().max(usize::from(file.expect_load_error.is_some()));
        for failure in check_file(&Native, &path) {
            failures += 1;
            eprintln!("{failure}");
        }
    }
    println!("{} passed, {failures} failed", cases.saturating_sub(failures));
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn rewrite(path: &std::path::Path) -> Result<(), String> {
    let mut file = read_file(path)?;
    if file.expect_load_error.is_none() {
        let rules = Native
            .load(file.policy_text()?.as_deref(), &file.catalog_text()?)
            .map_err(|e| format!("{e:?}"))?;
        for case in file.cases.iter_mut().filter(|c| !c.component_only) {
            case.expect = Native.run(&rules, case).map_err(|e| format!("{}: {e}", case.name))?;
        }
    }
    let mut text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| e.to_string())
}
