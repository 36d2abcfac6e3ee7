//! A Rust host in front of its own tools: load the policy with the tools'
//! catalog once, then ask before every call.

use toolgate::{Context, Engine};

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

    println!("tools/list: {}", rules.list_exposable(&context)?);
    for call in [
        r#"{"name":"get_order","arguments":{"order_id":"A-1"}}"#,
        r#"{"name":"refund_order","arguments":{"order_id":"A-1"}}"#,
        r#"{"name":"refund_order","arguments":{"order_id":"A-1","confirmed":true}}"#,
        r#"{"name":"delete_everything","arguments":{}}"#,
    ] {
        let decision = rules.evaluate(call.as_bytes(), &context);
        match decision.code {
            None => println!("run   {call}"),
            Some(code) => println!("block {call}: {code}"),
        }
    }
    Ok(())
}
