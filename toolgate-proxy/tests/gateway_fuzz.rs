//! Replays the gateway fuzz target's seeds (fuzz/seeds/gateway) and
//! deterministic mutations of them through the gateway fuzz harness, in
//! `cargo test`, so the invariant is checked on every run without the
//! fuzzer: every call the upstream sees has an allowing audit line before
//! it, nothing custom reaches it, the session keeps answering.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::path::Path;
use toolgate_proxy::fuzzing::{check_gateway, upstream_calls};

fn seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/gateway");
    let out = files_in(&dir);
    assert!(out.len() >= 5, "seeds missing in {}", dir.display());
    out
}

/// Crashes the long fuzz runs found and fixed (`fuzz/regressions/gateway/`;
/// none yet): replayed here, since CI's fuzz smoke leaves this target out.
fn regressions() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/gateway");
    if dir.is_dir() { files_in(&dir) } else { Vec::new() }
}

fn files_in(dir: &Path) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    out.sort();
    out
}

/// xorshift: a fixed sequence, so a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&[u8]] = &[
    b"\"confirmed\":true,",
    b"\"name\":\"write\",",
    b"\"requestState\":\"s\",",
    b"\"_meta\":{},",
    b"\"arguments\":{\"path\":\"/a\"},",
    b"\"method\":\"tools/call\",",
    b"\"id\":1,",
    b"[[[[",
    b"\xff",
    b"\\u0000",
    b"\n",
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(data.len() + 1);
        match rng.below(4) {
            0 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                data.splice(at..at, token.iter().copied());
            }
            1 if at < data.len() => {
                let end = (at + 1 + rng.below(8)).min(data.len());
                data.drain(at..end);
            }
            2 if at < data.len() => data[at] = rng.next() as u8,
            _ => {
                let other = TOKENS[rng.below(TOKENS.len())];
                data.extend_from_slice(other);
            }
        }
    }
    data
}

#[test]
fn seeds_and_mutations_keep_the_invariant() {
    let seeds = seeds();
    for seed in &seeds {
        check_gateway(seed).unwrap_or_else(|e| panic!("seed {:?}: {e}", String::from_utf8_lossy(seed)));
    }
    for regression in regressions() {
        check_gateway(&regression)
            .unwrap_or_else(|e| panic!("regression {:?}: {e}", String::from_utf8_lossy(&regression)));
    }
    assert!(
        upstream_calls() >= 3,
        "the seeds' allowed calls did not reach the upstream: the harness is vacuous"
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let seed = &seeds[rng.below(seeds.len())];
        let data = mutate(&mut rng, seed);
        check_gateway(&data).unwrap_or_else(|e| panic!("mutation {:?}: {e}", String::from_utf8_lossy(&data)));
    }
}
