//! The fixed rule sets the `evaluate` and `differential` targets choose from,
//! embedded at build time (a fuzz binary must not depend on the working
//! directory). The first byte of an `evaluate` / `differential` input picks
//! one by its index in [`VECTOR_FILES`]: that index is part of every saved
//! input, so the list is append-only (`fuzz/seed-corpus` has the same list;
//! the replay test checks that they agree).

use policy_core::Rules;
use serde_json::Value;
use std::sync::OnceLock;

/// `(file name, text)` of the vector files whose policy and catalog are the
/// fixed rule sets. Append only.
pub const VECTOR_FILES: &[(&str, &str)] = &[
    (
        "seed-catalog-policy.json",
        include_str!("../../vectors/seed-catalog-policy.json"),
    ),
    (
        "seed-catalog-legacy.json",
        include_str!("../../vectors/seed-catalog-legacy.json"),
    ),
    ("plans-policy.json", include_str!("../../vectors/plans-policy.json")),
    ("plans-legacy.json", include_str!("../../vectors/plans-legacy.json")),
    ("retail-legacy.json", include_str!("../../vectors/retail-legacy.json")),
    ("retail-turns.json", include_str!("../../vectors/retail-turns.json")),
    (
        "catalog-published.json",
        include_str!("../../vectors/catalog-published.json"),
    ),
    (
        "catalog-bare-array.json",
        include_str!("../../vectors/catalog-bare-array.json"),
    ),
    (
        "hints-default-transactional.json",
        include_str!("../../vectors/hints-default-transactional.json"),
    ),
    (
        "hints-no-policy.json",
        include_str!("../../vectors/hints-no-policy.json"),
    ),
];

/// `tests/vectors/fixtures/*`, by the path the vector files use.
pub const FIXTURE_FILES: &[(&str, &str)] = &[
    (
        "fixtures/plans-catalog.json",
        include_str!("../../vectors/fixtures/plans-catalog.json"),
    ),
    (
        "fixtures/plans-policy.yaml",
        include_str!("../../vectors/fixtures/plans-policy.yaml"),
    ),
    (
        "fixtures/retail-policy.yaml",
        include_str!("../../vectors/fixtures/retail-policy.yaml"),
    ),
    (
        "fixtures/retail-tools.yaml",
        include_str!("../../vectors/fixtures/retail-tools.yaml"),
    ),
    (
        "fixtures/seed-catalog.json",
        include_str!("../../vectors/fixtures/seed-catalog.json"),
    ),
];

/// The seed catalog (the catalog `load_policy` loads fuzzed policies against).
pub const SEED_CATALOG: &str = include_str!("../../vectors/fixtures/seed-catalog.json");

/// One rule set's inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixture {
    /// The vector file it comes from.
    pub name: &'static str,
    pub policy: Option<String>,
    pub catalog: String,
}

fn fixture_text(path: &str) -> String {
    FIXTURE_FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| (*text).to_owned())
        .unwrap_or_else(|| panic!("{path} is not embedded in fuzz-checks (add it to FIXTURE_FILES)"))
}

/// The policy and catalog of a vector file, as the vector format defines them.
pub fn from_vector(name: &'static str, text: &str) -> Fixture {
    let file: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let string = |key: &str| file.get(key).and_then(Value::as_str).map(str::to_owned);
    let policy = string("policy_text").or_else(|| string("policy").map(|p| fixture_text(&p)));
    let catalog = string("catalog_text")
        .or_else(|| string("catalog").map(|p| fixture_text(&p)))
        .unwrap_or_else(|| panic!("{name}: no catalog"));
    Fixture { name, policy, catalog }
}

/// Every fixed rule set's inputs, in [`VECTOR_FILES`] order.
pub fn fixtures() -> &'static [Fixture] {
    static FIXTURES: OnceLock<Vec<Fixture>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        VECTOR_FILES
            .iter()
            .map(|(name, text)| from_vector(name, text))
            .collect()
    })
}

/// Every fixed rule set loaded natively, once, in [`fixtures`] order.
pub fn native_rules() -> &'static [Rules] {
    static RULES: OnceLock<Vec<Rules>> = OnceLock::new();
    RULES.get_or_init(|| {
        fixtures()
            .iter()
            .map(|f| Rules::load(f.policy.as_deref(), &f.catalog).unwrap_or_else(|p| panic!("{}: {p}", f.name)))
            .collect()
    })
}

/// The policy of `seed-catalog-policy.json`: the seed-like policy that
/// `load_catalog` loads fuzzed catalogs with.
pub fn seed_policy() -> &'static str {
    static POLICY: OnceLock<String> = OnceLock::new();
    POLICY.get_or_init(|| {
        fixtures()
            .iter()
            .find(|f| f.name == "seed-catalog-policy.json")
            .and_then(|f| f.policy.clone())
            .unwrap_or_else(|| panic!("seed-catalog-policy.json has no policy_text"))
    })
}
