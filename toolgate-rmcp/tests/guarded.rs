//! `Guarded<S>` with rmcp's own client on both sides of an in-memory pipe:
//! what the client sees, what it may run, and what reaches the server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, ClientRequest,
    ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService, ServiceExt};
use serde_json::{Map, Value, json};
use std::future::Future;
use std::sync::{Arc, Mutex};
use toolgate::{Context, Engine, Surface};
use toolgate_rmcp::Guarded;

const POLICY: &str = "version: 1
defaults:
  operation_type: read_only
tool_policies:
  write_note:
    operation_type: transactional
    require_confirmation: true
  admin_reset:
    operation_type: transactional
    scopes: [admin]
";

/// A server with a read, a write and an admin tool, listed in pages of two;
/// it records every call it runs.
#[derive(Clone, Default, Debug)]
struct Notes {
    ran: Arc<Mutex<Vec<(String, Value)>>>,
    /// read_note taken off the list (the server changed its tools).
    withdrawn: Arc<std::sync::atomic::AtomicBool>,
    /// tools/list never answers.
    stalled: Arc<std::sync::atomic::AtomicBool>,
    /// write_note taken off the list.
    write_withdrawn: Arc<std::sync::atomic::AtomicBool>,
    /// read_note's `text` checked by a schema whose `anyOf` branches double
    /// at each of 48 levels: its decision runs until the guest's meter stops
    /// it (seconds).
    runaway: Arc<std::sync::atomic::AtomicBool>,
}

/// `{"$ref": "#/$defs/n0"}` where each `nK` is an `anyOf` of two refs to
/// `nK+1`, down to an integer: 2^48 branches for a string.
fn runaway_schema() -> Value {
    let mut defs = Map::new();
    for level in 0..48 {
        let next = json!({"$ref": format!("#/$defs/n{}", level + 1)});
        defs.insert(format!("n{level}"), json!({"anyOf": [next.clone(), next]}));
    }
    defs.insert("n48".into(), json!({"type": "integer"}));
    json!({"type": "object", "properties": {"text": {"$ref": "#/$defs/n0"}}, "$defs": defs})
}

fn tool(name: &str, read_only: bool) -> Tool {
    serde_json::from_value(json!({
        "name": name,
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": read_only},
    }))
    .unwrap()
}

#[allow(clippy::manual_async_fn)]
impl rmcp::ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + Send + '_ {
        async move {
            if self.stalled.load(std::sync::atomic::Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            let all: Vec<Tool> = [
                tool("read_note", true),
                tool("write_note", false),
                tool("admin_reset", false),
            ]
            .into_iter()
            .filter(|t| t.name != "read_note" || !self.withdrawn.load(std::sync::atomic::Ordering::SeqCst))
            .filter(|t| t.name != "write_note" || !self.write_withdrawn.load(std::sync::atomic::Ordering::SeqCst))
            .map(|mut t| {
                if t.name == "read_note" && self.runaway.load(std::sync::atomic::Ordering::SeqCst) {
                    t.input_schema = Arc::new(runaway_schema().as_object().unwrap().clone());
                }
                t
            })
            .collect();
            let start: usize = request.and_then(|r| r.cursor).map_or(0, |c| c.parse().unwrap());
            let mut page = ListToolsResult::with_all_items(all.iter().skip(start).take(2).cloned().collect());
            if start + 2 < all.len() {
                page.next_cursor = Some((start + 2).to_string());
            }
            Ok(page)
        }
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + '_ {
        async move {
            self.ran.lock().unwrap().push((
                request.name.to_string(),
                Value::Object(request.arguments.unwrap_or_default()),
            ));
            Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::text("done"),
            ])))
        }
    }
}

/// A client that declares elicitation and answers every request with `answer`.
#[derive(Clone)]
struct Person {
    answer: ElicitationAction,
    asked: Arc<Mutex<Vec<String>>>,
}

#[allow(clippy::manual_async_fn)]
impl rmcp::ClientHandler for Person {
    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + Send + '_ {
        async move {
            let message = serde_json::to_value(&request).unwrap()["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            self.asked.lock().unwrap().push(message);
            Ok(ElicitResult::new(self.answer.clone()))
        }
    }

    fn get_info(&self) -> ClientConfig {
        person_info()
    }
}

/// What every test client that stands for a person declares: elicitation.
fn person_info() -> ClientConfig {
    serde_json::from_value(json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "person", "version": "0"},
    }))
    .unwrap()
}

async fn serve<C: rmcp::ClientHandler>(server: Notes, context: Context, client: C) -> RunningService<RoleClient, C> {
    serve_guarded(server, context, client, |guarded| guarded).await
}

