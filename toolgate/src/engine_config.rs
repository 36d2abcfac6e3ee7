// The wasmtime configuration of toolgate's engines, in one place: wasmtime
// refuses precompiled code made under another configuration, and the name of
// shipped and cached code carries its compatibility hash (src/lib.rs).

/// `fuel`: wasmtime fuel is the backstop behind the guest meter; otherwise an
/// epoch deadline is (see `Limits`).
fn engine_config(fuel: bool) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    if fuel {
        config.consume_fuel(true);
    } else {
        config.epoch_interruption(true);
    }
    if std::env::var_os("TOOLGATE_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}
