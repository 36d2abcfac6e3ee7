//! The gate ([`crate::gate`]) in front of the Streamable HTTP endpoint: every
//! POST body is admitted or answered here before the MCP session sees it.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use rmcp::model::ErrorCode;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use crate::auth::Caller;
use crate::gate::{self, Admission, MAX_MESSAGE_BYTES, RelayList};
use crate::gateway::Counted;
use crate::gateway::UpstreamLink;
use crate::owners::{Access, Full, Owners};
use crate::stdio::DropReport;

#[derive(Clone)]
pub struct GateState {
    pub relay: RelayList,
    pub report: DropReport,
    /// (session, request id) of the requests whose response is still being
    /// sent: a second request with the same id in the same session is refused.
    pub in_flight: Arc<Mutex<HashSet<(String, String)>>>,
    /// Who opened each session: another caller naming it is refused.
    pub owners: Arc<Owners>,
    /// How long a request's body is waited for (`BODY_WAIT`).
    pub body_wait: std::time::Duration,
    /// Requests admitted whose response is not sent yet: a stop waits for
    /// them (`--shutdown-grace`).
    pub busy: Arc<std::sync::atomic::AtomicUsize>,
    /// With `--auth`: requests in flight per subject
    /// (`--max-in-flight-per-caller`).
    pub per_caller: Option<Arc<CallerLoad>>,
    /// The JSON values of large messages being handled ([`large_messages`]).
    pub large: Arc<tokio::sync::Semaphore>,
    /// Whether a stop is draining (no new session is opened then).
    pub health: Arc<crate::metrics::Metrics>,
}

/// A message of more than this many JSON values is large: its handling
/// holds its values from [`LARGE_VALUES_IN_FLIGHT`] until its answer is
/// sent. Smaller ones (every ordinary call) are not counted.
pub const LARGE_MESSAGE_VALUES: usize = 1 << 14;
/// How many values large messages may hold at once over every session and
/// caller: two of the largest (review 24: with room for one, one slow call
/// refused every other large message). Memory goes with values (up to about
/// 1 KB each, at the peak, for a message of empty objects: review 22
/// measured 762 MB for 800 000), so this keeps large messages near 1 GB
/// together. A large message that does not fit is answered `503` at once,
/// never queued: a queue would make the calls behind it wait for it.
pub const LARGE_VALUES_IN_FLIGHT: usize = 2 * crate::gate::MAX_MESSAGE_VALUES;

/// The budget of [`LARGE_VALUES_IN_FLIGHT`].
pub fn large_messages() -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(LARGE_VALUES_IN_FLIGHT))
}

/// Requests in flight per subject, bounded: one caller's slow calls cannot
/// take every place the shared 2026-07-28 upstream session has (256) from
/// the others, nor the gateway's memory.
#[derive(Debug)]
pub struct CallerLoad {
    limit: usize,
    counts: Mutex<std::collections::HashMap<String, usize>>,
}

impl CallerLoad {
    pub fn new(limit: usize) -> CallerLoad {
        CallerLoad {
            limit,
            counts: Mutex::default(),
        }
    }

    /// A place for one more request of `subject`, or `None` at the bound.
    fn enter(self: &Arc<Self>, subject: &str) -> Option<CallerSlot> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(subject.to_owned()).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(CallerSlot {
            load: self.clone(),
            subject: subject.to_owned(),
        })
    }
}

/// One request's place in its caller's count, given back when its response
/// is sent or abandoned.
struct CallerSlot {
    load: Arc<CallerLoad>,
    subject: String,
}

impl Drop for CallerSlot {
    fn drop(&mut self) {
        let mut counts = self.load.counts.lock().unwrap_or_else(PoisonError::into_inner);
        crate::owners::release(&mut counts, &self.subject);
    }
}

/// Frees a request's id when its response body is done (or dropped).
struct Release {
    in_flight: Arc<Mutex<HashSet<(String, String)>>>,
    key: (String, String),
}

impl Drop for Release {
    fn drop(&mut self) {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

impl std::fmt::Debug for GateState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateState").finish_non_exhaustive()
    }
}

/// Reads the body, keeping at most `keep` bytes of it; stops reading once
/// more than `stop_past` bytes have come. The bytes kept and the count read;
/// `None` if the body fails.
pub(crate) async fn read_body(body: Body, keep: usize, stop_past: usize) -> Option<(Vec<u8>, usize)> {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut kept = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.ok()?;
        if let Ok(data) = frame.into_data() {
            total = total.saturating_add(data.len());
            let room = keep.saturating_sub(kept.len());
            kept.extend_from_slice(data.get(..data.len().min(room)).unwrap_or_default());
            if total > stop_past {
                break;
            }
        }
    }
    Some((kept, total))
}