async fn serve_guarded<C: rmcp::ClientHandler>(
    server: Notes,
    context: Context,
    client: C,
    configure: impl FnOnce(Guarded<Notes>) -> Guarded<Notes>,
) -> RunningService<RoleClient, C> {
    let engine = Engine::cached().unwrap();
    let guarded = configure(Guarded::new(server, engine, Some(POLICY), context).unwrap());
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = guarded.serve(theirs).await {
            let _ = running.waiting().await;
        }
    });
    client.serve(ours).await.unwrap()
}

/// The error a call gets, its tool's name written `X`: a hidden, a withdrawn
/// and an absent tool must be refused alike.
async fn refusal<C: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, C>,
    params: CallToolRequestParams,
) -> String {
    let name = params.name.to_string();
    client
        .call_tool(params)
        .await
        .unwrap_err()
        .to_string()
        .replace(&name, "X")
}

fn arguments(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn code(result: &CallToolResult) -> Option<String> {
    if result.is_error != Some(true) {
        return None;
    }
    let text = serde_json::to_value(&result.content[0]).unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let decision: Value = serde_json::from_str(&text).unwrap();
    decision["error"]["code"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_cannot_be_asked_gets_the_engines_answers_and_nothing_unconfirmed_runs() {
    let server = Notes::default();
    let route = Context::from_flags(Surface::Confirming, Some(""), Some("read_note,write_note"));
    let client = serve(server.clone(), route, ()).await;

    // Every page of the server's catalog, filtered: admin_reset is not on
    // this route's allowlist.
    let listed: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(listed, vec!["read_note", "write_note"]);

    let read = client
        .call_tool(CallToolRequestParams::new("read_note").with_arguments(arguments(json!({"text": "a"}))))
        .await
        .unwrap();
    assert_eq!(code(&read), None);

    // The model's own `confirmed: true` does not confirm.
    let write = client
        .call_tool(
            CallToolRequestParams::new("write_note").with_arguments(arguments(json!({"text": "b", "confirmed": true}))),
        )
        .await
        .unwrap();
    assert_eq!(code(&write).as_deref(), Some("CONFIRMATION_REQUIRED"));

    // Hidden and absent tools: the same error, and neither runs.
    let hidden = refusal(&client, CallToolRequestParams::new("admin_reset")).await;
    let absent = refusal(&client, CallToolRequestParams::new("no_such_tool")).await;
    assert_eq!(hidden, absent);

    let ran = server.ran.lock().unwrap().clone();
    assert_eq!(ran, vec![("read_note".to_owned(), json!({"text": "a"}))]);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_is_asked_and_only_an_accept_runs_the_exact_call() {
    let server = Notes::default();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let yes = Person {
        answer: ElicitationAction::Accept,
        asked: asked.clone(),
    };
    let client = serve(server.clone(), Context::default(), yes).await;
    let write = client
        .call_tool(
            CallToolRequestParams::new("write_note")
                .with_arguments(arguments(json!({"text": "ok\u{202e}txt", "confirmed": true}))),
        )
        .await
        .unwrap();
    assert_eq!(code(&write), None, "{write:?}");
    let question = asked.lock().unwrap()[0].clone();
    assert!(
        question.contains("write_note") && question.contains("\\u{202E}"),
        "{question}"
    );
    // The engine's arguments: the model's `confirmed` is gone.
    assert_eq!(
        server.ran.lock().unwrap().clone(),
        vec![("write_note".to_owned(), json!({"text": "ok\u{202e}txt"}))]
    );
    client.cancel().await.unwrap();

    let server = Notes::default();
    let no = Person {
        answer: ElicitationAction::Decline,
        asked: Arc::default(),
    };
    let client = serve(server.clone(), Context::default(), no).await;
    assert_write_held(client, &server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_context_decides_what_is_listed_and_a_bad_policy_stops_at_start() {
    let server = Notes::default();
    let direct = Context::from_flags(Surface::Direct, Some("admin"), None);
    let client = serve(server.clone(), direct, ()).await;
    let listed: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    // The direct surface shows only reads that need no confirmation.
    assert_eq!(listed, vec!["read_note"]);
    client.cancel().await.unwrap();

    let engine = Engine::cached().unwrap();
    let error = Guarded::new(
        Notes::default(),
        engine,
        Some("version: 1\ntool_policies:\n  x:\n    require_confirmation: \"yes\"\n"),
        Context::default(),
    )
    .unwrap_err();
    assert!(error.code().starts_with("POLICY_"), "{error}");
    assert!(error.to_string().contains("4:"), "{error}");
}

/// Raw JSON-RPC lines: a `tools/call` with params that do not fit its type,
/// and one sent as a notification, reach nothing; the session goes on.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_and_notification_calls_never_reach_the_server() {
    use tokio::io::AsyncWriteExt;
    let server = Notes::default();
    let (mut lines, mut write) = raw_client_of(&server);
    let write_args = r#"{"text":"x","confirmed":true}"#;
    let sent = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":["write_note"],"arguments":{write_args}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"write_note","arguments":{write_args}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"write_note","arguments":{write_args}}}}}"#),
    ];
    for line in &sent {
        write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    }
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 3 {
        let line = lines.next_line().await.unwrap().unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = message.get("id").and_then(Value::as_i64) {
            answers.insert(id, message);
        }
    }
    assert!(answers[&2].get("error").is_some(), "{}", answers[&2]);
    // Only the well-formed request ran (the model's word trusted here), with
    // the engine's arguments.
    assert!(answers[&3].get("result").is_some(), "{}", answers[&3]);
    assert_eq!(
        server.ran.lock().unwrap().clone(),
        vec![("write_note".to_owned(), json!({"text": "x"}))]
    );
}

/// A tool the server withdrew after the client listed its tools is not run
/// by its old entry: every call is decided by the server's tools as they
/// are then.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_is_decided_by_the_servers_tools_as_they_are_at_that_call() {
    let server = Notes::default();
    let client = serve(server.clone(), Context::default(), ()).await;
    let listed = client.list_all_tools().await.unwrap();
    assert!(listed.iter().any(|t| t.name == "read_note"));
    let call = || CallToolRequestParams::new("read_note").with_arguments(arguments(json!({"text": "a"})));
    let read = client.call_tool(call()).await.unwrap();
    assert_eq!(code(&read), None);

    server.withdrawn.store(true, std::sync::atomic::Ordering::SeqCst);
    // No tools/list in between.
    let after = refusal(&client, call()).await;
    let absent = refusal(&client, CallToolRequestParams::new("no_such_tool")).await;
    assert_eq!(after, absent);
    assert_eq!(server.ran.lock().unwrap().len(), 1);
    client.cancel().await.unwrap();
}

/// A server whose tools/list never answers is a fault for the call waiting
/// on it, not a call that hangs (holding every later one) or runs; once it
/// lists again, calls are decided again.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_does_not_list_its_tools_in_time_runs_nothing() {
    let server = Notes::default();
    let client = serve_guarded(server.clone(), Context::default(), (), |guarded| {
        guarded.list_timeout(std::time::Duration::from_millis(300))
    })
    .await;
    let call = || CallToolRequestParams::new("read_note").with_arguments(arguments(json!({"text": "a"})));

    server.stalled.store(true, std::sync::atomic::Ordering::SeqCst);
    let stalled = client.call_tool(call()).await.unwrap_err().to_string();
    assert!(stalled.contains("did not list its tools in time"), "{stalled}");
    let listing = client.list_all_tools().await.unwrap_err().to_string();
    assert!(listing.contains("did not list its tools in time"), "{listing}");
    assert!(server.ran.lock().unwrap().is_empty());

    server.stalled.store(false, std::sync::atomic::Ordering::SeqCst);
    let read = client.call_tool(call()).await.unwrap();
    assert_eq!(code(&read), None);
    assert_eq!(server.ran.lock().unwrap().len(), 1);
    client.cancel().await.unwrap();
}

/// Trusting the model's `confirmed: true` is for clients that cannot be
/// asked: a client that elicits is asked all the same, and a no stands.
#[tokio::test(flavor = "multi_thread")]
async fn the_models_word_is_not_taken_where_the_person_can_be_asked() {
    let server = Notes::default();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let no = Person {
        answer: ElicitationAction::Decline,
        asked: asked.clone(),
    };
    let client = serve_guarded(server.clone(), Context::default(), no, |guarded| {
        guarded.trust_model_confirmation(true)
    })
    .await;
    let write = client
        .call_tool(
            CallToolRequestParams::new("write_note").with_arguments(arguments(json!({"text": "c", "confirmed": true}))),
        )
        .await
        .unwrap();
    assert_eq!(code(&write).as_deref(), Some("CONFIRMATION_REQUIRED"));
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert!(server.ran.lock().unwrap().is_empty());
    client.cancel().await.unwrap();
}

/// A person who accepts, while the server withdraws the tool they are asked
/// about (before answering).
#[derive(Clone)]
struct AcceptsWhileWithdrawn {
    server: Notes,
}

#[allow(clippy::manual_async_fn)]
impl rmcp::ClientHandler for AcceptsWhileWithdrawn {
    fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + Send + '_ {
        async move {
            self.server
                .write_withdrawn
                .store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(ElicitResult::new(ElicitationAction::Accept))
        }
    }

    fn get_info(&self) -> ClientConfig {
        person_info()
    }
}

/// A yes is about the tool as it was when the person was asked: a tool the
/// server changed or withdrew meanwhile does not run on it.
#[tokio::test(flavor = "multi_thread")]
async fn a_yes_given_while_the_tool_changed_does_not_run_it() {
    let server = Notes::default();
    let client = serve(
        server.clone(),
        Context::default(),
        AcceptsWhileWithdrawn { server: server.clone() },
    )
    .await;
    assert_write_held(client, &server).await;
}

/// A person who answers "accept" only when told to, so the call can be
/// cancelled while they are asked.
#[derive(Clone)]
struct LatePerson {
    asked: Arc<tokio::sync::Notify>,
    answer_now: Arc<tokio::sync::Notify>,
}

#[allow(clippy::manual_async_fn)]
impl rmcp::ClientHandler for LatePerson {
    fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + Send + '_ {
        async move {
            self.asked.notify_one();
            self.answer_now.notified().await;
            Ok(ElicitResult::new(ElicitationAction::Accept))
        }
    }

    fn get_info(&self) -> ClientConfig {
        person_info()
    }
}

