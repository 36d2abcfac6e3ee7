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

pub fn run(files: &[PathBuf]) -> Result<ExitCode> {
    let engine = Engine::cached()?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for file in files {
        let (p, f) = run_file(&engine, file).with_context(|| file.display().to_string())?;
        passed += p;
        failed += f;
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn run_file(engine: &Engine, file: &Path) -> Result<(usize, usize)> {
    let text = read_text(file)?;
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    let spec: TestFile = serde_saphyr::from_str_with_options(&text, options).map_err(|e| anyhow!("{e}"))?;
    let dir = file.parent().unwrap_or(Path::new("."));
    let policy = spec.policy.as_ref().map(|p| read_text(&dir.join(p))).transpose()?;
    let catalog = read_text(&dir.join(&spec.catalog))?;
    let rules = engine.load(policy.as_deref(), &catalog).map_err(|e| anyhow!("{e}"))?;
    let (mut passed, mut failed) = (0, 0);
    for case in &spec.cases {
        let context = case
            .context
            .as_ref()
            .map_or_else(|| "{}".to_owned(), serde_json::Value::to_string);
        let decision = rules.evaluate_raw(case.call.to_string().as_bytes(), &context);
        let got = decision.code.as_deref().unwrap_or("ALLOW");
        if got == case.expect {
            passed += 1;
            println!("ok    {}: {}", file.display(), case.name);
        } else {
            failed += 1;
            println!(
                "FAIL  {}: {}: expected {}, got {got}\n      {}",
                file.display(),
                case.name,
                case.expect,
                decision.json
            );
        }
    }
    Ok((passed, failed))
}
