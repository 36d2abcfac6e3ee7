//! toolgate in front of an [`rmcp`] MCP server, in the server's own process.
//!
//! [`Guarded`] wraps any `rmcp` server (every `ServerHandler` is a
//! `Service<RoleServer>`) and answers two requests itself:
//!
//! - `tools/list`: the server's whole catalog (every page) is loaded into the
//!   engine with the policy, and the tools this context may see are listed
//!   (filtered, sorted, annotations derived), exactly as `toolgate proxy`
//!   lists them;
//! - `tools/call`: the engine decides first, by the server's tools as they
//!   are at that call (listed again for each call; the rules are loaded
//!   again only when the catalog changed). Allowed: the server gets the
//!   call with exactly the arguments the engine returned. A write that needs
//!   a person: a client that declared elicitation is asked (the tool and the
//!   exact arguments, escaped), and only its accept runs the call. Blocked:
//!   the engine's blocked result. A tool the context may not see, and a tool
//!   that does not exist, both get the same `Unknown tool` error; neither
//!   reaches the server.
//!
//! Everything else goes to the wrapped server as it is.
//!
//! **Handlers must read exactly the keys their schema names.** rmcp builds a
//! handler's `Parameters<T>` with serde from the forwarded arguments, and the
//! tool's `inputSchema` (schemars) is what the engine checked them against.
//! A `#[serde(alias = "path")]` is not in that schema: `{"path": "/etc/shadow"}`
//! passes the `pattern` on `file` as an undeclared key and the handler reads
//! it as `file`. Put `#[serde(deny_unknown_fields)]` on every parameter type
//! (schemars then writes `additionalProperties: false`, which the engine
//! enforces, so an alias or any other undeclared key is denied) and do not
//! use `#[serde(alias)]` or `#[serde(flatten)]` on them.
//!
//! The runtime needs tokio's timers (`enable_time`, as `#[tokio::main]`
//! gives): listing the server's tools is bounded by a timeout.
//!
//! ```no_run
//! # async fn run(server: impl rmcp::ServerHandler) -> Result<(), Box<dyn std::error::Error>> {
//! use rmcp::ServiceExt;
//! let engine = toolgate::Engine::cached()?;
//! let policy = std::fs::read_to_string("tool_policies.yaml")?;
//! let guarded = toolgate_rmcp::Guarded::new(server, engine, Some(&policy), toolgate::Context::default())?;
//! guarded.serve((tokio::io::stdin(), tokio::io::stdout())).await?.waiting().await?;
//! # Ok(()) }
//! ```

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientNotification, ClientRequest, ClientResult,
    ElicitRequest, ElicitRequestParams, ElicitationAction, ErrorData, ListToolsRequest, ListToolsResult,
    PaginatedRequestParams, ServerNotification, ServerRequest, ServerResult, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RoleServer, Service, ServiceRole};
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use toolgate::{Confirmation, Context, Engine, Outcome, RuleSet};

/// Why a [`Guarded`] server could not be set up.
#[derive(Debug)]
#[non_exhaustive]
pub enum GuardError {
    /// The policy does not load (syntax, keys, types): its problem, with
    /// the line and column.
    Policy(toolgate::Error),
}

impl GuardError {
    /// The stable code of the error (`POLICY_…` from the engine).
    pub fn code(&self) -> String {
        match self {
            GuardError::Policy(e) => e.code(),
        }
    }
}

impl std::fmt::Display for GuardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuardError::Policy(e) => write!(f, "the policy does not load: {e}"),
        }
    }
}

impl std::error::Error for GuardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GuardError::Policy(e) => Some(e),
        }
    }
}

/// Pages of a server's `tools/list` read at most: past this the server is
/// taken to be looping.
const MAX_PAGES: usize = 10_000;

/// The rules over the catalog they were loaded with.
#[derive(Debug)]
struct Loaded {
    catalog: String,
    set: Arc<RuleSet>,
}

/// An `rmcp` server with a toolgate policy in front of its tools.
#[derive(Debug)]
pub struct Guarded<S> {
    inner: S,
    engine: Engine,
    policy: Option<String>,
    context: String,
    trust_model_confirmation: bool,
    ask_timeout: Duration,
    list_timeout: Duration,
    rules: tokio::sync::Mutex<Option<Loaded>>,
}

