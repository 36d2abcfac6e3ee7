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
use std::process::ExitCode;
use toolgate::{Context, Engine};

const RETAIL_POLICY: &str = include_str!("../../../examples/retail/tool_policies.yaml");
const RETAIL_CATALOG: &str = include_str!("../../../examples/retail/tools.yaml");
const PLANS_POLICY: &str = include_str!("../../../examples/plans/tool_policies.yaml");
const PLANS_CATALOG: &str = include_str!("../../../examples/plans/catalog.json");

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

pub fn run() -> Result<ExitCode> {
    let engine = Engine::cached()?;
    let retail = engine
        .load(Some(RETAIL_POLICY), RETAIL_CATALOG)
        .map_err(|e| anyhow!("{e}"))?;
    println!(
        "== Retail return (examples/retail), policy revision {}",
        retail.revision()
    );
    let context = json!({"surface": "confirming", "allowed_tools": ["consultar_pedido", "solicitar_devolucao"]});
    let mut state = String::new();
    for message in [
        "Quero devolver o pedido 123 porque me arrependi da compra.",
        "Sim, confirmo a devolução.",
    ] {
        println!("\nuser> {message}");
        let (calls, user_confirmed) = agent(message);
        let input = json!({"context": context, "calls": calls, "user_confirmed": user_confirmed});
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
            println!("  execute {name} {args} -> {result}");
        }
        println!(
            "  transaction_status={} confirmation_required={} confirmation_received={}",
            field(&parsed, "transaction_status"),
            field(&parsed, "confirmation_required"),
            field(&parsed, "confirmation_received")
        );
        if !field(&parsed, "pending_tool_call").is_null() {
            println!("  pending_tool_call={}", field(&parsed, "pending_tool_call"));
        }
        println!("  state: {state}");
    }

    let plans = engine
        .load(Some(PLANS_POLICY), PLANS_CATALOG)
        .map_err(|e| anyhow!("{e}"))?;
    println!(
        "\n== Plan change (examples/plans), policy revision {}",
        plans.revision()
    );
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
        println!("\ncall> {call}\n  {}", decision.json);
    }
    Ok(ExitCode::SUCCESS)
}
