//! The conformance corpus (`tests/vectors/*.json`) and two engines that run
//! it: policy-core natively and the component under wasmtime. The format is
//! described in `tests/vectors/README.md`; unknown fields are refused.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorFile {
    pub spec: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_load_error: Option<LoadError>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadError {
    pub code: String,
    pub line: u32,
    pub column: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub op: Op,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Instead of `context`: the context text sent as is (duplicate keys,
    /// deep nesting, not an object, not JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_hex: Option<String>,
    /// Present on every `turn` case: an object, or `null` for a new conversation.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "present_value")]
    pub state: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// `decide`: `"none"`, `"argument"`, `"person"`, `"invalid"` or
    /// `{"seal": {"payload", "caller", "now_ms"}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Value>,
    /// `seal_payload`: the caller, seal id and expiry sealed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
    /// Hand-written: the decision code, `null` when allowed.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "double_option")]
    pub expect_code: Option<Option<String>>,
    /// Hand-written: the case needs the component's guest meter (a call that
    /// exhausts the compute budget): the native engine, which has no meter
    /// and would run it to the end, skips it, and `vectors --write` leaves
    /// its `expect` (a host fault's bytes) as written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub component_only: bool,
    /// Hand-written: the names `list` must show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_names: Option<Vec<String>>,
    /// Hand-written: the `transaction_status` a `turn` must end in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<String>,
    /// The exact output (written by `vectors --write`, reviewed in the diff).
    #[serde(default)]
    pub expect: Value,
}

mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    pub fn serialize<S: Serializer>(v: &Option<Option<String>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
        Option::<String>::deserialize(d).map(Some)
    }
}

/// `Some(Value::Null)` for a key present with `null`, `None` for an absent key.
mod present_value {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;
    pub fn serialize<S: Serializer>(v: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(inner) => s.serialize_some(inner),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        Value::deserialize(d).map(Some)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Evaluate,
    List,
    Turn,
    Decide,
    SealPayload,
}

/// A `decide` case's confirmation, borrowed from the case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseConfirmation<'a> {
    None,
    Argument,
    Person,
    Invalid,
    Seal {
        payload: &'a str,
        caller: &'a str,
        now_ms: u64,
    },
}

impl Case {
    /// The call bytes exactly as a runner sends them.
    pub fn call_bytes(&self) -> Result<Vec<u8>, String> {
        match (&self.call, &self.call_text, &self.call_hex) {
            (Some(call), None, None) => serde_json::to_vec(call).map_err(|e| e.to_string()),
            (None, Some(text), None) => Ok(text.as_bytes().to_vec()),
            (None, None, Some(hex)) => decode_hex(hex),
            _ => Err(format!(
                "case `{}`: exactly one of call, call_text, call_hex",
                self.name
            )),
        }
    }

    pub fn confirmation(&self) -> Result<CaseConfirmation<'_>, String> {
        let bad = || format!("case `{}`: unreadable confirmation", self.name);
        match &self.confirmation {
            None => Ok(CaseConfirmation::None),
            Some(Value::String(s)) => match s.as_str() {
                "none" => Ok(CaseConfirmation::None),
                "argument" => Ok(CaseConfirmation::Argument),
                "person" => Ok(CaseConfirmation::Person),
                "invalid" => Ok(CaseConfirmation::Invalid),
                _ => Err(bad()),
            },
            Some(Value::Object(o)) => {
                let seal = o.get("seal").ok_or_else(bad)?;
                Ok(CaseConfirmation::Seal {
                    payload: seal.get("payload").and_then(Value::as_str).ok_or_else(bad)?,
                    caller: seal.get("caller").and_then(Value::as_str).ok_or_else(bad)?,
                    now_ms: seal.get("now_ms").and_then(Value::as_u64).ok_or_else(bad)?,
                })
            }
            Some(_) => Err(bad()),
        }
    }

    fn seal_inputs(&self) -> (&str, &str, u64) {
        (
            self.caller.as_deref().unwrap_or_default(),
            self.id.as_deref().unwrap_or_default(),
            self.expires_ms.unwrap_or_default(),
        )
    }

    pub fn context_text(&self) -> String {
        match &self.context_text {
            Some(text) => text.clone(),
            None => self.context.as_ref().map_or_else(|| "{}".to_owned(), Value::to_string),
        }
    }
}

fn decode_hex(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) {
        return Err("odd-length hex".into());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| "invalid hex".to_owned())
        })
        .collect()
}

pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("vectors")
}

