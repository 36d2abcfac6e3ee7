// The wasmtime configuration of toolgate's engines. One definition, included
// by the SDK (src/lib.rs) and by its build script (build.rs), which compiles
// the component ahead of time with it: wasmtime refuses precompiled code made
// under another configuration, so the two must never differ.

/// `fuel`: wasmtime fuel is the backstop behind the guest meter; otherwise an
/// epoch deadline is (see `Limits`).
fn engine_config(fuel: bool) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    if fuel {
        config.consume_fuel(true);
    } else {
        config.epoch_interruption(true);
    }
    config
}
