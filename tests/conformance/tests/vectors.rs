//! Every vector passes natively and through the component with identical
//! bytes (both are compared to the same `expect`).

// Test code: panicking on a broken expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use conformance::{Component, Native, check_file, read_file, vector_files};

fn all_files() -> Vec<std::path::PathBuf> {
    let files = vector_files().unwrap_or_default();
    assert!(!files.is_empty(), "no vector files found");
    files
}

#[test]
fn corpus_is_large_enough_and_well_formed() {
    let mut cases = 0;
    for path in all_files() {
        let file = read_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            file.spec.starts_with('§'),
            "{}: `spec` names a SPEC section",
            path.display()
        );
        cases += file.cases.len() + usize::from(file.expect_load_error.is_some());
    }
    assert!(cases >= 150, "only {cases} cases");
}

#[test]
fn every_vector_passes_natively() {
    let failures: Vec<String> = all_files().iter().flat_map(|p| check_file(&Native, p)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_vector_passes_through_the_component() {
    let engine = toolgate::Engine::cached().unwrap_or_else(|e| panic!("{e}"));
    let runner = Component(engine);
    let failures: Vec<String> = all_files().iter().flat_map(|p| check_file(&runner, p)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A prepared component (`toolgate::prepare`) decides every vector as the
/// shipped one: the prepared file's own vectors take the rules loaded at
/// preparation, every other file loads in an instance of the snapshot.
#[test]
fn every_vector_passes_through_a_prepared_component() {
    let prepared_from = conformance::vectors_dir().join("pipeline-plans.json");
    let file = read_file(&prepared_from).unwrap_or_else(|e| panic!("{e}"));
    let policy = file.policy_text().unwrap_or_else(|e| panic!("{e}"));
    let catalog = file.catalog_text().unwrap_or_else(|e| panic!("{e}"));
    let prepared = toolgate::prepare(policy.as_deref(), &catalog).unwrap_or_else(|e| panic!("{e}"));
    let engine =
        toolgate::Engine::from_prepared(&prepared, toolgate::Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let runner = Component(engine);
    let files = all_files();
    assert!(files.contains(&prepared_from));
    let failures: Vec<String> = files.iter().flat_map(|p| check_file(&runner, p)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The contract version is written once, in the WIT package line; the
/// engine's and the Rust SDK's constants must say the same (the JS and
/// Python constants are generated from it by component-build).
#[test]
fn contract_version_constants_follow_the_wit_package() {
    let wit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit/toolgate.wit")).unwrap();
    let version = wit
        .lines()
        .find_map(|l| l.trim().strip_prefix("package toolgate:policy@"))
        .and_then(|v| v.strip_suffix(';'))
        .unwrap();
    assert_eq!(policy_core::CONTRACT_VERSION, version);
    assert_eq!(toolgate::CONTRACT_VERSION, version);
}
