//! The `toolgate-proxy` binary: usage and load errors, and the fault path
//! with a real child that is not an MCP server. The real-server and
//! real-client tests are in `tests/e2e/` (run by `./test`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_toolgate-proxy");

#[test]
fn no_upstream_is_a_usage_error() {
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no upstream"), "{err}");
}

/// Without a policy the server's hints decide: said at start, and only then.
#[test]
fn a_gateway_without_a_policy_says_the_server_s_hints_decide() {
    let dir = std::env::temp_dir().join(format!("toolgate-proxy-nopolicy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, "version: 1\n").unwrap();
    let said = |flags: &[&std::ffi::OsStr]| {
        let out = Command::new(BIN)
            .args(flags)
            .args(["--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).contains("no --policy: the server's own annotations decide")
    };
    assert!(said(&[]));
    assert!(!said(&["--policy".as_ref(), policy.as_os_str()]));
}

/// An audit file that cannot be opened is a start-up error naming it (exit
/// 2, as an input that cannot be read), not a gateway that stopped (1).
#[test]
fn an_audit_file_that_cannot_be_opened_is_exit_2() {
    let out = Command::new(BIN)
        .args(["--audit", "/nonexistent-toolgate-dir/audit.jsonl", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent-toolgate-dir/audit.jsonl"));
}

/// With `--log-format json` the gateway's own notices are JSON lines too
/// (review 28: they came as plain text among the JSON logs). The upstream
/// here writes nothing to stderr, whose lines the gateway passes on as is.
#[test]
fn with_json_logs_the_gateway_s_own_lines_are_json() {
    let out = Command::new(BIN)
        .args(["--log-format", "json", "--", "sh", "-c", "echo not json; exit 3"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}\n{err}")))
        .collect();
    let notice = lines
        .iter()
        .find(|line| {
            line["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("no --policy"))
        })
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(
        (&notice["level"], &notice["target"]),
        (&"WARN".into(), &"toolgate_proxy".into())
    );
}

#[test]
fn a_bad_policy_fails_at_start_with_its_position() {
    let dir = std::env::temp_dir().join(format!("toolgate-proxy-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("bad.yaml");
    std::fs::write(&policy, "version: 1\ndefaults:\n  require_confirmation: \"true\"\n").unwrap();
    let out = Command::new(BIN)
        .arg("--policy")
        .arg(&policy)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml") && err.contains("3:"), "{err}");
}

#[test]
fn an_upstream_that_prints_garbage_gets_a_clear_error_not_a_hang() {
    let mut child = Command::new(BIN)
        .args(["--", "sh", "-c", "echo this is not json; sleep 30"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["error"]["code"], -32603);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("not a JSON-RPC message"), "{message}");
    // Closing stdin ends the proxy (and its child). The deadline is a hang
    // guard, not a measure.
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the proxy did not exit after its client left"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_issuer_s_settings_without_auth_are_refused_not_ignored() {
    for flags in [
        &[
            "--jwks",
            "jwks.json",
            "--issuer",
            "https://idp.example",
            "--audience",
            "mcp",
        ][..],
        &["--require-scope", "mcp:tools", "--issuer", "https://idp.example"][..],
        &["--introspection-url", "https://idp.example/introspect"][..],
        &["--introspection-cache", "5"][..],
        &["--jwks-max-age", "60"][..],
        // Bounds per caller bound nothing where callers cannot be told apart.
        &["--max-sessions-per-caller", "2"][..],
        &["--max-in-flight-per-caller", "2"][..],
    ] {
        let out = Command::new(BIN)
            .args(["--listen", "127.0.0.1:0"])
            .args(flags)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{flags:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("without --auth"), "{flags:?}: {err}");
    }
}

#[test]
fn a_password_in_the_upstream_url_is_refused_without_being_echoed() {
    let out = Command::new(BIN)
        .args(["--upstream", "http://svc:S3cretPw@127.0.0.1:1/mcp"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--upstream-header") && !err.contains("S3cretPw"), "{err}");
}

#[test]
fn secrets_for_the_upstream_go_in_clear_text_only_to_this_machine() {
    let out = Command::new(BIN)
        .args([
            "--upstream",
            "http://mcp.example.com/mcp",
            "--upstream-token-env",
            "TG_TEST_TOKEN",
        ])
        .env("TG_TEST_TOKEN", "t0ken")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use https") && !err.contains("t0ken"), "{err}");
}

/// Review 22 and 23: an `--auth` that could verify no token, or a flag of the
/// other way of checking tokens, stops the start (exit 64) instead of
/// serving a gateway that refuses every caller while it reports ready, or
/// an operator believing revoked tokens are asked about.
#[test]
fn an_auth_that_could_verify_nothing_or_mixes_its_ways_does_not_start() {
    let dir = std::env::temp_dir().join(format!("toolgate-proxy-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.json");
    std::fs::write(&empty, r#"{"keys":[]}"#).unwrap();
    let hmac_only = dir.join("hmac.json");
    std::fs::write(&hmac_only, r#"{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}"#).unwrap();
    let ec = dir.join("ec.json");
    std::fs::write(
        &ec,
        r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"e","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#,
    )
    .unwrap();
    let jwt = |jwks: &std::path::Path, issuer: &str, extra: &[&str]| {
        let out = Command::new(BIN)
            .args(["--listen", "127.0.0.1:0", "--auth", "jwt", "--jwks"])
            .arg(jwks)
            .args(["--issuer", issuer, "--audience", "mcp"])
            .args(extra)
            .args(["--", "true"])
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // A key set that verifies nothing, or none at all, is an input that did
    // not load (2); a flag given wrong is a usage error (64).
    let missing = dir.join("missing.json");
    for (jwks, issuer, extra, says, exit) in [
        (&empty, "https://idp.example", &[][..], "no key that can verify", 2),
        (&hmac_only, "https://idp.example", &[][..], "no key that can verify", 2),
        (&missing, "https://idp.example", &[][..], "missing.json", 2),
        (&ec, "", &[][..], "empty value", 64),
        (&ec, " ", &[][..], "empty value", 64),
        (
            &ec,
            "https://idp.example",
            &["--introspection-cache", "5"][..],
            "--auth introspection",
            64,
        ),
    ] {
        let (code, err) = jwt(jwks, issuer, extra);
        assert_eq!(code, Some(exit), "{jwks:?} {issuer:?} {extra:?}: {err}");
        assert!(err.contains(says), "{err}");
    }
    let introspection = Command::new(BIN)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--auth",
            "introspection",
            "--jwks-max-age",
            "60",
        ])
        .args([
            "--introspection-url",
            "https://idp.example/introspect",
            "--introspection-client-id",
            "g",
        ])
        .args([
            "--introspection-secret-env",
            "PATH",
            "--issuer",
            "https://idp.example",
            "--audience",
            "mcp",
        ])
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(introspection.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&introspection.stderr).contains("--jwks-max-age"));
    std::fs::remove_dir_all(&dir).ok();
}

/// A confirmation store that does not answer at start stops the start as an
/// input that could not be reached (exit 2), not as a usage error (64),
/// which an orchestrator would take for a configuration it must not retry.
#[test]
fn a_store_that_does_not_answer_at_start_is_an_input_not_reached() {
    let run = |store: &str| {
        let out = Command::new(BIN)
            .args(["--listen", "127.0.0.1:0", "--store", store, "--", "true"])
            .env("TOOLGATE_STATE_SECRET", "0123456789abcdef0123456789abcdef")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run("redis://127.0.0.1:1");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unreachable"), "{err}");
    let (code, err) = run("http://127.0.0.1:1");
    assert_eq!(code, Some(64), "{err}");
}