/// A handshake-era session's `DELETE` is answered `200 OK` once the session
/// is closed, as the official TypeScript and Python servers answer it. rmcp
/// says `202 Accepted` (with no body), which the official Python client takes
/// for a failure and logs as a warning on every session it closes.
fn session_closed(mut response: Response) -> Response {
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// How much of an over-long body is still read (and dropped) before it is
/// answered: a client sends its whole body before it reads the answer, and
/// a connection closed on unread bytes is reset, which can destroy the
/// answer on its way (a 20 MB message got "broken pipe" instead of its
/// JSON-RPC error, now and then).
const READ_PAST_BOUND: usize = 48 * 1024 * 1024;

/// How long a request's body is waited for.
pub const BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

pub(crate) fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
}

/// The most of a refused request's body read so the connection can stay open.
const DRAIN_BYTES: usize = 64 * 1024;
/// How long a refused request's body is waited for.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Sends an answer given before the request's body was needed (a refusal
/// made on the headers) only once that body is read. hyper keeps such a
/// connection alive only if the unread body is already in its buffer;
/// otherwise it closes the connection after the answer without saying so,
/// and a client that pools connections sends its next request into the
/// closing socket ("Server disconnected without sending a response"). A body
/// longer than `DRAIN_BYTES` or slower than `DRAIN_WAIT` is not waited for:
/// the answer says `Connection: close`, so the client does not reuse it.
pub(crate) async fn answer_after_body(body: Body, answer: Response) -> Response {
    let drained = matches!(
        tokio::time::timeout(DRAIN_WAIT, read_body(body, 0, DRAIN_BYTES)).await,
        Ok(Some((_, total))) if total <= DRAIN_BYTES
    );
    if drained { answer } else { closing(answer) }
}

/// A JSON response (axum's `json` feature is left off to keep the build lean).
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(value).unwrap_or_default(),
    )
        .into_response()
}

/// What the session layer answers for a session it does not know; a
/// session another caller opened gets the same, so its existence is not told.
fn no_such_session() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Not Found: Session not found",
    )
        .into_response()
}

/// The answer to an `initialize` past a session bound: `429`, with a
/// JSON-RPC error the client can show (`TOO_MANY_SESSIONS`, retryable once
/// a session is closed).
fn too_many_sessions(id: &rmcp::model::RequestId, full: Full) -> Response {
    let message = match full {
        Full::Gateway => {
            "toolgate proxy: the gateway has as many sessions open as it takes (--max-sessions); \
             try again once one is closed"
        }
        Full::Caller => {
            "toolgate proxy: this caller has as many sessions open as one caller may \
             (--max-sessions-per-caller); close one (DELETE) or let one expire, then try again"
        }
    };
    too_many(id, "TOO_MANY_SESSIONS", message, "5")
}

/// The answer to a request past `--max-in-flight-per-caller`: `429`, with a
/// JSON-RPC error (`TOO_MANY_REQUESTS`, retryable once one is answered).
fn too_many_requests(id: &rmcp::model::RequestId) -> Response {
    let message = "toolgate proxy: this caller has as many requests in flight as one caller may \
                   (--max-in-flight-per-caller); try again once one is answered";
    too_many(id, "TOO_MANY_REQUESTS", message, "1")
}

/// `429` with `Retry-After` and a JSON-RPC error naming the gateway's `code`.
fn too_many(id: &rmcp::model::RequestId, code: &str, message: &'static str, retry_after: &'static str) -> Response {
    let error = rmcp::model::ErrorData::new(
        ErrorCode(SERVER_ERROR_CODE),
        message,
        Some(serde_json::json!({ "toolgate": code })),
    );
    let mut response = json(StatusCode::TOO_MANY_REQUESTS, &gate::error_message(Some(id), &error));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, axum::http::HeaderValue::from_static(retry_after));
    response
}

/// The answer to a large message while others hold the values in flight:
/// `503` with `Retry-After`, and a JSON-RPC error `GATEWAY_BUSY`.
fn gateway_busy(id: Option<&rmcp::model::RequestId>) -> Response {
    let error = rmcp::model::ErrorData::new(
        ErrorCode(SERVER_ERROR_CODE),
        "toolgate proxy: the gateway is handling as many large messages as it takes at once; try again shortly",
        Some(serde_json::json!({ "toolgate": "GATEWAY_BUSY" })),
    );
    let mut response = json(StatusCode::SERVICE_UNAVAILABLE, &gate::error_message(id, &error));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
    response
}

