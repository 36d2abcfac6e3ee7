//! The gateway fuzz harness: arbitrary client lines through one real gateway
//! session (the real component deciding) to a recording upstream in this
//! process. The invariant: every `tools/call` the upstream sees has an
//! allowing audit line, written before it, for that tool; nothing custom
//! reaches the upstream; the session keeps answering.
//!
//! Used by the cargo-fuzz target `fuzz/fuzz_targets/gateway.rs` and by the
//! replay test `proxy/tests/gateway_fuzz.rs` (which runs in `cargo test`).

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomNotification, CustomRequest,
    CustomResult, ErrorData, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, ServiceExt};
use serde_json::{Value, json};
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use toolgate::Engine;

use crate::audit::Audit;
use crate::confirm::Sealing;
use crate::ledger::Ledger as SealLedger;
use crate::seal::KeyRing;
use crate::stdio::ClientLines;
use crate::{Config, Connector, Gateway, UpstreamSpec};

const POLICY: &str = "version: 1
defaults:
  operation_type: read_only
  require_confirmation: false
tool_policies:
  write:
    operation_type: transactional
    require_confirmation: true
    requires: [path]
  admin:
    operation_type: read_only
    scopes: [admin]
";

/// The audit lines written so far, shared by the gateway and the upstream.
#[derive(Clone, Default)]
struct AuditBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for AuditBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the upstream checked.
#[derive(Default)]
struct Ledger {
    /// Tools of forwarding audit lines not yet matched to a call the
    /// upstream received (calls run concurrently: any order).
    pending: Vec<String>,
    calls: u64,
    violations: Vec<String>,
}

#[derive(Clone)]
struct Recorder {
    audit: AuditBuffer,
    ledger: Arc<Mutex<Ledger>>,
}

impl Recorder {
    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call reached the upstream: an audit line written before it must
    /// have forwarded an allowed call of this tool, not matched yet.
    fn saw_call(&self, tool: &str) {
        // The ledger is held from taking the lines to matching them: a
        // concurrent call's check that took this call's line must have put
        // it in `pending` before this one looks.
        let mut ledger = self.ledger();
        // Take the complete lines written so far out of the buffer: each is
        // read once, and the buffer stays small over a long fuzzing run.
        let lines = {
            let mut audit = self.audit.0.lock().unwrap_or_else(PoisonError::into_inner);
            let complete = audit.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
            audit.drain(..complete).collect::<Vec<u8>>()
        };
        ledger.calls += 1;
        for line in lines.split_inclusive(|&b| b == b'\n') {
            let Ok(record) = serde_json::from_slice::<Value>(line) else {
                ledger.violations.push(format!("an audit line is not JSON: {line:?}"));
                continue;
            };
            if record.get("outcome").and_then(Value::as_str) != Some("forwarded") {
                continue;
            }
            if record.get("decision").and_then(Value::as_str) != Some("allowed") {
                ledger
                    .violations
                    .push(format!("a blocked decision was forwarded: {record}"));
                continue;
            }
            let name = record
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            ledger.pending.push(name);
        }
        match ledger.pending.iter().position(|t| t == tool) {
            Some(at) => {
                ledger.pending.remove(at);
            }
            None => ledger
                .violations
                .push(format!("upstream ran {tool:?} with no allowing audit line before it")),
        }
    }

    fn saw_custom(&self, what: &str) {
        self.ledger()
            .violations
            .push(format!("a custom message reached the upstream: {what}"));
    }
}

#[derive(Clone)]
struct RecordingUpstream(Recorder);

fn tool(name: &str, read_only: bool, schema: Value) -> Option<Tool> {
    serde_json::from_value(json!({
        "name": name,
        "inputSchema": schema,
        "annotations": { "readOnlyHint": read_only, "destructiveHint": !read_only },
    }))
    .ok()
}

#[allow(clippy::manual_async_fn, reason = "the trait asks for `impl Future + Send`")]
impl rmcp::ServerHandler for RecordingUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + Send + '_ {
        async move {
            let object = |props: Value| json!({ "type": "object", "properties": props });
            let tools = [
                tool("read", true, object(json!({ "q": { "type": "string" } }))),
                tool(
                    "write",
                    false,
                    object(json!({ "path": { "type": "string" }, "n": { "type": "integer", "maximum": 100 } })),
                ),
                tool("admin", true, object(json!({}))),
            ]
            .into_iter()
            .flatten()
            .collect();
            Ok(ListToolsResult::with_all_items(tools))
        }
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + '_ {
        async move {
            // The gateway's own probe (how does the upstream answer an
            // unknown tool?) names a tool no catalog has; it is not a
            // client's call.
            if !request.name.starts_with("toolgate-probe-") {
                self.0.saw_call(&request.name);
            }
            Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::text("ran"),
            ])))
        }
    }

    fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CustomResult, ErrorData>> + Send + '_ {
        async move {
            self.0.saw_custom(&format!("request {:?}", request.method));
            Err(ErrorData::method_not_found::<rmcp::model::CallToolRequestMethod>())
        }
    }

    fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = ()> + Send + '_ {
        async move {
            self.0.saw_custom(&format!("notification {:?}", notification.method));
        }
    }
}

/// One gateway session, kept across inputs (loading the rules once).
struct Harness {
    runtime: tokio::runtime::Runtime,
    to_gateway: WriteHalf<DuplexStream>,
    from_gateway: BufReader<ReadHalf<DuplexStream>>,
    recorder: Recorder,
    sync: u64,
}

static HARNESS: OnceLock<Result<Mutex<Harness>, String>> = OnceLock::new();