/// A call the client cancels while its person is asked runs nothing, though
/// the person accepts afterwards (review 25: it ran).
#[tokio::test(flavor = "multi_thread")]
async fn a_call_cancelled_while_its_person_is_asked_does_not_run_on_a_later_accept() {
    let server = Notes::default();
    let person = LatePerson {
        asked: Arc::default(),
        answer_now: Arc::default(),
    };
    let client = serve(server.clone(), Context::default(), person.clone()).await;
    let write = CallToolRequestParams::new("write_note").with_arguments(arguments(json!({"text": "withdrawn"})));
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(write)),
            rmcp::service::PeerRequestOptions::default(),
        )
        .await
        .unwrap();
    person.asked.notified().await;
    handle.cancel(Some("stop".into())).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    person.answer_now.notify_one();
    // A later call on the same connection is answered: the guard has moved on.
    client.list_tools(None).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(server.ran.lock().unwrap().is_empty());
    client.cancel().await.unwrap();
}

/// A call with more arguments than a person can check is not asked about:
/// held back, unasked, and nothing ran.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_too_large_to_show_a_person_is_not_asked_about() {
    let server = Notes::default();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let yes = Person {
        answer: ElicitationAction::Accept,
        asked: asked.clone(),
    };
    let client = serve(server.clone(), Context::default(), yes).await;
    let text = "x".repeat(toolgate_rmcp::MAX_SHOWN_ARGUMENTS);
    let write = client
        .call_tool(CallToolRequestParams::new("write_note").with_arguments(arguments(json!({ "text": text }))))
        .await
        .unwrap();
    assert_eq!(code(&write).as_deref(), Some("CONFIRMATION_REQUIRED"));
    assert!(asked.lock().unwrap().is_empty());
    assert!(server.ran.lock().unwrap().is_empty());
    client.cancel().await.unwrap();
}