/// Every vector file, sorted by name (`host-faults.json` is not one).
pub fn vector_files() -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json") && p.file_name().is_some_and(|n| n != "host-faults.json")
        })
        .collect();
    files.sort();
    Ok(files)
}

pub fn read_file(path: &Path) -> Result<VectorFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file: VectorFile = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    for case in &file.cases {
        case.check_fields()
            .map_err(|e| format!("{}: case `{}`: {e}", path.display(), case.name))?;
    }
    Ok(file)
}

impl Op {
    /// The fields a case of this op may carry besides `name`, `op` and
    /// `expect` (the Node runner's table, `bindings-js/test/lib/vectors.mjs`),
    /// and its hand-written anchor, required beside the engine-written
    /// `expect` so a wrong engine cannot bless itself.
    fn fields(self) -> (&'static [&'static str], Option<&'static str>) {
        const CALL: [&str; 3] = ["call", "call_text", "call_hex"];
        match self {
            Op::Evaluate => (
                &[
                    "context",
                    "context_text",
                    CALL[0],
                    CALL[1],
                    CALL[2],
                    "expect_code",
                    "component_only",
                ],
                Some("expect_code"),
            ),
            Op::Decide => (
                &[
                    "context",
                    "context_text",
                    CALL[0],
                    CALL[1],
                    CALL[2],
                    "confirmation",
                    "expect_code",
                    "component_only",
                ],
                Some("expect_code"),
            ),
            Op::List => (&["context", "expect_names"], Some("expect_names")),
            Op::Turn => (&["state", "input", "expect_status"], Some("expect_status")),
            Op::SealPayload => (&[CALL[0], CALL[1], CALL[2], "caller", "id", "expires_ms"], None),
        }
    }
}

impl Case {
    /// A field another op reads is refused (a `list` case's `call` would be
    /// ignored silently, its author believing it tested), as is a case
    /// without its op's hand-written anchor.
    fn check_fields(&self) -> Result<(), String> {
        let present = [
            ("context", self.context.is_some()),
            ("context_text", self.context_text.is_some()),
            ("call", self.call.is_some()),
            ("call_text", self.call_text.is_some()),
            ("call_hex", self.call_hex.is_some()),
            ("state", self.state.is_some()),
            ("input", self.input.is_some()),
            ("confirmation", self.confirmation.is_some()),
            ("caller", self.caller.is_some()),
            ("id", self.id.is_some()),
            ("expires_ms", self.expires_ms.is_some()),
            ("expect_code", self.expect_code.is_some()),
            ("component_only", self.component_only),
            ("expect_names", self.expect_names.is_some()),
            ("expect_status", self.expect_status.is_some()),
        ];
        let (allowed, anchor) = self.op.fields();
        if let Some((field, _)) = present.iter().find(|(f, set)| *set && !allowed.contains(f)) {
            return Err(format!("unknown field `{field}` for op {:?}", self.op));
        }
        match anchor {
            Some(anchor) if !present.iter().any(|(f, set)| *set && *f == anchor) => {
                Err(format!("`{anchor}` is required (written by hand)"))
            }
            _ => Ok(()),
        }
    }
}

impl VectorFile {
    pub fn policy_text(&self) -> Result<Option<String>, String> {
        match (&self.policy, &self.policy_text) {
            (Some(path), None) => read_fixture(path).map(Some),
            (None, text) => Ok(text.clone()),
            _ => Err("at most one of policy, policy_text".into()),
        }
    }

    pub fn catalog_text(&self) -> Result<String, String> {
        match (&self.catalog, &self.catalog_text) {
            (Some(path), None) => read_fixture(path),
            (None, Some(text)) => Ok(text.clone()),
            _ => Err("exactly one of catalog, catalog_text".into()),
        }
    }
}

fn read_fixture(path: &str) -> Result<String, String> {
    std::fs::read_to_string(vectors_dir().join(path)).map_err(|e| format!("{path}: {e}"))
}

/// What an engine answers for one case.
pub type Answer = Result<Value, String>;

/// One way to run the corpus.
pub trait Runner {
    type Loaded;
    /// Whether this runner runs the metered component (runs
    /// `component_only` cases).
    const METERED: bool = false;
    fn load(&self, policy: Option<&str>, catalog: &str) -> Result<Self::Loaded, LoadError>;
    fn run(&self, loaded: &Self::Loaded, case: &Case) -> Answer;
}

#[derive(Debug)]
pub struct Native;

impl Runner for Native {
    type Loaded = policy_core::Rules;

