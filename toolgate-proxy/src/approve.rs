//! Approval pages: how a person approves a call for a client that cannot
//! ask them itself (no elicitation, or URL-mode elicitation only).
//!
//! The blocked call's answer carries a link, `BASE/approve/<id>`; the page
//! shows the tool, its title and description, the exact arguments (escaped
//! for a person, then for HTML), the policy revision, the caller and the
//! expiry, with Approve and Deny forms. Approve records
//! `toolgate:approved:<digest>:<revision>:<caller>`; the model's retry of the
//! same call (same engine digest, revision and caller) takes it once, atomically, and
//! runs. Records live in the confirmation store ([`Ledger`]), so a page
//! served by one replica is honoured by every other.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

use crate::audit::{Record, rfc3339_ms};
use crate::auth::Caller;
use crate::confirm::now_ms;
use crate::gateway::Config;
use crate::ledger::{Also, Ledger, LedgerError};

/// Pending records' key prefix in the store.
pub const RECORD_PREFIX: &str = "toolgate:approval:";
/// Approvals waiting for their retry.
pub const APPROVED_PREFIX: &str = "toolgate:approved:";
/// How long a record outlives its expiry, so a late visit says "expired".
const GRACE_MS: u64 = 10 * 60 * 1000;
/// The page's headers: nothing loads, nothing frames it, nothing leaks.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

/// Where approval links point, set once the page listener is bound.
#[derive(Debug, Default)]
pub struct Pages {
    /// `http://HOST:PORT` (no trailing slash).
    pub base: OnceLock<String>,
}

impl Pages {
    /// The link for `id`, when pages are served.
    pub fn url(&self, id: &str) -> Option<String> {
        self.base.get().map(|base| format!("{base}/approve/{id}"))
    }
}

/// A pending approval, as stored (JSON).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Pending {
    pub id: String,
    pub digest: String,
    pub revision: String,
    pub tool: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// The call's arguments as the model sent them.
    #[serde(default)]
    pub arguments: Value,
    #[serde(default)]
    pub caller: String,
    /// The caller's realm (`Caller::realm`), for the approval's key only.
    #[serde(default)]
    pub realm: String,
    pub surface: String,
    pub expires_ms: u64,
    /// SHA-256 (hex) of the anti-forgery token of each of the last
    /// [`PAGES_VALID`] pages shown, newest last; empty until the page was
    /// shown and once it is answered.
    #[serde(default)]
    pub token_hashes: Vec<String>,
    /// `pending`, `approved` or `denied`.
    pub state: String,
}

/// How many pages shown of one approval keep a form that counts: a link
/// preview, the model fetching the link or a second tab each show the page
/// once more, and must not break the page the person has open. (A token
/// only proves the form came from this origin's page; any of them does.)
pub const PAGES_VALID: usize = 8;

pub fn record_key(id: &str) -> String {
    format!("{RECORD_PREFIX}{id}")
}