impl<S: Service<RoleServer>> Guarded<S> {
    /// `policy`: the policy text (`None`: the catalog's own fields decide).
    /// `context`: the surface, scopes and allowlist every call is decided
    /// with. The policy is checked now (against no catalog), so a broken
    /// file stops the server at start, not at its first call.
    pub fn new(inner: S, engine: Engine, policy: Option<&str>, context: Context) -> Result<Guarded<S>, GuardError> {
        engine.load(policy, r#"{"tools":[]}"#).map_err(GuardError::Policy)?;
        Ok(Guarded {
            inner,
            engine,
            policy: policy.map(str::to_owned),
            context: context.to_json(),
            trust_model_confirmation: false,
            ask_timeout: Duration::from_secs(300),
            list_timeout: Duration::from_secs(30),
            rules: tokio::sync::Mutex::default(),
        })
    }

    /// Count the model's own `confirmed: true` as the confirmation (for a
    /// host that keeps its own turn state). Off by default.
    pub fn trust_model_confirmation(mut self, trust: bool) -> Guarded<S> {
        self.trust_model_confirmation = trust;
        self
    }

    /// How long a person has to answer a confirmation (default 300 s).
    pub fn ask_timeout(mut self, timeout: Duration) -> Guarded<S> {
        self.ask_timeout = timeout;
        self
    }

    /// How long the wrapped server has to list its tools (default 30 s).
    /// Every call and listing reads the server's tools with the rules' slot
    /// held, so a listing that never ends would hold every later call too;
    /// past this it is a fault and the call is refused.
    pub fn list_timeout(mut self, timeout: Duration) -> Guarded<S> {
        self.list_timeout = timeout;
        self
    }

    /// The wrapped server.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The server's whole catalog, as the engine reads it. A server whose
    /// pages do not end (a cursor seen before, or more than `MAX_PAGES`)
    /// is a fault: nothing is allowed.
    async fn catalog(&self, context: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
        let mut tools: Vec<Tool> = Vec::new();
        let mut cursor = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            if seen.len() >= MAX_PAGES {
                return Err(fault("the server's tools/list has too many pages"));
            }
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(
                PaginatedRequestParams::default().with_cursor(cursor),
            ));
            let page = match self.inner.handle_request(request, context.clone()).await? {
                ServerResult::ListToolsResult(page) => page,
                _ => return Err(fault("the server answered tools/list with another result")),
            };
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(fault("the server's tools/list repeats a cursor"));
                }
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        Ok(json!({ "tools": tools }).to_string())
    }

    /// The rules over the server's current catalog: loaded again only when
    /// the catalog changed. A catalog that does not load allows nothing.
    /// The catalog is read with the slot held, so an older listing cannot
    /// replace the rules of a newer one.
    async fn rules(&self, context: &RequestContext<RoleServer>) -> Result<Arc<RuleSet>, ErrorData> {
        let mut slot = self.rules.lock().await;
        let catalog = tokio::time::timeout(self.list_timeout, self.catalog(context))
            .await
            .map_err(|_| fault("the server did not list its tools in time; no call is allowed"))??;
        if let Some(loaded) = slot.as_ref()
            && loaded.catalog == catalog
        {
            return Ok(loaded.set.clone());
        }
        *slot = None;
        // A load takes milliseconds to seconds (the engine's deadline is 60 s):
        // off the async threads, so a current-thread runtime keeps serving.
        let (engine, policy, text) = (self.engine.clone(), self.policy.clone(), catalog.clone());
        let loaded = tokio::task::spawn_blocking(move || engine.load(policy.as_deref(), &text))
            .await
            .map_err(|_| fault("the engine's load stopped; no call is allowed"))?;
        let set = Arc::new(loaded.map_err(|e| {
            fault(&format!(
                "the server's catalog could not be loaded ({e}); no call is allowed"
            ))
        })?);
        *slot = Some(Loaded {
            catalog,
            set: set.clone(),
        });
        Ok(set)
    }

    async fn list_tools(&self, context: &RequestContext<RoleServer>) -> Result<ServerResult, ErrorData> {
        let rules = self.rules(context).await?;
        // Off the async threads as a decision is: a runaway decision holds the
        // rule set's lock for seconds.
        let ctx = self.context.clone();
        let listed = tokio::task::spawn_blocking(move || rules.list_exposable_raw(&ctx))
            .await
            .map_err(|_| fault("the engine's listing stopped"))?
            .map_err(|e| fault(&format!("tools/list could not be answered: {e}")))?;
        let result: ListToolsResult =
            serde_json::from_str(&listed).map_err(|e| fault(&format!("unreadable tools/list from the engine: {e}")))?;
        Ok(ServerResult::ListToolsResult(private_listing(result)))
    }

    async fn call_tool(
        &self,
        mut params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        // Decided by the server's tools as they are now, not as last
        // listed: the wrapper does not see the server's list_changed, and a
        // tool changed or withdrawn since must not run by its old entry.
        let rules = self.rules(&context).await?;
        let call =
            json!({ "name": params.name, "arguments": params.arguments.clone().unwrap_or_default() }).to_string();
        // The model's own word counts only where the person cannot be asked
        // (docs/spec.md §8).
        let asks = self.asks(&context);
        // A 2026-07-28 client that declares form elicitation could be asked
        // (by a host that can send `input_required`): its model's word is
        // never taken, though this guard cannot ask it.
        let first = if self.trust_model_confirmation && !asks && !declares_form_elicitation(&context.meta) {
            Confirmation::Argument
        } else {
            Confirmation::None
        };
        let mut outcome = decide_off_thread(&rules, &call, &self.context, first).await?;
        if outcome.forward.is_none()
            && outcome.decision.code.as_deref() == Some("CONFIRMATION_REQUIRED")
            && asks
            && self.ask(&context, &params.name, params.arguments.as_ref()).await
        {
            // The person answered about the rules the call started with: if
            // the server's tools changed while they were asked (a pin may no
            // longer match, the tool may be gone), that answer is not about
            // the tool that would run now.
            let current = self.rules(&context).await?;
            if !Arc::ptr_eq(&current, &rules) {
                return blocked(&outcome, &params.name);
            }
            outcome = decide_off_thread(&rules, &call, &self.context, Confirmation::Person).await?;
        }
        let Some(forward) = outcome.forward.as_deref() else {
            return blocked(&outcome, &params.name);
        };
        let arguments: Map<String, Value> = serde_json::from_str(forward).map_err(|e| {
            fault(&format!(
                "unreadable arguments from the engine: {e}; the call was not run"
            ))
        })?;
        params.arguments = Some(arguments);
        self.inner
            .handle_request(ClientRequest::CallToolRequest(CallToolRequest::new(params)), context)
            .await
    }

    /// Whether this client can be asked: it declared form elicitation.
    /// Whether the client takes a form elicitation (the question asked in
    /// band); a URL-mode-only client cannot be asked that way.
    fn asks(&self, context: &RequestContext<RoleServer>) -> bool {
        context
            .peer
            .supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Form)
    }

    /// Asks the person about this very call. Only an accept is a yes.
    async fn ask(
        &self,
        context: &RequestContext<RoleServer>,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> bool {
        ask_person(context, tool, arguments, self.ask_timeout).await == Ok(true)
    }
}

