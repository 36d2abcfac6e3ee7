//! The codes the gateway itself answers with, in a JSON-RPC error's
//! `data.toolgate` (or, for `STORE_UNAVAILABLE` and `GATEWAY_REFUSED`, as
//! described): one table, from which docs/codes.md is generated.

/// `(code, when, retryable)`.
pub const GATEWAY_CODES: &[(&str, &str, bool)] = &[
    (
        "UPSTREAM_UNAVAILABLE",
        "the upstream server could not be started or reached; nothing was forwarded",
        true,
    ),
    (
        "UPSTREAM_TIMEOUT",
        "the upstream did not answer within `--timeout` (progress resets it); whether a call ran is unknown",
        true,
    ),
    (
        "UPSTREAM_CLOSED",
        "the connection to the upstream ended before it answered; whether a call ran is unknown",
        true,
    ),
    ("UPSTREAM_ERROR", "the upstream failed on the request", true),
    (
        "UPSTREAM_INPUT_REQUIRED",
        "the upstream answered an allowed `tools/call` with an MCP 2026-07-28 input request, which the gateway does not relay: a retry would carry the upstream's state and answers past the decision (`-32603`); the call did not complete",
        false,
    ),
    (
        "CATALOG_REJECTED",
        "the upstream's tool catalog could not be loaded by the engine; no call is allowed",
        false,
    ),
    (
        "ENGINE_ERROR",
        "the engine answered something the gateway could not read; the call was not forwarded",
        false,
    ),
    ("PROXY_ERROR", "the gateway could not build a message", false),
    (
        "CLIENT_CLOSED",
        "the client went away while the upstream asked it something",
        false,
    ),
    (
        "CLIENT_ERROR",
        "the client did not answer the upstream's request",
        false,
    ),
    (
        "CLIENT_CAPABILITY_UNDECLARED",
        "the upstream asked the client something (sampling, sampling with tools, roots, an elicitation of a mode) its handshake did not declare; the client was not asked (`-32601`)",
        false,
    ),
    (
        "CLIENT_BUSY",
        "the upstream asked the client something while 16 of its requests in this session already waited for the client's answer; the client was not asked",
        true,
    ),
    ("CANCELLED", "the client cancelled the request", false),
    (
        "UNAUTHENTICATED",
        "with `--auth`, a request that reached a session with no authenticated caller attached (`-32603`); nothing was allowed",
        false,
    ),
    (
        "GATEWAY_REFUSED",
        "a message the gate refuses before any session sees it (unparseable, untyped, a method not relayed)",
        false,
    ),
    (
        "TOO_MANY_SESSIONS",
        "an `initialize` over HTTP past `--max-sessions`, or past `--max-sessions-per-caller` for its subject (HTTP 429, `Retry-After`); no session was opened",
        true,
    ),
    (
        "TOO_MANY_REQUESTS",
        "a request over HTTP past `--max-in-flight-per-caller` for its subject (open `GET` streams count), with `--auth` (HTTP 429, `Retry-After`); it was not forwarded",
        true,
    ),
    (
        "GATEWAY_BUSY",
        "a message over HTTP of more than 2^14 JSON values whose values do not fit in what other such messages leave of 2^20 (HTTP 503, `Retry-After`); it was read but not parsed or relayed",
        true,
    ),
    (
        "SHUTTING_DOWN",
        "an `initialize` over HTTP while a stop drains (HTTP 503, `Retry-After`); no session was opened (requests on open sessions are still served until `--shutdown-grace` ends)",
        true,
    ),
    (
        "UNKNOWN_TASK",
        "a `tasks/get`, `tasks/update` or `tasks/cancel` naming a task the upstream did not start for this caller on this session through the gateway (`-32602`; another caller's task is answered the same as none)",
        false,
    ),
    (
        "STORE_UNAVAILABLE",
        "a blocked result (host fault): the ledger that makes a sealed confirmation single-use could not be reached",
        true,
    ),
];
