//! The upstream child process: spawned in its own process group, its stdout
//! checked line by line (anything that is not a JSON-RPC message ends the
//! connection with a recorded fault instead of leaving requests hanging), and
//! stopped with the MCP stdio shutdown sequence when the session ends.

#[cfg(windows)]
use process_wrap::tokio::JobObject;
#[cfg(unix)]
use process_wrap::tokio::ProcessGroup;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::ChildStdin;
use tokio::sync::{Notify, oneshot};

use crate::ProxyError;

/// Largest line accepted from the upstream (a message).
const MAX_LINE: usize = 64 * 1024 * 1024;
#[cfg(unix)]
const SIGTERM: i32 = 15;

/// Why the upstream connection ended, once known.
#[derive(Debug, Default)]
pub struct Fault {
    why: Mutex<Option<String>>,
    known: Notify,
}

impl Fault {
    pub fn set(&self, why: String) {
        let mut slot = self.why.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(why);
        }
        drop(slot);
        self.known.notify_waiters();
    }

    fn get(&self) -> Option<String> {
        self.why
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The reason, waiting briefly for it (the exit status arrives a moment
    /// after stdout closes).
    pub async fn describe(&self) -> Option<String> {
        if let Some(why) = self.get() {
            return Some(why);
        }
        let notified = self.known.notified();
        let _ = tokio::time::timeout(Duration::from_millis(500), notified).await;
        self.get()
    }
}

/// A running child. Dropping it stops the child too (its supervisor sees the
/// stop channel close).
#[derive(Debug)]
pub struct Child {
    stop: Option<oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<()>>,
    pub pid: Option<u32>,
}

impl Child {
    /// Stops the child: its stdin is already closed by the transport; wait
    /// for it to exit, then SIGTERM its process group, then SIGKILL.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(done) = self.done.take() {
            let _ = tokio::time::timeout(Duration::from_secs(8), done).await;
        }
    }
}

pub struct Spawned {
    pub child: Child,
    pub reader: DuplexStream,
    pub writer: ChildStdin,
}

pub fn spawn(program: &str, args: &[String], fault: Arc<Fault>) -> Result<Spawned, ProxyError> {
    let spawn_error = |source| ProxyError::Spawn {
        command: program.to_owned(),
        source,
    };
    // `npx` and other launchers are `.cmd` scripts on Windows: resolve the
    // name the way the shell would, so `-- npx -y …` works there too.
    #[cfg(windows)]
    let program = &windows_program(program);
    let mut command = CommandWrap::with_new(program, |c| {
        c.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
    });
    // The server and everything it starts, stopped together: a process
    // group on Unix, a job object on Windows.
    #[cfg(unix)]
    command.wrap(ProcessGroup::leader());
    #[cfg(windows)]
    command.wrap(JobObject);
    command.wrap(KillOnDrop);
    let mut child = command.spawn().map_err(spawn_error)?;
    let pid = child.id();
    let writer = child
        .stdin()
        .take()
        .ok_or_else(|| spawn_error(std::io::Error::other("no stdin")))?;
    let stdout = child
        .stdout()
        .take()
        .ok_or_else(|| spawn_error(std::io::Error::other("no stdout")))?;
    let (tx, reader) = tokio::io::duplex(1 << 20);
    tokio::spawn(filter_lines(stdout, tx, fault.clone()));
    let (stop, stop_rx) = oneshot::channel();
    let done = tokio::spawn(supervise(child, stop_rx, fault));
    Ok(Spawned {
        child: Child {
            stop: Some(stop),
            done: Some(done),
            pid,
        },
        reader,
        writer,
    })
}

/// Copies the child's stdout to the transport, one checked line at a time.
async fn filter_lines(stdout: tokio::process::ChildStdout, mut out: DuplexStream, fault: Arc<Fault>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(u64::try_from(MAX_LINE).unwrap_or(u64::MAX))
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                fault.set(format!("reading its output failed: {e}"));
                return;
            }
        }
        if line.len() >= MAX_LINE && line.last() != Some(&b'\n') {
            fault.set(format!("it sent a message longer than {MAX_LINE} bytes"));
            return;
        }
        let body = line.trim_ascii();
        if body.is_empty() {
            continue;
        }
        let lines = match readable(body) {
            Ok(lines) => lines,
            Err(why) => {
                let excerpt: String = String::from_utf8_lossy(body).chars().take(120).collect();
                fault.set(format!("it sent {why}: {excerpt:?}"));
                return;
            }
        };
        for line in lines {
            let line: &[u8] = match &line {
                Line::AsIs => body,
                Line::Rewritten(text) => text.as_bytes(),
            };
            if out.write_all(line).await.is_err() || out.write_all(b"\n").await.is_err() {
                return;
            }
        }
    }
}

/// What `filter_lines` passes on for one line of the upstream's.
#[derive(Debug, PartialEq)]
enum Line {
    AsIs,
    Rewritten(String),
}

