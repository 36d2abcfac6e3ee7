//! `yaml_reader`: the YAML tree builder (`policy-core/src/yaml/tree.rs`)
//! against the reader it replaced, serde-saphyr's deserializer, on any text.
//!
//! Every policy and YAML catalog goes through the builder; serde-saphyr is a
//! widely used reader that read the same texts into the same trees before
//! the builder took its place (session 25). A text one accepts and the other
//! refuses, or two different trees (a scalar typed differently, an alias or a
//! merge expanded differently, a budget crossed at a different point), is a
//! policy that would have meant something else. Where both refuse a broken
//! text they may name different faults; that is not compared.

/// `yaml_reader`: the bytes as YAML (lossy UTF-8, as a host reads a file);
/// panics (a crash for libFuzzer) when the two readers disagree.
pub fn check_yaml_reader(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Some(disagreement) = policy_core::yaml::disagreement_with_reference(&text) {
        panic!("the YAML readers disagree: {disagreement}");
    }
}
