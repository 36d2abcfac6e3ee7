//! The gateway's trust boundary for what the client sends.
//!
//! Every message from the client passes [`admit`] before the MCP session sees
//! it. A message is admitted only when it parses, strictly, into one of
//! `rmcp`'s typed client messages that the gateway handles, or names a custom
//! method on the operator's explicit relay list. Everything else is answered
//! here with a JSON-RPC error carrying the request's id where one can be read
//! (`-32700` parse error, `-32600` invalid request, `-32601` unknown method,
//! `-32602` a known method with params that do not fit its type), or, for a
//! notification (which cannot be answered), dropped and reported.
//!
//! Why this sits below `rmcp`: `ClientRequest` is an untagged enum whose last
//! variant is a catch-all custom request, so a `tools/call` whose params do not
//! fit `CallToolRequestParams` would otherwise arrive as a custom request, and a
//! message `rmcp` cannot parse at all would get no answer. See
//! `docs/security.md`.

use rmcp::model::{
    CallToolRequestMethod, CancelTaskMethod, ClientJsonRpcMessage, ClientNotification, ClientRequest,
    CompleteRequestMethod, ConstString, DiscoverRequestMethod, ErrorCode, ErrorData, GetPromptRequestMethod,
    GetSkillRequestMethod, GetTaskMethod, InitializeResultMethod, JsonRpcMessage, ListPromptsRequestMethod,
    ListResourceTemplatesRequestMethod, ListResourcesRequestMethod, ListSkillsRequestMethod, ListToolsRequestMethod,
    NumberOrString, PingRequestMethod, ReadResourceDirectoryRequestMethod, ReadResourceRequestMethod, RequestId,
    SetLevelRequestMethod, SubscribeRequestMethod, SubscriptionsListenRequestMethod, UnsubscribeRequestMethod,
    UpdateTaskMethod,
};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The largest message accepted from a client, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The most JSON values (object keys counted) a client's message may hold.
/// Its memory goes with its values, not its bytes: each becomes a node of
/// every tree the message is read into (here, then rmcp's), so 16 MiB of
/// `[0,0,…]` took 2.5 GB at its peak (review 22), about 300 bytes a value
/// (1 KB for empty objects). 2^19 keeps one message near 150–500 MB and
/// takes any call but one of more than half a million numbers or objects.
pub const MAX_MESSAGE_VALUES: usize = 1 << 19;

/// The request methods `rmcp` types, read from its own constants: a request
/// naming one of these whose params do not fit the type is `-32602`, any
/// other name `-32601`.
const TYPED_REQUEST_METHODS: &[&str] = &[
    PingRequestMethod::VALUE,
    InitializeResultMethod::VALUE,
    DiscoverRequestMethod::VALUE,
    CompleteRequestMethod::VALUE,
    SetLevelRequestMethod::VALUE,
    GetPromptRequestMethod::VALUE,
    ListPromptsRequestMethod::VALUE,
    ListResourcesRequestMethod::VALUE,
    ListResourceTemplatesRequestMethod::VALUE,
    ReadResourceRequestMethod::VALUE,
    SubscriptionsListenRequestMethod::VALUE,
    SubscribeRequestMethod::VALUE,
    UnsubscribeRequestMethod::VALUE,
    CallToolRequestMethod::VALUE,
    ListToolsRequestMethod::VALUE,
    GetTaskMethod::VALUE,
    UpdateTaskMethod::VALUE,
    CancelTaskMethod::VALUE,
    ListSkillsRequestMethod::VALUE,
    GetSkillRequestMethod::VALUE,
    ReadResourceDirectoryRequestMethod::VALUE,
];

/// The custom (untyped) methods the operator allows through, requests and
/// notifications alike (`--relay-method`). Empty by default: nothing custom
/// reaches the upstream.
#[derive(Debug, Clone, Default)]
pub struct RelayList {
    methods: BTreeSet<String>,
}

