//! The fuzz checks without the fuzzer: every seed input (every policy,
//! catalog, call and context in `tests/vectors/*.json`) and every saved
//! regression (`fuzz/regressions/<target>/*`) through all four checks,
//! including the differential one (native against the component).

// Test code: panicking on a broken expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use conformance::{Op, read_file, vector_files};
use fuzz_checks::fixtures::{VECTOR_FILES, fixtures};
use fuzz_checks::input::Input;
use fuzz_checks::{TARGETS, check_for};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Seeds = BTreeMap<&'static str, BTreeSet<Vec<u8>>>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The seed corpora, built the way `fuzz/seed-corpus` builds them.
fn seeds() -> Seeds {
    let mut seeds: Seeds = TARGETS.iter().map(|t| (*t, BTreeSet::new())).collect();
    let mut add = |target: &'static str, bytes: Vec<u8>| {
        seeds.get_mut(target).unwrap().insert(bytes);
    };
    let fixed = fixtures();
    for path in vector_files().unwrap() {
        let file = read_file(&path).unwrap();
        let policy = file.policy_text().unwrap();
        let catalog = file.catalog_text().unwrap();
        if let Some(policy) = &policy {
            add("load_policy", policy.as_bytes().to_vec());
        }
        add("load_catalog", catalog.as_bytes().to_vec());
        // The file's calls go to its own rule set if it is a fixed one, else
        // to the first with its catalog, else to the first.
        let index = fixed
            .iter()
            .position(|f| f.policy == policy && f.catalog == catalog)
            .or_else(|| fixed.iter().position(|f| f.catalog == catalog))
            .unwrap_or(0);
        let mut first_call = None;
        for case in &file.cases {
            let (call, context) = match case.op {
                Op::Evaluate | Op::Decide => (case.call_bytes().unwrap(), case.context_text()),
                Op::List => (Vec::new(), case.context_text()),
                _ => continue,
            };
            if case.op == Op::Evaluate && first_call.is_none() {
                first_call = Some(call.clone());
            }
            for target in ["evaluate", "differential"] {
                add(target, Input::encode(index, None, &call, &context));
            }
        }
        // Policy mode: the file's policy with a fixed rule set's catalog
        // (the first fixture whose catalog is this file's).
        if let (Some(policy), Some(index)) = (&policy, fixed.iter().position(|f| f.catalog == catalog)) {
            let call = first_call.unwrap_or_else(|| br#"{"name":"get_plan","arguments":{}}"#.to_vec());
            for target in ["evaluate", "differential"] {
                add(target, Input::encode(index, Some(policy), &call, "{}"));
            }
        }
    }
    seeds
}

fn regressions() -> Vec<(String, PathBuf)> {
    let dir = repo().join("fuzz/regressions");
    let mut out = Vec::new();
    let Ok(targets) = std::fs::read_dir(&dir) else {
        return out;
    };
    for target in targets {
        let target = target.unwrap().path();
        if !target.is_dir() {
            continue;
        }
        let name = target.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            check_for(&name).is_some(),
            "fuzz/regressions/{name}: not a fuzz target ({TARGETS:?})"
        );
        for file in std::fs::read_dir(&target).unwrap() {
            let file = file.unwrap().path();
            if file.is_file() && file.extension().is_none_or(|e| e != "md") {
                out.push((name.clone(), file));
            }
        }
    }
    out.sort();
    out
}

/// Runs `data` through every check; names the check that failed.
fn all_checks(what: &str, data: &[u8]) {
    for target in TARGETS {
        let check = check_for(target).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| check(data)) {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!("{what}: check {target} failed: {why}");
        }
    }
}

#[test]
fn every_fixed_rule_set_loads_alike_natively_and_in_the_component() {
    assert_eq!(fixtures().len(), VECTOR_FILES.len());
    for (index, fixture) in fixtures().iter().enumerate() {
        let on_disk = std::fs::read_to_string(repo().join("tests/vectors").join(fixture.name)).unwrap();
        assert_eq!(
            VECTOR_FILES[index].1, on_disk,
            "{}: embedded copy is stale",
            fixture.name
        );
        let native = policy_core::Rules::load(fixture.policy.as_deref(), &fixture.catalog).unwrap();
        assert_eq!(
            native.revision(),
            fuzz_checks::fixtures::native_rules()[index].revision()
        );
        // The differential check loads the component's copies on first use.
        fuzz_checks::check_differential(&Input::encode(index, None, b"{}", "{}"));
    }
}

#[test]
fn every_seed_input_passes_every_check() {
    let seeds = seeds();
    let mut count = 0;
    for (target, inputs) in &seeds {
        assert!(inputs.len() >= 10, "only {} seeds for {target}", inputs.len());
        for data in inputs {
            all_checks(&format!("seed for {target} {:?}", String::from_utf8_lossy(data)), data);
            count += 1;
        }
    }
    eprintln!("{count} seed inputs passed all {} checks", TARGETS.len());
}

#[test]
fn every_regression_passes_every_check() {
    let found = regressions();
    for (target, path) in &found {
        let data = std::fs::read(path).unwrap();
        all_checks(&format!("{target} regression {}", path.display()), &data);
    }
    eprintln!("{} regression inputs passed", found.len());
}

/// An input with its JSON parts re-serialized by serde_json, so that Python's
/// and serde_json's ways of writing the same JSON (number formats, spacing)
/// compare equal.
fn normalized(target: &str, data: &[u8]) -> Vec<u8> {
    let json = |bytes: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(bytes)
            .map(|v| v.to_string().into_bytes())
            .unwrap_or_else(|_| bytes.to_vec())
    };
    if !matches!(target, "evaluate" | "differential") {
        return data.to_vec();
    }
    let input = Input::split(data, fixtures().len()).unwrap();
    let mut out = vec![data[0]];
    out.extend(input.policy.map(|p| p.into_owned().into_bytes()).unwrap_or_default());
    out.push(0xFF);
    out.extend(json(input.call));
    out.push(0xFF);
    out.extend(json(input.context.as_bytes()));
    out
}

/// `fuzz/seed-corpus` (python3) writes exactly the seeds built above: the
/// script and the input format cannot drift apart.
#[test]
fn the_seed_corpus_script_writes_the_same_seeds() {
    if std::process::Command::new("python3").arg("--version").output().is_err() {
        eprintln!("python3 not found: skipped");
        return;
    }
    let out = std::env::temp_dir().join(format!("toolgate-seed-corpus-{}", std::process::id()));
    let status = std::process::Command::new("python3")
        .arg(repo().join("fuzz/seed-corpus"))
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "fuzz/seed-corpus failed");
    let expected = seeds();
    for target in TARGETS {
        let mut written = BTreeSet::new();
        for file in std::fs::read_dir(out.join(target)).unwrap() {
            written.insert(normalized(target, &std::fs::read(file.unwrap().path()).unwrap()));
        }
        let want: BTreeSet<Vec<u8>> = expected[target].iter().map(|d| normalized(target, d)).collect();
        let want = &want;
        assert!(
            written == *want,
            "{target}: the script wrote {} seeds, the test builds {}\nonly in the script: {:?}\nonly in the test: {:?}",
            written.len(),
            want.len(),
            written
                .difference(want)
                .take(3)
                .map(|d| String::from_utf8_lossy(d))
                .collect::<Vec<_>>(),
            want.difference(&written)
                .take(3)
                .map(|d| String::from_utf8_lossy(d))
                .collect::<Vec<_>>(),
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
