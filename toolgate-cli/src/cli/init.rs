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
    /// Under a policy that does not take the server's word (a bare
    /// `version: 1`): what the written policy starts from.
    operation_type: String,
    effect: String,
    source: String,
    /// The server says it only reads (its annotations, read with no policy
    /// at all), where a policy would not take that word.
    claimed_read_only: bool,
    /// The effect the engine gives the tool when it takes the server's word
    /// (`--read-only-from-hints` writes it so).
    claimed_effect: String,
    pin: Option<String>,
}

/// A policy that only says it is one: the server's hints do not loosen
/// anything under it (`trust_catalog_hints` defaults to false).
const BARE_POLICY: &str = "version: 1\n";

pub fn init(
    out: &Path,
    force: bool,
    read_only_from_hints: bool,
    upstream: Option<&str>,
    server: &[String],
    timeout: Duration,
) -> Result<ExitCode> {
    if out.exists() && !force {
        bail!("{} exists; give --force to replace it", out.display());
    }
    let (name, catalog) =
        toolgate_proxy::catalog::read_live(upstream, server, timeout)?.ok_or_else(|| anyhow!("no server named"))?;
    let engine = Engine::cached()?;
    let mut tools = classify(&engine, &catalog)?;
    if read_only_from_hints {
        // The operator took the server's word: its claimed reads are reads.
        for tool in tools.iter_mut().filter(|t| t.claimed_read_only) {
            tool.operation_type = "read_only".into();
            // Review 23: the comment said `(effect: write)` of a tool written
            // read_only; the engine's effect for it once the hint is taken.
            tool.effect = tool.claimed_effect.clone();
            tool.source = "taken".into();
            tool.claimed_read_only = false;
        }
    }
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
    write_replacing(out, &text)?;
    let waiting = tools.iter().filter(|t| t.operation_type != "read_only").count();
    let claimed = tools.iter().filter(|t| t.claimed_read_only).count();
    eprintln!(
        "toolgate: wrote {}: {} tool(s) of {name}, {waiting} waiting for a person's confirmation ({claimed} of them \
         the server says only read: review their entries), {} read(s); policy revision {}",
        out.display(),
        tools.len(),
        tools.len() - waiting,
        rules.revision()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn pin(policy_path: &Path, upstream: Option<&str>, server: &[String], timeout: Duration) -> Result<ExitCode> {
    let text = read_text(policy_path, Some("policy"))?;
    let (name, catalog) =
        toolgate_proxy::catalog::read_live(upstream, server, timeout)?.ok_or_else(|| anyhow!("no server named"))?;
    let engine = Engine::cached()?;
    let rules = engine
        .load(Some(&text), &catalog)
        .map_err(|e| anyhow!("{}: {e}", policy_path.display()))?;
    // What the server now says each tool does, its word taken (no policy).
    let claimed = engine
        .load(None, &catalog)
        .map_err(|e| anyhow!("the server's catalog: {e}"))?;
    let stale: Vec<_> = rules
        .findings()?
        .into_iter()
        .filter(|f| f.problem.code == "PIN_MISMATCH")
        .map(|f| f.problem)
        .collect();
    // First every stale pin rewritten, to see what the entries then make of
    // the new definitions; then only the ones that may be taken.
    let (all_lines, _) = repinned_lines(&text, &stale, |_| true);
    let all = all_lines.join("\n");
    let trial = engine
        .load(Some(&all), &catalog)
        .map_err(|e| anyhow!("the re-pinned policy does not load: {e}"))?;
    // A tool the entry makes read-only that the server now says writes is
    // the change a pin exists to stop: it stays held back until the entry is
    // reviewed. (A stricter entry, transactional where the server says it
    // reads, is no reason to hold anything.)
    let mut loosened = std::collections::BTreeSet::new();
    for problem in &stale {
        let tool = pinned_tool(problem).to_owned();
        let operation = |set: &RuleSet| -> Result<String> {
            Ok(metadata(set, &tool)?
                .get("operation_type")
                .and_then(|v| v.as_str())
                .unwrap_or("unknown")
                .to_owned())
        };
        if operation(&trial)? == "read_only" && operation(&claimed)? != "read_only" {
            eprintln!(
                "toolgate: {}:{}: `{tool}` is read_only in the policy, but the server now says it writes; its pin was \
                 not updated (review the entry, then pin again)",
                policy_path.display(),
                problem.line
            );
            loosened.insert(tool);
        }
    }
    let (lines, repinned) = repinned_lines(&text, &stale, |tool| !loosened.contains(tool));
    let left = stale.len() - repinned.len();
    for problem in &stale {
        let tool = pinned_tool(problem);
        if !loosened.contains(tool) && !repinned.iter().any(|(t, _)| t == tool) {
            eprintln!(
                "toolgate: {}:{}: the pin of `{tool}` could not be rewritten here (write it by hand): {}",
                policy_path.display(),
                problem.line,
                problem.message
            );
        }
    }
    if !repinned.is_empty() {
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let mut updated = lines.join(newline);
        if text.ends_with('\n') {
            updated.push_str(newline);
        }
        // Every pin rewritten must now hold, and no other: a line-based edit
        // that reached another entry is refused, and nothing is written.
        let still_stale: Vec<String> = engine
            .load(Some(&updated), &catalog)
            .map_err(|e| anyhow!("the re-pinned policy does not load: {e}"))?
            .findings()?
            .into_iter()
            .filter(|f| f.problem.code == "PIN_MISMATCH")
            .map(|f| pinned_tool(&f.problem).to_owned())
            .collect();
        if still_stale.len() != left || repinned.iter().any(|(tool, _)| still_stale.contains(tool)) {
            bail!(
                "{} was not changed: rewriting its pins did not make them hold (write them by hand)",
                policy_path.display()
            );
        }
        write_replacing(policy_path, &updated)?;
        for (tool, new) in &repinned {
            eprintln!(
                "toolgate: {}: `{tool}` pinned to its current definition {new}",
                policy_path.display()
            );
        }
    }
    eprintln!(
        "toolgate: {} pin(s) of {} updated against {name}{}",
        repinned.len(),
        policy_path.display(),
        if left > 0 {
            format!("; {left} left stale (held back)")
        } else {
            String::new()
        }
    );
    Ok(if left > 0 {
        ExitCode::from(super::EXIT_NO)
    } else {
        ExitCode::SUCCESS
    })
}

/// The tool a `PIN_MISMATCH` finding is about: its path is
/// `tool_policies.<tool>`.
fn pinned_tool(problem: &toolgate::Problem) -> &str {
    problem.path.strip_prefix("tool_policies.").unwrap_or(&problem.path)
}

/// `text`'s lines with the pin of each stale entry `take` accepts rewritten
/// to its current definition, and the (tool, hash) pairs rewritten.
fn repinned_lines(
    text: &str,
    stale: &[toolgate::Problem],
    take: impl Fn(&str) -> bool,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut repinned = Vec::new();
    for problem in stale {
        let tool = pinned_tool(problem);
        if !take(tool) {
            continue;
        }
        if let Some(new) = definition_hash(&problem.message)
            && replace_pin(&mut lines, problem.line, new)
        {
            repinned.push((tool.to_owned(), new.to_owned()));
        }
    }
    (lines, repinned)
}

/// Writes `text` beside `path` (the file a link names), then renames it over
/// `path`: a reader (a gateway's `--watch`) sees the old file or the new
/// one, never a part. The file's permissions are kept.
pub fn write_replacing(path: &Path, text: &str) -> Result<()> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = target.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let permissions = std::fs::metadata(&target).map(|m| m.permissions()).ok();
    std::fs::write(&temporary, text)
        .and_then(|()| match permissions {
            Some(p) => std::fs::set_permissions(&temporary, p),
            None => Ok(()),
        })
        .and_then(|()| std::fs::rename(&temporary, &target))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&temporary);
        })
        .with_context(|| path.display().to_string())
}

