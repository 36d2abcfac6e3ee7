//! The invariants behind the cargo-fuzz targets in `fuzz/`, in one place, so
//! the fuzz targets and an ordinary `cargo test` (the replay test in
//! `tests/replay.rs`, which runs every seed input and every saved regression
//! through all four checks) assert the same things.
//!
//! | check | input | asserts |
//! |---|---|---|
//! | [`check_load_policy`] | bytes as policy text (seed catalog), then as a catalog | no panic; a typed problem from the right input, bounded message, position inside the text; loaded rules keep every decision and listing invariant |
//! | [`check_load_catalog`] | bytes as a catalog, without a policy and with the seed-like policy | the same |
//! | [`check_evaluate`] | fixed rule set + call bytes + context ([`input`]) | [`native::check_decision`] and [`native::check_list`] |
//! | [`check_differential`] | the same input | native and component give the same bytes (feature `component`) |
//! | [`check_yaml_reader`] | bytes as YAML text | the tree builder and serde-saphyr read the same tree or both refuse (feature `yaml-reference`; fuzzed only, its cases in policy-core's tests) |

// A violated invariant must abort the fuzz run (libFuzzer reports a panic as
// a crash) and fail the test: panicking, unwrapping and indexing are the
// point of this crate, unlike library code elsewhere in the workspace.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

#[cfg(feature = "component")]
pub mod differential;
pub mod fixtures;
pub mod input;
pub mod native;
#[cfg(feature = "yaml-reference")]
pub mod yaml;

#[cfg(feature = "component")]
pub use differential::check_differential;
pub use native::{check_evaluate, check_load_catalog, check_load_policy};
#[cfg(feature = "yaml-reference")]
pub use yaml::check_yaml_reader;

/// The fuzz targets, by name, with their check (the regression folders in
/// `fuzz/regressions/` are named after them).
pub fn check_for(target: &str) -> Option<fn(&[u8])> {
    match target {
        "load_policy" => Some(check_load_policy),
        "load_catalog" => Some(check_load_catalog),
        "evaluate" => Some(check_evaluate),
        #[cfg(feature = "component")]
        "differential" => Some(check_differential),
        #[cfg(feature = "yaml-reference")]
        "yaml_reader" => Some(check_yaml_reader),
        _ => None,
    }
}

/// Every target name, in the order `fuzz/run` runs them.
pub const TARGETS: &[&str] = &["load_policy", "load_catalog", "evaluate", "differential"];