impl<S: Service<RoleServer>> Service<RoleServer> for Guarded<S> {
    async fn handle_request(
        &self,
        request: <RoleServer as ServiceRole>::PeerReq,
        context: RequestContext<RoleServer>,
    ) -> Result<<RoleServer as ServiceRole>::Resp, ErrorData> {
        match request {
            ClientRequest::ListToolsRequest(_) => self.list_tools(&context).await,
            ClientRequest::CallToolRequest(request) => self.call_tool(request.params, context).await,
            // A `tools/call` or `tools/list` whose params do not fit their
            // type arrives as a custom request: it is refused, never handed
            // to the server undecided.
            ClientRequest::CustomRequest(request) if is_tool_method(&request.method) => Err(ErrorData::invalid_params(
                format!("toolgate: malformed {} request; nothing was run", request.method),
                None,
            )),
            other => self.inner.handle_request(other, context).await,
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // A `tools/call` sent as a notification is dropped: a call runs only
        // as a request, after a decision.
        if let ClientNotification::CustomNotification(n) = &notification
            && is_tool_method(&n.method)
        {
            return Ok(());
        }
        self.inner.handle_notification(notification, context).await
    }

    fn get_info(&self) -> <RoleServer as ServiceRole>::Info {
        self.inner.get_info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [rmcp::model::ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }
}

/// One decision off the async threads, as a load is: the guest's meter lets
/// a runaway call run for seconds, and meanwhile a current-thread runtime
/// would serve nothing else, pings and cancellations included (review 11).
async fn decide_off_thread(
    rules: &Arc<RuleSet>,
    call: &str,
    context: &str,
    confirmation: Confirmation<'static>,
) -> Result<Outcome, ErrorData> {
    let (rules, call, context) = (rules.clone(), call.to_owned(), context.to_owned());
    tokio::task::spawn_blocking(move || rules.decide(call.as_bytes(), &context, confirmation))
        .await
        .map_err(|_| fault("the engine's decision stopped; no call is allowed"))
}

/// The answer to a call that does not run: the engine's blocked result, or
/// for a tool this context cannot see (hidden or absent alike) the error an
/// unknown tool gets.
fn blocked(outcome: &Outcome, name: &str) -> Result<ServerResult, ErrorData> {
    match outcome.blocked_result.as_deref() {
        Some(json) => {
            let result: CallToolResult = serde_json::from_str(json)
                .map_err(|e| fault(&format!("unreadable blocked result from the engine: {e}")))?;
            Ok(ServerResult::CallToolResult(result))
        }
        None => Err(ErrorData::invalid_params(format!("Unknown tool: {name}"), None)),
    }
}

/// A listing decided for this guard's caller: only that caller's client may
/// cache it. rmcp fills an absent `cacheScope` in as private only on its
/// 2026-07-28 paths; elsewhere an absent one reads as public.
pub fn private_listing(mut result: ListToolsResult) -> ListToolsResult {
    result.cache_scope = Some(rmcp::model::CacheScope::Private);
    result
}

/// Whether an MCP 2026-07-28 request declared form elicitation in its own
/// `_meta`, read from the JSON as sent (an `elicitation` rmcp's type cannot
/// read still counts).
pub fn declares_form_elicitation(meta: &rmcp::model::RequestMetaObject) -> bool {
    meta.get("io.modelcontextprotocol/clientCapabilities")
        .is_some_and(capabilities_declare_form_elicitation)
}

/// Whether a client's capabilities declare form elicitation (docs/spec.md
/// §8; every host is tested on tests/vectors/fixtures/form-elicitation.json):
/// `elicitation: {}` means form, as in MCP 2025-06-18; a null member is
/// absent; a URL-only client cannot be asked a form; an `elicitation` that is
/// not an object cannot be read, and counts as declared. (rmcp's
/// `supported_elicitation_modes` reads a handshake's typed capabilities the
/// same way.)
pub fn capabilities_declare_form_elicitation(capabilities: &Value) -> bool {
    match capabilities.get("elicitation") {
        None | Some(Value::Null) => false,
        Some(Value::Object(modes)) => {
            let given = |key: &str| modes.get(key).is_some_and(|v| !v.is_null());
            given("form") || !given("url")
        }
        Some(_) => true,
    }
}

/// The methods `Guarded` answers itself.
fn is_tool_method(method: &str) -> bool {
    matches!(method, "tools/call" | "tools/list")
}

fn fault(message: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("toolgate: {message}"),
        Some(json!({ "toolgate": "GUARD_ERROR" })),
    )
}

/// The largest arguments a person is asked to approve, on every channel (an
/// elicitation, an MCP 2026-07-28 input request, the gateway's approval
/// page), measured on their JSON as that channel holds it (indented in a
/// question, compact on a page): a person cannot check more, and a payload
/// hidden past the first screen would be approved unread (review 25: a
/// 300 KB prompt was accepted). A larger call needing confirmation is not
/// asked about, and so not run.
pub const MAX_SHOWN_ARGUMENTS: usize = 64 * 1024;

/// What the person is asked: the tool and its exact arguments, with
/// invisible, bidirectional and separator characters shown as escapes (the
/// pretty-printer's own line breaks are the only raw ones). `toolgate proxy`
/// asks with the same words. `None` when the arguments, as shown, are over
/// [`MAX_SHOWN_ARGUMENTS`].
pub fn prompt(tool: &str, arguments: Option<&Map<String, Value>>) -> Option<String> {
    // Bounded as shown: indentation makes deep arguments far longer printed
    // than sent (review 27: 64 KB of nested lists, 7.9 MB shown).
    let args = serde_json::to_string_pretty(&arguments.cloned().unwrap_or_default()).ok()?;
    if args.len() > MAX_SHOWN_ARGUMENTS {
        return None;
    }
    let args = args
        .split('\n')
        .map(policy_core::escape_for_person)
        .collect::<Vec<_>>()
        .join("\n");
    let tool = policy_core::escape_for_person(tool);
    Some(format!(
        "Allow the tool call `{tool}` with exactly these arguments?\n{args}\n\nIt changes something. Accept to run it once; decline to refuse."
    ))
}

/// Tells the client that the server's request `id` is withdrawn
/// (`notifications/cancelled`), best effort: a client already gone needs
/// no word.
pub async fn withdraw(peer: &rmcp::service::Peer<RoleServer>, id: rmcp::model::RequestId, reason: &str) {
    let withdrawn: Result<ServerNotification, _> = serde_json::from_value(json!({
        "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": reason }
    }));
    if let Ok(withdrawn) = withdrawn {
        let _ = peer.send_notification(withdrawn).await;
    }
}

