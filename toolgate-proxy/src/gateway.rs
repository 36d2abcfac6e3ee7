//! The gateway: one client session relayed to one upstream session.
//!
//! [`Gateway`] is the server the client talks to (an `rmcp` `Service` of the
//! server role, so every request arrives whole, known or custom); it owns an
//! `rmcp` client session to the upstream, whose handler ([`UpstreamHandler`])
//! relays the server's own requests and notifications back to the client.

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest, ClientResult,
    ErrorCode, ErrorData, Extensions, GetExtensions, GetMeta, InitializeRequestParams, ProgressToken, RequestId,
    ServerNotification, ServerRequest, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, RoleServer, RunningService, Service,
    ServiceError, ServiceExt,
};
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use toolgate::{Confirmation, Engine, Outcome, RuleSet};

use crate::approve;
use crate::audit::{Audit, Record};
use crate::auth::Caller;
use crate::confirm;
use crate::gate::RelayList;
use crate::metrics::{self, Metrics};
use crate::ordered::Ordered;
use crate::policy::{Policy, PolicyText};
use crate::tasks::TaskOwners;
use crate::upstream::{self, Fault};

/// Where the upstream server is.
#[derive(Debug, Clone)]
pub enum UpstreamSpec {
    /// A command started per client session, spoken to over stdio.
    Command { program: String, args: Vec<String> },
    /// A Streamable HTTP endpoint (`http://` or `https://`).
    Url(HttpUpstream),
    /// A server in this process, one byte stream per session (tests and the
    /// gateway fuzz target).
    InProcess(Connector),
}

/// An upstream Streamable HTTP endpoint and how to reach it.
#[derive(Debug, Clone)]
pub struct HttpUpstream {
    pub url: String,
    /// rustls with the platform's roots and `--upstream-ca`.
    pub client: reqwest::Client,
    /// `--upstream-header`s (values marked sensitive: never printed).
    pub headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
    /// `--upstream-token-env`: sent as `Authorization: Bearer …`.
    pub bearer: Option<String>,
}

/// Opens a new in-process connection to an upstream server.
#[derive(Clone)]
pub struct Connector(pub Arc<dyn Fn() -> tokio::io::DuplexStream + Send + Sync>);

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connector")
    }
}

/// What every session shares.
#[derive(Debug)]
pub struct Config {
    pub engine: Engine,
    /// The policy in force (replaced under `--watch`).
    pub policy: Arc<Policy>,
    /// The caller of a request that names none: stdio, or `--listen`
    /// without `--auth` (the static `--scopes`).
    pub anonymous: Arc<Caller>,
    /// Every `--listen` request must carry an authenticated caller
    /// (`--auth`); one that somehow does not is refused, never anonymous.
    pub authenticated: bool,
    /// `--mode shadow`: decide and audit every call, forward all of them.
    pub shadow: bool,
    pub metrics: Arc<Metrics>,
    /// Count the model's own `confirmed: true` (`--trust-model-confirmation`).
    pub trust_model_confirmation: bool,
    /// Keys, ledger and lifetime of sealed confirmations (MCP 2026-07-28).
    pub sealing: crate::confirm::Sealing,
    pub upstream: UpstreamSpec,
    /// How long a request to the upstream may go without an answer (reset by
    /// progress notifications).
    pub timeout: Duration,
    pub audit: Option<Audit>,
    /// Custom methods relayed as they are (`--relay-method`); every other
    /// custom method is refused.
    pub relay: RelayList,
    /// Where approval pages are served (links for clients that cannot ask
    /// the person themselves); no links until set.
    pub approve: crate::approve::Pages,
    /// The upstream session every MCP 2026-07-28 (sessionless) request is
    /// served on, opened on first use with the gateway's own client info, and
    /// opened again (its catalog read again) once its upstream is gone.
    pub(crate) stateless: Mutex<Option<Arc<SessionState>>>,
    /// Held while the sessionless upstream session opens, so requests that
    /// find it gone together open one.
    pub(crate) stateless_opening: tokio::sync::Mutex<()>,
    /// When opening the sessionless upstream session last failed, and why:
    /// the requests that waited for that attempt get its answer (review 24,
    /// as for a failed catalog load).
    pub(crate) stateless_failed: FailedAttempt,
    /// A background `warm_up` is running.
    pub(crate) warming: std::sync::atomic::AtomicBool,
    /// Rule sets (by revision) whose findings were reported already: each
    /// is said once, not once per session.
    pub(crate) reported: Mutex<std::collections::HashSet<String>>,
    /// The rule set the last session loaded, shared by every session with
    /// the same policy text and catalog: a session start or a reload costs
    /// a comparison instead of a load. Held while loading, so sessions that
    /// start together load once.
    pub(crate) shared: tokio::sync::Mutex<Option<SharedRules>>,
    /// Cancelled when a stop's grace has run out: each request still waiting
    /// for the upstream is cancelled there and answered `CANCELLED` (its
    /// audit line written) before the sessions end, rather than cut with no
    /// answer and no line (review 22).
    pub(crate) stopping: tokio_util::sync::CancellationToken,
    /// Requests sent upstream and not yet answered (a stdio stop waits for
    /// the ones it cancelled to be answered).
    pub(crate) forwarding: Arc<std::sync::atomic::AtomicUsize>,
}

/// One of the things a count counts (a request forwarded upstream, one the
/// gate admitted), from `new` until dropped.
pub(crate) struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Counted {
    pub(crate) fn new(count: &Arc<std::sync::atomic::AtomicUsize>) -> Counted {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Counted(count.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The last failure of an attempt that callers wait for one at a time
/// (loading the rules, opening the shared session): those that waited for
/// it get its answer instead of each making their own, one `--timeout`
/// after another; the next caller tries anew.
#[derive(Debug, Default)]
pub(crate) struct FailedAttempt(Mutex<Option<(std::time::Instant, ErrorData)>>);

impl FailedAttempt {
    fn record(&self, error: &ErrorData) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((std::time::Instant::now(), error.clone()));
    }

    /// The failure of an attempt that ended after `asked`, when this caller
    /// began to wait.
    fn since(&self, asked: std::time::Instant) -> Option<ErrorData> {
        let failed = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        failed.as_ref().filter(|(at, _)| *at >= asked).map(|(_, e)| e.clone())
    }
}

/// A loaded rule set and what it was loaded from.
#[derive(Debug)]
pub(crate) struct SharedRules {
    policy: Option<String>,
    listed: Listed,
    set: Arc<RuleSet>,
}

/// What the gateway keeps of an upstream's catalog, shared by every session
/// that listed the same one (review 22: with 200 000 tools each session kept
/// its own copy, 1.47 GB).
#[derive(Debug, Clone)]
struct Listed {
    /// The catalog the set was built from (`{"tools": [...]}`), kept to
    /// rebuild the set when the policy changes and to list every tool in
    /// shadow mode.
    catalog: Arc<str>,
    /// Each tool's title and description, for approval pages.
    about: Arc<HashMap<String, About>>,
}

/// A tool's title and description.
type About = (Option<String>, Option<String>);

impl Config {
    /// A gateway as `toolgate proxy` runs without optional flags: anonymous
    /// callers (`user` role on the confirming surface), enforce mode, no
    /// audit, sealed confirmations under `sealing`. Embedders set the public
    /// fields they need afterwards.
    pub fn new(
        engine: Engine,
        policy: Arc<Policy>,
        upstream: UpstreamSpec,
        sealing: crate::confirm::Sealing,
    ) -> Config {
        Config {
            engine,
            policy,
            anonymous: Arc::new(Caller::anonymous(toolgate::Context::from_flags(
                toolgate::Surface::Confirming,
                Some("user"),
                None,
            ))),
            authenticated: false,
            shadow: false,
            metrics: Arc::default(),
            trust_model_confirmation: false,
            sealing,
            upstream,
            timeout: Duration::from_secs(60),
            audit: None,
            relay: RelayList::default(),
            approve: crate::approve::Pages::default(),
            stateless: Mutex::default(),
            stateless_opening: tokio::sync::Mutex::default(),
            stateless_failed: FailedAttempt::default(),
            warming: std::sync::atomic::AtomicBool::new(false),
            reported: Mutex::default(),
            shared: tokio::sync::Mutex::default(),
            stopping: tokio_util::sync::CancellationToken::new(),
            forwarding: Arc::default(),
        }
    }

    fn surface(&self) -> &'static str {
        self.anonymous.context.surface.as_str()
    }

    /// Who is calling: the caller the auth layer attached to the HTTP
    /// request, else the anonymous one, unless callers must authenticate.
    fn caller(&self, extensions: &Extensions) -> Result<Arc<Caller>, ErrorData> {
        let attached = extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<Caller>>())
            .cloned();
        match attached {
            Some(caller) => Ok(caller),
            None if !self.authenticated => Ok(self.anonymous.clone()),
            None => Err(internal(
                "toolgate proxy: the request names no authenticated caller; nothing is allowed",
                "UNAUTHENTICATED",
            )),
        }
    }
}

/// One client session (the `rmcp` server-role service).
#[derive(Debug, Clone)]
pub struct Gateway {
    state: Arc<SessionState>,
}

impl Config {
    /// Ends the sessionless upstream session, if one was opened.
    pub async fn shutdown_stateless(&self) {
        if let Some(state) = self.current_stateless() {
            Gateway { state }.shutdown().await;
        }
    }

