//! Cedar set up as a Cedar user would for this workload: the policy set,
//! schema and entities parsed and validated once; per call, a request built
//! from the call (validated against the schema) and one `is_authorized`.

use cedar_policy::{
    Authorizer, Context, Decision, Entities, EntityId, EntityTypeName, EntityUid, PolicySet, Request,
    RestrictedExpression, Schema,
};
use serde_json::Value;
use std::str::FromStr;

pub struct CedarGate {
    authorizer: Authorizer,
    policies: PolicySet,
    schema: Schema,
    entities: Entities,
    principal: EntityUid,
    action: EntityUid,
    tool_type: EntityTypeName,
}

impl std::fmt::Debug for CedarGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CedarGate").finish_non_exhaustive()
    }
}

fn uid(v: &Value) -> Result<EntityUid, String> {
    EntityUid::from_json(v.clone()).map_err(|e| format!("entity uid {v}: {e}"))
}

impl CedarGate {
    pub fn load(policies: &str, schema: &str, entities: &Value) -> Result<CedarGate, String> {
        let policies = PolicySet::from_str(policies).map_err(|e| format!("cedar policies: {e}"))?;
        let (schema, _warnings) = Schema::from_cedarschema_str(schema).map_err(|e| format!("cedar schema: {e}"))?;
        let validation =
            cedar_policy::Validator::new(schema.clone()).validate(&policies, cedar_policy::ValidationMode::Strict);
        if !validation.validation_passed() {
            return Err(format!(
                "cedar policies do not validate against the schema: {validation:?}"
            ));
        }
        let entities =
            Entities::from_json_value(entities.clone(), Some(&schema)).map_err(|e| format!("cedar entities: {e}"))?;
        Ok(CedarGate {
            authorizer: Authorizer::new(),
            policies,
            schema,
            entities,
            principal: uid(&serde_json::json!({"type": "Agent", "id": "agent"}))?,
            action: uid(&serde_json::json!({"type": "Action", "id": "call"}))?,
            tool_type: EntityTypeName::from_str("Tool").map_err(|e| e.to_string())?,
        })
    }

    /// The per-call adapter: a request from the JSON request the workload's
    /// adapter wrote (`principal`, `action`, `resource`, `context`), validated
    /// against the schema. A request the schema rejects (`confirmed: "true"`)
    /// is a deny, as it would be in a gateway.
    pub fn request(&self, request: &Value) -> Option<Request> {
        let resource = uid(request.get("resource")?).ok()?;
        let context =
            Context::from_json_value(request.get("context")?.clone(), Some((&self.schema, &self.action))).ok()?;
        self.validated(resource, context)
    }

    /// The agent calling `resource`, validated against the schema: one rule
    /// for both adapters.
    fn validated(&self, resource: EntityUid, context: Context) -> Option<Request> {
        Request::new(
            self.principal.clone(),
            self.action.clone(),
            resource,
            context,
            Some(&self.schema),
        )
        .ok()
    }

    /// The per-call path a gateway takes, from the same bytes toolgate gets:
    /// parse the call, build the context from typed values (no JSON
    /// round-trip), validate the request against the schema, authorize.
    pub fn decide_call(&self, call: &[u8]) -> bool {
        let Ok(Value::Object(call)) = serde_json::from_slice::<Value>(call) else {
            return false;
        };
        let Some(Value::String(name)) = call.get("name") else {
            return false;
        };
        let empty = serde_json::Map::new();
        let arguments = match call.get("arguments") {
            Some(Value::Object(arguments)) => arguments,
            None | Some(Value::Null) => &empty,
            Some(_) => return false,
        };
        let mut pairs = vec![
            (
                "surface".to_owned(),
                RestrictedExpression::new_string("confirming".to_owned()),
            ),
            (
                "args".to_owned(),
                RestrictedExpression::new_set(arguments.keys().map(|k| RestrictedExpression::new_string(k.clone()))),
            ),
        ];
        for field in ["confirmed", "confirmation"] {
            if let Some(value) = arguments.get(field) {
                // Only a JSON boolean is a Bool; anything else fails validation.
                let expr = match value {
                    Value::Bool(b) => RestrictedExpression::new_bool(*b),
                    other => RestrictedExpression::new_string(other.to_string()),
                };
                pairs.push((field.to_owned(), expr));
            }
        }
        let Ok(context) = Context::from_pairs(pairs) else {
            return false;
        };
        let resource = EntityUid::from_type_name_and_id(self.tool_type.clone(), EntityId::new(name));
        self.validated(resource, context)
            .is_some_and(|request| self.authorize(&request))
    }

    pub fn authorize(&self, request: &Request) -> bool {
        self.authorizer
            .is_authorized(request, &self.policies, &self.entities)
            .decision()
            == Decision::Allow
    }

    /// Adapter and authorization together: what a gateway pays per call.
    pub fn decide(&self, request: &Value) -> bool {
        self.request(request).is_some_and(|r| self.authorize(&r))
    }
}
