//! The `toolgate` binary end to end.

// Test code: panicking on a broken expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn plans(file: &str) -> String {
    format!("{EXAMPLES}/plans/{file}")
}

#[test]
fn eval_prints_one_decision_per_line_and_survives_malformed_lines() {
    let policy = plans("tool_policies.yaml");
    let catalog = plans("catalog.json");
    let input = b"{\"name\":\"consultar_plano\",\"arguments\":{\"customer_id\":\"1\"}}\n\nnot json\r\n\xff\xfe\n{\"name\":\"alterar_plano\",\"arguments\":{\"customer_id\":\"1\",\"new_plan_id\":\"X\"}}\n";
    let out = run(&["eval", "--policy", &policy, "--catalog", &catalog], input);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let codes: Vec<Option<String>> = stdout
        .lines()
        .map(|l| {
            let d: serde_json::Value = serde_json::from_str(l).unwrap();
            d["error"]["code"].as_str().map(str::to_owned)
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            None,
            Some("BAD_REQUEST".into()),
            Some("BAD_REQUEST".into()),
            Some("CONFIRMATION_REQUIRED".into())
        ]
    );
}

#[test]
fn list_honours_surface_scopes_and_allowlist() {
    let policy = plans("tool_policies.yaml");
    let catalog = plans("catalog.json");
    let out = run(
        &[
            "list",
            "--policy",
            &policy,
            "--catalog",
            &catalog,
            "--surface",
            "direct",
            "--allow",
            "consultar_plano",
        ],
        b"",
    );
    assert!(out.status.success());
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["consultar_plano"]);
}

