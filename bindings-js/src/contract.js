// The WIT contract this package speaks. Every name of the component's
// interface (src/abi.js) is built from this one constant.

// BEGIN contract: generated from component-build/src by
// `cargo run --release --locked --bin component-build -- --write-limits`; do not edit.
/** The WIT contract version this package speaks (wit/toolgate.wit); checked on every load. */
export const CONTRACT_VERSION = '0.2.0';
// END contract
