//! `yaml_reader`: see fuzz/README.md and `fuzz_checks::check_yaml_reader`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_yaml_reader(data));