/// The lines to pass on for `line`, or why it ends the connection. An answer
/// (a result or an error) rmcp cannot type would be dropped by it and its
/// request left waiting for `--timeout`, then reported as unanswered
/// (review 31 F4: `"error": null` beside a result, a float error code): it
/// is passed on as an error answer to its id, so that request fails at once
/// and the session goes on. A batch (MCP 2025-03-26, which a client may ask
/// the upstream for; rmcp reads none) is passed on message by message. A
/// request or notification that does not type is rmcp's to answer or skip
/// (it is lenient with notifications), and holds up no call.
fn readable(line: &[u8]) -> Result<Vec<Line>, &'static str> {
    // The common case costs one typed parse, as rmcp's own.
    if serde_json::from_slice::<rmcp::model::ServerJsonRpcMessage>(line).is_ok() {
        return Ok(vec![Line::AsIs]);
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
        return Err("output that is not a JSON-RPC message");
    };
    match value {
        serde_json::Value::Array(items) if !items.is_empty() => {
            let mut lines = Vec::with_capacity(items.len());
            for item in items {
                let text = item.to_string();
                match one_message(item)? {
                    Line::AsIs => lines.push(Line::Rewritten(text)),
                    rewritten => lines.push(rewritten),
                }
            }
            Ok(lines)
        }
        value => one_message(value).map(|line| vec![line]),
    }
}

/// [`readable`] for one message that rmcp may not type.
fn one_message(value: serde_json::Value) -> Result<Line, &'static str> {
    if value.get("jsonrpc").and_then(serde_json::Value::as_str) != Some("2.0") {
        return Err("output that is not a JSON-RPC message");
    }
    if value.get("method").is_some() {
        return Ok(Line::AsIs);
    }
    let id = match value.get("id") {
        Some(id @ (serde_json::Value::Number(_) | serde_json::Value::String(_))) => id.clone(),
        _ => return Err("an answer without an id the gateway can read"),
    };
    if serde_json::from_value::<rmcp::model::ServerJsonRpcMessage>(value.clone()).is_ok() {
        return Ok(Line::AsIs);
    }
    let excerpt: String = value.to_string().chars().take(120).collect();
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32603,
            "message": format!("toolgate proxy: the upstream's answer could not be read: {excerpt}"),
            "data": { "toolgate": "UPSTREAM_ERROR" },
        },
    });
    Ok(Line::Rewritten(answer.to_string()))
}

async fn supervise(mut child: Box<dyn ChildWrapper>, stop: oneshot::Receiver<()>, fault: Arc<Fault>) {
    tokio::select! {
        status = child.wait() => {
            let why = match status {
                Ok(s) => format!("it exited ({s})"),
                Err(e) => format!("waiting for it failed: {e}"),
            };
            fault.set(why);
        }
        _ = stop => {
            // Either asked to stop or the session was dropped. Stdin is
            // closed by then (or about to be): give the server a moment to
            // exit by itself, then SIGTERM, then SIGKILL the process group.
            if tokio::time::timeout(Duration::from_secs(2), child.wait()).await.is_err() {
                #[cfg(unix)]
                let _ = child.signal(SIGTERM);
                if tokio::time::timeout(Duration::from_secs(2), child.wait()).await.is_err() {
                    let _ = Box::into_pin(child.kill()).await;
                }
            }
            fault.set("it was stopped by the proxy".into());
        }
    }
}

/// `name` as Windows runs it from a shell: a bare name that only exists as
/// `NAME.cmd` / `NAME.bat` / `NAME.exe` on `PATH` is given that extension.
#[cfg(windows)]
fn windows_program(name: &str) -> String {
    let path = std::path::Path::new(name);
    if path.extension().is_some() || path.components().count() > 1 {
        return name.to_owned();
    }
    let Some(dirs) = std::env::var_os("PATH") else {
        return name.to_owned();
    };
    for dir in std::env::split_paths(&dirs) {
        for ext in ["exe", "cmd", "bat"] {
            let candidate = dir.join(format!("{name}.{ext}"));
            if candidate.is_file() {
                return candidate.to_string_lossy().into_owned();
            }
        }
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::{Line, readable};

    /// Review 31 F4 and review 32 F2: an answer rmcp cannot type becomes an
    /// error answer to its id (it hung its request for `--timeout`); a batch
    /// is passed on message by message; what is not JSON-RPC ends the
    /// connection; what rmcp reads passes as it is.
    #[test]
    fn what_the_transport_cannot_read_is_answered_split_or_a_fault() {
        let rewritten = |line: &str| match readable(line.as_bytes()) {
            Ok(lines) => lines,
            Err(why) => panic!("{line}: {why}"),
        };
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":7}}"#,
        ] {
            let lines = rewritten(line);
            let [Line::Rewritten(text)] = lines.as_slice() else {
                panic!("{line}: {lines:?}")
            };
            let answer: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(answer["error"]["data"]["toolgate"], "UPSTREAM_ERROR", "{line}");
            assert!(
                serde_json::from_str::<rmcp::model::ServerJsonRpcMessage>(text).is_ok(),
                "{text}"
            );
        }
        let batch = rewritten(
            r#"[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}},{"jsonrpc":"2.0","id":2,"result":{"content":[]}}]"#,
        );
        assert_eq!(batch.len(), 2);
        assert!(batch.iter().all(
            |l| matches!(l, Line::Rewritten(t) if serde_json::from_str::<rmcp::model::ServerJsonRpcMessage>(t).is_ok())
        ));
        for line in [
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            "not json",
            "[]",
            r#"{"jsonrpc":"2.0","result":{}}"#,
        ] {
            assert!(readable(line.as_bytes()).is_err(), "{line}");
        }
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}"#,
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/whatever","params":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"roots/list"}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
        ] {
            assert_eq!(rewritten(line), vec![Line::AsIs], "{line}");
        }
    }
}