/// Asks the person about this very call with a form elicitation; `Ok(true)`
/// only for an accept. A call the client cancels while the question is open
/// withdraws the question (`notifications/cancelled` to the client) and is
/// `Err`: an answer that comes later is about a call that no longer exists
/// (review 25: it ran).
pub async fn ask_person(
    context: &RequestContext<RoleServer>,
    tool: &str,
    arguments: Option<&Map<String, Value>>,
    timeout: Duration,
) -> Result<bool, String> {
    let message = prompt(tool, arguments).ok_or_else(|| {
        format!("the call's arguments are over {MAX_SHOWN_ARGUMENTS} bytes, too large for a person to check")
    })?;
    let params: ElicitRequestParams =
        serde_json::from_value(elicitation_params(&message)).map_err(|e| e.to_string())?;
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    let handle = context
        .peer
        .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
        .await
        .map_err(|e| e.to_string())?;
    let (id, peer) = (handle.id.clone(), handle.peer.clone());
    let answer = tokio::select! {
        biased;
        () = context.ct.cancelled() => {
            withdraw(&peer, id, "the call was cancelled").await;
            return Err("the client cancelled the call".into());
        }
        answer = handle.await_response() => answer.map_err(|e| e.to_string())?,
    };
    match answer {
        ClientResult::ElicitResult(answer) => Ok(answer.action == ElicitationAction::Accept),
        _ => Err("the client answered with something else than an elicitation result".into()),
    }
}

