//! `toolgate demo`: the bundled examples, through the component.
//!
//! 1. The seed's retail return scenario (examples/retail) through the turn
//!    state machine: the order lookup runs at once, the return waits for the
//!    person's confirmation, and the confirming turn executes the very same
//!    call with `confirmed: true`.
//! 2. The seed's plan-change policy (examples/plans): what each call gets.
//!
//! The demo prints what the host would execute; the order lookup's answer
//! comes from a stand-in for the retail server (the Python package runs the
//! real MCP server in its demo and tests).

use anyhow::{Result, anyhow};
use serde_json::{Value, json};
use std::io::Write as _;
use std::process::ExitCode;
use toolgate::{Context, Engine};

const RETAIL_POLICY: &str = include_str!("bundled/retail-policy.yaml");
const RETAIL_CATALOG: &str = include_str!("bundled/retail-tools.yaml");
const PLANS_POLICY: &str = include_str!("bundled/plans-policy.yaml");
const PLANS_CATALOG: &str = include_str!("bundled/plans-catalog.json");

/// The seed's retail fixture: order `123` / `PED-ENTREGUE` is delivered.
fn order_status(order_id: &str) -> &'static str {
    match order_id {
        "123" | "PED-ENTREGUE" => "ENTREGUE",
        _ => "NAO_ENCONTRADO",
    }
}

/// A deterministic stand-in for the agent's model: maps the two scripted
/// sentences to proposed calls and to the person's answer.
fn agent(message: &str) -> (Vec<Value>, Option<bool>) {
    let lower = message.to_lowercase();
    if lower.starts_with("sim") {
        return (vec![], Some(true));
    }
    if lower.starts_with("não") || lower.starts_with("nao") {
        return (vec![], Some(false));
    }
    let order = lower
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .find(|w| w.chars().any(|c| c.is_ascii_digit()))
        .unwrap_or("123")
        .to_uppercase();
    let mut calls = vec![json!({"name": "consultar_pedido", "arguments": {"order_id": order}})];
    if lower.contains("devolver") {
        calls.push(json!({
            "name": "solicitar_devolucao",
            // The model also "confirms" on its own: the engine removes it.
            "arguments": {"order_id": order, "reason": "arrependimento da compra", "confirmed": true}
        }));
    }
    (calls, None)
}

/// A JSON field, or null: the demo only prints what the engine returned.
fn field<'a>(value: &'a Value, key: &str) -> &'a Value {
    value.get(key).unwrap_or(&Value::Null)
}

/// The decision's code and message, as a person reads it.
fn verdict(decision: &Value) -> String {
    match field(decision, "error").as_object() {
        None => "allowed".to_owned(),
        Some(error) => {
            let code = error.get("code").and_then(Value::as_str).unwrap_or("?");
            let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
            let details = error.get("details").map(|d| format!(" {d}")).unwrap_or_default();
            format!("{code}: {message}{details}")
        }
    }
}

/// `name {arguments}` of a call.
fn call_text(call: &Value) -> String {
    format!(
        "{} {}",
        field(call, "name").as_str().unwrap_or_default(),
        field(call, "arguments")
    )
}

/// Prints the demo as a person follows it; with `json`, also every turn
/// state and decision in full (one JSON document per line).
pub fn run(json: bool) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let engine = Engine::cached()?;
    let retail = engine
        .load(Some(RETAIL_POLICY), RETAIL_CATALOG)
        .map_err(|e| anyhow!("{e}"))?;
    writeln!(
        out,
        "Retail return (examples/retail): an agent proposes calls, the engine decides each turn."
    )?;
    writeln!(out, "policy revision {}", retail.revision())?;
    let context = json!({"surface": "confirming", "allowed_tools": ["consultar_pedido", "solicitar_devolucao"]});
    let mut state = String::new();
    for message in [
        "Quero devolver o pedido 123 porque me arrependi da compra.",
        "Sim, confirmo a devolução.",
    ] {
        writeln!(out, "\nuser: {message}")?;
        let (calls, user_confirmed) = agent(message);
        for call in &calls {
            writeln!(out, "  the model proposes  {}", call_text(call))?;
        }
        if let Some(answer) = user_confirmed {
            writeln!(out, "  the person answers  {}", if answer { "yes" } else { "no" })?;
        }
        // A yes names the call the person was shown (its digest in the
        // state they answered), so it cannot run a call that replaced it.
        let shown: Value = serde_json::from_str(&state).unwrap_or(Value::Null);
        let answer = match user_confirmed {
            Some(true) => field(&shown, "pending_digest").clone(),
            other => json!(other),
        };
        let input = json!({"context": context, "calls": calls, "user_confirmed": answer});
        state = retail.turn(&state, &input.to_string()).map_err(|e| anyhow!("{e}"))?;
        let parsed: Value = serde_json::from_str(&state)?;
        for call in field(&parsed, "execute").as_array().into_iter().flatten() {
            let name = field(call, "name").as_str().unwrap_or_default();
            let args = field(call, "arguments");
            let result = match name {
                "consultar_pedido" => format!(
                    "status {}",
                    order_status(field(args, "order_id").as_str().unwrap_or_default())
                ),
                _ => "devolução registrada".to_owned(),
            };
            writeln!(out, "  runs                {} -> {result}", call_text(call))?;
        }
        for result in field(&parsed, "results").as_array().into_iter().flatten() {
            if field(result, "action").as_str() == Some("execute") {
                continue;
            }
            writeln!(
                out,
                "  waits               {} ({})",
                field(result, "name").as_str().unwrap_or_default(),
                verdict(field(result, "decision"))
            )?;
        }
        let pending = field(&parsed, "pending_tool_call");
        if !pending.is_null() {
            writeln!(
                out,
                "  kept for the confirming turn: {} (the model's own `confirmed` removed)",
                call_text(pending)
            )?;
        }
        writeln!(
            out,
            "  turn state: {}",
            field(&parsed, "transaction_status").as_str().unwrap_or_default()
        )?;
        if json {
            writeln!(out, "  state {state}")?;
        }
    }

    let plans = engine
        .load(Some(PLANS_POLICY), PLANS_CATALOG)
        .map_err(|e| anyhow!("{e}"))?;
    writeln!(out, "\nPlan change (examples/plans): what each call gets.")?;
    writeln!(out, "policy revision {}", plans.revision())?;
    let calls = [
        r#"{"name":"consultar_plano","arguments":{"customer_id":"42"}}"#,
        r#"{"name":"alterar_plano","arguments":{"customer_id":"42","new_plan_id":"CONTROLE_100"}}"#,
        r#"{"name":"alterar_plano","arguments":{"customer_id":"42","new_plan_id":"CONTROLE_100","confirmed":"true"}}"#,
        r#"{"name":"alterar_plano","arguments":{"customer_id":"42","confirmed":true}}"#,
        r#"{"name":"alterar_plano","arguments":{"customer_id":"42","new_plan_id":"CONTROLE_100","confirmed":true}}"#,
        r#"{"name":"apagar_tudo","arguments":{}}"#,
    ];
    for call in calls {
        let decision = plans.evaluate(call.as_bytes(), &Context::default());
        let parsed: Value = serde_json::from_str(&decision.json)?;
        writeln!(
            out,
            "\n  {}\n    -> {}",
            call_text(&serde_json::from_str(call)?),
            verdict(&parsed)
        )?;
        if json {
            writeln!(out, "    decision {}", decision.json)?;
        }
    }
    if !json {
        writeln!(
            out,
            "\n(`toolgate demo --json` adds every turn state and decision in full.)"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
