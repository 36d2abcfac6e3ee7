// The decisions a host builds itself when the component cannot decide
// (docs/spec.md §5, §7), defined once for every host.
//
// This file is `component-build`'s `faults` module, and the Rust SDK includes
// it as is (`include!`): plain `//` comments only, no `use`, only constants.
// `cargo run --release --locked --bin component-build -- --write-limits`
// generates the JavaScript and Python tables and tests/vectors/host-faults.json
// from it, and a test checks they are fresh.

pub const ENGINE_TRAP: &str = r#"{"ok":false,"error":{"code":"ENGINE_TRAP","message":"The policy engine failed on this call; it was not allowed. Report it if it repeats.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}"#;
pub const ENGINE_LIMIT: &str = r#"{"ok":false,"error":{"code":"ENGINE_LIMIT","message":"The policy engine ran out of its time budget on this call; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}"#;
pub const ENGINE_OUT_OF_MEMORY: &str = r#"{"ok":false,"error":{"code":"ENGINE_OUT_OF_MEMORY","message":"The policy engine ran out of memory on this call; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}"#;
pub const INPUT_TOO_LARGE: &str = r#"{"ok":false,"error":{"code":"INPUT_TOO_LARGE","message":"The call is larger than this host accepts; it was not allowed. Send a smaller call.","retryable":false,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}"#;
// The gateway's: the ledger of redeemed sealed confirmations is unreachable.
pub const STORE_UNAVAILABLE: &str = r#"{"ok":false,"error":{"code":"STORE_UNAVAILABLE","message":"The store that makes a confirmation single-use could not be reached, so the call was not run. Try again shortly.","retryable":true,"outcome":"error"},"metadata":{"tool":null,"blocked_by_policy":true}}"#;

// Every host fault, by code, in the order the generated tables list them.
pub const ALL: [(&str, &str); 5] = [
    ("ENGINE_TRAP", ENGINE_TRAP),
    ("ENGINE_LIMIT", ENGINE_LIMIT),
    ("ENGINE_OUT_OF_MEMORY", ENGINE_OUT_OF_MEMORY),
    ("INPUT_TOO_LARGE", INPUT_TOO_LARGE),
    ("STORE_UNAVAILABLE", STORE_UNAVAILABLE),
];
