//! The client side over stdio: one JSON-RPC message per line in, through the
//! gate ([`crate::gate`]); messages out in exactly the order the session
//! hands them over.
//!
//! Order matters: a server's progress and log notifications for a call must
//! reach the client before that call's response. `rmcp` sends each outgoing
//! message from its own task, so a transport that takes a lock inside the
//! send future can reorder them; here `send` queues the bytes before it
//! returns, and one writer drains the queue.

use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::gate::{self, Admission, MAX_MESSAGE_BYTES, RelayList};

/// Called for every message the gate drops (a notification that is not
/// relayed): its method and why.
pub type DropReport = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The session's transport to a client over a byte stream pair.
pub struct ClientLines {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    outbox: Outbox,
}

impl std::fmt::Debug for ClientLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientLines").finish_non_exhaustive()
    }
}

/// What the writer is asked to do, in order.
enum Out {
    Line(Vec<u8>),
    /// Answer once everything queued before has been written and flushed.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Lines to write, in order, and the ids of the client's requests that are
/// still waiting for an answer.
#[derive(Clone)]
struct Outbox {
    lines: mpsc::UnboundedSender<Out>,
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
}

/// Waits until everything queued so far has reached the client's output
/// (before the process exits, so a last error answer is not lost).
#[derive(Clone)]
pub struct Flusher(Outbox);

impl std::fmt::Debug for Flusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Flusher")
    }
}

impl Flusher {
    pub async fn flush(&self) {
        let (done, written) = tokio::sync::oneshot::channel();
        if self.0.lines.send(Out::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), written).await;
        }
    }
}

impl Outbox {
    fn push(&self, message: &impl serde::Serialize) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(message).map_err(std::io::Error::other)?;
        self.lines
            .send(Out::Line(bytes))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client's output is closed"))
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ClientLines {
    /// Starts reading `read` and writing `write`.
    pub fn new<R, W>(read: R, write: W, relay: RelayList, report: DropReport) -> ClientLines
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (lines, queued) = mpsc::unbounded_channel();
        let outbox = Outbox {
            lines,
            in_flight: Arc::default(),
        };
        let (admitted, incoming) = mpsc::channel(64);
        tokio::spawn(write_lines(write, queued));
        tokio::spawn(read_lines(
            BufReader::new(read),
            admitted,
            outbox.clone(),
            relay,
            report,
        ));
        ClientLines { incoming, outbox }
    }

    /// A handle to wait for the output to be written.
    pub fn flusher(&self) -> Flusher {
        Flusher(self.outbox.clone())
    }
}

impl Transport<RoleServer> for ClientLines {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        // Queued now, before the future is polled: the queue's order is the
        // order the session produced the messages in.
        let result = self.outbox.push(&item);
        if let Some(id) = answered {
            self.outbox.in_flight().remove(&id);
        }
        std::future::ready(result)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.incoming.close();
        std::future::ready(Ok(()))
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(mut write: W, mut queued: mpsc::UnboundedReceiver<Out>) {
    let mut waiting = Vec::new();
    while let Some(first) = queued.recv().await {
        let mut next = Some(first);
        // Write everything queued, then flush once.
        while let Some(out) = next.take() {
            match out {
                Out::Line(mut line) => {
                    line.push(b'\n');
                    if write.write_all(&line).await.is_err() {
                        return;
                    }
                }
                Out::Flush(done) => waiting.push(done),
            }
            next = queued.try_recv().ok();
        }
        if write.flush().await.is_err() {
            return;
        }
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
}

/// One line of at most `MAX_MESSAGE_BYTES` (+1, to tell an over-long one),
/// the rest of a longer line skipped. `None` at end of input.
async fn next_line<R: AsyncBufRead + Unpin>(read: &mut R, line: &mut Vec<u8>) -> Option<usize> {
    line.clear();
    let mut total = 0usize;
    loop {
        let chunk = match read.fill_buf().await {
            Ok(chunk) => chunk,
            Err(_) => return None,
        };
        if chunk.is_empty() {
            return (total > 0).then_some(total);
        }
        let (taken, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (at, true),
            None => (chunk.len(), false),
        };
        let room = (MAX_MESSAGE_BYTES + 1).saturating_sub(line.len());
        line.extend_from_slice(chunk.get(..taken.min(room)).unwrap_or_default());
        total = total.saturating_add(taken);
        read.consume(if done { taken + 1 } else { taken });
        if done {
            return Some(total);
        }
    }
}

async fn read_lines<R: AsyncBufRead + Unpin>(
    mut read: R,
    admitted: mpsc::Sender<ClientJsonRpcMessage>,
    outbox: Outbox,
    relay: RelayList,
    report: DropReport,
) {
    let mut line = Vec::new();
    while let Some(total) = next_line(&mut read, &mut line).await {
        let body = line.trim_ascii();
        if body.is_empty() && total == line.len() {
            continue;
        }
        let admission = if total > line.len() {
            // Longer than the limit: what was kept is enough to find the id.
            gate::too_large(&line)
        } else {
            gate::admit(body, &relay)
        };
        let message = match admission {
            Admission::Admit(message) => *message,
            Admission::Drop { method, why } => {
                report(&method, &why);
                continue;
            }
            refused @ Admission::Refuse { .. } => {
                if let Some(answer) = refused.answer()
                    && outbox.push(&answer).is_err()
                {
                    return;
                }
                continue;
            }
        };
        let message = match message {
            JsonRpcMessage::Request(request) => {
                // Two requests in flight with one id would get each other's
                // answers: the second is refused.
                if !outbox.in_flight().insert(request.id.clone()) {
                    if let Some(answer) = gate::id_in_flight(&request.id).answer()
                        && outbox.push(&answer).is_err()
                    {
                        return;
                    }
                    continue;
                }
                JsonRpcMessage::Request(request)
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    // A cancelled request is never answered: its id is free.
                    outbox.in_flight().remove(id);
                }
                JsonRpcMessage::Notification(n)
            }
            other => other,
        };
        if admitted.send(message).await.is_err() {
            return;
        }
    }
}
