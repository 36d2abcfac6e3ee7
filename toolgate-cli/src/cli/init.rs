//! `toolgate init`: a starter policy from a live server's catalog, and
//! `toolgate pin`: the pins of an existing policy brought up to date.
//!
//! Everything the policy says about a tool comes from the engine: its
//! classification and where it came from (the decision metadata of a probe
//! call), its definition hash (the `PIN_MISMATCH` finding of a probe
//! policy). The CLI only writes it down.

use anyhow::{Context as _, Result, anyhow, bail};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use toolgate::{Engine, RuleSet};

use super::read_text;

/// A definition hash no tool has: every tool pinned to it reports its own.
const NO_PIN: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// What the engine says about one tool.
struct Classified {
    name: String,
    operation_type: String,
    effect: String,
    source: String,
    pin: Option<String>,
}

pub fn init(out: &Path, force: bool, upstream: Option<&str>, server: &[String], timeout: Duration) -> Result<ExitCode> {
    if out.exists() && !force {
        bail!("{} exists; give --force to replace it", out.display());
    }
    let (name, catalog) =
        toolgate_proxy::catalog::read_live(upstream, server, timeout)?.ok_or_else(|| anyhow!("no server named"))?;
    let engine = Engine::cached()?;
    let tools = classify(&engine, &catalog)?;
    let text = starter_policy(&name, &tools);
    // The policy must load over the very catalog it was written from, with
    // no error, before it is written: a starter that does not check is
    // worse than none.
    let rules = engine
        .load(Some(&text), &catalog)
        .map_err(|e| anyhow!("the starter policy does not load: {e}"))?;
    let errors: Vec<String> = rules
        .findings()?
        .into_iter()
        .filter(|f| f.severity == "error")
        .map(|f| format!("{} ({})", f.problem.message, f.problem.code))
        .collect();
    if !errors.is_empty() {
        bail!("the starter policy has errors: {}", errors.join("; "));
    }
    std::fs::write(out, &text).with_context(|| out.display().to_string())?;
    let writes = tools.iter().filter(|t| t.operation_type == "transactional").count();
    eprintln!(
        "toolgate: wrote {}: {} tool(s) of {name}, {writes} write(s) needing a person's confirmation, {} read(s); policy revision {}",
        out.display(),
        tools.len(),
        tools.len() - writes,
        rules.revision()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn pin(policy_path: &Path, upstream: Option<&str>, server: &[String], timeout: Duration) -> Result<ExitCode> {
    let text = read_text(policy_path)?;
    let (name, catalog) =
        toolgate_proxy::catalog::read_live(upstream, server, timeout)?.ok_or_else(|| anyhow!("no server named"))?;
    let engine = Engine::cached()?;
    let rules = engine
        .load(Some(&text), &catalog)
        .map_err(|e| anyhow!("{}: {e}", policy_path.display()))?;
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut changed = 0usize;
    for finding in rules.findings()? {
        let problem = &finding.problem;
        if problem.code != "PIN_MISMATCH" {
            continue;
        }
        let Some(new) = definition_hash(&problem.message) else {
            continue;
        };
        let tool = problem.path.strip_prefix("tool_policies.").unwrap_or(&problem.path);
        if replace_pin(&mut lines, problem.line, new) {
            changed += 1;
            eprintln!(
                "toolgate: {}:{}: `{tool}` pinned to its current definition {new}",
                policy_path.display(),
                problem.line
            );
        }
    }
    if changed > 0 {
        let mut updated = lines.join("\n");
        if text.ends_with('\n') {
            updated.push('\n');
        }
        engine
            .load(Some(&updated), &catalog)
            .map_err(|e| anyhow!("the re-pinned policy does not load: {e}"))?;
        std::fs::write(policy_path, updated).with_context(|| policy_path.display().to_string())?;
    }
    eprintln!(
        "toolgate: {changed} pin(s) of {} updated against {name}",
        policy_path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Each tool of the catalog with the engine's classification and pin.
fn classify(engine: &Engine, catalog: &str) -> Result<Vec<Classified>> {
    let names = tool_names(catalog)?;
    let plain = engine
        .load(None, catalog)
        .map_err(|e| anyhow!("the server's catalog: {e}"))?;
    let pins = pins(engine, catalog, &names)?;
    names
        .into_iter()
        .map(|name| {
            let about = metadata(&plain, &name)?;
            let field = |key: &str| about.get(key).and_then(|v| v.as_str()).unwrap_or("unknown").to_owned();
            Ok(Classified {
                operation_type: field("operation_type"),
                effect: field("effect"),
                source: field("policy_source"),
                pin: pins.get(&name).cloned(),
                name,
            })
        })
        .collect()
}

fn tool_names(catalog: &str) -> Result<Vec<String>> {
    let value: serde_json::Value = serde_json::from_str(catalog)?;
    let tools = value
        .get("tools")
        .and_then(|t| t.as_array())
        .ok_or_else(|| anyhow!("the server's tools/list has no tools array"))?;
    Ok(tools
        .iter()
        .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_owned))
        .collect())
}

/// The decision metadata of a call to `name` (no arguments, no scope
/// check): the tool's operation type, effect and where it came from.
fn metadata(rules: &RuleSet, name: &str) -> Result<serde_json::Map<String, serde_json::Value>> {
    let call = serde_json::json!({ "name": name, "arguments": {} }).to_string();
    let decision: serde_json::Value = serde_json::from_str(&rules.evaluate_raw(call.as_bytes(), "{}").json)?;
    decision
        .get("metadata")
        .and_then(|m| m.as_object())
        .cloned()
        .ok_or_else(|| anyhow!("no decision metadata for `{name}`"))
}

/// Every tool's definition hash, as the engine reports a pin that does not
/// match it.
fn pins(engine: &Engine, catalog: &str, names: &[String]) -> Result<std::collections::HashMap<String, String>> {
    let entries: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|n| (n.clone(), serde_json::json!({ "pin": NO_PIN })))
        .collect();
    // JSON is YAML: the probe policy needs no quoting rules of its own.
    let probe = serde_json::json!({ "version": 1, "tool_policies": entries }).to_string();
    let rules = engine
        .load(Some(&probe), catalog)
        .map_err(|e| anyhow!("pinning the server's tools: {e}"))?;
    Ok(rules
        .findings()?
        .into_iter()
        .filter(|f| f.problem.code == "PIN_MISMATCH")
        .filter_map(|f| {
            let tool = f.problem.path.strip_prefix("tool_policies.")?.to_owned();
            Some((tool, definition_hash(&f.problem.message)?.to_owned()))
        })
        .collect())
}

/// The `sha256:<64 hex>` a `PIN_MISMATCH` message ends with.
fn definition_hash(message: &str) -> Option<&str> {
    let at = message.rfind("sha256:")?;
    let hash = message.get(at..at + 7 + 64)?;
    hash.get(7..)?.bytes().all(|b| b.is_ascii_hexdigit()).then_some(hash)
}

/// Replaces the hash on the first `pin:` line of the entry that starts on
/// `entry_line` (1-based), before the next line indented as little as it.
fn replace_pin(lines: &mut [String], entry_line: u32, new: &str) -> bool {
    let start = usize::try_from(entry_line.saturating_sub(1)).unwrap_or(usize::MAX);
    let Some(entry) = lines.get(start) else {
        return false;
    };
    let indent = entry.len() - entry.trim_start().len();
    for line in lines.iter_mut().skip(start + 1) {
        let trimmed = line.trim_start();
        if !trimmed.is_empty() && !trimmed.starts_with('#') && line.len() - trimmed.len() <= indent {
            return false;
        }
        if trimmed.starts_with("pin:")
            && let Some(at) = line.find("sha256:")
            && let Some(old) = line.get(at..at + 7 + 64)
        {
            *line = line.replacen(&old.to_owned(), new, 1);
            return true;
        }
    }
    false
}

fn why(source: &str) -> &'static str {
    match source {
        "catalog" => "the server's own annotations or effect",
        "builtin" => "no annotation says it only reads, so it is treated as a write (MCP's default)",
        "defaults" => "the policy's defaults",
        "tool_policies" => "an explicit policy entry",
        "tools_yaml" => "the legacy tools.yaml",
        _ => "unknown",
    }
}