    /// Whether a shared 2026-07-28 upstream session is open or opening.
    fn has_shared_session(&self) -> bool {
        self.current_stateless().is_some() || self.warming.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn current_stateless(&self) -> Option<Arc<SessionState>> {
        self.stateless
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl SessionState {
    /// `shared`: the one session behind every MCP 2026-07-28 request.
    fn new(config: Arc<Config>, shared: bool) -> SessionState {
        SessionState {
            config,
            downstream: OnceLock::new(),
            upstream: tokio::sync::OnceCell::new(),
            rules: tokio::sync::Mutex::new(None),
            failed_load: FailedAttempt::default(),
            progress: Mutex::new(HashMap::new()),
            shared,
            tasks: Mutex::default(),
            spent: std::sync::atomic::AtomicBool::new(false),
            reload_queued: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The session behind every MCP 2026-07-28 request now (one it has
    /// replaced is not).
    fn is_current_shared(&self) -> bool {
        self.config
            .current_stateless()
            .is_some_and(|current| std::ptr::eq(Arc::as_ptr(&current), self))
    }

    /// Whether its upstream session can still carry requests: opened, and
    /// neither closed nor refused by the upstream since (a restarted HTTP
    /// upstream forgets the session and answers 404).
    fn is_alive(&self) -> bool {
        !self.spent.load(std::sync::atomic::Ordering::Relaxed)
            && self.upstream.get().is_some_and(|up| !up.peer.is_transport_closed())
    }

    fn task_table(&self) -> std::sync::MutexGuard<'_, TaskOwners> {
        self.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Refuses a request about an upstream task another caller started, or
    /// one the gateway did not see started on this very session.
    fn check_task(&self, task: &str, ctx: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let caller = self.config.caller(&ctx.extensions)?;
        if self.task_table().owns(task, &caller.subject) {
            return Ok(());
        }
        tracing::info!(
            subject = caller.subject,
            "a request named a task it did not start: refused"
        );
        Err(ErrorData::invalid_params(
            "toolgate proxy: no such task",
            Some(json!({ "toolgate": "UNKNOWN_TASK" })),
        ))
    }
}

/// With `--listen`: opens the shared upstream session and loads its catalog
/// in the background, so `/readyz` tells when calls can be decided; retried
/// until it works. At start, and whenever the shared session is found gone
/// (an orchestrator sends no requests to an unready replica, so nothing else
/// would open it again). One at a time.
pub fn warm_up(config: Arc<Config>) {
    if config.warming.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    tokio::spawn(async move {
        let mut wait = Duration::from_millis(500);
        loop {
            match Gateway::new(config.clone()).warm_up().await {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e.message, "the upstream catalog could not be loaded yet");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(10));
                }
            }
        }
        config.warming.store(false, std::sync::atomic::Ordering::SeqCst);
    });
}

/// How many requests the shared upstream session of MCP 2026-07-28 callers
/// (an HTTP upstream) carries at once; a handshake-era session keeps rmcp's 16.
const SHARED_SESSION_CONCURRENCY: usize = 256;

/// How the gateway introduces itself to the upstream on the sessionless
/// path: no client capabilities, since a 2026-07-28 client cannot be reached
/// in the middle of a call.
fn gateway_client_info() -> Result<InitializeRequestParams, ErrorData> {
    from_json(json!({
        "protocolVersion": rmcp::model::ProtocolVersion::V_2025_11_25,
        "capabilities": {},
        "clientInfo": { "name": "toolgate-proxy", "version": env!("CARGO_PKG_VERSION") }
    }))
}

impl Gateway {
    pub fn new(config: Arc<Config>) -> Gateway {
        Gateway {
            state: Arc::new(SessionState::new(config, false)),
        }
    }

    /// The session a request is served on: this client session's (the
    /// handshake era), or, for an MCP 2026-07-28 request, which belongs to
    /// no session and may come to any replica, the shared sessionless one.
    async fn session(&self, meta: &rmcp::model::RequestMetaObject) -> Result<Arc<SessionState>, ErrorData> {
        if self.state.upstream.get().is_some() || !confirm::is_stateless(meta) {
            return Ok(self.state.clone());
        }
        self.shared_session().await
    }

    /// The sessionless upstream session, opened on first use and again when
    /// its upstream is gone: a new upstream session (a restarted server, a
    /// stdio child started again) has its catalog read anew before anything
    /// is decided on it, never the old one's rules.
    async fn shared_session(&self) -> Result<Arc<SessionState>, ErrorData> {
        let config = &self.state.config;
        if let Some(shared) = config.current_stateless().filter(|s| s.is_alive()) {
            return Ok(shared);
        }
        let asked = std::time::Instant::now();
        let _opening = config.stateless_opening.lock().await;
        let gone = match config.current_stateless() {
            Some(shared) if shared.is_alive() => return Ok(shared),
            gone => gone,
        };
        if let Some(failure) = config.stateless_failed.since(asked) {
            return Err(failure);
        }
        if let Some(gone) = gone {
            tracing::warn!("the upstream session of MCP 2026-07-28 requests ended: opening a new one");
            config.metrics.set_ready(false);
            Gateway { state: gone }.shutdown().await;
            // Should this request's attempt fail, the replica still becomes
            // ready again on its own.
            warm_up(config.clone());
        }
        let state = Arc::new(SessionState::new(config.clone(), true));
        if let Err(e) = state.connect(gateway_client_info()?).await {
            config.stateless_failed.record(&e);
            return Err(e);
        }
        *config
            .stateless
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(state.clone());
        Ok(state)
    }

    /// Opens the shared upstream session and loads its catalog (`--listen`
    /// does this at start, so readiness means calls can be decided).
    pub async fn warm_up(&self) -> Result<(), ErrorData> {
        self.shared_session().await?.rules().await.map(|_| ())
    }

    /// Resolves once this session's upstream session has ended (a stdio
    /// child that exited, a connection that closed, a session the upstream
    /// forgot); never while none was opened.
    pub async fn upstream_ended(&self) {
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if self.state.upstream.get().is_some() && !self.state.is_alive() {
                return;
            }
        }
    }

    /// Ends the upstream session and stops the child, if any.
    pub async fn shutdown(&self) {
        if let Some(up) = self.state.upstream.get() {
            let running = up
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(running) = running {
                let _ = tokio::time::timeout(Duration::from_secs(5), running.cancel()).await;
            }
            let child = up
                .child
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(mut child) = child {
                child.stop().await;
            }
        }
    }

    /// The upstream child's process id (tests).
    pub fn upstream_pid(&self) -> Option<u32> {
        let up = self.state.upstream.get()?;
        let child = up.child.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        child.as_ref().and_then(|c| c.pid)
    }
}

/// Lets the HTTP layer, which knows a handshake-era client session only by
/// its id, see whether that session's upstream session has ended (a stdio
/// child that exited, an HTTP upstream that restarted and forgot it): the
/// client is then told its session is gone (`404`, after which MCP clients
/// initialize again) instead of getting `UPSTREAM_CLOSED` for as long as it
/// keeps the session. Set by the session's `initialize`.
#[derive(Debug, Default)]
pub struct UpstreamLink(OnceLock<Weak<SessionState>>);

impl UpstreamLink {
    pub fn upstream_ended(&self) -> bool {
        self.0
            .get()
            .and_then(Weak::upgrade)
            .is_some_and(|state| state.upstream.get().is_some() && !state.is_alive())
    }
}

#[derive(Debug)]
pub(crate) struct SessionState {
    config: Arc<Config>,
    downstream: OnceLock<Peer<RoleServer>>,
    upstream: tokio::sync::OnceCell<Upstream>,
    rules: tokio::sync::Mutex<Option<Arc<Rules>>>,
    /// When the last attempt to load the rules failed, and why: the calls
    /// that waited for that attempt get its answer instead of each making
    /// their own, one after another (review 22: five calls queued behind a
    /// hung `tools/list` were answered after 1, 2, … 5 `--timeout`s).
    failed_load: FailedAttempt,
    /// Upstream progress token -> the client's own token.
    progress: Mutex<HashMap<ProgressToken, ProgressToken>>,
    /// Whether this is the one session behind every 2026-07-28 request.
    shared: bool,
    /// The subject each upstream task was started for on this session
    /// (`tasks.rs`): every session keeps one, as every caller reaches the
    /// upstream under the gateway's one identity.
    tasks: Mutex<TaskOwners>,
    /// The upstream session ended or was refused: requests on it fail, and
    /// the shared one is opened again on the next request.
    spent: std::sync::atomic::AtomicBool,
    /// A catalog reload is waiting to start (`relay_notification`).
    reload_queued: std::sync::atomic::AtomicBool,
}

struct Upstream {
    peer: Peer<RoleClient>,
    info: Value,
    running: Mutex<Option<RunningService<RoleClient, UpstreamHandler>>>,
    child: Mutex<Option<upstream::Child>>,
    fault: Arc<Fault>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").finish_non_exhaustive()
    }
}

/// The rules over the upstream's current catalog.
#[derive(Debug)]
struct Rules {
    set: Arc<RuleSet>,
    unknown: Arc<UnknownTool>,
    listed: Listed,
    /// The policy generation the set was built from.
    generation: u64,
}

impl Rules {
    /// Whether `other` decides as these rules do: the same policy and
    /// catalog texts give the one shared set (`load_set`), so a reload after
    /// a `list_changed` that changed nothing does not void a person's answer
    /// given meanwhile (review 31 F3: a server re-announcing its list every
    /// second refused every confirmation that spanned one).
    fn same_set(&self, other: &Rules) -> bool {
        Arc::ptr_eq(&self.set, &other.set)
    }
}

/// How the upstream answers a call to a tool it does not have, learned once
/// per session with a probe name; hidden tools are answered the same way.
#[derive(Debug)]
enum UnknownTool {
    Error { probe: String, json: String },
    Result { probe: String, json: String },
}

const CONFIRMATION_REQUIRED: &str = "CONFIRMATION_REQUIRED";
/// How long a catalog reload waits for more `list_changed` announcements
/// before it reads the catalog (with the rules held, so no call is decided
/// by the old ones meanwhile).
const RELOAD_SETTLE: Duration = Duration::from_millis(50);
/// The most policy findings logged for one rule set.
const MAX_FINDINGS_LOGGED: usize = 50;
const NOT_FOUND: &str = "NOT_FOUND";
const STORE_UNAVAILABLE: &str = "STORE_UNAVAILABLE";

/// The upstream request for a client's `method` with `params` (its `_meta`
/// is restored from the context by `forward_failing`).
fn relay_request<P: serde::Serialize>(method: &str, params: &P) -> Result<ClientRequest, ErrorData> {
    let mut message = Map::new();
    message.insert("method".into(), Value::String(method.to_owned()));
    match serde_json::to_value(params) {
        Ok(Value::Null) => {}
        Ok(Value::Object(mut p)) => {
            // `_meta` is restored from the context by `forward_failing`.
            p.remove("_meta");
            message.insert("params".into(), Value::Object(p));
        }
        Ok(other) => {
            message.insert("params".into(), other);
        }
        Err(e) => {
            return Err(internal(
                format!("toolgate proxy: could not relay {method}: {e}"),
                "PROXY_ERROR",
            ));
        }
    }
    from_json(Value::Object(message))
}

/// A failed upstream request: the client's answer and, when the upstream
/// gave no answer of its own, the gateway's code for it (decided from how
/// the request failed, never from what an upstream wrote).
struct Failure {
    error: ErrorData,
    code: Option<&'static str>,
    /// `false` only when the gateway knows the request did not go upstream
    /// (a `tools/call`'s audit line then says `not_sent`, else
    /// `upstream_failed`: it may have run).
    sent: bool,
}

impl Failure {
    /// A failure that is an answer (the gateway's or the upstream's own).
    fn answer(error: ErrorData) -> Failure {
        Failure {
            error,
            code: None,
            sent: true,
        }
    }
}

fn internal(message: impl Into<Cow<'static, str>>, reason: &str) -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, message, Some(json!({ "toolgate": reason })))
}

fn convert<T: serde::Serialize, U: serde::de::DeserializeOwned>(value: &T) -> Result<U, ErrorData> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            internal(
                format!("toolgate proxy: could not convert a message: {e}"),
                "PROXY_ERROR",
            )
        })
}

fn from_json<U: serde::de::DeserializeOwned>(value: Value) -> Result<U, ErrorData> {
    serde_json::from_value(value)
        .map_err(|e| internal(format!("toolgate proxy: could not build a message: {e}"), "PROXY_ERROR"))
}

impl Rules {
    /// A refused call's answer: for a tool the caller may not see (unknown
    /// or hidden, `NOT_FOUND`), exactly the upstream's answer for a tool it
    /// does not have (docs/spec.md §8), on every path a call can take;
    /// otherwise the engine's blocked result.
    fn refuse(&self, tool: &str, outcome: &Outcome) -> Result<ServerResult, ErrorData> {
        if outcome.decision.code.as_deref() == Some(NOT_FOUND) {
            return self.unknown.render(tool);
        }
        blocked(outcome)
    }
}

