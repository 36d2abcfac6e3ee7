// The WIT contract this package speaks. Every name of the component's
// interface (src/abi.js) is built from this one constant.

/** The WIT contract version this package speaks; checked on every load. */
export const CONTRACT_VERSION = '0.2.0';