/// A write the person did not confirm: held back, and nothing ran.
async fn assert_write_held<C: rmcp::ClientHandler>(client: RunningService<RoleClient, C>, server: &Notes) {
    let write = client
        .call_tool(CallToolRequestParams::new("write_note").with_arguments(arguments(json!({"text": "c"}))))
        .await
        .unwrap();
    assert_eq!(code(&write).as_deref(), Some("CONFIRMATION_REQUIRED"));
    assert!(server.ran.lock().unwrap().is_empty());
    client.cancel().await.unwrap();
}

/// The list is decided for this guard's caller: private to their client (on
/// this handshake-era connection rmcp leaves an absent `cacheScope` absent).
#[tokio::test(flavor = "multi_thread")]
async fn the_listing_is_private_to_the_caller() {
    let client = serve(Notes::default(), Context::default(), ()).await;
    let listed = client.list_tools(None).await.unwrap();
    assert_eq!(listed.cache_scope, Some(rmcp::model::CacheScope::Private));
    client.cancel().await.unwrap();
}

/// A decision the guest's meter has to stop takes seconds; on a
/// current-thread runtime the server must go on answering meanwhile (the
/// decision runs off the async threads, as a load does). A listing asked for
/// meanwhile waits for the rule set the decision holds, off the async
/// threads too: a ping sent after both (their requests are written first) is
/// answered first, and the listing comes once the decision is over.
#[tokio::test(flavor = "current_thread")]
async fn a_runaway_decision_does_not_stall_a_current_thread_server() {
    let server = Notes::default();
    server.runaway.store(true, std::sync::atomic::Ordering::SeqCst);
    let client = serve(server.clone(), Context::default(), ()).await;
    let slow =
        client.call_tool(CallToolRequestParams::new("read_note").with_arguments(arguments(json!({"text": "x"}))));
    tokio::pin!(slow);
    let listing = client.list_tools(None);
    tokio::pin!(listing);
    let ping = rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest::default());
    tokio::select! {
        biased;
        answer = &mut slow => panic!("the runaway call was answered before a ping sent after it: {answer:?}"),
        listed = &mut listing => panic!("the listing was answered while the decision held the rules: {listed:?}"),
        pong = client.send_request(ping) => { pong.unwrap(); }
    };
    let (answer, listed) = tokio::join!(slow, listing);
    assert_eq!(code(&answer.unwrap()).as_deref(), Some("ENGINE_LIMIT"));
    let names: Vec<String> = listed.unwrap().tools.iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"read_note".to_owned()), "{names:?}");
    assert!(server.ran.lock().unwrap().is_empty(), "nothing ran");
}

