//! The gateway's HTTP listeners (`--listen`, `--metrics`, the approval
//! pages): one HTTP/1 connection per accepted socket, with the bounds a
//! server facing a network needs and `axum::serve` does not set.
//!
//! - **Header time.** A request's headers must arrive within
//!   `header_timeout`, and so must the next request on a kept-alive
//!   connection: a client that opens connections and sends headers slowly,
//!   or never, loses them (hyper's own default only runs with a timer, which
//!   `axum::serve` does not give it). hyper runs one timer for both, so the
//!   default (75 s) is above a load balancer's usual idle timeout (60 s): a
//!   pooled connection closed under it would be a 502. A response being
//!   sent, an SSE stream among them, is not limited. Bodies are bounded
//!   where they are read (`/mcp`'s gate, the approval form).
//! - **Connections.** At most `max_connections` are served at once; a socket
//!   past that waits in the kernel's backlog until one closes (as Go's
//!   `LimitListener` does) rather than being accepted and dropped, so a
//!   burst delays clients instead of failing them. This bounds the
//!   gateway's resources; it is no defence against a flood (sockets that
//!   send nothing are cut only by the header time): that is the load
//!   balancer's job, and probes belong on `--metrics`, which has its own
//!   places.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::metrics::Metrics;

/// How every listener bounds its clients (`--header-timeout`,
/// `--max-connections`).
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub header_timeout: Duration,
    pub max_connections: usize,
}

/// How long a TLS handshake may take (at most the header time): a few round
/// trips, so more is a client holding a place.
const TLS_HANDSHAKE_TIME: Duration = Duration::from_secs(10);

/// How long accepting pauses after an error that is the listener's, not a
/// client's (out of file descriptors): retrying at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);

/// Serves `router` on `listener` until `stop` completes; then accepts no
/// more, lets each connection finish the response it is sending (an idle
/// one closes at once) and returns once all are closed. `name` labels the
/// listener's connections in the metrics; with `tls`, every connection is
/// TLS (its handshake bounded by the header time too).
pub async fn serve(
    (name, listener): (&'static str, TcpListener),
    router: Router,
    limits: ConnectionLimits,
    tls: Option<TlsAcceptor>,
    metrics: Arc<Metrics>,
    stop: impl Future<Output = ()>,
) {
    let places = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(stop);
    loop {
        let place = tokio::select! {
            place = places.clone().acquire_owned() => place,
            () = &mut stop => break,
        };
        // The semaphore is never closed, so a place always comes.
        let Ok(place) = place else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) if is_the_client_s(&e) => continue,
            Err(e) => {
                tracing::warn!("accepting a connection failed: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        // Nagle's algorithm off: a response written in more than one piece
        // would otherwise wait for the client's delayed ACK, about 40 ms per
        // `tools/call` (found by `toolgate-gateway-bench`'s `gateway-listen`
        // lines). Best effort: a socket that refuses only costs latency.
        let _ = tcp.set_nodelay(true);
        let open = OpenConnection::new(metrics.clone(), name);
        let connection = Connection {
            builder: builder.clone(),
            router: router.clone(),
            watcher: connections.watcher(),
            open,
        };
        let tls = tls.clone();
        let handshake_time = TLS_HANDSHAKE_TIME.min(limits.header_timeout);
        tokio::spawn(async move {
            match tls {
                None => connection.run(tcp).await,
                Some(tls) => match tokio::time::timeout(handshake_time, tls.accept(tcp)).await {
                    Ok(Ok(stream)) => connection.run(stream).await,
                    // Scanners and probes fail handshakes all day: not worth
                    // more than a debug line.
                    Ok(Err(e)) => tracing::debug!(listener = name, "a TLS handshake failed: {e}"),
                    Err(_) => tracing::debug!(listener = name, "a TLS handshake did not finish in time"),
                },
            }
            drop(place);
        });
    }
    drop(listener);
    connections.shutdown().await;
}

/// One accepted connection, served once its transport is ready.
struct Connection {
    builder: hyper::server::conn::http1::Builder,
    router: Router,
    watcher: hyper_util::server::graceful::Watcher,
    open: OpenConnection,
}

impl Connection {
    async fn run<Io>(self, io: Io)
    where
        Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let served = self
            .builder
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(self.router));
        if let Err(e) = self.watcher.watch(served).await
            && e.is_timeout()
        {
            tracing::info!(
                listener = self.open.listener,
                "a connection sent no complete request in --header-timeout (slow headers, or idle): closed"
            );
            self.open.metrics.header_timed_out();
        }
    }
}

/// Errors of one client's connection attempt, after which accepting goes on
/// at once.
fn is_the_client_s(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset)
}

/// One connection, counted open in the metrics while it lives.
struct OpenConnection {
    metrics: Arc<Metrics>,
    listener: &'static str,
}

impl OpenConnection {
    fn new(metrics: Arc<Metrics>, listener: &'static str) -> OpenConnection {
        metrics.connection_opened(listener);
        OpenConnection { metrics, listener }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.metrics.connection_closed(self.listener);
    }
}