fn starter_policy(server: &str, tools: &[Classified]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# A starter policy written by `toolgate init` from the tools of:");
    let _ = writeln!(out, "#   {}", server.replace('\n', " "));
    let _ = writeln!(
        out,
        "# Every tool it lists is named below, with how toolgate classifies it and why. Writes wait for a\n\
         # person's confirmation; each `pin` holds its tool back when the server changes its definition\n\
         # (`toolgate pin` accepts the new one). Review, then run it: `toolgate proxy --policy FILE -- SERVER`."
    );
    out.push_str("version: 1\ntool_policies:\n");
    for tool in tools {
        // A JSON string is a YAML double-quoted scalar: any name is safe.
        let key = serde_json::Value::String(tool.name.clone()).to_string();
        let _ = writeln!(out, "  {key}:");
        let _ = writeln!(
            out,
            "    # {} (effect: {}): {}",
            tool.operation_type,
            tool.effect,
            why(&tool.source)
        );
        // Anything but a known read (a probe that faulted has no
        // classification) is written as a write that needs confirmation.
        let write = tool.operation_type != "read_only";
        let _ = writeln!(
            out,
            "    operation_type: {}",
            if write { "transactional" } else { "read_only" }
        );
        if write {
            out.push_str("    require_confirmation: true\n");
        }
        if let Some(pin) = &tool.pin {
            let _ = writeln!(out, "    pin: \"{pin}\"");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const HASH_A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const HASH_B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn the_hash_is_read_from_the_findings_message() {
        assert_eq!(
            definition_hash(&format!(
                "`x` changed since it was pinned; it is held back. Its definition is now {HASH_A}"
            )),
            Some(HASH_A)
        );
        assert_eq!(definition_hash("sha256:abc"), None);
        assert_eq!(definition_hash("no hash"), None);
    }

    #[test]
    fn only_the_entrys_own_pin_is_replaced() {
        let mut lines: Vec<String> = [
            "tool_policies:",
            "  a:",
            "    # a comment",
            "    operation_type: read_only",
            &format!("    pin: \"{HASH_A}\""),
            "  b:",
            &format!("    pin: \"{HASH_A}\""),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert!(replace_pin(&mut lines, 6, HASH_B));
        assert_eq!(lines[4], format!("    pin: \"{HASH_A}\""));
        assert_eq!(lines[6], format!("    pin: \"{HASH_B}\""));
        let mut no_pin: Vec<String> = [
            "  a:",
            "    operation_type: read_only",
            "  b:",
            &format!("    pin: {HASH_A}"),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert!(!replace_pin(&mut no_pin, 1, HASH_B));
        assert_eq!(no_pin[3], format!("    pin: {HASH_A}"));
    }
}