#[test]
fn a_malformed_policy_is_refused_with_file_line_and_column() {
    let dir = std::env::temp_dir().join(format!("toolgate-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "version: 1\ntool_policies:\n  alterar_plano:\n    require_confirmation: \"true\"\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    let out = run(&["eval", "--policy", bad, "--catalog", &plans("catalog.json")], b"");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with(&format!("toolgate: {bad}:4:27: ")), "{stderr}");
    assert!(stderr.contains("(POLICY_INVALID_VALUE)"), "{stderr}");

    let out = run(&["check", "--policy", bad, "--catalog", &plans("catalog.json")], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .starts_with(&format!("{bad}:4:27: error: "))
    );
}

#[test]
fn check_reports_lints_with_positions() {
    let dir = std::env::temp_dir().join(format!("toolgate-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("p.yaml");
    std::fs::write(
        &policy,
        "version: 1\ndefaults:\n  operation_type: read_only\ntool_policies:\n  ghost: {}\n  cancelar_conta:\n    operation_type: read_only\n  listar_planos: {operation_type: transactional, require_confirmation: false}\n",
    )
    .unwrap();
    let policy = policy.to_str().unwrap();
    // Warnings only: exit 0, or 1 with --strict (a CI gate); a clean policy passes --strict.
    let strict = run(
        &[
            "check",
            "--strict",
            "--policy",
            policy,
            "--catalog",
            &plans("catalog.json"),
        ],
        b"",
    );
    assert_eq!(strict.status.code(), Some(1), "{strict:?}");
    let clean = run(
        &[
            "check",
            "--strict",
            "--policy",
            &plans("tool_policies.yaml"),
            "--catalog",
            &plans("catalog.json"),
        ],
        b"",
    );
    assert!(clean.status.success(), "{clean:?}");
    let out = run(&["check", "--policy", policy, "--catalog", &plans("catalog.json")], b"");
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains(&format!("{policy}:5:3: warning: tool_policies.ghost: `ghost` is in the policy but not in the catalog (POLICY_TOOL_NOT_IN_CATALOG)")), "{stdout}");
    assert!(
        stdout.contains(&format!("{policy}:6:3: warning:")) && stdout.contains("POLICY_CONTRADICTS_HINT"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{policy}:8:3: warning: ")) && stdout.contains("`listar_planos` is transactional (write) and runs without confirmation (TRANSACTIONAL_WITHOUT_CONFIRMATION)"),
        "{stdout}"
    );
}

#[test]
fn policy_tests_pass_and_a_wrong_expectation_fails() {
    let out = run(&["test", &plans("plans.test.yaml")], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8(out.stdout).unwrap().contains("6 passed, 0 failed"));

    let dir = std::env::temp_dir().join(format!("toolgate-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("wrong.test.yaml");
    std::fs::write(
        &file,
        format!(
            "policy: {}\ncatalog: {}\ncases:\n  - name: wrong\n    call: {{ name: alterar_plano, arguments: {{ customer_id: \"1\", new_plan_id: X }} }}\n    expect: ALLOW\n",
            plans("tool_policies.yaml"),
            plans("catalog.json")
        ),
    )
    .unwrap();
    let out = run(&["test", file.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stdout).unwrap().contains("0 passed, 1 failed"));

    // A file without cases tests nothing: an error, not "0 passed, 0 failed".
    let empty = dir.join("empty.test.yaml");
    std::fs::write(&empty, format!("catalog: {}\ncases: []\n", plans("catalog.json"))).unwrap();
    let out = run(&["test", empty.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8(out.stderr).unwrap().contains("`cases` is empty"));
}

#[test]
fn demo_runs_the_retail_scenario() {
    let out = run(&["demo"], b"");
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    // As a person reads it: what waits and why, then the confirmed call runs.
    assert!(
        stdout.contains("waits               solicitar_devolucao (CONFIRMATION_REQUIRED: "),
        "{stdout}"
    );
    assert!(stdout.contains("turn state: AWAITING_CONFIRMATION"), "{stdout}");
    assert!(stdout.contains(
        "runs                solicitar_devolucao {\"confirmed\":true,\"order_id\":\"123\",\"reason\":\"arrependimento da compra\"} -> devolução registrada"
    ), "{stdout}");
    assert!(
        !stdout.contains("\"transaction_status\""),
        "no raw state without --json: {stdout}"
    );

    let out = run(&["demo", "--json"], b"");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let states: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("state "))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(states.len(), 2);
    assert_eq!(states[0]["transaction_status"], "AWAITING_CONFIRMATION");
    assert_eq!(states[1]["transaction_status"], "EXECUTING");
}

#[test]
fn usage_errors_exit_64() {
    let out = run(&["eval"], b"");
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn help_proxy_is_the_gateways_own_help() {
    for args in [&["help", "proxy"][..], &["proxy", "--help"][..]] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("--trust-model-confirmation") && text.contains("--state-secret-file"),
            "{args:?}: {text}"
        );
    }
}

#[test]
fn eval_one_call_and_fail_on_deny() {
    let policy = plans("tool_policies.yaml");
    let catalog = plans("catalog.json");
    let read = r#"{"name":"consultar_plano","arguments":{"customer_id":"1"}}"#;
    let write = r#"{"name":"alterar_plano","arguments":{"customer_id":"1","new_plan_id":"X"}}"#;
    let base = ["eval", "--policy", &policy, "--catalog", &catalog];
    let with = |extra: &[&str]| run(&[&base[..], extra].concat(), b"");

    let out = with(&["--call", read, "--fail-on-deny"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let decision: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision["ok"], true);

    // Denied: printed either way; the exit code only with --fail-on-deny.
    let out = with(&["--call", write]);
    assert_eq!(out.status.code(), Some(0));
    let out = with(&["--call", write, "--fail-on-deny"]);
    assert_eq!(out.status.code(), Some(1));
    let decision: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision["error"]["code"], "CONFIRMATION_REQUIRED");

    // Lines on stdin: one denial among allowed calls is enough.
    let input = format!("{read}\n{write}\n{read}\n");
    let out = run(&[&base[..], &["--fail-on-deny"]].concat(), input.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 3);
}

#[test]
fn check_a_policy_alone_then_as_json() {
    let dir = std::env::temp_dir().join(format!("toolgate-alone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.yaml");
    // `ghost` names no tool, but with no catalog that cannot be known.
    std::fs::write(
        &good,
        "version: 1\ntool_policies:\n  ghost:\n    operation_type: read_only\n",
    )
    .unwrap();
    let good = good.to_str().unwrap();
    let out = run(&["check", "--policy", good], b"");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));

    let out = run(&["check", "--policy", good, "--format", "json"], b"");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], 0);
    assert_eq!(report["loads"], true);
    assert!(report["policy_revision"].as_str().unwrap().starts_with("sha256:"));

    // Against the catalog the same entry is reported.
    let out = run(
        &[
            "check",
            "--policy",
            good,
            "--catalog",
            &plans("catalog.json"),
            "--format",
            "json",
        ],
        b"",
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"POLICY_TOOL_NOT_IN_CATALOG"), "{report}");

    // A wrong type: refused with its position, as text and as JSON.
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "version: 1\ntool_policies:\n  x:\n    require_confirmation: yes\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    let out = run(&["check", "--policy", bad], b"");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(&format!("{bad}:4:")), "{text}");
    let out = run(&["check", "--policy", bad, "--format", "json"], b"");
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["loads"], false);
    assert_eq!(report["findings"][0]["file"], bad);
    assert_eq!(report["findings"][0]["line"], 4);
    assert_eq!(report["findings"][0]["severity"], "error");

    // Bytes that are not UTF-8 are a finding with its code and position,
    // as text and as JSON, in the policy and in the catalog.
    let not_utf8 = dir.join("not-utf8.yaml");
    std::fs::write(&not_utf8, b"version: 1\ntool_policies:\n  x\xff: {}\n").unwrap();
    let not_utf8 = not_utf8.to_str().unwrap();
    let out = run(&["check", "--policy", not_utf8], b"");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{not_utf8}:3:4: error: not valid UTF-8 (POLICY_SYNTAX)\n")
    );
    for (flags, code, file) in [
        (
            ["--policy", not_utf8, "--catalog", &plans("catalog.json")],
            "POLICY_SYNTAX",
            not_utf8,
        ),
        (["--policy", good, "--catalog", not_utf8], "CATALOG_SYNTAX", not_utf8),
    ] {
        let out = run(&[&["check"][..], &flags, &["--format", "json"]].concat(), b"");
        assert_eq!(out.status.code(), Some(1));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["loads"], false);
        assert_eq!(report["errors"], 1);
        let finding = &report["findings"][0];
        assert_eq!(
            (&finding["file"], &finding["line"], &finding["column"], &finding["code"]),
            (
                &serde_json::json!(file),
                &serde_json::json!(3),
                &serde_json::json!(4),
                &serde_json::json!(code)
            ),
            "{report}"
        );
    }

    // An unreadable input is exit 2 (one line, each cause once), a usage error 64.
    let out = run(&["check", "--policy", &dir.join("missing.yaml").to_string_lossy()], b"");
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8(out.stderr).unwrap();
    assert_eq!(said.lines().count(), 1, "{said}");
    assert_eq!(said.matches("No such file").count(), 1, "{said}");
    let out = run(
        &[
            "check",
            "--policy",
            good,
            "--catalog",
            "x.json",
            "--upstream",
            "http://127.0.0.1:1/mcp",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn test_results_as_json() {
    let out = run(&["test", "--format", "json", &plans("plans.test.yaml")], b"");
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], 6);
    assert_eq!(report["failed"], 0);
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    assert!(
        cases
            .iter()
            .all(|c| c["ok"] == true && c["decision"]["ok"].is_boolean())
    );
}