impl UnknownTool {
    fn render(&self, name: &str) -> Result<ServerResult, ErrorData> {
        let escaped = serde_json::to_string(name).unwrap_or_default();
        let escaped = escaped
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or_default();
        match self {
            UnknownTool::Error { probe, json } => {
                let text = json.replace(probe.as_str(), escaped);
                Err(serde_json::from_str::<ErrorData>(&text).unwrap_or_else(|_| default_unknown(name)))
            }
            UnknownTool::Result { probe, json } => {
                let text = json.replace(probe.as_str(), escaped);
                let result: CallToolResult = serde_json::from_str(&text).map_err(|_| default_unknown(name))?;
                let mut result = ServerResult::CallToolResult(result);
                stamp_complete(&mut result);
                Ok(result)
            }
        }
    }
}

fn default_unknown(name: &str) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, format!("Unknown tool: {name}"), None)
}

fn probe_name() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(u64::from(std::process::id()));
    format!("toolgate-probe-{:016x}", h.finish())
}

impl SessionState {
    fn upstream(&self) -> Result<&Upstream, ErrorData> {
        self.upstream.get().ok_or_else(|| {
            ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                "toolgate proxy: the session is not initialized (send initialize first)",
                None,
            )
        })
    }

    async fn connect(self: &Arc<Self>, params: InitializeRequestParams) -> Result<&Upstream, ErrorData> {
        self.upstream
            .get_or_try_init(|| async {
                let handler = UpstreamHandler {
                    state: Arc::downgrade(self),
                    info: params,
                    relayed: Arc::new(tokio::sync::Semaphore::new(MAX_RELAYED_REQUESTS)),
                };
                let fault = Arc::new(Fault::default());
                let timeout = self.config.timeout;
                let (running, child) = match &self.config.upstream {
                    UpstreamSpec::Command { program, args } => {
                        let spawned = upstream::spawn(program, args, fault.clone())
                            .map_err(|e| internal(format!("toolgate proxy: {e}"), "UPSTREAM_UNAVAILABLE"))?;
                        let mut child = spawned.child;
                        let transport = Ordered::new(
                            rmcp::transport::async_rw::AsyncRwTransport::new_client(spawned.reader, spawned.writer),
                            Arc::downgrade(self),
                        );
                        let started = tokio::time::timeout(timeout, handler.serve(transport)).await;
                        match started {
                            Ok(Ok(running)) => (running, Some(child)),
                            Ok(Err(e)) => {
                                let why = fault.describe().await;
                                child.stop().await;
                                return Err(start_failed(&e.to_string(), why));
                            }
                            Err(_) => {
                                child.stop().await;
                                return Err(start_failed(
                                    &format!("no answer to initialize within {} s", timeout.as_secs()),
                                    None,
                                ));
                            }
                        }
                    }
                    UpstreamSpec::InProcess(connect) => {
                        let (read, write) = tokio::io::split((connect.0)());
                        let transport = Ordered::new(
                            rmcp::transport::async_rw::AsyncRwTransport::new_client(read, write),
                            Arc::downgrade(self),
                        );
                        match tokio::time::timeout(timeout, handler.serve(transport)).await {
                            Ok(Ok(running)) => (running, None),
                            Ok(Err(e)) => return Err(start_failed(&e.to_string(), None)),
                            Err(_) => return Err(start_failed("no answer to initialize", None)),
                        }
                    }
                    UpstreamSpec::Url(http) => {
                        let mut settings =
                            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                                http.url.as_str(),
                            );
                        settings.auth_header = http.bearer.clone();
                        settings.custom_headers = http.headers.clone();
                        // A restarted upstream forgets the session (404). rmcp
                        // would open a new one quietly and retry, and the
                        // gateway would go on deciding with the old
                        // server's catalog: the request fails instead, the
                        // session is spent, and a new one reads the catalog.
                        settings.reinit_on_expired_session = false;
                        // Every MCP 2026-07-28 caller shares one upstream
                        // session: rmcp's default of 16 POSTs at once let 16
                        // slow calls of one caller hold up everyone else's.
                        if self.shared {
                            settings = settings.max_concurrent_requests(SHARED_SESSION_CONCURRENCY);
                        }
                        let transport = Ordered::new(
                            rmcp::transport::StreamableHttpClientTransport::with_client(http.client.clone(), settings),
                            Arc::downgrade(self),
                        );
                        match tokio::time::timeout(timeout, handler.serve(transport)).await {
                            Ok(Ok(running)) => (running, None),
                            Ok(Err(e)) => {
                                let why = match crate::outbound::connect_failure(&http.client, &http.url).await {
                                    Some(cause) => cause,
                                    None => crate::outbound::error_chain(&e),
                                };
                                return Err(start_failed(
                                    &format!("{} did not answer: {why}", crate::outbound::host_of(&http.url)),
                                    None,
                                ));
                            }
                            Err(_) => {
                                return Err(start_failed(
                                    &format!("no answer to initialize within {} s", timeout.as_secs()),
                                    None,
                                ));
                            }
                        }
                    }
                };
                self.config.metrics.upstream_started();
                let peer = running.peer().clone();
                // The gateway owns its catalog's freshness: rmcp's response
                // cache would answer a re-list from an earlier `tools/list`
                // (kept for the upstream's `ttlMs`, served stale when the
                // upstream fails), so a changed tool could be decided by its
                // old definition (review 25).
                peer.set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
                    .await;
                let info = peer
                    .peer_info()
                    .map(|i| serde_json::to_value(&*i).unwrap_or(Value::Null))
                    .unwrap_or(Value::Null);
                Ok(Upstream {
                    peer,
                    info,
                    running: Mutex::new(Some(running)),
                    child: Mutex::new(child),
                    fault,
                })
            })
            .await
    }

    /// The current rules, loading them from the upstream's live catalog
    /// when there are none yet.
    async fn rules(&self) -> Result<Arc<Rules>, ErrorData> {
        let asked = std::time::Instant::now();
        let mut slot = self.rules.lock().await;
        let policy = self.config.policy.current();
        if let Some(rules) = slot.as_ref() {
            if rules.generation == policy.generation {
                return Ok(rules.clone());
            }
            // `--watch` took in a new policy: the same catalog under it.
            match self.rebuild(rules, &policy).await {
                Ok(fresh) => {
                    let fresh = Arc::new(fresh);
                    *slot = Some(fresh.clone());
                    return Ok(fresh);
                }
                Err(e) => {
                    // It loaded alone but not over this catalog (a pin, a
                    // schema): the rules in force stay, as for a bad file.
                    say!(Warn, "{}; the previous rules stay in force", e.message);
                    let kept = Arc::new(Rules {
                        generation: policy.generation,
                        set: rules.set.clone(),
                        unknown: rules.unknown.clone(),
                        listed: rules.listed.clone(),
                    });
                    *slot = Some(kept.clone());
                    return Ok(kept);
                }
            }
        }
        if let Some(failure) = self.failed_load.since(asked) {
            return Err(failure);
        }
        let rules = Arc::new(self.loaded(self.load_rules(None).await)?);
        *slot = Some(rules.clone());
        Ok(rules)
    }

    /// A load's result, its failure kept for the callers waiting on it. The
    /// shared 2026-07-28 session's failure makes the replica unready (no
    /// catalog, no decision: review 22 saw `/readyz` stay 200) and retries
    /// in the background until a load works, since an orchestrator sends an
    /// unready replica nothing that would. A handshake-era session's says
    /// nothing about the others'.
    fn loaded(&self, result: Result<Rules, ErrorData>) -> Result<Rules, ErrorData> {
        if let Err(e) = &result {
            self.failed_load.record(e);
            if self.is_current_shared() {
                self.config.metrics.set_ready(false);
                warm_up(self.config.clone());
            }
        }
        result
    }

    /// The rules `rules` over its own catalog under another policy.
    async fn rebuild(&self, rules: &Rules, policy: &PolicyText) -> Result<Rules, ErrorData> {
        let (set, listed) = self.load_set(policy.text.clone(), rules.listed.clone()).await?;
        Ok(Rules {
            set,
            unknown: rules.unknown.clone(),
            listed,
            generation: policy.generation,
        })
    }

    /// Loads a rule set off the async threads, or takes the one another
    /// session loaded from the same policy and catalog, with that session's
    /// copy of the catalog.
    async fn load_set(&self, policy: Option<String>, listed: Listed) -> Result<(Arc<RuleSet>, Listed), ErrorData> {
        let mut shared = self.config.shared.lock().await;
        if let Some(last) = shared.as_ref()
            && last.policy == policy
            && *last.listed.catalog == *listed.catalog
        {
            return Ok((last.set.clone(), last.listed.clone()));
        }
        let engine = self.config.engine.clone();
        let (text, catalog) = (policy.clone(), listed.catalog.clone());
        let set = tokio::task::spawn_blocking(move || engine.load(text.as_deref(), &catalog).map(Arc::new))
            .await
            .map_err(|e| internal(format!("toolgate proxy: loading the rules failed: {e}"), "PROXY_ERROR"))?
            .map_err(|e| {
                internal(
                    format!("toolgate proxy: the upstream's catalog could not be loaded ({e}); no call is allowed"),
                    "CATALOG_REJECTED",
                )
            })?;
        self.config.metrics.rule_set_loaded();
        // Every load, a rollback to an earlier revision included (its
        // findings are logged once per revision).
        say!(
            Info,
            "rules loaded over the upstream's catalog: audit lines decided by them carry policy_revision {}",
            set.revision()
        );
        self.report_findings(&set);
        *shared = Some(SharedRules {
            policy,
            listed: listed.clone(),
            set: set.clone(),
        });
        Ok((set, listed))
    }

    /// What `toolgate check` would say about the policy over the live
    /// catalog (a pin that no longer matches, an entry that names no tool,
    /// a write without confirmation), logged once per rule set at start-up
    /// and after every reload.
    fn report_findings(&self, set: &RuleSet) {
        let first = self
            .config
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(set.revision().to_owned());
        if !first {
            return;
        }
        match set.findings() {
            Ok(findings) => {
                // One line a tool would bury the log under a large catalog
                // (review 22: 200 000 lines); `toolgate check` lists them all.
                if findings.len() > MAX_FINDINGS_LOGGED {
                    tracing::warn!(
                        findings = findings.len(),
                        logged = MAX_FINDINGS_LOGGED,
                        "the policy has {} findings over the upstream's catalog; the first {MAX_FINDINGS_LOGGED} follow, `toolgate check` lists them all",
                        findings.len()
                    );
                }
                for finding in findings.iter().take(MAX_FINDINGS_LOGGED) {
                    let p = &finding.problem;
                    tracing::warn!(
                        severity = finding.severity,
                        code = %p.code,
                        path = %p.path,
                        line = p.line,
                        column = p.column,
                        "policy finding over the upstream's catalog: {}",
                        p.message
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "the policy's findings could not be computed"),
        }
    }

    /// Re-reads the catalog (after `notifications/tools/list_changed`). On
    /// failure the rules are dropped, so calls fail closed until a reload
    /// succeeds.
    async fn reload_rules(&self) {
        let mut slot = self.rules.lock().await;
        // Calls wait for the new rules while the announcements of one change
        // (a redeploy sends several in a row) settle into this reload.
        tokio::time::sleep(RELOAD_SETTLE).await;
        // The catalog is read afresh from here: a change announced from now
        // on queues one more reload.
        self.reload_queued.store(false, std::sync::atomic::Ordering::SeqCst);
        let unknown = slot.as_ref().map(|r| r.unknown.clone());
        match self.loaded(self.load_rules(unknown).await) {
            Ok(rules) => *slot = Some(Arc::new(rules)),
            Err(e) => {
                say!(Warn, "reloading the catalog failed: {}", e.message);
                *slot = None;
            }
        }
    }

    async fn load_rules(&self, unknown: Option<Arc<UnknownTool>>) -> Result<Rules, ErrorData> {
        let up = self.upstream()?;
        let tools = match tokio::time::timeout(self.config.timeout, crate::catalog::every_tool(&up.peer)).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(crate::catalog::ListFailure::Upstream(e))) => {
                return Err(self.upstream_error(e, "tools/list").await);
            }
            Ok(Err(crate::catalog::ListFailure::Unbounded(why))) => {
                return Err(internal(
                    format!("toolgate proxy: {why}; no call is allowed"),
                    "CATALOG_REJECTED",
                ));
            }
            Err(_) => {
                return Err(internal(
                    "toolgate proxy: the upstream server did not answer tools/list in time; no call is allowed",
                    "UPSTREAM_TIMEOUT",
                ));
            }
        };
        let about = tools
            .iter()
            .map(|t| {
                let title = t
                    .title
                    .clone()
                    .or_else(|| t.annotations.as_ref().and_then(|a| a.title.clone()));
                (
                    t.name.to_string(),
                    (title, t.description.as_ref().map(|d| d.to_string())),
                )
            })
            .collect();
        let listed = Listed {
            catalog: json!({ "tools": tools }).to_string().into(),
            about: Arc::new(about),
        };
        drop(tools);
        let policy = self.config.policy.current();
        let (set, listed) = self.load_set(policy.text.clone(), listed).await?;
        let unknown = match unknown {
            Some(u) => u,
            None => Arc::new(self.probe_unknown(up, &listed.about).await),
        };
        // With a shared 2026-07-28 session (`--listen`), readiness is its
        // own: a handshake-era session loading its catalog while the shared
        // one reopens says nothing about whether that one can decide.
        if self.is_current_shared() || !self.config.has_shared_session() {
            self.config.metrics.set_ready(true);
        }
        Ok(Rules {
            set,
            unknown,
            listed,
            generation: policy.generation,
        })
    }

    /// Learns how the upstream answers a call to a tool it does not have.
    async fn probe_unknown<V>(&self, up: &Upstream, tools: &HashMap<String, V>) -> UnknownTool {
        let mut probe = probe_name();
        while tools.contains_key(&probe) {
            probe.push('x');
        }
        let request: Result<ClientRequest, _> = serde_json::from_value(json!({
            "method": "tools/call",
            "params": { "name": probe, "arguments": {} }
        }));
        let fallback = |probe: String| UnknownTool::Error {
            json: serde_json::to_string(&default_unknown(&probe)).unwrap_or_default(),
            probe,
        };
        let Ok(request) = request else {
            return fallback(probe);
        };
        let answer = tokio::time::timeout(Duration::from_secs(10), up.peer.send_request(request)).await;
        match answer {
            Ok(Ok(ServerResult::CallToolResult(result))) => UnknownTool::Result {
                json: serde_json::to_string(&result).unwrap_or_default(),
                probe,
            },
            Ok(Err(ServiceError::McpError(error))) => UnknownTool::Error {
                json: serde_json::to_string(&error).unwrap_or_default(),
                probe,
            },
            _ => fallback(probe),
        }
    }

    async fn upstream_error(&self, error: ServiceError, method: &str) -> ErrorData {
        self.upstream_failure(error, method).await.error
    }

    /// What a failed upstream request answers the client, and, when the
    /// upstream gave no answer of its own, the gateway's code for it.
    async fn upstream_failure(&self, error: ServiceError, method: &str) -> Failure {
        let why = match self.upstream.get() {
            Some(up) => up.fault.describe().await,
            None => None,
        };
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        let gone = self.ends_upstream_session(&error);
        let unusable = self.unusable_http_answer(&error);
        let (message, code) = match error {
            ServiceError::McpError(e) => return Failure::answer(e),
            // An HTTP upstream that answered, but not with a message: a 5xx,
            // a 429, a body that is not JSON-RPC. Its connection did not end
            // (review 22: these were reported as UPSTREAM_CLOSED).
            ServiceError::TransportSend(_) if !gone && unusable.is_some() => (
                format!(
                    "toolgate proxy: the upstream server answered {method} with nothing the gateway can read ({}); whether a call ran is unknown",
                    unusable.unwrap_or_default()
                ),
                "UPSTREAM_ERROR",
            ),
            ServiceError::Timeout { timeout } => (
                format!(
                    "toolgate proxy: the upstream server did not answer {method} within {} s; the request was cancelled upstream",
                    timeout.as_secs()
                ),
                "UPSTREAM_TIMEOUT",
            ),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                if gone {
                    self.spent.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                (
                    format!(
                        "toolgate proxy: the connection to the upstream server ended before it answered {method}{why}; whether a call ran is unknown"
                    ),
                    "UPSTREAM_CLOSED",
                )
            }
            ServiceError::Cancelled { reason } => (
                format!(
                    "toolgate proxy: {method} was cancelled{}; whether a call ran is unknown",
                    reason.map(|r| format!(" ({r})")).unwrap_or_default()
                ),
                "CANCELLED",
            ),
            other => (
                format!("toolgate proxy: the upstream server failed on {method}: {other}"),
                "UPSTREAM_ERROR",
            ),
        };
        self.config.metrics.upstream_failed(code);
        Failure {
            error: internal(message, code),
            code: Some(code),
            sent: true,
        }
    }

    /// Whether `error` means this upstream session is over: the connection
    /// closed, a write to a child's pipe failed, or an HTTP upstream answered
    /// that it no longer knows the session (404: restarted). An HTTP upstream's
    /// other failures (a 429, a 5xx, a network blip) end one request only.
    fn ends_upstream_session(&self, error: &ServiceError) -> bool {
        use rmcp::transport::streamable_http_client::StreamableHttpError;
        match error {
            // Over HTTP, rmcp answers one request whose response stream was
            // cut early (a proxy upstream ending a long call) this way too,
            // while the session lives on; a worker that really ended is seen
            // by `is_alive` (its transport closed).
            ServiceError::TransportClosed => !matches!(self.config.upstream, UpstreamSpec::Url(_)),
            ServiceError::TransportSend(sent) => {
                if !matches!(self.config.upstream, UpstreamSpec::Url(_)) {
                    return true;
                }
                let mut source: Option<&(dyn std::error::Error + 'static)> = Some(sent.error.as_ref());
                while let Some(current) = source {
                    if matches!(
                        current.downcast_ref::<StreamableHttpError<reqwest::Error>>(),
                        Some(StreamableHttpError::SessionExpired)
                    ) {
                        return true;
                    }
                    source = current.source();
                }
                false
            }
            _ => false,
        }
    }

    /// What an HTTP upstream answered instead of a message, when it answered
    /// (an HTTP status, an unreadable or over-long body, another content
    /// type), as rmcp's error says it.
    fn unusable_http_answer(&self, error: &ServiceError) -> Option<String> {
        use rmcp::transport::streamable_http_client::StreamableHttpError;
        let ServiceError::TransportSend(sent) = error else {
            return None;
        };
        if !matches!(self.config.upstream, UpstreamSpec::Url(_)) {
            return None;
        }
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(sent.error.as_ref());
        while let Some(current) = source {
            if let Some(
                answered @ (StreamableHttpError::HttpStatus(_)
                | StreamableHttpError::UnexpectedServerResponse(_)
                | StreamableHttpError::ResponseBodyTooLarge { .. }
                | StreamableHttpError::UnexpectedContentType(_)
                | StreamableHttpError::Deserialize(_)),
            ) = current.downcast_ref::<StreamableHttpError<reqwest::Error>>()
            {
                return Some(answered.to_string());
            }
            source = current.source();
        }
        None
    }

    /// Builds the request `method` with `params` and forwards it.
    async fn relay<P: serde::Serialize>(
        &self,
        method: &str,
        params: &P,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let request = relay_request(method, params)?;
        self.forward(request, ctx).await
    }

    /// Sends a request upstream on behalf of the client (`forward_failing`).
    async fn forward(
        &self,
        request: ClientRequest,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        self.forward_failing(request, ctx)
            .await
            .map_err(|failure| failure.error)
    }

    /// Sends a request upstream on behalf of the client: its `_meta` kept,
    /// its progress token mapped, cancellation relayed, a timeout that
    /// progress resets.
    async fn forward_failing(
        &self,
        mut request: ClientRequest,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, Failure> {
        let up = self.upstream().map_err(Failure::answer)?;
        let method = request.method().to_owned();
        *request.extensions_mut() = Extensions::default();
        request.get_meta_mut().extend(end_to_end_meta(&ctx.meta).into());
        let client_token = ctx.meta.get_progress_token();
        if let Some(token) = &client_token
            && let Ok(token) = serde_json::to_value(token)
        {
            // Mapped by `Ordered::send` before the request is written: the
            // upstream's first progress notification can come back before
            // this task runs again (it was dropped, unmapped, under load).
            request.get_meta_mut().insert(CLIENT_PROGRESS_META.to_owned(), token);
        }
        // Withdrawn before it is sent (while it was decided, or while a
        // person was asked and answered after the client gave up): not sent
        // at all, whatever the request.
        if ctx.ct.is_cancelled() {
            return Err(Failure {
                error: internal(
                    format!("toolgate proxy: the client cancelled {method}; it was not sent"),
                    "CANCELLED",
                ),
                code: Some("CANCELLED"),
                sent: false,
            });
        }
        let options = PeerRequestOptions::with_timeout(self.config.timeout).reset_timeout_on_progress();
        let started = std::time::Instant::now();
        let _forwarding = Counted::new(&self.config.forwarding);
        let handle = match up.peer.send_cancellable_request(request, options).await {
            Ok(handle) => handle,
            Err(e) => return Err(self.upstream_failure(e, &method).await),
        };
        let upstream_token = handle.progress_token.clone();
        let id = handle.id.clone();
        let result = tokio::select! {
            // A stop cancels every request's context too: said as the stop.
            biased;
            () = self.config.stopping.cancelled() => {
                let _ = cancel_upstream(&up.peer, id).await;
                Err(ServiceError::Cancelled { reason: Some("the gateway is stopping".into()) })
            }
            r = handle.await_response() => r,
            () = ctx.ct.cancelled() => {
                let _ = cancel_upstream(&up.peer, id).await;
                Err(ServiceError::Cancelled { reason: Some("cancelled by the client".into()) })
            }
        };
        self.progress_map().remove(&upstream_token);
        self.config.metrics.upstream_answered_in(&method, started.elapsed());
        match result {
            Ok(mut r) => {
                stamp_complete(&mut r);
                if let ServerResult::CreateTaskResult(created) = &r {
                    let caller = self.config.caller(&ctx.extensions).map_err(Failure::answer)?;
                    self.task_table().started(&created.task.task_id, &caller.subject);
                }
                Ok(r)
            }
            Err(e) => Err(self.upstream_failure(e, &method).await),
        }
    }

    /// Relays one of the upstream's notifications to the client. Called by
    /// the upstream transport before it hands over the next message, so a
    /// call's progress and log notifications reach the client before its
    /// response.
    pub(crate) async fn relay_notification(self: &Arc<Self>, notification: ServerNotification) {
        if let ServerNotification::ToolListChangedNotification(n) = notification {
            // The rules follow the upstream's tools whether or not a client
            // is attached to hear about it: the shared sessionless session
            // (MCP 2026-07-28 clients) has none, and kept deciding by the
            // tools it first read (a changed pinned tool still ran).
            // Reloading asks the upstream for its tools, which needs the
            // upstream's reader (this caller): done on its own task.
            // A reload that has not started yet reads the catalog after this
            // change too, and tells the client: a burst of notifications
            // costs one reload, not one each.
            if self.reload_queued.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let state = self.clone();
            tokio::spawn(async move {
                state.reload_rules().await;
                if let Some(peer) = state.downstream.get().cloned() {
                    let mut n = ServerNotification::ToolListChangedNotification(n);
                    *n.extensions_mut() = Extensions::default();
                    let _ = peer.send_notification(n).await;
                }
            });
            return;
        }
        let Some(peer) = self.downstream.get().cloned() else {
            return;
        };
        let mut notification = match notification {
            ServerNotification::CancelledNotification(_) => return,
            ServerNotification::ProgressNotification(mut n) => {
                let mapped = self.progress_map().get(&n.params.progress_token).cloned();
                match mapped {
                    Some(token) => {
                        n.params.progress_token = token;
                        ServerNotification::ProgressNotification(n)
                    }
                    None => return,
                }
            }
            other => other,
        };
        *notification.extensions_mut() = Extensions::default();
        let _ = peer.send_notification(notification).await;
    }

    async fn notify_upstream(&self, mut notification: ClientNotification, context: NotificationContext<RoleServer>) {
        if let Ok(up) = self.upstream() {
            *notification.extensions_mut() = Extensions::default();
            notification
                .get_meta_mut()
                .extend(end_to_end_meta(&context.meta).into());
            let _ = up.peer.send_notification(notification).await;
        }
    }

    /// The client's progress token for the upstream's, set as a forwarded
    /// request is written upstream (`Ordered::send`).
    pub(crate) fn map_progress(&self, upstream: ProgressToken, client: ProgressToken) {
        self.progress_map().insert(upstream, client);
    }

    fn progress_map(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, ProgressToken>> {
        self.progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn audit(&self, record: Record<'_>) {
        if let Some(audit) = &self.config.audit {
            audit.write(&record);
        }
    }

    async fn list_tools(&self, caller: &Caller) -> Result<ServerResult, ErrorData> {
        let rules = self.rules().await?;
        let listed = if self.config.shadow {
            // Shadow mode changes nothing the client sees.
            Ok(rules.listed.catalog.to_string())
        } else {
            rules.set.list_exposable(&caller.context)
        };
        let listed = listed.map_err(|e| {
            internal(
                format!("toolgate proxy: the policy engine failed to list tools: {e}"),
                "ENGINE_ERROR",
            )
        })?;
        let value: Value = serde_json::from_str(&listed)
            .map_err(|e| internal(format!("toolgate proxy: unreadable tools/list: {e}"), "ENGINE_ERROR"))?;
        // Decided for this caller (scopes, surface): private to them.
        let mut result = ServerResult::ListToolsResult(toolgate_rmcp::private_listing(from_json(value)?));
        stamp_complete(&mut result);
        Ok(result)
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let rules = self.rules().await?;
        let caller = self.config.caller(&ctx.extensions)?;
        let call = Call::new(&params, &rules, self, &caller);
        if confirm::is_stateless(&ctx.meta) && (params.request_state.is_some() || params.input_responses.is_some()) {
            return self.sealed_retry(params, &rules, call, &ctx).await;
        }
        let stateless = confirm::is_stateless(&ctx.meta);
        let modes = ctx.peer.supported_elicitation_modes();
        let can_ask = if stateless {
            confirm::declares_form_elicitation(&ctx.meta)
        } else {
            modes.contains(&rmcp::service::ElicitationMode::Form)
        };
        // The model's own `confirmed: true` counts only where the operator
        // said so and the person cannot be asked in the protocol; the engine
        // removes it otherwise (docs/spec.md §8). A handshake that declared
        // form elicitation counts for every request on its connection, a
        // 2026-07-28 request's `_meta` among them: the model's word never
        // stands in for such a client's person (asked in the protocol, or
        // on the approval page when the request's own `_meta` declares no
        // elicitation), and a decline stands.
        let declared_asking = can_ask || modes.contains(&rmcp::service::ElicitationMode::Form);
        let unasked = if self.config.trust_model_confirmation && !declared_asking {
            Confirmation::Argument
        } else {
            Confirmation::None
        };
        let started = std::time::Instant::now();
        let outcome = rules.set.decide(call.json.as_bytes(), &caller.context_json, unasked);
        self.config.metrics.decided_in(started.elapsed());
        let code = outcome.decision.code.as_deref();
        if self.config.shadow {
            // Decided and audited; forwarded as the client sent it.
            if outcome.forward.is_some() {
                call.record(None, None, None, "forwarded");
            } else {
                call.record_would_block(code);
            }
            return self.send_call(&call, params, &ctx).await;
        }
        if outcome.forward.is_some() {
            let taken = outcome.decision.json.contains("\"confirmation_received\":true");
            call.record(None, taken.then_some("argument"), None, "forwarded");
            return self.forward_call(&call, params, outcome, &ctx).await;
        }
        if code != Some(CONFIRMATION_REQUIRED) {
            call.record(code, None, None, "blocked");
            return rules.refuse(&call.name, &outcome);
        }
        if stateless {
            // MCP 2026-07-28: no server-to-client request; the person's
            // answer comes back with the retried call, sealed to it.
            if !can_ask {
                // No way to ask in the protocol: a link to the approval page.
                return self.approval(params, &rules, &call, &outcome, &ctx, false).await;
            }
            let Some(message) = confirm::prompt(&call.name, params.arguments.as_ref()) else {
                tracing::warn!(tool = %call.name, "no input request: the call's arguments are too large to show");
                call.record(code, Some("unavailable"), None, "blocked");
                return blocked(&outcome);
            };
            let (result, id) =
                self.config
                    .sealing
                    .input_required(&rules.set, &call.json, &caller.qualified, &message)?;
            call.record(code, Some("mrtr"), Some(&id), "input_required");
            return Ok(ServerResult::InputRequiredResult(result));
        }
        if !can_ask {
            // The approval page: sent as a URL-mode elicitation where the
            // client takes those, else only as a link in the result.
            let url_mode = modes.contains(&rmcp::service::ElicitationMode::Url);
            return self.approval(params, &rules, &call, &outcome, &ctx, url_mode).await;
        }
        // Ask the person.
        match confirm::ask_person(&ctx, &call.name, params.arguments.as_ref(), self.config.timeout).await {
            Ok(true) => {}
            Ok(false) => {
                call.record(code, Some("declined"), None, "blocked");
                return blocked(&outcome);
            }
            Err(why) => {
                let how = if ctx.ct.is_cancelled() {
                    "cancelled"
                } else {
                    tracing::warn!(tool = %call.name, %why, "could not ask the person to confirm");
                    "unavailable"
                };
                call.record(code, Some(how), None, "blocked");
                return blocked(&outcome);
            }
        }
        // The person answered about the rules the call started with; if the
        // catalog was reloaded meanwhile (a pin may no longer match), that
        // answer is not about the current tool.
        let current = self.rules().await?;
        // A change announced but not yet read counts as a change.
        if !current.same_set(&rules) || self.reload_queued.load(std::sync::atomic::Ordering::SeqCst) {
            call.record(code, Some("stale"), None, "blocked");
            return blocked(&outcome);
        }
        let confirmed = rules
            .set
            .decide(call.json.as_bytes(), &caller.context_json, Confirmation::Person);
        if confirmed.forward.is_none() {
            call.record(confirmed.decision.code.as_deref(), Some("elicitation"), None, "blocked");
            return rules.refuse(&call.name, &confirmed);
        }
        call.record(None, Some("elicitation"), None, "forwarded");
        self.forward_call(&call, params, confirmed, &ctx).await
    }

    /// A 2026-07-28 retry carrying the person's answer and the sealed state:
    /// forwarded once if the state opens with one of this gateway's keys,
    /// the engine finds it sealed for exactly this call, caller and
    /// revision and unexpired, the person accepted, and its id was not
    /// redeemed before on any replica.
    async fn sealed_retry(
        &self,
        params: CallToolRequestParams,
        rules: &Rules,
        call: Call<'_>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let context = &call.caller.context_json;
        let invalid = |why: &str| {
            tracing::info!(tool = %call.name, why, "sealed confirmation refused");
            let outcome = rules.set.decide(call.json.as_bytes(), context, Confirmation::Invalid);
            call.record(outcome.decision.code.as_deref(), Some("mrtr"), None, "blocked");
            rules.refuse(&call.name, &outcome)
        };
        match confirm::answer(params.input_responses.as_ref()) {
            confirm::Answer::Accept => {}
            confirm::Answer::Refuse => {
                // The person's no is final: a state sealed for this very
                // call is spent, so it cannot be sent again with an accept.
                if let Some(state) = params.request_state.as_deref()
                    && let Ok((_, id, expires_ms)) = self.opened_seal(state, rules, &call)
                {
                    let _ = self
                        .config
                        .sealing
                        .ledger
                        .redeem(&id, expires_ms, confirm::now_ms())
                        .await;
                }
                let outcome = rules.set.decide(call.json.as_bytes(), context, Confirmation::None);
                call.record(outcome.decision.code.as_deref(), Some("declined"), None, "blocked");
                return rules.refuse(&call.name, &outcome);
            }
            confirm::Answer::Missing => return invalid("no answer to the gateway's input request"),
        }
        let sealing = &self.config.sealing;
        let Some(state) = params.request_state.as_deref() else {
            return invalid("no requestState");
        };
        let (outcome, id, expires_ms) = match self.opened_seal(state, rules, &call) {
            Ok(opened) => opened,
            Err(Unopened::Invalid(why)) => return invalid(&why),
            Err(Unopened::Refused(outcome, id)) => {
                call.record(outcome.decision.code.as_deref(), Some("mrtr"), Some(&id), "blocked");
                return rules.refuse(&call.name, &outcome);
            }
        };
        match sealing.ledger.redeem(&id, expires_ms, confirm::now_ms()).await {
            Ok(true) => {}
            Ok(false) => return invalid("already redeemed"),
            Err(e) => {
                tracing::error!(error = %e, "the confirmation store is unreachable");
                call.record(Some(STORE_UNAVAILABLE), Some("mrtr"), Some(&id), "blocked");
                return blocked(&Outcome::fault(STORE_UNAVAILABLE));
            }
        }
        call.record(None, Some("mrtr"), Some(&id), "forwarded");
        let mut params = params;
        params.input_responses = None;
        params.request_state = None;
        self.forward_call(&call, params, outcome, ctx).await
    }

    /// Opens a sealed state and has the engine decide the call by it: the
    /// allowing outcome, the seal's id and its expiry, when the state is this
    /// gateway's and sealed for exactly this call, caller and revision, and
    /// unexpired (not yet redeemed: that is the ledger's to say).
    fn opened_seal(&self, state: &str, rules: &Rules, call: &Call<'_>) -> Result<(Outcome, String, u64), Unopened> {
        let payload = match self.config.sealing.keys.open(state).map(String::from_utf8) {
            Ok(Ok(payload)) => payload,
            Ok(Err(_)) => return Err(Unopened::Invalid("not UTF-8".into())),
            Err(e) => return Err(Unopened::Invalid(e.to_string())),
        };
        let outcome = rules.set.decide(
            call.json.as_bytes(),
            &call.caller.context_json,
            Confirmation::Seal {
                payload: &payload,
                caller: &call.caller.qualified,
                now_ms: confirm::now_ms(),
            },
        );
        let Some((id, expires_ms)) = confirm::seal_id(&payload) else {
            return Err(Unopened::Invalid("no id in the payload".into()));
        };
        if outcome.forward.is_none() {
            return Err(Unopened::Refused(Box::new(outcome), id));
        }
        Ok((outcome, id, expires_ms))
    }

    /// Forwards the call exactly as the engine returned it.
    async fn forward_call(
        &self,
        call: &Call<'_>,
        mut params: CallToolRequestParams,
        outcome: Outcome,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let forward = outcome.forward.as_deref().unwrap_or("{}");
        let arguments: Map<String, Value> = serde_json::from_str(forward).map_err(|e| {
            // Its `forwarded` line is written: the log says it was not sent.
            self.audit(call.line(Some("ENGINE_ERROR"), "not_sent"));
            internal(
                format!("toolgate proxy: unreadable arguments from the engine: {e}; the call was not forwarded"),
                "ENGINE_ERROR",
            )
        })?;
        params.arguments = Some(arguments);
        self.send_call(call, params, ctx).await
    }

    /// Sends an allowed call upstream. Its `forwarded` line was written
    /// before (so a crash mid-call still leaves it); a call that got no
    /// answer of the upstream's own adds a line `upstream_failed` with the
    /// gateway's code, so the log tells which forwarded calls have no known
    /// result. Each may have run: a timeout or a closed connection says
    /// nothing, an answer rmcp could not read (`UPSTREAM_ERROR`) came after
    /// the call, and a cancellation (`CANCELLED`) is a request the upstream
    /// may not honour.
    async fn send_call(
        &self,
        call: &Call<'_>,
        mut params: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        // Only what was decided goes upstream: a client's `requestState` and
        // `inputResponses` are no part of the call the engine saw (the
        // gateway's own are taken off by `sealed_retry`), and on the
        // handshake path they are no part of the protocol.
        params.request_state = None;
        params.input_responses = None;
        let request = relay_request("tools/call", &params)?;
        match self.forward_failing(request, ctx).await {
            Ok(ServerResult::InputRequiredResult(_)) => {
                // The retry would carry the upstream's state and the client's
                // answers to it, which no decision covers.
                self.audit(call.line(Some("UPSTREAM_INPUT_REQUIRED"), "upstream_failed"));
                Err(internal(
                    "toolgate proxy: the upstream asked for more input (an MCP 2026-07-28 input request), which the gateway does not relay for tools/call; the call did not complete",
                    "UPSTREAM_INPUT_REQUIRED",
                ))
            }
            Ok(result) => Ok(result),
            Err(failure) => {
                if let Some(code) = failure.code {
                    let outcome = if failure.sent { "upstream_failed" } else { "not_sent" };
                    self.audit(call.line(Some(code), outcome));
                }
                Err(failure.error)
            }
        }
    }

    /// A call that needs a person's confirmation from a client that cannot
    /// ask them: runs once if a person approved this very call (digest and
    /// revision) on its page; otherwise a new page, its link in the blocked
    /// result (and, in URL mode, sent to the client, waiting for the
    /// person's answer up to `--timeout`).
    async fn approval(
        &self,
        params: CallToolRequestParams,
        rules: &Arc<Rules>,
        call: &Call<'_>,
        outcome: &Outcome,
        ctx: &RequestContext<RoleServer>,
        url_mode: bool,
    ) -> Result<ServerResult, ErrorData> {
        let code = Some(CONFIRMATION_REQUIRED);
        let Some(digest) = outcome.digest.as_deref() else {
            call.record(code, None, None, "blocked");
            return blocked(outcome);
        };
        let ledger = &self.config.sealing.ledger;
        let store_down = |e: crate::ledger::LedgerError| {
            tracing::error!(error = %e, "the confirmation store is unreachable");
            call.record(Some(STORE_UNAVAILABLE), Some("approval"), None, "blocked");
            blocked(&Outcome::fault(STORE_UNAVAILABLE))
        };
        match approve::take_approved(ledger, digest, call.revision, &call.caller).await {
            Ok(Some(id)) => return self.run_approved(params, rules, call, &id, digest, ctx).await,
            Ok(None) => {}
            Err(e) => return store_down(e),
        }
        let Some(base_url) = self.config.approve.base.get() else {
            call.record(code, None, None, "blocked");
            return blocked(outcome);
        };
        let now = confirm::now_ms();
        let ttl_ms = u64::try_from(self.config.sealing.ttl.as_millis()).unwrap_or(u64::MAX);
        let arguments = params.arguments.clone().map_or(Value::Null, Value::Object);
        // Bounded: what the pages keep is the client's to choose otherwise
        // (approve::MAX_SHOWN_ARGUMENTS, MAX_OPEN_PER_CALLER).
        let too_large = arguments.to_string().len() > approve::MAX_SHOWN_ARGUMENTS;
        let refused = too_large
            || match approve::may_open(ledger, &call.caller.subject, ttl_ms, now).await {
                Ok(may) => !may,
                Err(e) => return store_down(e),
            };
        if refused {
            tracing::warn!(
                tool = %call.name,
                too_large,
                "no approval link: the call's arguments are too large to show, or its caller has too many links open"
            );
            call.record(code, Some("unavailable"), None, "blocked");
            return blocked(outcome);
        }
        let (title, description) = rules.listed.about.get(&call.name).cloned().unwrap_or_default();
        let pending = approve::Pending {
            id: String::new(),
            digest: digest.to_owned(),
            revision: call.revision.to_owned(),
            tool: call.name.clone(),
            title,
            description,
            arguments,
            caller: call.caller.subject.clone(),
            realm: call.caller.realm.clone(),
            surface: self.config.surface().to_owned(),
            expires_ms: now.saturating_add(ttl_ms),
            token_hashes: Vec::new(),
            state: "pending".into(),
        };
        let pending = match approve::create(ledger, pending, now).await {
            Ok(p) => p,
            Err(e) => return store_down(e),
        };
        let url = format!("{base_url}/approve/{}", pending.id);
        let linked = || {
            call.record_approval(code, "link", &pending.id, digest, "blocked");
            let text = outcome.blocked_result.as_deref().unwrap_or_default();
            let value = approve::link_result(text, &url, pending.expires_ms, now).map_err(|e| {
                internal(
                    format!(
                        "toolgate proxy: unreadable blocked result from the engine: {e}; the call was not forwarded"
                    ),
                    "ENGINE_ERROR",
                )
            })?;
            let mut result = ServerResult::CallToolResult(from_json(value)?);
            stamp_complete(&mut result);
            Ok(result)
        };
        if !url_mode {
            return linked();
        }
        let message = format!(
            "toolgate: a person must approve the tool call `{}` before it runs. Open the page to see its exact arguments and approve or deny it.",
            policy_core::escape_for_person(&call.name)
        );
        let elicitation = from_json(json!({
            "mode": "url",
            "message": message,
            "url": url,
            "elicitationId": pending.id,
        }));
        let accepted = match elicitation {
            Ok(p) => matches!(
                ctx.peer.create_elicitation_with_timeout(p, Some(self.config.timeout)).await,
                Ok(answer) if answer.action == rmcp::model::ElicitationAction::Accept
            ),
            Err(_) => false,
        };
        if !accepted {
            return linked();
        }
        // The person opened the page: wait for their answer.
        // `checked_add`: an SDK caller may configure any duration.
        let deadline = tokio::time::Instant::now()
            .checked_add(self.config.timeout)
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(604_800));
        loop {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
                () = ctx.ct.cancelled() => return linked(),
            }
            match approve::state(ledger, &pending.id).await {
                Ok(Some(s)) if s == "approved" => break,
                Ok(Some(s)) if s == "pending" => {}
                Ok(Some(s)) if s == "denied" => {
                    call.record_approval(code, "denied", &pending.id, digest, "blocked");
                    return blocked(outcome);
                }
                Ok(_) => return linked(),
                Err(e) => return store_down(e),
            }
            if tokio::time::Instant::now() >= deadline {
                return linked();
            }
        }
        match approve::take_approved(ledger, digest, call.revision, &call.caller).await {
            Ok(Some(id)) => self.run_approved(params, rules, call, &id, digest, ctx).await,
            Ok(None) => linked(),
            Err(e) => store_down(e),
        }
    }

    /// Runs a call a person approved on its page (the approval was taken).
    async fn run_approved(
        &self,
        params: CallToolRequestParams,
        rules: &Arc<Rules>,
        call: &Call<'_>,
        id: &str,
        digest: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        // The person approved the call as the rules it started with showed
        // it; if the catalog was reloaded since (the URL-mode wait lasts up
        // to `--timeout`; a pin may no longer match), the approval is not
        // about the current tool, as after a form elicitation.
        let current = self.rules().await?;
        if !current.same_set(rules) {
            call.record_approval(Some(CONFIRMATION_REQUIRED), "stale", id, digest, "blocked");
            let outcome = current
                .set
                .decide(call.json.as_bytes(), &call.caller.context_json, Confirmation::None);
            return current.refuse(&call.name, &outcome);
        }
        let confirmed = rules
            .set
            .decide(call.json.as_bytes(), &call.caller.context_json, Confirmation::Person);
        if confirmed.forward.is_none() {
            call.record_approval(confirmed.decision.code.as_deref(), "consumed", id, digest, "blocked");
            return rules.refuse(&call.name, &confirmed);
        }
        call.record_approval(None, "consumed", id, digest, "forwarded");
        self.forward_call(call, params, confirmed, ctx).await
    }
}

/// Why a sealed state does not allow the call.
enum Unopened {
    /// Not this gateway's, damaged, or without an id.
    Invalid(String),
    /// The engine's refusal (another call, caller or revision; expired).
    Refused(Box<Outcome>, String),
}

/// One `tools/call` being decided: what its audit lines share.
struct Call<'a> {
    name: String,
    /// `{"name", "arguments"}` as the engine reads it.
    json: String,
    revision: &'a str,
    /// The arguments for audit lines, copied only when they keep them.
    arguments: Option<Value>,
    state: &'a SessionState,
    caller: Arc<Caller>,
    /// The name as the metrics label it: one from the catalog, or
    /// `(unknown)` (a client cannot make up label values).
    label: &'a str,
}

