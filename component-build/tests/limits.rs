//! The limits are defined once (`src/limits.rs`): the JavaScript and Python
//! constants generated from them must be fresh, and the shared host-fault
//! vector file must agree on the input cap.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn generated_limit_constants_are_fresh() {
    for (path, text, expected) in component_build::generated_limits(&root()).unwrap() {
        assert!(
            text == expected,
            "{} is stale: run `cargo run --release --locked --bin component-build -- --write-limits`",
            path.display()
        );
    }
}

#[test]
fn host_faults_vector_file_has_the_same_input_cap() {
    let text = std::fs::read_to_string(root().join("tests/vectors/host-faults.json")).unwrap();
    let needle = format!("\"max_input_bytes\": {}", component_build::limits::MAX_INPUT_BYTES);
    assert!(text.contains(&needle), "host-faults.json does not say {needle}");
}
