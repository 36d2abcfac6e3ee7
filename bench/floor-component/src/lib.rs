//! The benchmark floor: the same WIT world as the policy component, called the
//! same way, with no engine behind it. `evaluate` takes the call bytes and
//! returns a string the size of a typical decision, so the distance between
//! toolgate and this floor is what the engine itself costs in each host.

wit_bindgen::generate!({
    path: "../../wit",
    world: "toolgate",
});

use exports::toolgate::policy::engine::{Confirmation, Finding, Guest, GuestRuleSet, Outcome, Problem, RuleSet};

struct Component;

struct Floor;

/// A real allowed decision from the seed-catalog mix (its typical size).
const DECISION: &str = r#"{"ok":true,"error":null,"metadata":{"tool":"send_whatsapp","blocked_by_policy":false,"operation_type":"transactional","effect":"write","policy_source":"catalog","confirmation_required":true,"confirmation_received":true,"policy_revision":"4f1c0d8a9e2b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"}}"#;

impl Guest for Component {
    type RuleSet = Floor;

    fn contract_version() -> String {
        "0.2.0".to_owned()
    }
}

impl GuestRuleSet for Floor {
    fn load(_policy: Option<String>, _catalog: String) -> Result<RuleSet, Problem> {
        Ok(RuleSet::new(Floor))
    }

    fn evaluate(&self, call: Vec<u8>, _context: String) -> String {
        // Touch the input so it cannot be elided; the answer is fixed-size.
        let mut out = String::with_capacity(DECISION.len());
        out.push_str(DECISION);
        if call.is_empty() {
            out.push(' ');
        }
        out
    }

    fn list_exposable(&self, _context: String) -> Result<String, Problem> {
        Ok("{\"tools\":[]}".to_owned())
    }

    fn turn(&self, state: String, _input: String) -> Result<String, Problem> {
        Ok(state)
    }

    fn revision(&self) -> String {
        String::new()
    }

    fn findings(&self) -> Vec<Finding> {
        Vec::new()
    }

    fn decide(&self, call: Vec<u8>, context: String, _confirmation: Confirmation) -> Outcome {
        Outcome {
            decision: self.evaluate(call, context),
            forward: Some("{}".to_owned()),
            blocked_result: None,
            digest: None,
        }
    }

    fn seal_payload(&self, _call: Vec<u8>, _caller: String, _id: String, _expires_ms: u64) -> Result<String, Problem> {
        Ok(String::new())
    }
}

export!(Component);