#[test]
fn help_lists_the_exit_codes() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for line in ["  0 ", "  1 ", "  2 ", "  64 "] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
}

/// Runs a just-written executable. Tests run on threads of one process, so a
/// sibling test's `fork` can inherit the copy's still-open write descriptor for
/// the instant before its child execs; `exec` then fails with "text file
/// busy" (ETXTBSY). That is a property of the test harness, not of toolgate, so
/// the run is retried until the sibling's child has exec'd.
fn first_run_of_a_fresh_copy(command: &mut Command) -> std::process::Output {
    let mut attempts = 0;
    loop {
        match command.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && attempts < 100 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.unwrap(),
        }
    }
}

/// A copy of the binary alone in `<tmp>/<tag>-<pid>/bin/`, as a package ships
/// it, with `toolgate precompile` run there: (its directory, the copy, the
/// native code it wrote, checked to be beside it).
fn packaged_copy(tag: &str) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let cli = bin.join("toolgate");
    std::fs::copy(BIN, &cli).unwrap();
    let out = first_run_of_a_fresh_copy(Command::new(&cli).arg("precompile"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shipped = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert_eq!(shipped.parent(), Some(bin.as_path()));
    (dir, cli, shipped)
}

/// `toolgate precompile` ships the native code beside the binary, a fresh
/// start with an empty cache loads it (compiles nothing), and a damaged
/// shipped file means compiling, with the same decision.
#[test]
fn native_code_shipped_beside_the_binary_is_loaded_and_a_damaged_one_is_not() {
    let (dir, cli, shipped) = packaged_copy("toolgate-shipped");
    let name = shipped.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(
        name.starts_with("toolgate_policy-") && name.ends_with(".cwasm"),
        "{name}"
    );
    assert!(std::fs::metadata(&shipped).unwrap().len() > 1_000_000);

    let policy = plans("tool_policies.yaml");
    let catalog = plans("catalog.json");
    let decide = |cache: &std::path::Path| {
        let out = Command::new(&cli)
            .env("TOOLGATE_CACHE_DIR", cache)
            .args(["eval", "--policy", &policy, "--catalog", &catalog, "--call"])
            .arg(r#"{"name":"alterar_plano","arguments":{"customer_id":"1","new_plan_id":"X"}}"#)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let fresh_cache = dir.join("cache-shipped");
    let with_shipped = decide(&fresh_cache);
    assert!(
        !fresh_cache.exists(),
        "the shipped code was not used: the engine compiled"
    );

    std::fs::write(&shipped, b"\x7fELF not code").unwrap();
    let damaged_cache = dir.join("cache-damaged");
    assert_eq!(decide(&damaged_cache), with_shipped);
    assert!(
        std::fs::read_dir(&damaged_cache)
            .unwrap()
            .any(|e| e.unwrap().file_name() == *name),
        "a refused shipped file means compiling into the cache under the same name"
    );
    let decision: serde_json::Value = serde_json::from_slice(&with_shipped).unwrap();
    assert_eq!(decision["error"]["code"], "CONFIRMATION_REQUIRED");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Code anyone may write beside the binary (a planted or world-writable
/// file) is not loaded: the engine compiles instead.
#[cfg(unix)]
#[test]
fn world_writable_native_code_beside_the_binary_is_not_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, cli, shipped) = packaged_copy("toolgate-shipped-open");
    std::fs::set_permissions(&shipped, std::fs::Permissions::from_mode(0o666)).unwrap();

    let cache = dir.join("cache");
    let policy = plans("tool_policies.yaml");
    let catalog = plans("catalog.json");
    let out = Command::new(&cli)
        .env("TOOLGATE_CACHE_DIR", &cache)
        .args(["eval", "--policy", &policy, "--catalog", &catalog, "--call"])
        .arg(r#"{"name":"consultar_plano","arguments":{"customer_id":"1"}}"#)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let decision: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision["ok"], true);
    assert!(
        cache.is_dir(),
        "a world-writable shipped file was loaded: the engine should have compiled into the cache"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `toolgate prepare` writes the engine with the rules loaded; `--prepared`
/// answers byte for byte as the shipped engine, for its texts and others.
#[test]
fn a_prepared_engine_answers_as_the_shipped_one() {
    let dir = std::env::temp_dir().join(format!("toolgate-cli-prepared-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out_dir = dir.to_str().unwrap();
    let (policy, catalog) = (plans("tool_policies.yaml"), plans("catalog.json"));
    let out = run(
        &[
            "prepare",
            "--policy",
            &policy,
            "--catalog",
            &catalog,
            "--out",
            out_dir,
            "--native",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(written.len(), 3, "{written:?}");
    assert!(written.iter().all(|f| std::path::Path::new(f).is_file()), "{written:?}");
    let calls = b"{\"name\":\"alterar_plano\",\"arguments\":{}}\n{\"name\":\"consultar_plano\",\"arguments\":{\"customer_id\":\"c-1\"}}\nnot json\n";
    for args in [
        vec!["eval", "--policy", &policy, "--catalog", &catalog],
        vec!["eval", "--catalog", &catalog],
        vec![
            "list",
            "--policy",
            &policy,
            "--catalog",
            &catalog,
            "--surface",
            "direct",
        ],
    ] {
        let shipped = run(&args, calls);
        let prepared = run(&[args.as_slice(), &["--prepared", out_dir]].concat(), calls);
        assert!(shipped.status.success());
        assert_eq!(prepared.stdout, shipped.stdout, "{args:?}");
        assert_eq!(prepared.status.code(), shipped.status.code());
    }
    // Refused rules are refused when preparing, as when loading.
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "version: 1\nunknown_key: 1\n").unwrap();
    let out = run(
        &[
            "prepare",
            "--policy",
            bad.to_str().unwrap(),
            "--catalog",
            &catalog,
            "--out",
            out_dir,
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("(POLICY_UNKNOWN_KEY)"));
    // A directory without a prepared component is an error, never the shipped engine.
    let out = run(
        &[
            "eval",
            "--catalog",
            &catalog,
            "--prepared",
            dir.join("nothing").to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    // ...and its line ends with the code, as every error line does.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.trim_end().ends_with("(COMPONENT_INVALID)"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reader that stops early (`toolgate demo | head -1`) ends the command
/// quietly with the shell's broken-pipe status, never a panic on stderr.
#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    for args in [&["demo"][..], &["test", &plans("plans.test.yaml")][..]] {
        let mut child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before anything is read: every write finds no reader.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(141), "{args:?}: {err}");
    }
}