pub fn approved_key(digest: &str, revision: &str, realm: &str, subject: &str) -> String {
    // The caller is part of the key: one caller's approval never runs
    // another's identical call, nor that of the same `sub` of another
    // issuer sharing the store. Hashed, so any subject makes a safe key;
    // the realm is length-prefixed so no split of the two collides.
    use sha2::Digest;
    let who = crate::auth::qualified(realm, subject);
    let caller: String = sha2::Sha256::digest(who.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{APPROVED_PREFIX}{digest}:{revision}:{caller}")
}

/// 128 random bits, base64url (22 characters).
pub fn random_token() -> Result<String, String> {
    use base64::Engine as _;
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Equal in time that depends only on the lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The largest arguments an approval page stores and shows (their JSON
/// text): what a person is asked to approve on any channel. Every open page
/// also keeps its call's arguments until it expires, so pages for calls of
/// the engine's 4 MiB limit would let one client fill the gateway's memory
/// or the shared store. A larger call needing confirmation gets no link.
pub use crate::confirm::MAX_SHOWN_ARGUMENTS;
/// Approval links one caller may open within a confirmation window (every
/// caller without a token counts as one): with the size above, what one
/// caller can make the store hold is bounded (about 2 MiB per window).
pub const MAX_OPEN_PER_CALLER: u64 = 32;
/// Links opened per caller (hashed), counted across replicas.
const OPENED_PREFIX: &str = "toolgate:approval-opened:";

/// Whether `caller` may open another approval link now; counts it when so.
/// The count lasts a record's life from the first link of its window, so a
/// caller past the limit gets links again once that window ends.
pub async fn may_open(ledger: &Ledger, caller: &str, ttl_ms: u64, now: u64) -> Result<bool, LedgerError> {
    let key = format!("{OPENED_PREFIX}{}", &sha256_hex(caller)[..32]);
    let opened = ledger.count_up(&key, ttl_ms.saturating_add(GRACE_MS), now).await?;
    Ok(opened <= MAX_OPEN_PER_CALLER)
}

/// Stores a new pending approval; its id.
pub async fn create(ledger: &Ledger, mut pending: Pending, now: u64) -> Result<Pending, LedgerError> {
    let ttl = pending.expires_ms.saturating_sub(now).saturating_add(GRACE_MS);
    for _ in 0..3 {
        pending.id = random_token().map_err(LedgerError::Unreachable)?;
        let text = serde_json::to_string(&pending).map_err(|e| LedgerError::Unreachable(e.to_string()))?;
        if ledger.put_new(&record_key(&pending.id), &text, ttl, now).await? {
            return Ok(pending);
        }
    }
    Err(LedgerError::Unreachable("no fresh approval id".into()))
}

/// Takes the approval of this call under this revision, if a person gave
/// one: the pending record's id. Once, on any replica.
pub async fn take_approved(
    ledger: &Ledger,
    digest: &str,
    revision: &str,
    caller: &Caller,
) -> Result<Option<String>, LedgerError> {
    let key = approved_key(digest, revision, &caller.realm, &caller.subject);
    ledger.take(&key, now_ms()).await
}

/// The state of a pending record (for a gateway waiting on the page).
pub async fn state(ledger: &Ledger, id: &str) -> Result<Option<String>, LedgerError> {
    let now = now_ms();
    Ok(ledger
        .get(&record_key(id), now)
        .await?
        .and_then(|t| serde_json::from_str::<Pending>(&t).ok())
        .map(|p| if p.expires_ms <= now { "expired".into() } else { p.state }))
}

/// What the model is told: the engine's blocked result, plus a second text
/// block with the link and, where the engine put `structuredContent`,
/// `structuredContent.approval = {url, expires_ms}`.
pub fn link_result(blocked_result: &str, url: &str, expires_ms: u64, now: u64) -> Result<Value, String> {
    let mut result: Value = serde_json::from_str(blocked_result).map_err(|e| e.to_string())?;
    let obj = result.as_object_mut().ok_or("not an object")?;
    let secs = expires_ms.saturating_sub(now).div_ceil(1000);
    let text = format!(
        "A person must approve this call before it runs: they open {url} , check the tool and its exact arguments and press Approve (the link works once and expires in {secs} s, at {}). After that, retry exactly the same call (same tool, same arguments); it then runs once. Other arguments need another approval.",
        rfc3339_ms(expires_ms)
    );
    if let Some(Value::Array(content)) = obj.get_mut("content") {
        content.push(json!({ "type": "text", "text": text }));
    }
    if let Some(Value::Object(structured)) = obj.get_mut("structuredContent") {
        structured.insert("approval".into(), json!({ "url": url, "expires_ms": expires_ms }));
    }
    Ok(result)
}

/// `<`, `>`, `&`, `"` and `'` as entities.
pub fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Untrusted text for the page: invisible, bidirectional and separator
/// characters as visible escapes, then HTML-escaped.
fn shown(text: &str) -> String {
    html_escape(&policy_core::escape_for_person(text))
}

/// The arguments, pretty-printed, each line escaped (the printer's own line
/// breaks are the only raw ones).
fn shown_arguments(arguments: &Value) -> String {
    let args = match arguments {
        Value::Null => Value::Object(Map::new()),
        other => other.clone(),
    };
    serde_json::to_string_pretty(&args)
        .unwrap_or_default()
        .split('\n')
        .map(shown)
        .collect::<Vec<_>>()
        .join("\n")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#111}\
pre{background:#f4f4f4;border:1px solid #ccc;padding:1rem;white-space:pre-wrap;word-break:break-all}\
dt{font-weight:bold;margin-top:.6rem}form{display:inline-block;margin-right:1rem}\
button{font-size:1.1rem;padding:.5rem 1.5rem}.approve{background:#1a7f37;color:#fff}.deny{background:#b42318;color:#fff}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head><body>\n{body}\n</body></html>\n",
        html_escape(title)
    )
}

/// The approval page for `pending`, with `token` in both forms.
pub fn render(pending: &Pending, token: &str, now: u64) -> String {
    let mut body = String::new();
    body.push_str("<h1>Approve a tool call?</h1>\n<p>A model asked toolgate to run this call. It changes something, so it runs only if you approve it. Check the tool and every argument.</p>\n<dl>\n");
    let mut item = |name: &str, value: &str| {
        let _ = writeln!(
            body,
            "<dt>{name}</dt><dd id=\"{}\">{value}</dd>",
            name.to_lowercase().replace(' ', "-")
        );
    };
    item("Tool", &format!("<code>{}</code>", shown(&pending.tool)));
    item("Title", &pending.title.as_deref().map(shown).unwrap_or_default());
    item(
        "Description",
        &pending.description.as_deref().map(shown).unwrap_or_default(),
    );
    item("Policy revision", &format!("<code>{}</code>", shown(&pending.revision)));
    let caller = if pending.caller.is_empty() {
        "(not authenticated)".to_owned()
    } else {
        shown(&pending.caller)
    };
    item("Caller", &caller);
    let secs = pending.expires_ms.saturating_sub(now).div_ceil(1000);
    item(
        "Expires",
        &format!("{} (in {secs} s)", html_escape(&rfc3339_ms(pending.expires_ms))),
    );
    body.push_str("</dl>\n<h2>Exact arguments</h2>\n<pre id=\"arguments\">");
    body.push_str(&shown_arguments(&pending.arguments));
    body.push_str(
        "</pre>\n<p>Invisible, right-to-left and line-separator characters are shown as <code>\\u{XXXX}</code>.</p>\n",
    );
    let token = html_escape(token);
    for (action, label) in [("approve", "Approve"), ("deny", "Deny")] {
        let _ = writeln!(
            body,
            "<form method=\"post\"><input type=\"hidden\" name=\"token\" value=\"{token}\"><input type=\"hidden\" name=\"action\" value=\"{action}\"><button type=\"submit\" id=\"{action}\" class=\"{action}\">{label}</button></form>"
        );
    }
    page("Approve a tool call", &body)
}

fn message(title: &str, text: &str) -> String {
    page(
        title,
        &format!("<h1>{}</h1>\n<p>{}</p>", html_escape(title), html_escape(text)),
    )
}

/// A response with the page's strict headers.
fn respond(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The page server's state.
#[derive(Debug, Clone)]
pub struct Served {
    pub config: Arc<Config>,
    /// Host names (without port) the page answers to: a DNS-rebinding page
    /// cannot read a token.
    pub hosts: Arc<Vec<String>>,
}

/// `/approve/{id}`: GET shows the page, POST approves or denies.
pub fn router(served: Served) -> axum::Router {
    axum::Router::new()
        .route("/approve/{id}", axum::routing::get(show).post(answer))
        .with_state(served)
}

fn host_allowed(served: &Served, headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    served.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// A browser's form POST from another origin is refused. `null` (what a
/// browser sends under `Referrer-Policy: no-referrer`) and no `Origin`
/// pass: the anti-forgery token is what decides.
fn origin_allowed(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok()) else {
        return true;
    };
    if origin == "null" {
        return true;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    origin == format!("http://{host}") || origin == format!("https://{host}")
}

/// A person's act on the page (`shown`, `approved`, `denied`, `expired`):
/// not a decision (`outcome: "page"`, `decision: null`), with the code of
/// the decision the page is about. An `approved` line said `allowed`
/// though nothing ran, and consumers that counted allowed decisions
/// counted each approved call twice (review 28).
fn audit(served: &Served, pending: &Pending, event: &str) {
    if let Some(audit) = &served.config.audit {
        audit.write(&Record {
            tool: &pending.tool,
            code: Some("CONFIRMATION_REQUIRED"),
            revision: &pending.revision,
            surface: &pending.surface,
            confirmation: Some("approval"),
            seal: None,
            approval: Some(&pending.id),
            digest: Some(&pending.digest),
            event: Some(event),
            outcome: crate::audit::PAGE,
            arguments: Some(&pending.arguments),
            caller: &pending.caller,
            would_block: false,
        });
    }
}

fn unavailable(e: &LedgerError) -> Response {
    tracing::error!(error = %e, "the confirmation store is unreachable");
    respond(
        StatusCode::SERVICE_UNAVAILABLE,
        message(
            "Try again later",
            "The approval store cannot be reached; nothing was changed.",
        ),
    )
}

fn gone() -> Response {
    respond(
        StatusCode::NOT_FOUND,
        message(
            "No such approval",
            "This link is unknown, expired or already used. The model gets a new link when it tries the call again.",
        ),
    )
}

async fn load(served: &Served, id: &str) -> Result<Option<(String, Pending)>, LedgerError> {
    if !(16..=64).contains(&id.len()) || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Ok(None);
    }
    let text = served.config.sealing.ledger.get(&record_key(id), now_ms()).await?;
    Ok(text.and_then(|t| serde_json::from_str::<Pending>(&t).ok().map(|p| (t, p))))
}

/// Replaces the page's record `text` with `next_text` if nobody changed it
/// meanwhile (and writes `also` with it): `Ok(false)` when it changed.
async fn replace_record(
    served: &Served,
    id: &str,
    pending: &Pending,
    text: &str,
    next_text: &str,
    also: Option<Also<'_>>,
    now: u64,
) -> Result<bool, LedgerError> {
    served
        .config
        .sealing
        .ledger
        .swap(&record_key(id), text, next_text, record_ttl(pending, now), also, now)
        .await
}

fn record_ttl(pending: &Pending, now: u64) -> u64 {
    pending.expires_ms.saturating_sub(now).saturating_add(GRACE_MS)
}

async fn show(State(served): State<Served>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if !host_allowed(&served, &headers) {
        return respond(StatusCode::FORBIDDEN, message("Forbidden", "Unknown host."));
    }
    let (text, pending) = match load(&served, &id).await {
        Ok(Some(found)) => found,
        Ok(None) => return gone(),
        Err(e) => return unavailable(&e),
    };
    let now = now_ms();
    if pending.expires_ms <= now {
        audit(&served, &pending, "expired");
        return gone();
    }
    if pending.state != "pending" {
        let done = if pending.state == "approved" {
            "approved"
        } else {
            "denied"
        };
        return respond(
            StatusCode::GONE,
            message("Already answered", &format!("This call was already {done}.")),
        );
    }
    // A fresh token per page shown; the last few pages' forms count.
    let token = match random_token() {
        Ok(t) => t,
        Err(e) => return unavailable(&LedgerError::Unreachable(e)),
    };
    let mut next = pending.clone();
    next.token_hashes.push(sha256_hex(&token));
    let past = next.token_hashes.len().saturating_sub(PAGES_VALID);
    next.token_hashes.drain(..past);
    let Ok(next_text) = serde_json::to_string(&next) else {
        return gone();
    };
    match replace_record(&served, &id, &pending, &text, &next_text, None, now).await {
        Ok(true) => {}
        Ok(false) => {
            return respond(
                StatusCode::CONFLICT,
                message("Try again", "The page changed; reload it."),
            );
        }
        Err(e) => return unavailable(&e),
    }
    audit(&served, &pending, "shown");
    respond(StatusCode::OK, render(&next, &token, now))
}

/// `application/x-www-form-urlencoded` fields.
pub fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    let decode = |s: &str| -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            match b {
                b'+' => out.push(b' '),
                b'%' => {
                    let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                    match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        Some(v) => {
                            out.push(v);
                            i += 2;
                        }
                        None => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The most of a form's body read, and how long it is waited for: the pages
/// need no login, so a body sent slowly or never must not hold a connection
/// (and its place under `--max-connections`).
const FORM_BYTES: usize = 4096;
const FORM_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

async fn answer(State(served): State<Served>, Path(id): Path<String>, headers: HeaderMap, body: Body) -> Response {
    if !host_allowed(&served, &headers) || !origin_allowed(&headers) {
        let refused = respond(StatusCode::FORBIDDEN, message("Forbidden", "Not from this page."));
        return crate::http::answer_after_body(body, refused).await;
    }
    let read = tokio::time::timeout(FORM_WAIT, crate::http::read_body(body, FORM_BYTES, FORM_BYTES)).await;
    let body = match read {
        Ok(Some((kept, total))) if total <= FORM_BYTES => kept,
        Ok(Some(_)) => {
            let long = message("Payload too large", "An approval form is a few hundred bytes.");
            return crate::http::closing(respond(StatusCode::PAYLOAD_TOO_LARGE, long));
        }
        Ok(None) => {
            return respond(
                StatusCode::BAD_REQUEST,
                message("Bad request", "The form could not be read."),
            );
        }
        Err(_) => {
            let late = message("Request timeout", "The form did not arrive in time.");
            return crate::http::closing(respond(StatusCode::REQUEST_TIMEOUT, late));
        }
    };
    let fields = form_fields(&body);
    let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let (token, action) = (field("token").unwrap_or_default(), field("action").unwrap_or_default());
    let (text, pending) = match load(&served, &id).await {
        Ok(Some(found)) => found,
        Ok(None) => return gone(),
        Err(e) => return unavailable(&e),
    };
    let now = now_ms();
    if pending.expires_ms <= now {
        audit(&served, &pending, "expired");
        return gone();
    }
    let forged = || {
        respond(
            StatusCode::FORBIDDEN,
            message("Forbidden", "This form is not valid (reload the page)."),
        )
    };
    if pending.state != "pending" {
        return respond(
            StatusCode::GONE,
            message(
                "Already answered",
                "This approval was already answered; nothing was changed.",
            ),
        );
    }
    let presented = sha256_hex(token);
    if token.is_empty()
        || !pending
            .token_hashes
            .iter()
            .any(|shown| constant_time_eq(presented.as_bytes(), shown.as_bytes()))
    {
        tracing::info!(approval = %pending.id, "approval form refused: bad anti-forgery token");
        return forged();
    }
    let approve = match action {
        "approve" => true,
        "deny" => false,
        _ => return forged(),
    };
    let mut next = pending.clone();
    next.state = if approve { "approved" } else { "denied" }.into();
    next.token_hashes.clear();
    let Ok(next_text) = serde_json::to_string(&next) else {
        return forged();
    };
    let key = approved_key(&pending.digest, &pending.revision, &pending.realm, &pending.caller);
    // An approval is kept per call (not per link); a deny on any link of the
    // same call takes back an approval given on another, so the person's
    // last word is the one that stands.
    let also = Some(Also {
        key: &key,
        value: if approve { &pending.id } else { "" },
        ttl_ms: pending.expires_ms.saturating_sub(now).max(1),
    });
    match replace_record(&served, &id, &pending, &text, &next_text, also, now).await {
        Ok(true) => {}
        Ok(false) => {
            return respond(
                StatusCode::CONFLICT,
                message(
                    "Already answered",
                    "This approval changed meanwhile; nothing was changed.",
                ),
            );
        }
        Err(e) => return unavailable(&e),
    }
    if approve {
        audit(&served, &pending, "approved");
        respond(
            StatusCode::OK,
            message(
                "Approved",
                "Approved. The call runs once when the model retries exactly this call (until the link's expiry).",
            ),
        )
    } else {
        audit(&served, &pending, "denied");
        respond(StatusCode::OK, message("Denied", "Denied. The call does not run."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(args: Value) -> Pending {
        Pending {
            id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
            digest: "sha256:00".into(),
            revision: "rev-1".into(),
            tool: "write_file".into(),
            title: Some("Write <file>".into()),
            description: Some("Writes\u{200B} a file & more".into()),
            arguments: args,
            caller: String::new(),
            realm: String::new(),
            surface: "confirming".into(),
            expires_ms: 61_000,
            token_hashes: Vec::new(),
            state: "pending".into(),
        }
    }

    #[test]
    fn page_shows_arguments_escaped_and_never_raw() {
        let html = render(
            &pending(json!({"path": "/tmp/a</pre><script>x</script>", "content": "ok\u{202e}txt\u{2028}y\u{200d}"})),
            "tok&en",
            1_000,
        );
        assert!(html.contains("\\u{202E}") && html.contains("\\u{2028}") && html.contains("\\u{200D}"));
        assert!(!html.contains('\u{202e}') && !html.contains('\u{2028}') && !html.contains('\u{200d}'));
        assert!(html.contains("&lt;/pre&gt;&lt;script&gt;x&lt;/script&gt;") && !html.contains("<script>"));
        assert!(html.contains("Write &lt;file&gt;") && html.contains("Writes\\u{200B} a file &amp; more"));
        assert!(html.contains("value=\"tok&amp;en\""));
        assert!(html.contains("rev-1") && html.contains("(in 60 s)") && html.contains("1970-01-01T00:01:01.000Z"));
        assert_eq!(html.matches("<form method=\"post\">").count(), 2);
        // A typed escape cannot pass for an escaped character.
        let typed = render(&pending(json!({"content": "\\u{202E}"})), "t", 0);
        assert!(typed.contains("\\u{005C}u{202E}"), "{typed}");
    }

    #[test]
    fn link_result_keeps_the_engine_result() {
        let engine = r#"{"content":[{"type":"text","text":"{\"x\":1}"}],"structuredContent":{"x":1},"isError":true}"#;
        let r = link_result(engine, "http://h/approve/abc", 5_000, 1_000).unwrap();
        assert_eq!(r["content"][0]["text"], "{\"x\":1}");
        assert!(
            r["content"][1]["text"]
                .as_str()
                .unwrap()
                .contains("http://h/approve/abc")
        );
        assert_eq!(r["structuredContent"]["approval"]["url"], "http://h/approve/abc");
        assert_eq!(r["structuredContent"]["approval"]["expires_ms"], 5_000);
        assert_eq!(r["structuredContent"]["x"], 1);
        let no_structured = r#"{"content":[{"type":"text","text":"{}"}],"isError":true}"#;
        let r = link_result(no_structured, "http://h/approve/abc", 5_000, 1_000).unwrap();
        assert!(r.get("structuredContent").is_none() && r["content"].as_array().unwrap().len() == 2);
    }

    #[test]
    fn forms_and_tokens() {
        let f = form_fields(b"token=a%2Bb+c&action=approve&x");
        assert_eq!(f[0], ("token".into(), "a+b c".into()));
        assert_eq!(f[1], ("action".into(), "approve".into()));
        assert_eq!(f[2], ("x".into(), String::new()));
        assert!(
            constant_time_eq(b"abc", b"abc") && !constant_time_eq(b"abc", b"abd") && !constant_time_eq(b"a", b"ab")
        );
        let t = random_token().unwrap();
        assert_eq!(t.len(), 22);
        assert_ne!(t, random_token().unwrap());
    }

    #[tokio::test]
    async fn store_roundtrip_approve_once() {
        let ledger = Ledger::memory();
        let now = now_ms();
        let mut p = pending(json!({}));
        p.expires_ms = now + 60_000;
        (p.realm, p.caller) = ("https://idp-a.example".into(), "ana".into());
        let p = create(&ledger, p, now).await.unwrap();
        assert_eq!(state(&ledger, &p.id).await.unwrap().as_deref(), Some("pending"));
        let text = ledger.get(&record_key(&p.id), now).await.unwrap().unwrap();
        let mut next = p.clone();
        next.state = "approved".into();
        let key = approved_key(&p.digest, &p.revision, &p.realm, &p.caller);
        let also = Also {
            key: &key,
            value: &p.id,
            ttl_ms: 60_000,
        };
        let next_text = serde_json::to_string(&next).unwrap();
        assert!(
            ledger
                .swap(&record_key(&p.id), &text, &next_text, 60_000, Some(also), now)
                .await
                .unwrap()
        );
        assert!(
            !ledger
                .swap(&record_key(&p.id), &text, &next_text, 60_000, Some(also), now)
                .await
                .unwrap()
        );
        assert_eq!(state(&ledger, &p.id).await.unwrap().as_deref(), Some("approved"));
        let caller = |realm: &str, subject: &str| {
            let context = toolgate::Context::from_flags(toolgate::Surface::Confirming, None, None);
            Caller::new(realm.into(), subject.into(), context)
        };
        let ana = caller("https://idp-a.example", "ana");
        assert_eq!(take_approved(&ledger, "sha256:00", "rev-2", &ana).await.unwrap(), None);
        // Another caller's identical call does not take this approval, nor
        // the same `sub` vouched for by another issuer sharing the store.
        for other in [
            caller("https://idp-a.example", "mallory"),
            caller("https://idp-b.example", "ana"),
            caller("", "ana"),
            caller("https://idp-a.exampleana", ""),
        ] {
            assert_eq!(
                take_approved(&ledger, "sha256:00", "rev-1", &other).await.unwrap(),
                None
            );
        }
        assert_eq!(
            take_approved(&ledger, "sha256:00", "rev-1", &ana).await.unwrap(),
            Some(p.id.clone())
        );
        assert_eq!(take_approved(&ledger, "sha256:00", "rev-1", &ana).await.unwrap(), None);
    }
}