/// Each tool of the catalog with the engine's classification and pin.
fn classify(engine: &Engine, catalog: &str) -> Result<Vec<Classified>> {
    let names = tool_names(catalog)?;
    let load = |policy| {
        engine
            .load(policy, catalog)
            .map_err(|e| anyhow!("the server's catalog: {e}"))
    };
    // A server's annotations are its own claims (MCP calls them untrusted):
    // the starter policy is what the engine decides when it does not take
    // them, and says where the server claims more.
    let (claimed, bare) = (load(None)?, load(Some(BARE_POLICY))?);
    let pins = pins(engine, catalog, &names)?;
    names
        .into_iter()
        .map(|name| {
            let about = metadata(&bare, &name)?;
            let field = |key: &str| about.get(key).and_then(|v| v.as_str()).unwrap_or("unknown").to_owned();
            let operation_type = field("operation_type");
            let claims = metadata(&claimed, &name)?;
            let claimed_read_only = operation_type != "read_only"
                && claims.get("operation_type").and_then(|v| v.as_str()) == Some("read_only");
            let claimed_effect = claims
                .get("effect")
                .and_then(|v| v.as_str())
                .unwrap_or("unknown")
                .to_owned();
            Ok(Classified {
                operation_type,
                effect: field("effect"),
                source: field("policy_source"),
                claimed_read_only,
                claimed_effect,
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
            let hash = definition_hash(&f.problem.message)?.to_owned();
            Some((pinned_tool(&f.problem).to_owned(), hash))
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
        "taken" => "the server's annotations say it only reads, taken at its word (--read-only-from-hints)",
        _ => "unknown",
    }
}

/// For a name that is not plain ASCII, the code points a reviewer cannot
/// tell from their look-alikes (`рlain_write` with a Cyrillic `р` is
/// another tool than `plain_write`, and may be a read where the other
/// writes).
fn non_ascii_note(name: &str) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    let points: Vec<String> = name
        .chars()
        .filter(|c| !c.is_ascii() && seen.insert(*c))
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect();
    if points.is_empty() {
        return None;
    }
    Some(format!(
        "The name is not plain ASCII: it holds {} (a name that looks the same is another tool).",
        points.join(", ")
    ))
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
        if let Some(note) = non_ascii_note(&tool.name) {
            let _ = writeln!(out, "    # {note}");
        }
        let because = if tool.claimed_read_only {
            "the server's annotations say it only reads, which a policy does not take on the server's word"
        } else {
            why(&tool.source)
        };
        let _ = writeln!(
            out,
            "    # {} (effect: {}): {because}",
            tool.operation_type, tool.effect
        );
        // Anything but a known read (a probe that faulted has no
        // classification) is written as a write that needs confirmation.
        let write = tool.operation_type != "read_only";
        if tool.claimed_read_only {
            // Stating `transactional` would contradict the server's hint
            // (a `check` finding); the bare policy already makes it one.
            out.push_str("    # Checked that it only reads? Replace the next line with `operation_type: read_only`.\n");
        } else {
            let _ = writeln!(
                out,
                "    operation_type: {}",
                if write { "transactional" } else { "read_only" }
            );
        }
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

    /// A server's read-only hint is its claim: the starter policy makes the
    /// tool wait for a person and says how to take the claim once checked.
    #[test]
    fn a_servers_read_only_claim_is_written_as_a_question_not_a_rule() {
        let catalog = r#"{"tools":[
          {"name":"says_it_reads","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},
          {"name":"plain","inputSchema":{"type":"object"}}
        ]}"#;
        let engine = Engine::cached().unwrap();
        let tools = classify(&engine, catalog).unwrap();
        let text = starter_policy("test", &tools);
        assert!(!text.contains("operation_type: read_only\n"), "{text}");
        assert!(
            text.contains("Replace the next line with `operation_type: read_only`"),
            "{text}"
        );
        let code = |policy: &str, tool: &str| {
            let rules = engine.load(Some(policy), catalog).unwrap();
            let call = format!(r#"{{"name":"{tool}","arguments":{{}}}}"#);
            let decision: serde_json::Value =
                serde_json::from_str(&rules.evaluate_raw(call.as_bytes(), "{}").json).unwrap();
            assert!(rules.findings().unwrap().is_empty(), "{text}");
            decision["error"]["code"].as_str().map(str::to_owned)
        };
        for tool in ["says_it_reads", "plain"] {
            assert_eq!(code(&text, tool).as_deref(), Some("CONFIRMATION_REQUIRED"), "{tool}");
        }
        // The reviewer's edit, as the comment says.
        let checked = text.replacen("    require_confirmation: true\n", "    operation_type: read_only\n", 1);
        assert_eq!(code(&checked, "says_it_reads"), None, "{checked}");
        assert_eq!(code(&checked, "plain").as_deref(), Some("CONFIRMATION_REQUIRED"));
    }

    /// Two names that look alike are told apart in the starter policy.
    #[test]
    fn a_look_alike_name_says_which_code_points_it_holds() {
        let catalog = r#"{"tools":[
          {"name":"plain_write","inputSchema":{"type":"object"}},
          {"name":"\u0440lain_write","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}
        ]}"#;
        let engine = Engine::cached().unwrap();
        let text = starter_policy("test", &classify(&engine, catalog).unwrap());
        let notes: Vec<&str> = text.lines().filter(|l| l.contains("not plain ASCII")).collect();
        assert_eq!(notes.len(), 1, "{text}");
        assert!(notes[0].contains("U+0440"), "{text}");
        assert!(
            engine
                .load(Some(&text), catalog)
                .unwrap()
                .findings()
                .unwrap()
                .is_empty(),
            "{text}"
        );
    }

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