/// The answer to an `initialize` while a stop drains: `503` with
/// `Retry-After` and a JSON-RPC error `SHUTTING_DOWN`. A session opened now
/// would be ended within `--shutdown-grace`, with whatever its client had
/// begun; refused, the client opens it on another replica (or on this one
/// once restarted). Requests on open sessions, and MCP 2026-07-28 requests,
/// which open none, are still served while the drain lasts.
fn shutting_down(id: &rmcp::model::RequestId) -> Response {
    let error = rmcp::model::ErrorData::new(
        ErrorCode(SERVER_ERROR_CODE),
        "toolgate proxy: the gateway is stopping and opens no new session; try again shortly",
        Some(serde_json::json!({ "toolgate": "SHUTTING_DOWN" })),
    );
    let mut response = json(StatusCode::SERVICE_UNAVAILABLE, &gate::error_message(Some(id), &error));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
    response
}

/// JSON-RPC's first implementation-defined server error.
const SERVER_ERROR_CODE: i32 = -32000;

fn session_of(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// `response`, with `held` dropped once its body (a JSON body or an SSE
/// stream) has been sent or abandoned.
fn held_until_sent<T: Send + Sync + 'static>(response: Response, held: T) -> Response {
    response.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _held = &held;
            chunk
        }))
    })
}

