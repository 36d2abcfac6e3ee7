//! SPEC §6: the per-turn transactional runtime as a pure state machine.
//! State in, state out, as JSON, so the host persists it anywhere.
//!
//! The state is trusted host storage: keep it server-side, never round-trip
//! it through the model or the client (a forged `pending_tool_call` would be
//! executed on the next "yes").

use crate::context::Context;
use crate::decision::{Code, Decision, Denial};
use crate::error::{Origin, Problem, ProblemCode};
use crate::evaluate::{CONFIRMATION_FIELDS, call_from_value};
use crate::json::{self, write_bool, write_str};
use crate::pipeline::{call_digest, confirmed_by_person};
use crate::policy::OperationType;
use crate::rules::Rules;
use serde_json::{Map, Value};

/// Where the turn's one transactional call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// No transactional call this turn.
    None,
    /// A call waits for the person's confirmation (`pending_tool_call`).
    AwaitingConfirmation,
    /// A transactional call is in `execute` this turn (confirmed, or needing none).
    Executing,
    /// The person refused; the pending call was dropped.
    Cancelled,
    /// The selected transactional call was refused by policy.
    Blocked,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::None => "NONE",
            Status::AwaitingConfirmation => "AWAITING_CONFIRMATION",
            Status::Executing => "EXECUTING",
            Status::Cancelled => "CANCELLED",
            Status::Blocked => "BLOCKED",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        [
            Status::None,
            Status::AwaitingConfirmation,
            Status::Executing,
            Status::Cancelled,
            Status::Blocked,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Map<String, Value>,
}

impl ToolCall {
    fn write(&self, out: &mut String) {
        out.push_str("{\"name\":");
        write_str(out, &self.name);
        out.push_str(",\"arguments\":");
        json::write_canonical(out, &Value::Object(self.arguments.clone()));
        out.push('}');
    }
}

/// What the host keeps between turns.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnState {
    pub status: Status,
    pub pending: Option<ToolCall>,
    /// The rules' revision when the state with the pending call was written
    /// (`pending_policy_revision`). A yes given to that state counts only
    /// under the same rules. `None` for a state written before the field
    /// existed: its yes counts as before.
    pub asked_under: Option<String>,
}

/// The most calls one turn may propose: a turn's state carries a decision
/// per proposal, so the output grows with them.
pub const MAX_CALLS_PER_TURN: usize = 128;

const QUESTION_DOMAIN: &str = "toolgate-turn-1\n";

/// What the person is asked: the pending call under the rules' revision,
/// `sha256:` + hex SHA-256 of `toolgate-turn-1\n<revision>\n<call digest>`
/// (`pending_digest`). A yes naming it answers that call under those rules
/// and nothing else.
pub fn question_digest(call: &ToolCall, revision: &str) -> String {
    let mut text = String::from(QUESTION_DOMAIN);
    text.push_str(revision);
    text.push('\n');
    text.push_str(&call_digest(&call.name, &call.arguments));
    crate::catalog::sha256_hex(text.as_bytes())
}

/// What the person said about the pending call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `true`: yes to the pending call, whichever it is.
    Yes,
    /// A call digest: yes to the call with this digest only, so a yes cannot
    /// land on a call that replaced the one the person was shown.
    YesTo(String),
    /// `false`.
    No,
}

/// One turn's input: the context, the calls the agent proposes, and whether
/// the person confirmed, refused or said neither (`null`).
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub context: Context,
    pub calls: Vec<ToolCall>,
    pub user_confirmed: Option<Answer>,
}

const STATE_KEYS: &[&str] = &[
    "transaction_status",
    "pending_tool_call",
    "available_mcp_tools",
    "selected_tool_call",
    "tool_policy_result",
    "confirmation_required",
    "confirmation_received",
    "execute",
    "results",
    "pending_digest",
    "pending_policy_revision",
];

fn state_problem(message: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidValue, Origin::State, message)
}

fn input_problem(message: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidValue, Origin::Input, message)
}

fn parse_json(text: &str, origin: Origin) -> Result<Value, Problem> {
    if json::is_blank(text) {
        return Ok(Value::Null);
    }
    json::parse_strict(text.as_bytes()).map_err(|e| {
        Problem::new(ProblemCode::Syntax, origin, crate::catalog::json_error_message(&e))
            .at(e.line() as u64, e.column() as u64)
    })
}