impl<'a> Call<'a> {
    fn new(
        params: &CallToolRequestParams,
        rules: &'a Rules,
        state: &'a SessionState,
        caller: &Arc<Caller>,
    ) -> Call<'a> {
        let name = params.name.to_string();
        let label = rules
            .listed
            .about
            .get_key_value(&name)
            .map_or(metrics::UNKNOWN_TOOL, |(known, _)| known.as_str());
        Call {
            caller: caller.clone(),
            label,
            json: call_json(&name, params.arguments.as_ref()),
            name,
            revision: rules.set.revision(),
            arguments: state
                .config
                .audit
                .as_ref()
                .filter(|a| a.keeps_arguments())
                .and_then(|_| params.arguments.clone().map(Value::Object)),
            state,
        }
    }

    /// This call's audit line with `code` and `outcome`, nothing else said.
    fn line<'r>(&'r self, code: Option<&'r str>, outcome: &'r str) -> Record<'r> {
        Record {
            tool: &self.name,
            code,
            revision: self.revision,
            surface: self.state.config.surface(),
            confirmation: None,
            seal: None,
            approval: None,
            digest: None,
            event: None,
            outcome,
            arguments: self.arguments.as_ref(),
            caller: &self.caller.subject,
            would_block: false,
        }
    }

    /// An approval event about this call (link given, approval consumed):
    /// each is a decision on the call, counted as the others are.
    fn record_approval(&self, code: Option<&str>, event: &str, id: &str, digest: &str, outcome: &str) {
        self.state.config.metrics.decision(self.label, code);
        self.state.audit(Record {
            confirmation: Some("approval"),
            approval: Some(id),
            digest: Some(digest),
            event: Some(event),
            ..self.line(code, outcome)
        });
    }

    /// Shadow mode: the call the policy would have blocked with `code`,
    /// forwarded.
    fn record_would_block(&self, code: Option<&str>) {
        self.state.config.metrics.decision(self.label, code);
        self.state.audit(Record {
            would_block: true,
            ..self.line(code, "forwarded")
        });
    }

    fn record(&self, code: Option<&str>, confirmation: Option<&str>, seal: Option<&str>, outcome: &str) {
        self.state.config.metrics.decision(self.label, code);
        self.state.audit(Record {
            confirmation,
            seal,
            ..self.line(code, outcome)
        });
    }
}

