//! `load_catalog`: see fuzz/README.md and `fuzz_checks::check_load_catalog`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_load_catalog(data));