    fn load(&self, policy: Option<&str>, catalog: &str) -> Result<Self::Loaded, LoadError> {
        policy_core::Rules::load(policy, catalog).map_err(|p| LoadError {
            code: p.full_code(),
            line: p.line,
            column: p.column,
        })
    }

    fn run(&self, rules: &Self::Loaded, case: &Case) -> Answer {
        match case.op {
            Op::Evaluate => Ok(Value::String(
                rules.evaluate_json(&case.call_bytes()?, &case.context_text()).json,
            )),
            Op::List => {
                let ctx = policy_core::Context::parse(&case.context_text()).map_err(|p| p.full_code())?;
                Ok(Value::String(rules.list_exposable(&ctx)))
            }
            Op::Turn => rules
                .turn_json(&state_text(case), &input_text(case))
                .map(Value::String)
                .map_err(|p| p.full_code()),
            Op::Decide => {
                use policy_core::Confirmation as C;
                let confirmation = match case.confirmation()? {
                    CaseConfirmation::None => C::None,
                    CaseConfirmation::Argument => C::Argument,
                    CaseConfirmation::Person => C::Person,
                    CaseConfirmation::Invalid => C::Invalid,
                    CaseConfirmation::Seal {
                        payload,
                        caller,
                        now_ms,
                    } => C::Seal(policy_core::OpenedSeal {
                        payload,
                        caller,
                        now_ms,
                    }),
                };
                let o = rules.decide(&case.call_bytes()?, &case.context_text(), confirmation);
                Ok(outcome_value(o.decision.json, o.forward, o.blocked_result, o.digest))
            }
            Op::SealPayload => {
                let (caller, id, expires_ms) = case.seal_inputs();
                Ok(rules
                    .seal_payload(&case.call_bytes()?, caller, id, expires_ms)
                    .map_or_else(|p| serde_json::json!({"error": p.full_code()}), Value::String))
            }
        }
    }
}

#[derive(Debug)]
pub struct Component(pub toolgate::Engine);

impl Runner for Component {
    type Loaded = toolgate::RuleSet;
    const METERED: bool = true;

    fn load(&self, policy: Option<&str>, catalog: &str) -> Result<Self::Loaded, LoadError> {
        self.0.load(policy, catalog).map_err(|e| match e {
            toolgate::Error::Load(p) => LoadError {
                code: p.code,
                line: p.line,
                column: p.column,
            },
            other => LoadError {
                code: other.code(),
                line: 0,
                column: 0,
            },
        })
    }

    fn run(&self, rules: &Self::Loaded, case: &Case) -> Answer {
        match case.op {
            Op::Evaluate => Ok(Value::String(
                rules.evaluate_raw(&case.call_bytes()?, &case.context_text()).json,
            )),
            Op::List => rules
                .list_exposable_raw(&case.context_text())
                .map(Value::String)
                .map_err(|e| e.code()),
            Op::Turn => rules
                .turn(&state_text(case), &input_text(case))
                .map(Value::String)
                .map_err(|e| e.code()),
            Op::Decide => {
                use toolgate::Confirmation as C;
                let confirmation = match case.confirmation()? {
                    CaseConfirmation::None => C::None,
                    CaseConfirmation::Argument => C::Argument,
                    CaseConfirmation::Person => C::Person,
                    CaseConfirmation::Invalid => C::Invalid,
                    CaseConfirmation::Seal {
                        payload,
                        caller,
                        now_ms,
                    } => C::Seal {
                        payload,
                        caller,
                        now_ms,
                    },
                };
                let o = rules.decide(&case.call_bytes()?, &case.context_text(), confirmation);
                Ok(outcome_value(o.decision.json, o.forward, o.blocked_result, o.digest))
            }
            Op::SealPayload => {
                let (caller, id, expires_ms) = case.seal_inputs();
                Ok(rules
                    .seal_payload(&case.call_bytes()?, caller, id, expires_ms)
                    .map_or_else(|e| serde_json::json!({"error": e.code()}), Value::String))
            }
        }
    }
}

/// A `decide` answer as the vectors write it.
fn outcome_value(
    decision: String,
    forward: Option<String>,
    blocked_result: Option<String>,
    digest: Option<String>,
) -> Value {
    serde_json::json!({
        "decision": decision,
        "forward": forward,
        "blocked_result": blocked_result,
        "digest": digest,
    })
}

fn state_text(case: &Case) -> String {
    match &case.state {
        None | Some(Value::Null) => String::new(),
        Some(v) => v.to_string(),
    }
}

