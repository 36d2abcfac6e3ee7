//! `load_policy`: see fuzz/README.md and `fuzz_checks::check_load_policy`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_load_policy(data));
