//! `toolgate test FILE...`: policy tests, like `opa test`. A file names a
//! policy and a catalog (relative to itself) and lists cases:
//!
//! ```yaml
//! policy: tool_policies.yaml      # optional: absent means legacy behaviour
//! catalog: catalog.json
//! cases:
//!   - name: a plan change needs confirmation
//!     context: { surface: confirming, scopes: [plans:write] }   # optional
//!     call: { name: alterar_plano, arguments: { customer_id: "42", new_plan_id: PLUS } }
//!     expect: CONFIRMATION_REQUIRED    # or ALLOW
//! ```

use super::read_text;
use anyhow::{Context as _, Result, anyhow};
use serde::Deserialize;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolgate::Engine;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestFile {
    policy: Option<PathBuf>,
    catalog: PathBuf,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default)]
    context: Option<serde_json::Value>,
    call: serde_json::Value,
    expect: String,
}

/// One case's result.
struct Outcome {
    file: String,
    name: String,
    expected: String,
    got: String,
    decision: String,
}

impl Outcome {
    fn passed(&self) -> bool {
        self.got == self.expected
    }
}

pub fn run(files: &[PathBuf], json: bool) -> Result<ExitCode> {
    let engine = Engine::cached()?;
    let mut outcomes = Vec::new();
    for file in files {
        outcomes.extend(run_file(&engine, file).with_context(|| file.display().to_string())?);
    }
    let failed = outcomes.iter().filter(|o| !o.passed()).count();
    let passed = outcomes.len() - failed;
    let mut out = std::io::stdout().lock();
    if json {
        let cases: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|o| {
                serde_json::json!({
                    "file": o.file,
                    "name": o.name,
                    "ok": o.passed(),
                    "expected": o.expected,
                    "got": o.got,
                    "decision": serde_json::from_str::<serde_json::Value>(&o.decision).unwrap_or(serde_json::Value::Null),
                })
            })
            .collect();
        writeln!(
            out,
            "{}",
            serde_json::json!({ "passed": passed, "failed": failed, "cases": cases })
        )?;
    } else {
        for o in &outcomes {
            if o.passed() {
                writeln!(out, "ok    {}: {}", o.file, o.name)?;
            } else {
                writeln!(
                    out,
                    "FAIL  {}: {}: expected {}, got {}\n      {}",
                    o.file, o.name, o.expected, o.got, o.decision
                )?;
            }
        }
        writeln!(out, "{passed} passed, {failed} failed")?;
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::EXIT_NO)
    })
}

fn run_file(engine: &Engine, file: &Path) -> Result<Vec<Outcome>> {
    let text = read_text(file, None)?;
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    let spec: TestFile = serde_saphyr::from_str_with_options(&text, options).map_err(|e| anyhow!("{e}"))?;
    // A file that tests nothing must not read as a pass (`cases: []`, or a
    // list emptied by a bad merge).
    if spec.cases.is_empty() {
        return Err(anyhow!("`cases` is empty: a test file lists at least one case"));
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let policy = super::read_policy(spec.policy.as_ref().map(|p| dir.join(p)).as_deref())?;
    let catalog = read_text(&dir.join(&spec.catalog), Some("catalog"))?;
    let rules = engine.load(policy.as_deref(), &catalog).map_err(|e| anyhow!("{e}"))?;
    Ok(spec
        .cases
        .iter()
        .map(|case| {
            let context = case
                .context
                .as_ref()
                .map_or_else(|| "{}".to_owned(), serde_json::Value::to_string);
            let decision = rules.evaluate_raw(case.call.to_string().as_bytes(), &context);
            Outcome {
                file: file.display().to_string(),
                name: case.name.clone(),
                expected: case.expect.clone(),
                got: decision.code.clone().unwrap_or_else(|| "ALLOW".to_owned()),
                decision: decision.json,
            }
        })
        .collect())
}