fn input_text(case: &Case) -> String {
    case.input.as_ref().map_or_else(String::new, Value::to_string)
}

/// Runs one file; returns the failures (empty when all pass).
pub fn check_file<R: Runner>(runner: &R, path: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    let file = match read_file(path) {
        Ok(f) => f,
        Err(e) => return vec![e],
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (policy, catalog) = match (file.policy_text(), file.catalog_text()) {
        (Ok(p), Ok(c)) => (p, c),
        (Err(e), _) | (_, Err(e)) => return vec![format!("{name}: {e}")],
    };
    let loaded = runner.load(policy.as_deref(), &catalog);
    match (&file.expect_load_error, loaded) {
        (Some(expected), Err(got)) => {
            if *expected != got {
                failures.push(format!("{name}: load error {got:?}, expected {expected:?}"));
            }
        }
        (Some(expected), Ok(_)) => failures.push(format!("{name}: loaded, expected {expected:?}")),
        (None, Err(got)) => failures.push(format!("{name}: load failed: {got:?}")),
        (None, Ok(rules)) => {
            if file.cases.is_empty() {
                failures.push(format!("{name}: no cases"));
            }
            for case in file.cases.iter().filter(|c| R::METERED || !c.component_only) {
                if let Err(why) = check_case(runner, &rules, case) {
                    failures.push(format!("{name}: {}: {why}", case.name));
                }
            }
        }
    }
    failures
}

pub fn check_case<R: Runner>(runner: &R, rules: &R::Loaded, case: &Case) -> Result<(), String> {
    if case.context.is_some() && case.context_text.is_some() {
        return Err("at most one of context, context_text".into());
    }
    let got = runner.run(rules, case)?;
    if got != case.expect {
        return Err(format!("\n  got      {got}\n  expected {}", case.expect));
    }
    // A `decide` answer's code is its decision's.
    let decided = got.get("decision").cloned().unwrap_or_else(|| got.clone());
    if let (Some(expected_code), Value::String(json)) = (&case.expect_code, &decided) {
        let decision: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let code = decision
            .pointer("/error/code")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if code != *expected_code {
            return Err(format!("code {code:?}, hand-written expectation {expected_code:?}"));
        }
        if decision.get("ok") != Some(&Value::Bool(code.is_none())) {
            return Err("`ok` disagrees with `error`".into());
        }
    }
    if let (Some(status), Value::String(json)) = (&case.expect_status, &got) {
        let state: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let got_status = state.get("transaction_status").and_then(Value::as_str);
        if got_status != Some(status.as_str()) {
            return Err(format!("status {got_status:?}, hand-written expectation {status:?}"));
        }
    }
    if let (Some(names), Value::String(json)) = (&case.expect_names, &got) {
        let listed: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let got_names: Vec<&str> = listed
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t.get("name").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default();
        if got_names != names.iter().map(String::as_str).collect::<Vec<_>>() {
            return Err(format!("listed {got_names:?}, hand-written expectation {names:?}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(json: &str) -> Result<(), String> {
        serde_json::from_str::<Case>(json)
            .map_err(|e| e.to_string())?
            .check_fields()
    }

    #[test]
    fn a_case_carries_only_its_ops_fields_and_its_hand_written_anchor() {
        let call = r#""call":{"name":"t","arguments":{}}"#;
        assert_eq!(
            case(&format!(r#"{{"name":"a","op":"evaluate",{call},"expect_code":null}}"#)),
            Ok(())
        );
        assert_eq!(case(r#"{"name":"a","op":"list","expect_names":[]}"#), Ok(()));
        assert_eq!(
            case(&format!(r#"{{"name":"a","op":"seal_payload",{call},"caller":"c"}}"#)),
            Ok(())
        );
        assert_eq!(
            case(&format!(r#"{{"name":"a","op":"list",{call},"expect_names":[]}}"#)),
            Err("unknown field `call` for op List".to_owned())
        );
        assert_eq!(
            case(r#"{"name":"a","op":"turn","state":null,"confirmation":"none","expect_status":"x"}"#),
            Err("unknown field `confirmation` for op Turn".to_owned())
        );
        assert_eq!(
            case(&format!(r#"{{"name":"a","op":"decide",{call}}}"#)),
            Err("`expect_code` is required (written by hand)".to_owned())
        );
        assert_eq!(
            case(r#"{"name":"a","op":"turn","state":null}"#),
            Err("`expect_status` is required (written by hand)".to_owned())
        );
    }
}