impl RelayList {
    /// A list of exact method names. Names in MCP's own namespaces are
    /// refused, in any case (`Tools/call`), and so is any spelling of an MCP
    /// method or namespace with other separators (`/tools/call`,
    /// `tools.call`, `tools_call`, `-ping`): they must be decided (or typed),
    /// never relayed raw, and an upstream that matches methods loosely would
    /// run them as a call no one decided. So are names with anything but
    /// letters, digits and `/ _ . -`.
    pub fn new<I: IntoIterator<Item = String>>(methods: I) -> Result<RelayList, String> {
        let mut set = BTreeSet::new();
        for method in methods {
            let folded = method.to_ascii_lowercase();
            let loose = loosely(&method);
            let others = ["notifications/", "sampling/", "elicitation/", "roots/"];
            let in_mcp_namespace = TYPED_REQUEST_METHODS.iter().chain(&others).any(|typed| {
                let namespace = typed.split_once('/').map_or(*typed, |(ns, _)| ns);
                let typed = typed.to_ascii_lowercase();
                folded == typed
                    || folded == namespace
                    || folded.starts_with(&format!("{namespace}/"))
                    || loose == typed
                    || loose == namespace
            });
            let plain = method
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/_.-".contains(&b));
            if in_mcp_namespace || !plain || method.is_empty() {
                return Err(format!(
                    "--relay-method {method:?}: only custom methods can be relayed; MCP methods are handled by the gateway"
                ));
            }
            set.insert(method);
        }
        Ok(RelayList { methods: set })
    }

    pub fn contains(&self, method: &str) -> bool {
        self.methods.contains(method)
    }
}

/// A method name as a loose router might read it: lower case, every run of
/// separators (`/ _ . -`) one `/`, none at either end.
fn loosely(method: &str) -> String {
    method
        .to_ascii_lowercase()
        .split(['/', '_', '.', '-'])
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// What happens to one message from the client.
#[derive(Debug)]
pub enum Admission {
    /// Hand it to the session.
    Admit(Box<ClientJsonRpcMessage>),
    /// Answer the client with this error and go no further.
    Refuse { id: Option<RequestId>, error: ErrorData },
    /// A notification that is not relayed (it cannot be answered).
    Drop { method: String, why: String },
}

impl Admission {
    /// The JSON-RPC error message for a refusal (`None` otherwise).
    pub fn answer(&self) -> Option<Value> {
        match self {
            Admission::Refuse { id, error } => Some(error_message(id.as_ref(), error)),
            _ => None,
        }
    }
}

/// A JSON-RPC 2.0 error message (`id` is `null` when it could not be read).
pub fn error_message(id: Option<&RequestId>, error: &ErrorData) -> Value {
    let mut message = Map::new();
    message.insert("jsonrpc".into(), Value::String("2.0".into()));
    message.insert(
        "id".into(),
        id.and_then(|id| serde_json::to_value(id).ok()).unwrap_or(Value::Null),
    );
    message.insert(
        "error".into(),
        serde_json::to_value(error).unwrap_or_else(|_| Value::String(error.message.to_string())),
    );
    Value::Object(message)
}

fn refuse(id: Option<RequestId>, code: ErrorCode, message: String) -> Admission {
    Admission::Refuse {
        id,
        error: ErrorData::new(
            code,
            message,
            Some(serde_json::json!({ "toolgate": "GATEWAY_REFUSED" })),
        ),
    }
}

/// The answer to a message longer than [`MAX_MESSAGE_BYTES`], of which only
/// `prefix` was kept (enough to find the id, usually).
pub fn too_large(prefix: &[u8]) -> Admission {
    refuse(
        scan_id(prefix),
        ErrorCode::INVALID_REQUEST,
        format!("toolgate proxy: the message is larger than {MAX_MESSAGE_BYTES} bytes; it was not relayed"),
    )
}

/// An upper bound on the JSON values in `bytes`, read without building
/// anything: one more than the `[`, `{`, `,` and `:` outside strings (every
/// value but the first follows one of them; a key's `:` counts the key).
pub fn values_at_most(bytes: &[u8]) -> usize {
    let (mut count, mut in_string, mut escaped) = (1usize, false, false);
    for &byte in bytes {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b'[' | b'{' | b',' | b':' => count += 1,
                _ => {}
            }
        }
    }
    count
}

/// The answer to a message holding more than [`MAX_MESSAGE_VALUES`] values.
fn too_many_values(bytes: &[u8]) -> Admission {
    refuse(
        scan_id(bytes),
        ErrorCode::INVALID_REQUEST,
        format!("toolgate proxy: the message holds more than {MAX_MESSAGE_VALUES} JSON values; it was not relayed"),
    )
}

/// The answer to a request whose id is already used by one in flight.
pub fn id_in_flight(id: &RequestId) -> Admission {
    refuse(
        Some(id.clone()),
        ErrorCode::INVALID_REQUEST,
        format!("toolgate proxy: the id {id} is already used by a request in flight; it was not relayed"),
    )
}

/// Decides what happens to one message from the client (`bytes` is one
/// line on stdio, one POST body over HTTP).
pub fn admit(bytes: &[u8], relay: &RelayList) -> Admission {
    admit_counted(bytes, values_at_most(bytes), relay)
}