impl Harness {
    fn start() -> Result<Harness, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let engine = Engine::cached().map_err(|e| e.to_string())?;
        let audit = AuditBuffer::default();
        let recorder = Recorder {
            audit: audit.clone(),
            ledger: Arc::default(),
        };
        let upstream = RecordingUpstream(recorder.clone());
        let connector = Connector(Arc::new(move || {
            let (ours, theirs) = tokio::io::duplex(1 << 20);
            let server = upstream.clone();
            tokio::spawn(async move {
                if let Ok(running) = server.serve(theirs).await {
                    let _ = running.waiting().await;
                }
            });
            ours
        }));
        let sealing = Sealing {
            keys: KeyRing::ephemeral().map_err(|e| e.to_string())?,
            ledger: SealLedger::memory(),
            ttl: Duration::from_secs(60),
        };
        let policy = Arc::new(crate::policy::Policy::fixed(Some(POLICY.to_owned())));
        let mut config = Config::new(engine, policy, UpstreamSpec::InProcess(connector), sealing);
        // The argument path, so confirmed writes reach the upstream and the
        // invariant is checked on them too.
        config.trust_model_confirmation = true;
        config.timeout = Duration::from_secs(10);
        config.audit = Some(Audit::to_writer(Box::new(audit), false));
        let config = Arc::new(config);
        let (client, gateway_side) = tokio::io::duplex(1 << 20);
        let (to_gateway, from_gateway_raw) = {
            let (read, write) = tokio::io::split(client);
            (write, read)
        };
        let mut harness = Harness {
            runtime,
            to_gateway,
            from_gateway: BufReader::new(from_gateway_raw),
            recorder,
            sync: 0,
        };
        harness.runtime.block_on(async {
            let (read, write) = tokio::io::split(gateway_side);
            let transport = ClientLines::new(read, write, config.relay.clone(), Arc::new(|_: &str, _: &str| {}));
            let gateway = Gateway::new(config);
            tokio::spawn(async move {
                if let Ok(running) = gateway.serve(transport).await {
                    let _ = running.waiting().await;
                }
            });
        });
        let init = json!({"jsonrpc":"2.0","id":"toolgate-fuzz-init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}});
        harness.send_and_wait(
            format!("{init}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}").as_bytes(),
            "toolgate-fuzz-init",
        )?;
        Ok(harness)
    }

    /// Writes `lines`, then waits for the answer to the request `id` (sent
    /// last, or inside `lines`).
    fn send_and_wait(&mut self, lines: &[u8], id: &str) -> Result<(), String> {
        let Harness {
            runtime,
            to_gateway,
            from_gateway,
            ..
        } = self;
        runtime.block_on(async {
            to_gateway.write_all(lines).await.map_err(|e| e.to_string())?;
            to_gateway.write_all(b"\n").await.map_err(|e| e.to_string())?;
            let wait = async {
                let mut line = String::new();
                loop {
                    line.clear();
                    if from_gateway.read_line(&mut line).await.map_err(|e| e.to_string())? == 0 {
                        return Err("the gateway closed its output".to_owned());
                    }
                    let Ok(message) = serde_json::from_str::<Value>(&line) else {
                        return Err(format!("the gateway wrote a line that is not JSON: {line:?}"));
                    };
                    if message.get("id").and_then(Value::as_str) == Some(id) && message.get("method").is_none() {
                        return Ok(());
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(20), wait)
                .await
                .map_err(|_| format!("no answer to {id} within 20 s: the session hangs"))?
        })
    }

    fn run(&mut self, data: &[u8]) -> Result<(), String> {
        self.sync += 1;
        let id = format!("toolgate-fuzz-sync-{}", self.sync);
        let mut lines = data.to_vec();
        lines.push(b'\n');
        lines.extend_from_slice(json!({"jsonrpc":"2.0","id":id,"method":"ping"}).to_string().as_bytes());
        self.send_and_wait(&lines, &id)?;
        let ledger = self.recorder.ledger();
        match ledger.violations.first() {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }
}

/// Runs one fuzz input (client lines, `\n`-separated) through the shared
/// gateway session. `Err` names the broken invariant.
pub fn check_gateway(data: &[u8]) -> Result<(), String> {
    let harness = HARNESS.get_or_init(|| Harness::start().map(Mutex::new));
    let harness = harness
        .as_ref()
        .map_err(|e| format!("the harness did not start: {e}"))?;
    let mut harness = harness.lock().unwrap_or_else(PoisonError::into_inner);
    harness.run(data)
}

/// How many calls the recording upstream has run (replay tests check the
/// harness is not vacuous).
pub fn upstream_calls() -> u64 {
    match HARNESS.get() {
        Some(Ok(h)) => h.lock().unwrap_or_else(PoisonError::into_inner).recorder.ledger().calls,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
    use super::*;

    /// Calls reach the upstream concurrently, each after its own audit line:
    /// the recorder must never report one as unaudited. (It did when one
    /// call's check took the lines out of the buffer and another's matched
    /// them before the first had put them in the ledger: the CI failure of
    /// cd50242.)
    #[test]
    fn concurrent_calls_each_after_their_line_are_never_reported() {
        let recorder = Recorder {
            audit: AuditBuffer::default(),
            ledger: Arc::default(),
        };
        let threads: Vec<_> = ["read", "write", "admin", "read"]
            .into_iter()
            .map(|tool| {
                let recorder = recorder.clone();
                let mut audit = recorder.audit.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        let line = json!({ "tool": tool, "decision": "allowed", "outcome": "forwarded" });
                        audit.write_all(format!("{line}\n").as_bytes()).unwrap();
                        recorder.saw_call(tool);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let ledger = recorder.ledger();
        assert_eq!(ledger.calls, 400_000);
        assert_eq!(ledger.violations.first(), None);
        assert!(ledger.pending.is_empty(), "{:?}", ledger.pending);
    }
}