/// The call as the engine reads it: `{"name", "arguments"}`.
fn call_json(name: &str, arguments: Option<&Map<String, Value>>) -> String {
    let mut call = Map::new();
    call.insert("name".into(), Value::String(name.to_owned()));
    if let Some(args) = arguments {
        call.insert("arguments".into(), Value::Object(args.clone()));
    }
    Value::Object(call).to_string()
}

/// A blocked call's answer: the engine's blocked result, the same bytes the
/// Node and Python middleware answer with.
fn blocked(outcome: &Outcome) -> Result<ServerResult, ErrorData> {
    let text = outcome.blocked_result.as_deref().unwrap_or_default();
    let result: CallToolResult = serde_json::from_str(text).map_err(|e| {
        internal(
            format!("toolgate proxy: unreadable blocked result from the engine: {e}; the call was not forwarded"),
            "ENGINE_ERROR",
        )
    })?;
    let mut result = ServerResult::CallToolResult(result);
    stamp_complete(&mut result);
    Ok(result)
}

/// MCP 2026-07-28 results say `resultType: "complete"`; results read from
/// a handshake-era upstream or built from the engine's JSON lack it. rmcp
/// removes it again for handshake-era clients.
fn stamp_complete(result: &mut ServerResult) {
    let result_type = match result {
        ServerResult::CompleteResult(r) => &mut r.result_type,
        ServerResult::GetPromptResult(r) => &mut r.result_type,
        ServerResult::ListPromptsResult(r) => &mut r.result_type,
        ServerResult::ListResourcesResult(r) => &mut r.result_type,
        ServerResult::ListResourceTemplatesResult(r) => &mut r.result_type,
        ServerResult::ReadResourceResult(r) => &mut r.result_type,
        ServerResult::ListToolsResult(r) => &mut r.result_type,
        ServerResult::CallToolResult(r) => &mut r.result_type,
        ServerResult::ListSkillsResult(r) => &mut r.result_type,
        ServerResult::GetSkillResult(r) => &mut r.result_type,
        _ => return,
    };
    result_type.get_or_insert(rmcp::model::ResultType::COMPLETE);
}