/// [`admit`] with `values`, the [`values_at_most`] of `bytes`, counted
/// already (the HTTP gate counts a body once, for its budget and here).
pub fn admit_counted(bytes: &[u8], values: usize, relay: &RelayList) -> Admission {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return too_large(bytes);
    }
    if values > MAX_MESSAGE_VALUES {
        return too_many_values(bytes);
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return refuse(
            scan_id(bytes),
            ErrorCode::PARSE_ERROR,
            "toolgate proxy: the message is not valid UTF-8; it was not relayed".into(),
        );
    };
    // The engine's own strict reader: every object's keys unique at any depth
    // (`serde_json` keeps the last of two equal keys and the upstream's SDK
    // may keep either, so such a message is ambiguous), nesting at most 128.
    let value = match policy_core::json::parse_strict(text.as_bytes()) {
        Ok(value) => value,
        Err(e) => {
            let duplicate = e.to_string().starts_with(DUPLICATE);
            let (code, what) = if duplicate {
                (ErrorCode::INVALID_REQUEST, "is ambiguous")
            } else {
                (ErrorCode::PARSE_ERROR, "is not JSON the gateway can read")
            };
            return refuse(
                scan_id(bytes),
                code,
                format!("toolgate proxy: the message {what} ({e}); it was not relayed"),
            );
        }
    };
    admit_value(value, relay)
}

fn admit_value(value: Value, relay: &RelayList) -> Admission {
    let Value::Object(object) = &value else {
        let why = if value.is_array() {
            "batches are not supported; send one message at a time"
        } else {
            "a message must be a JSON object"
        };
        return refuse(None, ErrorCode::INVALID_REQUEST, format!("toolgate proxy: {why}"));
    };
    let id = object.get("id").and_then(read_id);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return refuse(
            id,
            ErrorCode::INVALID_REQUEST,
            "toolgate proxy: the message must have \"jsonrpc\": \"2.0\"".into(),
        );
    }
    let method = match object.get("method") {
        None => None,
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => {
            return refuse(
                id,
                ErrorCode::INVALID_REQUEST,
                "toolgate proxy: the method must be a string".into(),
            );
        }
    };
    let has_id = object.contains_key("id");
    if has_id && id.is_none() {
        return refuse(
            None,
            ErrorCode::INVALID_REQUEST,
            "toolgate proxy: an id must be a string or an integer".into(),
        );
    }
    let parsed = serde_json::from_value::<ClientJsonRpcMessage>(value);
    match (method, has_id) {
        // A request.
        (Some(method), true) => match parsed {
            Ok(JsonRpcMessage::Request(request)) => match &request.request {
                ClientRequest::CustomRequest(custom) if !relay.contains(&custom.method) => {
                    refuse_method(id, &custom.method)
                }
                _ => Admission::Admit(Box::new(JsonRpcMessage::Request(request))),
            },
            _ => refuse_method(id, &method),
        },
        // A notification.
        (Some(method), false) => match parsed {
            Ok(JsonRpcMessage::Notification(notification)) => match &notification.notification {
                ClientNotification::CustomNotification(custom) if !relay.contains(&custom.method) => Admission::Drop {
                    why: notification_why(&custom.method),
                    method: custom.method.clone(),
                },
                _ => Admission::Admit(Box::new(JsonRpcMessage::Notification(notification))),
            },
            _ => Admission::Drop {
                why: notification_why(&method),
                method,
            },
        },
        // An answer to one of the gateway's own requests (elicitation,
        // sampling, roots): matched by id inside the session.
        (None, true) => match parsed {
            Ok(message @ (JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_))) => {
                Admission::Admit(Box::new(message))
            }
            _ => refuse(
                id,
                ErrorCode::INVALID_REQUEST,
                "toolgate proxy: the message is neither a request, a notification nor a valid response".into(),
            ),
        },
        (None, false) => match parsed {
            // An error answer may carry a null id.
            Ok(message @ JsonRpcMessage::Error(_)) => Admission::Admit(Box::new(message)),
            _ => refuse(
                None,
                ErrorCode::INVALID_REQUEST,
                "toolgate proxy: the message has no method and no id".into(),
            ),
        },
    }
}