/// The form elicitation request's params (the same in both MCP eras).
pub fn elicitation_params(message: &str) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": { "type": "object", "properties": {} }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn declared_form_elicitation_follows_the_shared_table() {
        let table: Value =
            serde_json::from_str(include_str!("../../tests/vectors/fixtures/form-elicitation.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() > 10);
        for case in cases {
            let capabilities = &case["capabilities"];
            assert_eq!(
                capabilities_declare_form_elicitation(capabilities),
                case["declares_form"].as_bool().unwrap(),
                "{capabilities}"
            );
            let meta: rmcp::model::RequestMetaObject =
                serde_json::from_value(json!({ "io.modelcontextprotocol/clientCapabilities": capabilities })).unwrap();
            assert_eq!(
                declares_form_elicitation(&meta),
                case["declares_form"].as_bool().unwrap(),
                "{capabilities}"
            );
        }
    }

    #[test]
    fn prompt_shows_invisible_characters_escaped() {
        let mut args = Map::new();
        args.insert("content".into(), Value::String("ok\u{202e}txt\u{2028}x".into()));
        let p = prompt("write_file", Some(&args)).unwrap();
        assert!(p.contains("\\u{202E}") && p.contains("\\u{2028}"), "{p}");
        assert!(!p.contains('\u{202e}') && !p.contains('\u{2028}'));
    }

    #[test]
    fn a_call_too_large_to_check_is_not_asked_about() {
        let mut args = Map::new();
        let at_most = MAX_SHOWN_ARGUMENTS - "{\n  \"content\": \"\"\n}".len();
        args.insert("content".into(), Value::String("x".repeat(at_most)));
        assert!(prompt("write_file", Some(&args)).is_some());
        args.insert("content".into(), Value::String("x".repeat(at_most + 1)));
        assert_eq!(prompt("write_file", Some(&args)), None);
        // 600 bytes sent, over 64 KiB shown (each level indented further).
        let nested = (0..300).fold(Value::Null, |inner, _| Value::Array(vec![inner]));
        assert!(serde_json::to_string(&nested).unwrap().len() < 1000);
        args.insert("content".into(), nested);
        assert_eq!(prompt("write_file", Some(&args)), None);
    }
}