pub async fn gate(State(state): State<Arc<GateState>>, request: Request, next: Next) -> Response {
    // The auth layer runs first; without `--auth` every caller is "".
    let subject = request
        .extensions()
        .get::<Arc<Caller>>()
        .map(|caller| caller.subject.clone())
        .unwrap_or_default();
    let session = session_of(request.headers());
    if let Some(session) = &session
        && state.owners.access(session, &subject) == Access::Foreign
    {
        tracing::info!(subject, "a request named a session another caller opened: refused");
        return answer_after_body(request.into_body(), no_such_session()).await;
    }
    if let Some(session) = &session
        && request.method() != Method::DELETE
        && state.owners.close_if_upstream_ended(session).await
    {
        tracing::warn!("a handshake-era session's upstream session had ended: closed; its client initializes again");
        return answer_after_body(request.into_body(), no_such_session()).await;
    }
    if request.method() == Method::DELETE {
        // rmcp answers a DELETE of any id as done; one it does not have gets
        // the 404 another caller's session gets, so a DELETE tells nothing
        // of which ids are live (review 28).
        if let Some(session) = &session
            && !state.owners.is_open(session).await
        {
            return answer_after_body(request.into_body(), no_such_session()).await;
        }
        let response = session_closed(next.run(request).await);
        if let Some(session) = &session
            && response.status().is_success()
        {
            state.owners.closed(session);
        }
        return response;
    }
    if request.method() != Method::POST {
        // A GET's answer is a stream that stays open (rmcp serves every GET
        // on a session, a second one as a "shadow" stream): it holds one of
        // its caller's places in flight while it is open, or one token could
        // hold every connection the gateway serves (review 22).
        let slot = match (request.method() == Method::GET, &state.per_caller) {
            (true, Some(load)) => match load.enter(&subject) {
                Some(slot) => Some(slot),
                None => {
                    tracing::info!(subject, "a GET stream was refused: too many in flight for its caller");
                    let refused = (
                        StatusCode::TOO_MANY_REQUESTS,
                        [(header::RETRY_AFTER, "1")],
                        "Too Many Requests: this caller has as many requests and streams open as one caller may \
                         (--max-in-flight-per-caller)",
                    );
                    return answer_after_body(request.into_body(), refused.into_response()).await;
                }
            },
            _ => None,
        };
        // A GET stream open on a session is its client's activity.
        let active = session.as_deref().and_then(|session| state.owners.active(session));
        let response = next.run(request).await;
        return match (slot, active) {
            (None, None) => response,
            held => held_until_sent(response, held),
        };
    }
    let (mut parts, body) = request.into_parts();
    // `MAX_MESSAGE_BYTES + 1` bytes are enough to tell an over-long body
    // and to find its id; no more is kept, and a body is waited for at most
    // `body_wait`, so a client cannot hold the gateway's memory with bodies
    // it sends slowly or without end.
    let read = tokio::time::timeout(
        state.body_wait,
        read_body(body, MAX_MESSAGE_BYTES + 1, MAX_MESSAGE_BYTES + READ_PAST_BOUND),
    )
    .await;
    let Ok(read) = read else {
        return closing((StatusCode::REQUEST_TIMEOUT, "the request body did not arrive in time").into_response());
    };
    let Some((bytes, total)) = read else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    if total > MAX_MESSAGE_BYTES {
        let answer = json(
            StatusCode::BAD_REQUEST,
            &gate::too_large(&bytes).answer().unwrap_or_default(),
        );
        // Read to its end, the body leaves the connection usable; past
        // that, the rest is left unread and the connection is not reused.
        return if total > MAX_MESSAGE_BYTES + READ_PAST_BOUND {
            closing(answer)
        } else {
            answer
        };
    }
    // Counted on the bytes before anything is built from them; a message
    // past `MAX_MESSAGE_VALUES` is refused by `admit` itself.
    let values = gate::values_at_most(&bytes);
    let large = match values {
        values @ LARGE_MESSAGE_VALUES.. if values <= gate::MAX_MESSAGE_VALUES => {
            let permits = u32::try_from(values).unwrap_or(u32::MAX);
            match state.large.clone().try_acquire_many_owned(permits) {
                Ok(permit) => Some(permit),
                Err(_) => {
                    tracing::info!(
                        values,
                        "a large message was refused: as many large messages in flight as taken"
                    );
                    return gateway_busy(gate::scan_id(&bytes).as_ref());
                }
            }
        }
        _ => None,
    };
    let admission = gate::admit_counted(&bytes, values, &state.relay);
    match admission {
        Admission::Admit(message) => {
            // A place for the session an `initialize` opens, held until its
            // answer says the session's id (or that none was opened).
            let _opening = match (&*message, &session) {
                (JsonRpcMessage::Request(r), None) if matches!(r.request, ClientRequest::InitializeRequest(_)) => {
                    if state.health.is_draining() {
                        tracing::info!(subject, "an initialize was refused: the gateway is stopping");
                        return shutting_down(&r.id);
                    }
                    match state.owners.open(&subject).await {
                        Ok(opening) => Some(opening),
                        Err(full) => {
                            tracing::warn!(subject, ?full, "an initialize was refused: too many open sessions");
                            return too_many_sessions(&r.id, full);
                        }
                    }
                }
                _ => None,
            };
            // The new session's state tells the gate, through this, when its
            // upstream session ends.
            let upstream = Arc::new(UpstreamLink::default());
            if _opening.is_some() {
                parts.extensions.insert(upstream.clone());
            }
            // Ids are per session; a request without a session (initialize)
            // is not tracked: clients starting at once may share an id.
            let release = match (&*message, session.clone()) {
                (JsonRpcMessage::Request(r), Some(session)) => {
                    let key = (session, r.id.to_string());
                    let fresh = state
                        .in_flight
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(key.clone());
                    if !fresh {
                        // Two requests in flight with one id would get each
                        // other's answers: the second is refused.
                        let refused = gate::id_in_flight(&r.id);
                        return json(StatusCode::BAD_REQUEST, &refused.answer().unwrap_or_default());
                    }
                    Some(Release {
                        in_flight: state.in_flight.clone(),
                        key,
                    })
                }
                _ => None,
            };
            let slot = match (&*message, &state.per_caller) {
                (JsonRpcMessage::Request(r), Some(load)) => match load.enter(&subject) {
                    Some(slot) => Some(slot),
                    None => {
                        tracing::info!(subject, "a request was refused: too many in flight for its caller");
                        return too_many_requests(&r.id);
                    }
                },
                _ => None,
            };
            // Counted in `GateState::busy` until its response (a JSON body or
            // an SSE stream) is sent or abandoned.
            let busy = matches!(&*message, JsonRpcMessage::Request(_)).then(|| Counted::new(&state.busy));
            let active = session.as_deref().and_then(|session| state.owners.active(session));
            // The session layer reads the body again; the gate's own reading
            // of it is not kept while the request runs (a large message's
            // tree would be held twice for as long as its call takes).
            drop(message);
            let response = next
                .run(Request::from_parts(parts, Body::from(Bytes::from(bytes))))
                .await;
            if session.is_none()
                && let Some(opened) = session_of(response.headers())
            {
                state.owners.opened(&opened, &subject, upstream).await;
            }
            match (release, busy, slot, active, large) {
                (None, None, None, None, None) => response,
                // The id is free, and the request no longer in flight, once
                // the response (a JSON body or an SSE stream) has been sent
                // or abandoned.
                held => held_until_sent(response, held),
            }
        }
        Admission::Drop { method, why } => {
            (state.report)(&method, &why);
            StatusCode::ACCEPTED.into_response()
        }
        refused @ Admission::Refuse { .. } => {
            let status = match &refused {
                // A message that is not a request the server can read is a
                // bad HTTP request; a readable one gets its JSON-RPC answer.
                Admission::Refuse { error, .. }
                    if error.code == ErrorCode::PARSE_ERROR || error.code == ErrorCode::INVALID_REQUEST =>
                {
                    StatusCode::BAD_REQUEST
                }
                _ => StatusCode::OK,
            };
            json(status, &refused.answer().unwrap_or_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal() -> Response {
        json(StatusCode::UNAUTHORIZED, &serde_json::json!({"error": "invalid_token"}))
    }

    fn closes(response: &Response) -> bool {
        response
            .headers()
            .get(header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"))
    }

    /// A body read to its end leaves the connection open; one past the bound
    /// is not read on, and the answer closes the connection instead.
    #[tokio::test]
    async fn a_refusal_closes_the_connection_only_when_the_body_is_left_unread() {
        let small = answer_after_body(Body::from(vec![b'x'; 1024]), refusal()).await;
        assert_eq!(small.status(), StatusCode::UNAUTHORIZED);
        assert!(!closes(&small));
        let exact = answer_after_body(Body::from(vec![b'x'; DRAIN_BYTES]), refusal()).await;
        assert!(!closes(&exact));
        let large = answer_after_body(Body::from(vec![b'x'; DRAIN_BYTES + 1]), refusal()).await;
        assert_eq!(large.status(), StatusCode::UNAUTHORIZED);
        assert!(closes(&large));
    }

    /// A body that does not finish within the wait (1 s, real time) is not
    /// waited for.
    #[tokio::test]
    async fn a_refusal_does_not_wait_for_a_stalled_body() {
        let stalled = Body::from_stream(futures_util::stream::pending::<Result<Bytes, std::io::Error>>());
        let answer = answer_after_body(stalled, refusal()).await;
        assert!(closes(&answer));
    }

    /// The gate keeps a prefix of an over-long body but reads it to the end,
    /// so its size is known; a drain stops once past its bound.
    #[tokio::test]
    async fn a_body_is_kept_up_to_its_bound_and_counted() {
        let (kept, total) = read_body(Body::from(vec![b'x'; 5000]), 1000, usize::MAX).await.unwrap();
        assert_eq!((kept.len(), total), (1000, 5000));
        let chunks = futures_util::stream::iter((0..10).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 100]))));
        let (kept, total) = read_body(Body::from_stream(chunks), 0, 250).await.unwrap();
        assert_eq!((kept.len(), total), (0, 300));
    }

    /// A gate in front of a handler that counts what reaches it, served on
    /// a loopback port; raw HTTP/1.1 on a socket, so a body can be sent
    /// without end or not at all.
    async fn gated(body_wait: std::time::Duration) -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        gated_with(body_wait, large_messages(), Arc::default()).await
    }

    async fn gated_with(
        body_wait: std::time::Duration,
        large: Arc<tokio::sync::Semaphore>,
        health: Arc<crate::metrics::Metrics>,
    ) -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = reached.clone();
        let state = Arc::new(GateState {
            relay: RelayList::default(),
            report: Arc::new(|_: &str, _: &str| {}),
            in_flight: Arc::default(),
            busy: Arc::default(),
            per_caller: None,
            owners: Arc::new(Owners::new(
                Arc::new(LocalSessionManager::default()),
                crate::owners::SessionLimits {
                    total: usize::MAX,
                    per_caller: None,
                },
            )),
            body_wait,
            large,
            health,
        });
        let router = axum::Router::new()
            .route(
                "/mcp",
                axum::routing::post(move || {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    async { StatusCode::OK }
                }),
            )
            .layer(axum::middleware::from_fn_with_state(state, gate));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        (addr, reached)
    }

    /// Sends `head` then `chunk` again and again (none: nothing more) until
    /// the server answers; the answer's head.
    async fn answer_to(addr: std::net::SocketAddr, head: &str, chunk: Option<&[u8]>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut read, mut write) = stream.into_split();
        write.write_all(head.as_bytes()).await.unwrap();
        if let Some(chunk) = chunk {
            let chunk = chunk.to_vec();
            tokio::spawn(async move {
                let framed = [format!("{:x}\r\n", chunk.len()).into_bytes(), chunk, b"\r\n".to_vec()].concat();
                while write.write_all(&framed).await.is_ok() {}
            });
        } else {
            tokio::spawn(async move {
                std::future::pending::<()>().await;
                drop(write);
            });
        }
        let mut answer = vec![0u8; 4096];
        let n = read.read(&mut answer).await.unwrap();
        String::from_utf8_lossy(answer.get(..n).unwrap_or_default()).into_owned()
    }

    /// A body without end is read only up to the bound, answered `-32600`
    /// and the connection closed; nothing reaches the session.
    #[tokio::test]
    async fn a_body_without_end_is_refused_at_the_bound() {
        let (addr, reached) = gated(BODY_WAIT).await;
        let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        let answer = answer_to(addr, head, Some(&[b' '; 1 << 16])).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
        assert!(answer.contains("-32600") && answer.contains("larger than"), "{answer}");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    /// A body that does not come is waited for only `body_wait`.
    #[tokio::test]
    async fn a_body_that_does_not_come_is_not_waited_for() {
        let (addr, reached) = gated(std::time::Duration::from_millis(300)).await;
        let head =
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
        let answer = answer_to(addr, head, None).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    /// Large messages take their values from one budget while they are
    /// handled; one that does not fit is answered `503` at once, while an
    /// ordinary message is not counted and goes through.
    #[tokio::test]
    async fn large_messages_share_a_budget_and_one_that_does_not_fit_is_answered_at_once() {
        let large = large_messages();
        let (addr, reached) = gated_with(BODY_WAIT, large.clone(), Arc::default()).await;
        let post = |values: usize| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"t","arguments":{{"a":[{}]}}}}}}"#,
                vec!["0"; values].join(",")
            );
            format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let reached_now = || reached.load(std::sync::atomic::Ordering::SeqCst);
        // Other large messages hold all but 1 000 values.
        let held = large
            .clone()
            .try_acquire_many_owned(u32::try_from(LARGE_VALUES_IN_FLIGHT - 1000).unwrap())
            .unwrap();
        let busy = answer_to(addr, &post(LARGE_MESSAGE_VALUES + 10), None).await;
        assert!(busy.starts_with("HTTP/1.1 503"), "{busy}");
        assert!(busy.contains("GATEWAY_BUSY") && busy.contains(r#""id":5"#), "{busy}");
        assert!(busy.to_ascii_lowercase().contains("retry-after: 1"), "{busy}");
        assert_eq!(reached_now(), 0);
        let small = answer_to(addr, &post(100), None).await;
        assert!(small.starts_with("HTTP/1.1 200"), "{small}");
        assert_eq!(reached_now(), 1);
        drop(held);
        let fits = answer_to(addr, &post(LARGE_MESSAGE_VALUES + 10), None).await;
        assert!(fits.starts_with("HTTP/1.1 200"), "{fits}");
        assert_eq!(reached_now(), 2);
        // Its values come back once its answer has been sent.
        for _ in 0..100 {
            if large.available_permits() == LARGE_VALUES_IN_FLIGHT {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(large.available_permits(), LARGE_VALUES_IN_FLIGHT);
    }

    /// Once a stop drains, an `initialize` is answered `503 SHUTTING_DOWN`
    /// and opens nothing; before it, the same message reaches the session.
    #[tokio::test]
    async fn a_draining_gateway_opens_no_new_session() {
        let health = Arc::new(crate::metrics::Metrics::new());
        let (addr, reached) = gated_with(BODY_WAIT, large_messages(), health.clone()).await;
        let body = r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let post = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let before = answer_to(addr, &post, None).await;
        assert!(before.starts_with("HTTP/1.1 200"), "{before}");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
        health.drain();
        let refused = answer_to(addr, &post, None).await;
        assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
        assert!(
            refused.contains("SHUTTING_DOWN") && refused.contains(r#""id":7"#),
            "{refused}"
        );
        assert!(refused.to_ascii_lowercase().contains("retry-after: 1"), "{refused}");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn a_closed_session_is_answered_ok() {
        assert_eq!(
            session_closed(StatusCode::ACCEPTED.into_response()).status(),
            StatusCode::OK
        );
        assert_eq!(
            session_closed(StatusCode::NOT_FOUND.into_response()).status(),
            StatusCode::NOT_FOUND
        );
    }
}