fn tool_call(value: &Value, origin: Origin, what: &str) -> Result<ToolCall, Problem> {
    let call = call_from_value(value.clone())
        .map_err(|(_, why)| Problem::new(ProblemCode::InvalidValue, origin, format!("{what}: {why}")))?;
    let arguments = match call.arguments {
        None => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(Problem::new(
                ProblemCode::InvalidValue,
                origin,
                format!("{what}: `arguments` must be an object"),
            ));
        }
    };
    Ok(ToolCall {
        name: call.name,
        arguments,
    })
}

impl TurnState {
    pub fn parse(text: &str) -> Result<TurnState, Problem> {
        let value = parse_json(text, Origin::State)?;
        let map = match &value {
            Value::Null => {
                return Ok(TurnState {
                    status: Status::None,
                    pending: None,
                    asked_under: None,
                });
            }
            Value::Object(map) => map,
            _ => {
                return Err(state_problem(
                    "the state must be a JSON object (or empty for a new conversation)",
                ));
            }
        };
        if let Some(key) = map.keys().find(|k| !STATE_KEYS.contains(&k.as_str())) {
            return Err(Problem::new(
                ProblemCode::UnknownKey,
                Origin::State,
                format!("unknown state key `{}`", json::truncate_for_message(key)),
            ));
        }
        let status = match map.get("transaction_status") {
            None | Some(Value::Null) => Status::None,
            Some(Value::String(s)) => Status::parse(s).ok_or_else(|| state_problem("unknown `transaction_status`"))?,
            Some(_) => return Err(state_problem("`transaction_status` must be a string")),
        };
        let pending = match map.get("pending_tool_call") {
            None | Some(Value::Null) => None,
            Some(v) => Some(tool_call(v, Origin::State, "pending_tool_call")?),
        };
        if (status == Status::AwaitingConfirmation) != pending.is_some() {
            return Err(state_problem(
                "`pending_tool_call` is set exactly when `transaction_status` is AWAITING_CONFIRMATION",
            ));
        }
        // A consistency check on trusted storage, not an authenticator (the
        // digest has no key): a state whose call or revision was changed
        // after the engine wrote it, or that kept one of the two fields, is
        // not one it wrote. Neither field: a state from before they existed.
        let digest = optional_string(map, "pending_digest")?;
        let asked_under = optional_string(map, "pending_policy_revision")?;
        match (&digest, &asked_under, &pending) {
            (None, None, _) => {}
            (Some(digest), Some(revision), Some(call)) if *digest == question_digest(call, revision) => {}
            (Some(_), Some(_), Some(_)) => {
                return Err(state_problem(
                    "`pending_digest` does not match `pending_tool_call` under `pending_policy_revision`: the state was edited (keep the engine's exact JSON text: re-serialising it can rewrite numbers, 10.0 as 10)",
                ));
            }
            _ => {
                return Err(state_problem(
                    "`pending_digest` and `pending_policy_revision` are set together, exactly when a call is pending",
                ));
            }
        }
        Ok(TurnState {
            status,
            pending,
            asked_under,
        })
    }
}

fn optional_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, Problem> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(state_problem(format!("`{key}` must be a string or null"))),
    }
}

impl TurnInput {
    pub fn parse(text: &str) -> Result<TurnInput, Problem> {
        let value = parse_json(text, Origin::Input)?;
        let Value::Object(map) = &value else {
            return Err(input_problem("the turn input must be a JSON object with `calls`"));
        };
        let mut input = TurnInput {
            context: Context::default(),
            calls: Vec::new(),
            user_confirmed: None,
        };
        for (key, value) in map {
            match key.as_str() {
                "context" => input.context = Context::from_value(value)?,
                "calls" => match value {
                    Value::Null => {}
                    Value::Array(items) if items.len() > MAX_CALLS_PER_TURN => {
                        return Err(input_problem(format!(
                            "a turn proposes at most {MAX_CALLS_PER_TURN} calls"
                        )));
                    }
                    Value::Array(items) => {
                        for (i, item) in items.iter().enumerate() {
                            input
                                .calls
                                .push(tool_call(item, Origin::Input, &format!("calls[{i}]"))?);
                        }
                    }
                    _ => return Err(input_problem("`calls` must be an array of {name, arguments}")),
                },
                "user_confirmed" => {
                    input.user_confirmed = match value {
                        Value::Null => None,
                        Value::Bool(true) => Some(Answer::Yes),
                        Value::Bool(false) => Some(Answer::No),
                        Value::String(digest) if crate::catalog::is_sha256_hex(digest) => {
                            Some(Answer::YesTo(digest.clone()))
                        }
                        _ => {
                            return Err(input_problem(
                                "`user_confirmed` must be true, false, null or the `pending_digest` the person confirmed",
                            ));
                        }
                    }
                }
                _ => {
                    return Err(Problem::new(
                        ProblemCode::UnknownKey,
                        Origin::Input,
                        format!(
                            "unknown turn input key `{}`; expected context, calls, user_confirmed",
                            json::truncate_for_message(key)
                        ),
                    ));
                }
            }
        }
        Ok(input)
    }
}

