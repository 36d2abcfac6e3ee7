//! `gateway`: arbitrary client lines through a real gateway session (the
//! component deciding) to a recording upstream; see
//! `toolgate_proxy::fuzzing`. A broken invariant is a crash.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(e) = toolgate_proxy::fuzzing::check_gateway(data) {
        panic!("gateway invariant broken: {e}");
    }
});