fn start_failed(what: &str, why: Option<String>) -> ErrorData {
    let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
    internal(
        format!("toolgate proxy: the upstream MCP server could not be started: {what}{why}"),
        "UPSTREAM_UNAVAILABLE",
    )
}

async fn cancel_upstream(peer: &Peer<RoleClient>, id: RequestId) -> Result<(), ServiceError> {
    let notification: ClientNotification = serde_json::from_value(json!({
        "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": "cancelled by the client" }
    }))
    .map_err(|_| ServiceError::TransportClosed)?;
    peer.send_notification(notification).await
}

/// What the gateway says about itself: the upstream's own server info.
fn server_config(state: &SessionState) -> rmcp::model::ServerConfig {
    state
        .upstream
        .get()
        .and_then(|up| serde_json::from_value(initialize_info(&up.info)).ok())
        .unwrap_or_default()
}

fn initialize_info(info: &Value) -> Value {
    let mut info = info.clone();
    if let Some(obj) = info.as_object_mut() {
        obj.entry("serverInfo")
            .or_insert_with(|| json!({ "name": "toolgate-proxy", "version": env!("CARGO_PKG_VERSION") }));
    }
    info
}

/// A result of the expected kind, converted from whatever the upstream's
/// answer parsed as.
fn typed<T: serde::de::DeserializeOwned>(result: ServerResult) -> Result<T, ErrorData> {
    convert(&result)
}

