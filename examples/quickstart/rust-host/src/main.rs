//! A Rust host in front of its own tools: load the policy with the tools'
//! catalog once, then ask before every call. The model's own
//! `confirmed: true` never counts (`Confirmation::None`); a write runs after
//! the person says yes to that very call (`Confirmation::Person`).

use toolgate::{Confirmation, Context, Engine};

const POLICY: &str = include_str!("../policy.yaml");
const CATALOG: &str = r#"{"tools":[
  {"name":"get_order","annotations":{"readOnlyHint":true},
   "inputSchema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}},
  {"name":"refund_order","annotations":{"destructiveHint":true},
   "inputSchema":{"type":"object","properties":{"order_id":{"type":"string"},"confirmed":{"type":"boolean"}}}}
]}"#;

fn main() -> Result<(), toolgate::Error> {
    let engine = Engine::cached()?; // compiles once per machine, then loads the cached code
    let rules = engine.load(Some(POLICY), CATALOG)?; // a broken policy is an error here, not a silent allow
    let context = Context::default(); // a surface that can ask a person
    let context_json = context.to_json();

    println!("tools/list: {}", rules.list_exposable(&context)?);
    for call in [
        r#"{"name":"get_order","arguments":{"order_id":"A-1"}}"#,
        r#"{"name":"refund_order","arguments":{"order_id":"A-1"}}"#,
        r#"{"name":"refund_order","arguments":{"order_id":"A-1","confirmed":true}}"#,
        r#"{"name":"delete_everything","arguments":{}}"#,
    ] {
        let outcome = rules.decide(call.as_bytes(), &context_json, Confirmation::None);
        match (outcome.forward, outcome.decision.code) {
            (Some(arguments), _) => println!("run   {call} with {arguments}"),
            (None, Some(code)) if code == "CONFIRMATION_REQUIRED" => {
                // Ask the person about this very call (your UI); on their yes:
                let asked = rules.decide(call.as_bytes(), &context_json, Confirmation::Person);
                match asked.forward {
                    Some(arguments) => println!("block {call}: {code}; after the person's yes: run with {arguments}"),
                    None => println!("block {call}: {code}; still blocked after a yes"),
                }
            }
            (None, code) => println!("block {call}: {}", code.unwrap_or_default()),
        }
    }
    Ok(())
}
