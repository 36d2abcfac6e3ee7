#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test file: a panic is a failure"
)]
//! docs/codes.md is generated from the code tables (engine decisions,
//! load problems, host faults, SDK errors, gateway codes) and must be fresh:
//! `TOOLGATE_WRITE_DOCS=1 cargo test -p toolgate-proxy --test codes_doc`.

use policy_core::{Code, ProblemCode};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn render() -> String {
    let mut out = String::from(
        "# Every code a user can see\n\n\
         Generated from the code tables by `toolgate-proxy/tests/codes_doc.rs`; do not edit.\n\n\
         ## Decisions (the engine, every runtime)\n\n\
         `error.code` of a decision (docs/spec.md §5). Messages are fixed per code.\n\n\
         | code | retryable | message |\n|---|---|---|\n",
    );
    for code in Code::ALL {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            code.as_str(),
            code.retryable(),
            code.message()
        );
    }
    out.push_str(
        "\n## Host faults (built by every host, `outcome: \"error\"`)\n\n\
         Defined once in `component-build/src/faults.rs` (the Rust SDK includes it) and generated into the JS and Python packages and `tests/vectors/host-faults.json`.\n\n\
         | code | retryable | message |\n|---|---|---|\n",
    );
    let faults: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("tests/vectors/host-faults.json")).unwrap()).unwrap();
    let mut names: Vec<&String> = faults["faults"].as_object().unwrap().keys().collect();
    names.sort();
    for name in names {
        let decision: Value = serde_json::from_str(faults["faults"][name.as_str()].as_str().unwrap()).unwrap();
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} |",
            decision["error"]["retryable"],
            decision["error"]["message"].as_str().unwrap()
        );
    }
    out.push_str(
        "\n## Load problems (`ORIGIN_CODE`, with line and column)\n\n\
         A policy, catalog, context, turn state or input the engine refuses: `POLICY_`, `CATALOG_`, `CALL_`, \
         `CONTEXT_`, `STATE_` or `INPUT_` followed by one of these.\n\n| code | meaning |\n|---|---|\n",
    );
    for code in ProblemCode::ALL {
        let _ = writeln!(out, "| `{}` | {} |", code.as_str(), code.meaning());
    }
    out.push_str(
        "\n## Findings (`toolgate check`, `findings()` in every SDK, the gateway's start-up log)\n\n\
         Warnings about rules that load but deserve a look (`FILE:LINE:COL: warning: message (CODE)`).\n\n\
         | code | meaning |\n|---|---|\n",
    );
    for (code, meaning) in policy_core::error::FINDING_CODES {
        let _ = writeln!(out, "| `{code}` | {meaning} |");
    }
    out.push_str(
        "\n## SDK errors (Rust `toolgate::Error::code`, JS `error.code`, Python `error.code`)\n\n\
         | code | meaning |\n|---|---|\n\
         | `COMPONENT_INVALID` | the component could not be compiled or instantiated |\n\
         | `CONTRACT_VERSION_MISMATCH` | the component implements another WIT contract version than the host |\n\
         | `INPUT_TOO_LARGE` | an input over the host's cap (`limits.MAX_INPUT_BYTES`) |\n\
         | `ENGINE_TRAP`, `ENGINE_LIMIT`, `ENGINE_OUT_OF_MEMORY` | a fault on a call that returns a value (list, turn, seal payload) |\n\
         | `STATE_INVALID` (JS and Python `StateKeys`) | a sealed `requestState` that does not open |\n\
         | `STATE_KEY_INVALID` (JS and Python `StateKeys`) | a key ring that cannot be built (no secret, one shorter than 32 bytes) |\n\
         | `CLOSED` (JS) | a call on a `Toolgate` after `close()` |\n\
         \n## `toolgate-rmcp` (`Guarded`)\n\n\
         In a JSON-RPC error's `data.toolgate`.\n\n\
         | code | meaning |\n|---|---|\n\
         | `GUARD_ERROR` | the wrapper could not decide (the server's catalog did not load, the engine's answer was unreadable, a decision stopped): nothing was forwarded |\n",
    );
    out.push_str("\n## Gateway (`toolgate proxy`)\n\nIn a JSON-RPC error's `data.toolgate`.\n\n| code | retryable | when |\n|---|---|---|\n");
    for (code, when, retryable) in toolgate_proxy::codes::GATEWAY_CODES {
        let _ = writeln!(out, "| `{code}` | {retryable} | {when} |");
    }
    out
}

#[test]
fn codes_doc_is_fresh() {
    let path = root().join("docs/codes.md");
    let expected = render();
    if std::env::var_os("TOOLGATE_WRITE_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        text == expected,
        "docs/codes.md is stale: TOOLGATE_WRITE_DOCS=1 cargo test -p toolgate-proxy --test codes_doc"
    );
}

#[test]
fn every_host_fault_is_built_by_the_rust_sdk_with_the_same_bytes() {
    let faults: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("tests/vectors/host-faults.json")).unwrap()).unwrap();
    for (name, bytes) in faults["faults"].as_object().unwrap() {
        let code: &'static str = Box::leak(name.clone().into_boxed_str());
        let outcome = toolgate::Outcome::fault(code);
        assert_eq!(outcome.decision.json, bytes.as_str().unwrap(), "{name}");
    }
}