fn call_response(result: ServerResult) -> Result<CallToolResponse, ErrorData> {
    match result {
        ServerResult::CallToolResult(r) => Ok(CallToolResponse::Complete(r)),
        ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
        ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
        other => typed::<CallToolResult>(other).map(CallToolResponse::Complete),
    }
}

/// A typed pass-through request. With a task field (`tasks/*`), the request
/// names one upstream task, which on the shared session only the caller it
/// was started for may ask about.
macro_rules! relay {
    ($name:ident, $method:literal, $params:ty, $ret:ty, $conv:expr $(, task = $task:ident)?) => {
        fn $name(
            &self,
            request: $params,
            context: RequestContext<RoleServer>,
        ) -> impl Future<Output = Result<$ret, ErrorData>> + Send + '_ {
            async move {
                let state = self.session(&context.meta).await?;
                $(state.check_task(&request.$task, &context)?;)?
                let result = state.relay($method, &request, &context).await?;
                $conv(result)
            }
        }
    };
}

fn unit(_: ServerResult) -> Result<(), ErrorData> {
    Ok(())
}

fn prompt_response(result: ServerResult) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
    match result {
        ServerResult::InputRequiredResult(r) => Ok(rmcp::model::GetPromptResponse::InputRequired(r)),
        other => typed::<rmcp::model::GetPromptResult>(other).map(rmcp::model::GetPromptResponse::Complete),
    }
}

fn read_response(result: ServerResult) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
    match result {
        ServerResult::InputRequiredResult(r) => Ok(rmcp::model::ReadResourceResponse::InputRequired(r)),
        other => typed::<rmcp::model::ReadResourceResult>(other).map(rmcp::model::ReadResourceResponse::Complete),
    }
}

#[allow(deprecated, reason = "resources/subscribe is relayed for clients that use it")]
#[allow(
    clippy::manual_async_fn,
    reason = "the trait asks for `impl Future + Send`; explicit async blocks keep that visible"
)]
impl ServerHandler for Gateway {
    fn ping(&self, context: RequestContext<RoleServer>) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        async move {
            self.state.relay("ping", &Value::Null, &context).await?;
            Ok(())
        }
    }

    fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<rmcp::model::InitializeResult, ErrorData>> + Send + '_ {
        async move {
            let state = &self.state;
            let link = context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Arc<UpstreamLink>>());
            if let Some(link) = link {
                let _ = link.0.set(Arc::downgrade(state));
            }
            context.peer.set_peer_info(request.clone());
            let _ = state.downstream.set(context.peer.clone());
            let up = state.connect(request).await?;
            let result = from_json(initialize_info(&up.info))?;
            // Read the catalog now; a failure is retried on first use.
            if let Err(e) = state.rules().await {
                say!(Warn, "reading the upstream's tools failed: {}", e.message);
            }
            Ok(result)
        }
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [rmcp::model::ProtocolVersion]> {
        // Both eras: a handshake-era client session is one upstream session;
        // 2026-07-28 requests share the sessionless one.
        Cow::Borrowed(rmcp::model::ProtocolVersion::KNOWN_VERSIONS)
    }

    fn get_info(&self) -> rmcp::model::ServerConfig {
        // An MCP 2026-07-28 request is served by an instance with no upstream
        // of its own: what it may be asked (rmcp serves `tasks/*` only where
        // the capabilities say so) is the shared session's upstream's.
        match self.state.config.current_stateless() {
            Some(shared) if self.state.upstream.get().is_none() => server_config(&shared),
            _ => server_config(&self.state),
        }
    }

    fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<rmcp::model::DiscoverResult, ErrorData>> + Send + '_ {
        async move {
            let state = self.session(&context.meta).await?;
            Ok(rmcp::model::DiscoverResult::from_server_info(
                ServerHandler::supported_protocol_versions(self).into_owned(),
                server_config(&state),
            ))
        }
    }

    relay!(
        complete,
        "completion/complete",
        rmcp::model::CompleteRequestParams,
        rmcp::model::CompleteResult,
        typed
    );
    relay!(
        set_level,
        "logging/setLevel",
        rmcp::model::SetLevelRequestParams,
        (),
        unit
    );
    relay!(
        get_prompt,
        "prompts/get",
        rmcp::model::GetPromptRequestParams,
        rmcp::model::GetPromptResponse,
        prompt_response
    );
    relay!(
        list_prompts,
        "prompts/list",
        Option<rmcp::model::PaginatedRequestParams>,
        rmcp::model::ListPromptsResult,
        typed
    );
    relay!(
        list_resources,
        "resources/list",
        Option<rmcp::model::PaginatedRequestParams>,
        rmcp::model::ListResourcesResult,
        typed
    );
    relay!(
        list_resource_templates,
        "resources/templates/list",
        Option<rmcp::model::PaginatedRequestParams>,
        rmcp::model::ListResourceTemplatesResult,
        typed
    );
    relay!(
        read_resource,
        "resources/read",
        rmcp::model::ReadResourceRequestParams,
        rmcp::model::ReadResourceResponse,
        read_response
    );
    relay!(
        subscribe,
        "resources/subscribe",
        rmcp::model::SubscribeRequestParams,
        (),
        unit
    );
    relay!(
        unsubscribe,
        "resources/unsubscribe",
        rmcp::model::UnsubscribeRequestParams,
        (),
        unit
    );
    relay!(
        get_task,
        "tasks/get",
        rmcp::model::GetTaskParams,
        rmcp::model::GetTaskResult,
        typed,
        task = task_id
    );
    relay!(
        update_task,
        "tasks/update",
        rmcp::model::UpdateTaskParams,
        (),
        unit,
        task = task_id
    );
    relay!(
        cancel_task,
        "tasks/cancel",
        rmcp::model::CancelTaskParams,
        (),
        unit,
        task = task_id
    );
    relay!(
        list_skills,
        "skills/list",
        Option<rmcp::model::PaginatedRequestParams>,
        rmcp::model::ListSkillsResult,
        typed
    );
    relay!(
        get_skill,
        "skills/get",
        rmcp::model::GetSkillRequestParams,
        rmcp::model::GetSkillResult,
        typed
    );
    relay!(
        read_resource_directory,
        "resources/directory/read",
        rmcp::model::ReadResourceDirectoryRequestParams,
        rmcp::model::ReadResourceDirectoryResult,
        typed
    );

    fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<rmcp::model::ListToolsResult, ErrorData>> + Send + '_ {
        async move {
            let caller = self.state.config.caller(&_context.extensions)?;
            typed(self.session(&_context.meta).await?.list_tools(&caller).await?)
        }
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + '_ {
        async move {
            let state = self.session(&context.meta).await?;
            match state.call_tool(request, context).await {
                Ok(result) => call_response(result),
                Err(e) => Err(e),
            }
        }
    }

    fn on_custom_request(
        &self,
        mut request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<rmcp::model::CustomResult, ErrorData>> + Send + '_ {
        async move {
            // The gate refuses these before they get here; this keeps the
            // rule where the request is handled too.
            if !self.state.config.relay.contains(&request.method) {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "toolgate proxy: the method {:?} is not relayed by this gateway",
                        request.method
                    ),
                    None,
                ));
            }
            request.extensions = Extensions::default();
            let result = self
                .session(&context.meta)
                .await?
                .forward(ClientRequest::CustomRequest(request), &context)
                .await?;
            typed(result)
        }
    }

    fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) -> impl Future<Output = ()> + Send + '_ {
        async move {
            let notification = serde_json::from_value(json!({ "method": "notifications/roots/list_changed" }));
            if let Ok(notification) = notification {
                self.state.notify_upstream(notification, context).await;
            }
        }
    }

    fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = ()> + Send + '_ {
        async move {
            if self.state.config.relay.contains(&notification.method) {
                self.state
                    .notify_upstream(ClientNotification::CustomNotification(notification), context)
                    .await;
            }
        }
    }
}