/// The shared table of what declares form elicitation
/// (tests/vectors/fixtures/form-elicitation.json), through a real handshake:
/// rmcp's own reading of the client's capabilities (`supported_elicitation_modes`)
/// decides whether the model's word counts, and it must agree with the rule
/// every other host applies. Capabilities rmcp's types cannot read end the
/// handshake, so nothing can be called on them.
#[tokio::test(flavor = "multi_thread")]
async fn the_handshake_reads_declared_form_elicitation_as_the_shared_table() {
    use tokio::io::AsyncWriteExt;
    let table: Value =
        serde_json::from_str(include_str!("../../tests/vectors/fixtures/form-elicitation.json")).unwrap();
    let mut handshakes = 0;
    for case in table["cases"].as_array().unwrap() {
        let (capabilities, declares_form) = (&case["capabilities"], case["declares_form"].as_bool().unwrap());
        let server = Notes::default();
        let (mut lines, mut write) = raw_client_of(&server);
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "0"}}});
        write.write_all(format!("{initialize}\n").as_bytes()).await.unwrap();
        let accepted = next_line(&mut lines)
            .await
            .is_some_and(|line| serde_json::from_str::<Value>(&line).unwrap().get("result").is_some());
        if !accepted {
            assert!(
                serde_json::from_value::<rmcp::model::ClientCapabilities>(capabilities.clone()).is_err(),
                "{capabilities}: a handshake rmcp can read was refused"
            );
            assert!(server.ran.lock().unwrap().is_empty());
            continue;
        }
        handshakes += 1;
        for line in [
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "write_note", "arguments": {"text": "x", "confirmed": true}}}),
        ] {
            write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        }
        let mut asked = false;
        let answer = loop {
            let message: Value = serde_json::from_str(&next_line(&mut lines).await.unwrap()).unwrap();
            if message["method"] == "elicitation/create" {
                asked = true;
                let decline = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"action": "decline"}});
                write.write_all(format!("{decline}\n").as_bytes()).await.unwrap();
            } else if message["id"] == 2 {
                break message;
            }
        };
        assert_eq!(asked, declares_form, "{capabilities}: asked? {answer}");
        let ran = !server.ran.lock().unwrap().is_empty();
        assert_eq!(ran, !declares_form, "{capabilities}: the model's word taken? {answer}");
    }
    assert!(handshakes >= 12, "only {handshakes} handshakes went through");
}

/// The next line, or None at the end; a hang guard only: every answer in
/// these tests comes at once.
async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut tokio::io::Lines<R>) -> Option<String> {
    tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
        .await
        .expect("the guarded server answers")
        .unwrap()
}

type RawLines = tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;

/// `server` guarded (the model's word trusted where the client cannot be
/// asked), served on an in-memory pipe: the lines it writes, and the half
/// a raw client writes JSON-RPC lines to.
fn raw_client_of(server: &Notes) -> (RawLines, tokio::io::WriteHalf<tokio::io::DuplexStream>) {
    use tokio::io::AsyncBufReadExt;
    let guarded = Guarded::new(
        server.clone(),
        Engine::cached().unwrap(),
        Some(POLICY),
        Context::default(),
    )
    .unwrap()
    .trust_model_confirmation(true);
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = guarded.serve(theirs).await {
            let _ = running.waiting().await;
        }
    });
    let (read, write) = tokio::io::split(ours);
    (tokio::io::BufReader::new(read).lines(), write)
}