fn refuse_method(id: Option<RequestId>, method: &str) -> Admission {
    let shown = serde_json::to_string(method).unwrap_or_default();
    if TYPED_REQUEST_METHODS.contains(&method) {
        refuse(
            id,
            ErrorCode::INVALID_PARAMS,
            format!("toolgate proxy: the params of {shown} do not fit the MCP schema; it was not relayed"),
        )
    } else {
        refuse(
            id,
            ErrorCode::METHOD_NOT_FOUND,
            format!("toolgate proxy: the method {shown} is not relayed by this gateway"),
        )
    }
}

fn notification_why(method: &str) -> String {
    if TYPED_REQUEST_METHODS.contains(&method) {
        format!("{method} was sent as a notification (no id): it is never relayed")
    } else {
        format!("the notification {method:?} is not on the relay list or does not fit its MCP schema")
    }
}

fn read_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::String(s) => Some(NumberOrString::String(s.as_str().into())),
        Value::Number(n) => n.as_i64().map(NumberOrString::Number),
        _ => None,
    }
}

/// How the engine's strict reader starts the error for a key written twice.
const DUPLICATE: &str = "duplicate key";

/// Reads the top-level `"id"` of a message that does not parse (too deep,
/// too large, invalid UTF-8 elsewhere, duplicate keys), so its error can
/// carry it. Walks the top-level object's members and skips nested values
/// by counting brackets outside strings: no recursion, bounded by the input.
pub fn scan_id(bytes: &[u8]) -> Option<RequestId> {
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_ws(bytes, at);
        let key_start = at;
        at = skip_string(bytes, at)?;
        let key = bytes.get(key_start..at)?;
        at = skip_ws(bytes, at);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(bytes, at + 1);
        let value_start = at;
        at = skip_value(bytes, at)?;
        if key == b"\"id\"" {
            let value: Value = serde_json::from_slice(bytes.get(value_start..at)?).ok()?;
            return read_id(&value);
        }
        at = skip_ws(bytes, at);
        match bytes.get(at) {
            Some(b',') => at += 1,
            _ => return None,
        }
    }
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// `at` is on a `"`; returns the index after the closing quote.
fn skip_string(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        match bytes.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

fn skip_value(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => skip_string(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = skip_string(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = at;
            while bytes
                .get(i)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                i += 1;
            }
            Some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(a: &Admission) -> Option<i32> {
        match a {
            Admission::Refuse { error, .. } => Some(error.code.0),
            _ => None,
        }
    }

    fn id_of(a: &Admission) -> Option<RequestId> {
        match a {
            Admission::Refuse { id, .. } => id.clone(),
            _ => None,
        }
    }

    fn none() -> RelayList {
        RelayList::default()
    }

    #[test]
    fn a_well_formed_call_is_admitted_typed() {
        let a = admit(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#,
            &none(),
        );
        match a {
            Admission::Admit(m) => match *m {
                JsonRpcMessage::Request(r) => assert!(matches!(r.request, ClientRequest::CallToolRequest(_))),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn calls_that_do_not_fit_the_type_are_invalid_params_never_custom() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","requestState":5}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","inputResponses":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"t"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
        ] {
            let a = admit(line.as_bytes(), &none());
            assert_eq!(code(&a), Some(-32602), "{line}");
            assert_eq!(id_of(&a), Some(NumberOrString::Number(7)), "{line}");
        }
    }

    #[test]
    fn duplicate_keys_anywhere_are_refused_with_the_id() {
        for line in [
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","name":"b"}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","arguments":{},"arguments":{"p":1}}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","_meta":{},"_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","arguments":{"p":1,"p":2}}}"#,
        ] {
            let a = admit(line.as_bytes(), &none());
            assert_eq!(code(&a), Some(-32600), "{line}");
            assert_eq!(id_of(&a), Some(NumberOrString::String("x".into())), "{line}");
        }
    }

    #[test]
    fn unknown_and_look_alike_methods_are_not_found() {
        for method in [
            "tools/call ",
            "Tools/call",
            "tools/call\u{200b}",
            "tools/calls",
            "x/custom",
        ] {
            let line = serde_json::json!({"jsonrpc":"2.0","id":1,"method":method,"params":{"name":"t"}}).to_string();
            assert_eq!(code(&admit(line.as_bytes(), &none())), Some(-32601), "{method:?}");
        }
    }

    #[test]
    fn custom_methods_pass_only_from_the_list() {
        let relay = RelayList::new(["x/custom".to_owned()]).unwrap();
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"x/custom","params":{}}"#;
        assert!(matches!(admit(line, &relay), Admission::Admit(_)));
        for reserved in [
            "tools/call",
            "Tools/call",
            "TOOLS/CALL",
            "tools/anything",
            " tools/call",
            "tools/call\u{200b}",
            "notifications/tools/list_changed",
            "Sampling/createMessage",
            "Initialize",
            "ping",
            "",
            "/tools/call",
            ".tools/call",
            "tools.call",
            "tools_call",
            "tools-call",
            "tools//call",
            "tools/call/",
            "-ping",
            "resources.read",
        ] {
            assert!(RelayList::new([reserved.to_owned()]).is_err(), "{reserved:?}");
        }
        for custom in [
            "x/custom",
            "acme.tools",
            "toolsync/run",
            "x-ping",
            "vendor_tools/call",
            "tools_sync",
            "ping-ext",
            "logging.custom",
            "server-status",
            "completion_x",
        ] {
            assert!(RelayList::new([custom.to_owned()]).is_ok(), "{custom:?}");
        }
    }

    #[test]
    fn a_call_sent_as_a_notification_is_dropped() {
        let a = admit(
            br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{}}}"#,
            &none(),
        );
        assert!(matches!(a, Admission::Drop { .. }), "{a:?}");
        let ok = admit(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, &none());
        assert!(matches!(ok, Admission::Admit(_)));
    }

    #[test]
    fn unparseable_messages_are_answered_with_their_id_when_readable() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{{"name":"t","arguments":{{"a":{}1{}}}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let a = admit(deep.as_bytes(), &none());
        assert_eq!(code(&a), Some(-32700));
        assert_eq!(id_of(&a), Some(NumberOrString::Number(42)));

        let mut utf8 = br#"{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"t"#.to_vec();
        utf8.extend_from_slice(&[0xff, 0xfe]);
        utf8.extend_from_slice(br#""}}"#);
        let a = admit(&utf8, &none());
        assert_eq!(code(&a), Some(-32700));
        assert_eq!(id_of(&a), Some(NumberOrString::Number(43)));

        let big = format!(
            r#"{{"jsonrpc":"2.0","id":44,"method":"tools/call","params":{{"name":"t","arguments":{{"a":"{}"}}}}}}"#,
            "x".repeat(MAX_MESSAGE_BYTES)
        );
        let a = admit(big.as_bytes(), &none());
        assert_eq!(code(&a), Some(-32600));
        assert_eq!(id_of(&a), Some(NumberOrString::Number(44)));

        for bad in [
            "",
            "{",
            "[]",
            "[1]",
            "null",
            "3",
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        ] {
            assert!(code(&admit(bad.as_bytes(), &none())).is_some(), "{bad:?}");
        }
        let a = admit(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#, &none());
        assert_eq!(code(&a), Some(-32600));
    }

    #[test]
    fn a_message_of_too_many_values_is_refused_before_it_is_read_into_a_tree() {
        assert_eq!(values_at_most(b"0"), 1);
        assert_eq!(values_at_most(br#"{"a":[1,2,{"b":null}]}"#), 8);
        // Structure inside strings, escaped quotes among it, is text.
        assert_eq!(values_at_most(br#"["a,b:[{", "\",[", "\\"]"#), 4);
        let call = |n: usize| {
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"t","arguments":{{"a":[{}]}}}}}}"#,
                vec!["0"; n].join(",")
            )
        };
        let under = call(MAX_MESSAGE_VALUES - 20);
        assert!(values_at_most(under.as_bytes()) <= MAX_MESSAGE_VALUES);
        assert!(matches!(admit(under.as_bytes(), &none()), Admission::Admit(_)));
        let over = call(MAX_MESSAGE_VALUES);
        let a = admit(over.as_bytes(), &none());
        assert_eq!(code(&a), Some(-32600));
        assert_eq!(id_of(&a), Some(NumberOrString::Number(7)));
        // Long strings are bytes, not values: still bounded by size alone.
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{{"name":"t","arguments":{{"a":"{}"}}}}}}"#,
            ",".repeat(MAX_MESSAGE_VALUES * 2)
        );
        assert!(matches!(admit(text.as_bytes(), &none()), Admission::Admit(_)));
    }

    #[test]
    fn scan_id_finds_the_top_level_id_only() {
        assert_eq!(
            scan_id(br#"{"params":{"id":1,"x":"}\""},"id":"top"}"#),
            Some(NumberOrString::String("top".into()))
        );
        assert_eq!(
            scan_id(br#"{"a":[[[{"id":2}]]] , "id" : 9 "#),
            Some(NumberOrString::Number(9))
        );
        assert_eq!(scan_id(b"[1]"), None);
        assert_eq!(scan_id(br#"{"id":true}"#), None);
    }
}