enum Action {
    Execute,
    AwaitConfirmation,
    Refused,
    /// The same call as the one confirmed this turn: it runs once.
    AlreadySelected,
}

impl Action {
    fn as_str(&self) -> &'static str {
        match self {
            Action::Execute => "execute",
            Action::AwaitConfirmation => "await_confirmation",
            Action::Refused => "refused",
            Action::AlreadySelected => "already_selected",
        }
    }
}

impl Rules {
    pub fn turn_json(&self, state: &str, input: &str) -> Result<String, Problem> {
        let state = TurnState::parse(state)?;
        let input = TurnInput::parse(input)?;
        Ok(self.turn(&state, &input))
    }

    fn evaluate_map(&self, call: &ToolCall, ctx: &Context) -> Decision {
        let args = Value::Object(call.arguments.clone());
        self.evaluate(&call.name, Some(&args), ctx)
    }

    /// One turn. Read-only calls that pass run; at most one transactional
    /// call is selected; one that needs confirmation waits for the person.
    /// Confirmation comes only from `user_confirmed`: engine fields the model
    /// wrote into a proposed call are removed first, so it cannot self-confirm.
    pub fn turn(&self, state: &TurnState, input: &TurnInput) -> String {
        let ctx = &input.context;
        let mut status = Status::None;
        let mut pending: Option<ToolCall> = None;
        let mut selected: Option<(ToolCall, Decision)> = None;
        let mut confirmation_required = false;
        let mut confirmation_received = false;
        let mut execute: Vec<ToolCall> = Vec::new();
        let mut results: Vec<(String, Action, Decision)> = Vec::new();
        let mut slot_taken = false;
        let mut confirmed_call: Option<ToolCall> = None;

        if let Some(waiting) = &state.pending {
            match &input.user_confirmed {
                Some(Answer::No) => status = Status::Cancelled,
                Some(answer) if self.answers(waiting, state.asked_under.as_deref(), answer) => {
                    // Confirmed as `decide` confirms for a person, so the
                    // call decided is the call forwarded: the field the
                    // tool's schema declares is the one set and checked.
                    let with_confirmation = ToolCall {
                        name: waiting.name.clone(),
                        arguments: match self.tool(&waiting.name) {
                            Some(tool) => confirmed_by_person(tool, &waiting.arguments),
                            // Unknown by now: evaluate says so.
                            None => waiting.arguments.clone(),
                        },
                    };
                    let decision = self.evaluate_map(&with_confirmation, ctx);
                    confirmation_required = true;
                    confirmation_received = true;
                    slot_taken = true;
                    if decision.ok {
                        execute.push(self.forwardable(&with_confirmation));
                        status = Status::Executing;
                    } else {
                        status = Status::Blocked;
                    }
                    confirmed_call = Some(waiting.clone());
                    selected = Some((waiting.clone(), decision));
                }
                // No answer, or a yes to another call or under other rules
                // than the person was shown: the call is asked about again,
                // while it still waits for the person. One the rules now
                // refuse is dropped (`BLOCKED`); one that no longer needs
                // the person is dropped too (`NONE`): the model proposes it
                // again, and it runs like any call that needs no one.
                _ => {
                    let decision = self.evaluate_map(waiting, ctx);
                    if decision.code == Some(Code::ConfirmationRequired) {
                        status = Status::AwaitingConfirmation;
                        pending = Some(waiting.clone());
                        confirmation_required = true;
                    } else if !decision.ok {
                        status = Status::Blocked;
                    }
                    selected = Some((waiting.clone(), decision));
                }
            }
        }

        for proposed in &input.calls {
            let mut call = proposed.clone();
            for f in CONFIRMATION_FIELDS {
                call.arguments.remove(f);
            }
            let decision = self.evaluate_map(&call, ctx);
            // A call waits for the person when it writes, and also when it
            // only reads but its entry or schema asks for confirmation: run
            // or refused outright, such a read could never run in a turn.
            let waits_for_person = decision.code == Some(Code::ConfirmationRequired)
                || self
                    .tool(&call.name)
                    .is_some_and(|t| t.class.operation_type == OperationType::Transactional);
            if !waits_for_person || decision.code == Some(Code::NotFound) {
                let action = if decision.ok {
                    execute.push(self.forwardable(&call));
                    Action::Execute
                } else {
                    Action::Refused
                };
                results.push((call.name.clone(), action, decision));
                continue;
            }
            if confirmed_call.as_ref() == Some(&call) {
                // The confirmed call's own decision: it runs once, as confirmed.
                let confirmed = selected.as_ref().map_or(decision, |(_, d)| d.clone());
                results.push((call.name.clone(), Action::AlreadySelected, confirmed));
                continue;
            }
            if slot_taken {
                let tool_decision = self.transaction_limit(&call, ctx);
                results.push((call.name.clone(), Action::Refused, tool_decision));
                continue;
            }
            slot_taken = true;
            // A new transactional proposal replaces an unconfirmed pending
            // one: a different call needs its own confirmation.
            pending = None;
            confirmation_required = false;
            let action = if decision.ok {
                execute.push(self.forwardable(&call));
                status = Status::Executing;
                Action::Execute
            } else if decision.code == Some(Code::ConfirmationRequired) {
                status = Status::AwaitingConfirmation;
                pending = Some(call.clone());
                confirmation_required = true;
                Action::AwaitConfirmation
            } else {
                status = Status::Blocked;
                Action::Refused
            };
            results.push((call.name.clone(), action, decision.clone()));
            selected = Some((call, decision));
        }

        let mut out = String::with_capacity(1024);
        out.push_str("{\"transaction_status\":\"");
        out.push_str(status.as_str());
        out.push_str("\",\"pending_tool_call\":");
        match &pending {
            Some(call) => call.write(&mut out),
            None => out.push_str("null"),
        }
        out.push_str(",\"available_mcp_tools\":[");
        for (i, name) in self.listed_names(ctx).into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(&mut out, name);
        }
        out.push_str("],\"selected_tool_call\":");
        match &selected {
            Some((call, _)) => call.write(&mut out),
            None => out.push_str("null"),
        }
        out.push_str(",\"tool_policy_result\":");
        match &selected {
            Some((_, decision)) => out.push_str(&decision.json),
            None => out.push_str("null"),
        }
        out.push_str(",\"confirmation_required\":");
        write_bool(&mut out, confirmation_required);
        out.push_str(",\"confirmation_received\":");
        write_bool(&mut out, confirmation_received);
        out.push_str(",\"execute\":[");
        for (i, call) in execute.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            call.write(&mut out);
        }
        out.push_str("],\"results\":[");
        for (i, (name, action, decision)) in results.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"name\":");
            write_str(&mut out, name);
            out.push_str(",\"action\":\"");
            out.push_str(action.as_str());
            out.push_str("\",\"decision\":");
            out.push_str(&decision.json);
            out.push('}');
        }
        out.push_str("],\"pending_digest\":");
        match &pending {
            Some(call) => write_str(&mut out, &question_digest(call, self.revision())),
            None => out.push_str("null"),
        }
        out.push_str(",\"pending_policy_revision\":");
        out.push_str(if pending.is_some() {
            self.revision_json()
        } else {
            "null"
        });
        out.push('}');
        out
    }

    /// Whether a yes answers the pending call: the call the person was shown
    /// (when the yes names its digest), under the rules they were shown it.
    fn answers(&self, waiting: &ToolCall, asked_under: Option<&str>, answer: &Answer) -> bool {
        let same_rules = asked_under.is_none_or(|revision| revision == self.revision());
        let same_call = match answer {
            Answer::YesTo(digest) => *digest == question_digest(waiting, self.revision()),
            Answer::Yes | Answer::No => true,
        };
        same_rules && same_call
    }

    /// The call as the server receives it: engine fields removed, and, for a
    /// confirmed call, the confirmation field the tool's schema declares.
    /// The call to forward: the arguments decided, less the engine's fields
    /// the tool's schema does not declare (as `decide` forwards them).
    fn forwardable(&self, decided: &ToolCall) -> ToolCall {
        let mut out = decided.clone();
        for f in self.strip_fields(&decided.name) {
            out.arguments.remove(*f);
        }
        out
    }

    fn transaction_limit(&self, call: &ToolCall, ctx: &Context) -> Decision {
        let denial = Denial::new(Code::TransactionLimit);
        match self.tool(&call.name) {
            Some(tool) => self.about(tool, tool.class.confirmation_required, false, Some(&denial)),
            None => self.evaluate_map(call, ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str =
        "version: 1\ntool_policies:\n  send:\n    operation_type: transactional\n    require_confirmation: true\n";
    const CATALOG: &str =
        r#"{"tools":[{"name":"send","inputSchema":{"type":"object","properties":{"to":{"type":"string"}}}}]}"#;

    fn awaiting(rules: &Rules, to: &str) -> Value {
        let input = format!(r#"{{"calls":[{{"name":"send","arguments":{{"to":"{to}"}}}}]}}"#);
        let out = rules.turn_json("", &input).unwrap();
        serde_json::from_str(&out).unwrap()
    }

    fn problem(rules: &Rules, state: &Value, input: &str) -> Problem {
        rules.turn_json(&state.to_string(), input).unwrap_err()
    }

    #[test]
    fn a_state_is_refused_when_its_pending_call_no_longer_matches_its_digest() {
        let rules = Rules::load(Some(POLICY), CATALOG).unwrap();
        let mut state = awaiting(&rules, "alice");
        assert!(
            rules
                .turn_json(&state.to_string(), r#"{"user_confirmed":true}"#)
                .is_ok()
        );
        state["pending_tool_call"]["arguments"]["to"] = "mallory".into();
        let edited = problem(&rules, &state, r#"{"user_confirmed":true}"#);
        assert_eq!(
            (edited.full_code(), edited.origin),
            ("STATE_INVALID_VALUE".into(), Origin::State)
        );

        let mut orphan = awaiting(&rules, "alice");
        orphan["transaction_status"] = "NONE".into();
        orphan["pending_tool_call"] = Value::Null;
        orphan["pending_digest"] = Value::Null;
        assert_eq!(problem(&rules, &orphan, "{}").full_code(), "STATE_INVALID_VALUE");

        let mut not_text = awaiting(&rules, "alice");
        not_text["pending_policy_revision"] = 7.into();
        assert_eq!(problem(&rules, &not_text, "{}").full_code(), "STATE_INVALID_VALUE");

        // The revision is part of what the digest covers.
        let mut other_rules = awaiting(&rules, "alice");
        other_rules["pending_policy_revision"] = format!("sha256:{}", "0".repeat(64)).into();
        assert_eq!(problem(&rules, &other_rules, "{}").full_code(), "STATE_INVALID_VALUE");

        // Half a new state is neither a new one nor an old one.
        for field in ["pending_digest", "pending_policy_revision"] {
            let mut half = awaiting(&rules, "alice");
            half[field] = Value::Null;
            assert_eq!(
                problem(&rules, &half, r#"{"user_confirmed":true}"#).full_code(),
                "STATE_INVALID_VALUE"
            );
            half.as_object_mut().unwrap().remove(field);
            assert_eq!(
                problem(&rules, &half, r#"{"user_confirmed":true}"#).full_code(),
                "STATE_INVALID_VALUE"
            );
        }
    }

    #[test]
    fn a_turn_proposes_a_bounded_number_of_calls() {
        let rules = Rules::load(Some(POLICY), CATALOG).unwrap();
        let input = |n: usize| serde_json::json!({ "calls": vec![serde_json::json!({"name": "send"}); n] }).to_string();
        assert!(rules.turn_json("", &input(MAX_CALLS_PER_TURN)).is_ok());
        let refused = rules.turn_json("", &input(MAX_CALLS_PER_TURN + 1)).unwrap_err();
        assert_eq!(refused.full_code(), "INPUT_INVALID_VALUE");
    }

    #[test]
    fn user_confirmed_names_a_digest_in_the_engine_s_spelling_or_is_refused() {
        let rules = Rules::load(Some(POLICY), CATALOG).unwrap();
        let state = awaiting(&rules, "alice");
        let digest = state["pending_digest"].as_str().unwrap().to_owned();
        let upper = digest.to_ascii_uppercase();
        for bad in [upper.as_str(), "yes", "sha256:", &digest[..digest.len() - 1]] {
            let input = serde_json::json!({ "user_confirmed": bad }).to_string();
            assert_eq!(
                problem(&rules, &state, &input).full_code(),
                "INPUT_INVALID_VALUE",
                "{bad}"
            );
        }
        let input = serde_json::json!({ "user_confirmed": digest }).to_string();
        let ran: Value = serde_json::from_str(&rules.turn_json(&state.to_string(), &input).unwrap()).unwrap();
        assert_eq!(ran["transaction_status"], "EXECUTING");
    }
}