/// The client side towards the upstream: relays the server's requests and
/// notifications to the client.
#[derive(Debug)]
struct UpstreamHandler {
    state: Weak<SessionState>,
    /// The client's handshake, as the gateway passed it on: its capabilities
    /// bound what the upstream may ask it.
    info: InitializeRequestParams,
    /// The upstream's requests waiting for the client's answer (review 31
    /// F6: each waits up to `--timeout`, and an upstream sending them without
    /// end held gigabytes and put as many dialogs before the person).
    relayed: Arc<tokio::sync::Semaphore>,
}

/// The most requests of the upstream one session relays to its client at once.
const MAX_RELAYED_REQUESTS: usize = 16;

/// The capability `request` needs that the client's handshake did not
/// declare: MCP forbids a server to ask a client for what it did not declare,
/// and a host may hold a sampling or elicitation handler that it declares
/// per server (review 31 F7). Read from the JSON, as the client will.
fn undeclared_capability(
    request: &ServerRequest,
    capabilities: &rmcp::model::ClientCapabilities,
) -> Option<&'static str> {
    let declared = serde_json::to_value(capabilities).unwrap_or(Value::Null);
    let has = |pointer: &str| declared.pointer(pointer).is_some_and(|v| !v.is_null());
    let request = serde_json::to_value(request).unwrap_or(Value::Null);
    match request.get("method").and_then(Value::as_str) {
        Some("sampling/createMessage") => {
            // `tools: []` offers the model nothing to call.
            let with_tools = request
                .pointer("/params/tools")
                .is_some_and(|t| !t.is_null() && t.as_array().is_none_or(|tools| !tools.is_empty()));
            if !has("/sampling") {
                Some("sampling")
            } else if with_tools && !has("/sampling/tools") {
                Some("sampling with tools")
            } else {
                None
            }
        }
        Some("roots/list") => (!has("/roots")).then_some("roots"),
        Some("elicitation/create") => {
            if request.pointer("/params/mode").and_then(Value::as_str) == Some("url") {
                (!has("/elicitation/url")).then_some("URL-mode elicitation")
            } else {
                (!toolgate_rmcp::capabilities_declare_form_elicitation(&declared)).then_some("form elicitation")
            }
        }
        _ => None,
    }
}

impl UpstreamHandler {
    fn downstream(&self) -> Option<(Arc<SessionState>, Peer<RoleServer>)> {
        let state = self.state.upgrade()?;
        let peer = state.downstream.get()?.clone();
        Some((state, peer))
    }
}

#[allow(clippy::manual_async_fn, reason = "the trait asks for `impl Future + Send`")]
impl Service<RoleClient> for UpstreamHandler {
    fn handle_request(
        &self,
        mut request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ClientResult, ErrorData>> + Send + '_ {
        async move {
            if let ServerRequest::PingRequest(_) = request {
                return Ok(ClientResult::empty(()));
            }
            if let Some(capability) = undeclared_capability(&request, &self.info.capabilities) {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!("toolgate proxy: the client did not declare {capability}; it was not asked"),
                    Some(json!({ "toolgate": "CLIENT_CAPABILITY_UNDECLARED" })),
                ));
            }
            let Ok(_waiting) = self.relayed.clone().try_acquire_owned() else {
                return Err(internal(
                    format!(
                        "toolgate proxy: {MAX_RELAYED_REQUESTS} of the server's requests already wait for the client"
                    ),
                    "CLIENT_BUSY",
                ));
            };
            let Some((state, peer)) = self.downstream() else {
                return Err(internal("toolgate proxy: the client is gone", "CLIENT_CLOSED"));
            };
            *request.extensions_mut() = Extensions::default();
            request.get_meta_mut().extend(context.meta.clone());
            let options = PeerRequestOptions::with_timeout(state.config.timeout);
            let handle = peer.send_cancellable_request(request, options).await.map_err(|e| {
                internal(
                    format!("toolgate proxy: could not reach the client: {e}"),
                    "CLIENT_CLOSED",
                )
            })?;
            let id = handle.id.clone();
            let result = tokio::select! {
                r = handle.await_response() => r,
                () = context.ct.cancelled() => {
                    toolgate_rmcp::withdraw(&peer, id, "cancelled by the server").await;
                    Err(ServiceError::Cancelled { reason: None })
                }
            };
            match result {
                Ok(r) => Ok(r),
                Err(ServiceError::McpError(e)) => Err(e),
                Err(e) => Err(internal(
                    format!("toolgate proxy: the client did not answer: {e}"),
                    "CLIENT_ERROR",
                )),
            }
        }
    }

    fn handle_notification(
        &self,
        _notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        // Relayed in order by the transport (`Ordered`), before the session
        // sees the next message: nothing left to do here.
        async { Ok(()) }
    }

    fn get_info(&self) -> InitializeRequestParams {
        self.info.clone()
    }
}

/// The `_meta` key on a forwarded request that carries the client's progress
/// token to `Ordered::send`, which maps the upstream's token to it and takes
/// the key off before the request is written.
pub(crate) const CLIENT_PROGRESS_META: &str = "io.toolgate/client-progress-token";

/// The `_meta` entries that travel end to end. The 2026-07-28 envelope keys
/// (`io.modelcontextprotocol/protocolVersion`, `clientCapabilities`,
/// `clientInfo`, `logLevel`) describe the client's own connection to the
/// gateway; the gateway's connection upstream has its own era, and a
/// handshake-era server refuses a request that carries them (mcp 2.x answers
/// -32600). Everything else (progress tokens, tracing, vendor keys) is kept.
fn end_to_end_meta(meta: &rmcp::model::MetaObject) -> rmcp::model::MetaObject {
    // The gateway's own key too: a client cannot name the token its
    // request's progress is relayed under.
    const PER_CONNECTION: [&str; 5] = [
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/logLevel",
        CLIENT_PROGRESS_META,
    ];
    meta.iter()
        .filter(|(key, _)| !PER_CONNECTION.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect::<Map<String, Value>>()
        .into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Review 31 F7: the upstream asks the client only what its handshake
    /// declared (sampling, sampling with tools, roots, each elicitation mode).
    #[test]
    fn the_upstream_asks_the_client_only_what_it_declared() {
        let request = |method: &str, params: Value| -> ServerRequest {
            serde_json::from_value(json!({ "method": method, "params": params })).unwrap()
        };
        let caps = |c: Value| -> rmcp::model::ClientCapabilities { serde_json::from_value(c).unwrap() };
        let sampling = request("sampling/createMessage", json!({"messages": [], "maxTokens": 10}));
        let with_tools = request(
            "sampling/createMessage",
            json!({"messages": [], "maxTokens": 10, "tools": [{"name": "wipe", "inputSchema": {"type": "object"}}]}),
        );
        let roots = request("roots/list", json!({}));
        let form = request(
            "elicitation/create",
            json!({"message": "ok?", "requestedSchema": {"type": "object", "properties": {}}}),
        );
        let url = request(
            "elicitation/create",
            json!({"mode": "url", "message": "open", "url": "https://example.com/x", "elicitationId": "e1"}),
        );
        let none = caps(json!({}));
        for r in [&sampling, &with_tools, &roots, &form, &url] {
            assert!(undeclared_capability(r, &none).is_some());
        }
        let all = caps(json!({"sampling": {"tools": {}}, "roots": {}, "elicitation": {"form": {}, "url": {}}}));
        for r in [&sampling, &with_tools, &roots, &form, &url] {
            assert_eq!(undeclared_capability(r, &all), None);
        }
        let plain_sampling = caps(json!({"sampling": {}}));
        assert_eq!(undeclared_capability(&sampling, &plain_sampling), None);
        let no_tools = request(
            "sampling/createMessage",
            json!({"messages": [], "maxTokens": 10, "tools": []}),
        );
        assert_eq!(undeclared_capability(&no_tools, &plain_sampling), None);
        assert_eq!(
            undeclared_capability(&with_tools, &plain_sampling),
            Some("sampling with tools")
        );
        // `elicitation: {}` is form (MCP 2025-06-18), not URL.
        let legacy = caps(json!({"elicitation": {}}));
        assert_eq!(undeclared_capability(&form, &legacy), None);
        assert_eq!(undeclared_capability(&url, &legacy), Some("URL-mode elicitation"));
        let url_only = caps(json!({"elicitation": {"url": {}}}));
        assert_eq!(undeclared_capability(&form, &url_only), Some("form elicitation"));
        assert_eq!(undeclared_capability(&url, &url_only), None);
    }

    /// Those who waited for the failed attempt get its failure; those who
    /// came after it try anew.
    #[test]
    fn a_failed_attempt_is_told_to_those_who_waited_for_it_only() {
        let failed = FailedAttempt::default();
        let waiting = std::time::Instant::now();
        assert!(failed.since(waiting).is_none());
        failed.record(&internal("no catalog", "UPSTREAM_TIMEOUT"));
        assert_eq!(
            failed.since(waiting).map(|e| e.message.to_string()).as_deref(),
            Some("no catalog")
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(failed.since(std::time::Instant::now()).is_none());
    }

    /// A client's progress token, tracing and vendor keys travel; the keys of
    /// its own connection do not, nor the key by which the gateway tells its
    /// transport which client token a request's progress goes to.
    #[test]
    fn end_to_end_meta_keeps_the_clients_keys_but_not_the_gateways() {
        let meta: rmcp::model::MetaObject = serde_json::from_value(json!({
            "progressToken": 7,
            "traceparent": "00-abc-def-01",
            "vendor/x": true,
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {},
            "io.modelcontextprotocol/logLevel": "debug",
            CLIENT_PROGRESS_META: "someone-elses-token"
        }))
        .unwrap();
        let kept = end_to_end_meta(&meta);
        let mut keys: Vec<&str> = kept.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["progressToken", "traceparent", "vendor/x"]);
    }
}
