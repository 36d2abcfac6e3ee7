//! What the gateway reports: Prometheus metrics (`--metrics ADDR`),
//! `/healthz` (the process serves) and `/readyz` (an upstream catalog is
//! loaded, so calls can be decided).
//!
//! Label values are bounded: a tool label is a name from the upstream's
//! catalog or `(unknown)`, never a name a client made up, and a code label
//! is one of the engine's or the gateway's codes.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub tool: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    pub listener: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: String,
}

/// Every metric the gateway keeps, and its readiness.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    decision_seconds: Histogram,
    upstream_seconds: Family<MethodLabels, Histogram>,
    upstream_starts: Counter,
    reloads: Family<ResultLabels, Counter>,
    rule_set_loads: Counter,
    auth_refusals: Family<ReasonLabels, Counter>,
    upstream_errors: Family<ReasonLabels, Counter>,
    connections: Family<ListenerLabels, Gauge>,
    header_timeouts: Counter,
    tls_expiry: Family<ListenerLabels, Gauge>,
    audit_write_failures: Counter,
    ready: AtomicBool,
    /// A stop is draining: not ready again, whatever loads meanwhile.
    draining: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// The label an allowed call's decision is counted under.
pub const ALLOWED: &str = "ALLOW";
/// The tool label of a name the upstream's catalog does not have.
pub const UNKNOWN_TOOL: &str = "(unknown)";

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("toolgate");
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "decisions",
            "tools/call decisions, by tool and code (ALLOW when allowed)",
            decisions.clone(),
        );
        // 1 µs to ~16 s.
        let decision_seconds = Histogram::new(exponential_buckets(1e-6, 4.0, 13));
        registry.register(
            "decision_duration_seconds",
            "time the policy engine took to decide one tools/call",
            decision_seconds.clone(),
        );
        let upstream_seconds = Family::<MethodLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(1e-4, 4.0, 10))
        });
        registry.register(
            "upstream_duration_seconds",
            "time the upstream server took to answer a relayed request",
            upstream_seconds.clone(),
        );
        let upstream_starts = Counter::default();
        registry.register(
            "upstream_starts",
            "upstream sessions opened (a child started, or an HTTP session)",
            upstream_starts.clone(),
        );
        let reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "policy_reloads",
            "policy file reloads under --watch, by result (ok or error)",
            reloads.clone(),
        );
        let rule_set_loads = Counter::default();
        registry.register(
            "rule_set_loads",
            "rule sets loaded into the engine (sessions with the same policy and catalog share one)",
            rule_set_loads.clone(),
        );
        let auth_refusals = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "auth_refusals",
            "requests refused before the MCP session (--auth), by reason: missing, invalid_token, insufficient_scope, unavailable",
            auth_refusals.clone(),
        );
        let upstream_errors = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "upstream_errors",
            "requests to the upstream that got no answer from it, by reason: UPSTREAM_CLOSED, UPSTREAM_TIMEOUT, UPSTREAM_ERROR, CANCELLED (an allowed call counted here may not have run)",
            upstream_errors.clone(),
        );
        let connections = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "http_connections",
            "connections open, by listener: mcp (--listen), metrics, approve (at most --max-connections each)",
            connections.clone(),
        );
        let header_timeouts = Counter::default();
        registry.register(
            "http_header_timeouts",
            "connections closed by --header-timeout: a request's headers did not arrive in time, or a kept-alive connection stayed idle that long",
            header_timeouts.clone(),
        );
        // A family, so a gateway that serves no certificate publishes no
        // sample (an unlabelled gauge read 0, which an expiry alert takes
        // for a certificate long expired: review 28).
        let tls_expiry = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "tls_certificate_expiry_timestamp_seconds",
            "when the certificate a listener serves (--listen with --tls-cert) expires, in Unix seconds; no sample without one",
            tls_expiry.clone(),
        );
        let audit_write_failures = Counter::default();
        registry.register(
            "audit_write_failures",
            "audit lines (--audit) that could not be written; the call went on, as the audit records decisions and does not make them",
            audit_write_failures.clone(),
        );
        Metrics {
            registry,
            audit_write_failures,
            upstream_errors,
            connections,
            header_timeouts,
            tls_expiry,
            rule_set_loads,
            auth_refusals,
            decisions,
            decision_seconds,
            upstream_seconds,
            upstream_starts,
            reloads,
            ready: AtomicBool::new(false),
            draining: AtomicBool::new(false),
        }
    }

    /// The counter `Audit` adds to when a line cannot be written.
    pub fn audit_write_failures(&self) -> Counter {
        self.audit_write_failures.clone()
    }

    pub fn decision(&self, tool: &str, code: Option<&str>) {
        self.decisions
            .get_or_create(&DecisionLabels {
                tool: tool.to_owned(),
                code: code.unwrap_or(ALLOWED).to_owned(),
            })
            .inc();
    }

    pub fn decided_in(&self, took: Duration) {
        self.decision_seconds.observe(took.as_secs_f64());
    }

    pub fn upstream_answered_in(&self, method: &str, took: Duration) {
        self.upstream_seconds
            .get_or_create(&MethodLabels {
                method: method.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    pub fn upstream_started(&self) {
        self.upstream_starts.inc();
    }

    pub fn reloaded(&self, ok: bool) {
        self.reloads
            .get_or_create(&ResultLabels {
                result: if ok { "ok" } else { "error" }.to_owned(),
            })
            .inc();
    }

    /// A request to the upstream that got no answer; `code` is one of the
    /// fixed few `Gateway::upstream_error` gives.
    pub fn upstream_failed(&self, code: &'static str) {
        self.upstream_errors
            .get_or_create(&ReasonLabels {
                reason: code.to_owned(),
            })
            .inc();
    }

    /// A request refused by `--auth`; `reason` is one of a fixed few
    /// (`auth::Refusal::reason`), never text a client wrote.
    pub fn auth_refused(&self, reason: &'static str) {
        self.auth_refusals
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// An upstream catalog was loaded: calls can be decided.
    pub fn connection_opened(&self, listener: &'static str) {
        self.connections.get_or_create(&ListenerLabels { listener }).inc();
    }

    pub fn connection_closed(&self, listener: &'static str) {
        self.connections.get_or_create(&ListenerLabels { listener }).dec();
    }

    pub fn tls_certificate_expires(&self, listener: &'static str, unix_seconds: u64) {
        self.tls_expiry
            .get_or_create(&ListenerLabels { listener })
            .set(i64::try_from(unix_seconds).unwrap_or(i64::MAX));
    }

    pub fn header_timed_out(&self) {
        self.header_timeouts.inc();
    }

    pub fn rule_set_loaded(&self) {
        self.rule_set_loads.inc();
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready
            .store(ready && !self.draining.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// A stop began: `/readyz` answers 503 from now on.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.ready.store(false, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// `/metrics`, `/healthz` and `/readyz`.
pub fn router(metrics: Arc<Metrics>) -> axum::Router {
    axum::Router::new()
        .route("/metrics", axum::routing::get(scrape))
        .with_state(metrics.clone())
        .merge(health_router(metrics))
}

/// `/healthz` and `/readyz` alone (also served on `--listen`).
pub fn health_router(metrics: Arc<Metrics>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .route("/readyz", axum::routing::get(readyz))
        .with_state(metrics)
}

async fn scrape(State(metrics): State<Arc<Metrics>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.render(),
    )
        .into_response()
}

async fn readyz(State(metrics): State<Arc<Metrics>>) -> Response {
    if metrics.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the upstream catalog is not loaded yet\n",
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drain is not undone by a catalog that loads during it (a 2026-07-28
    /// request, a `list_changed` reload): the replica stays not ready.
    #[test]
    fn a_drain_stays_not_ready_whatever_loads() {
        let m = Metrics::new();
        m.set_ready(true);
        assert!(m.is_ready() && !m.is_draining());
        m.drain();
        m.set_ready(true);
        assert!(!m.is_ready() && m.is_draining());
    }

    #[test]
    fn counts_by_tool_and_code() {
        let m = Metrics::new();
        m.decision("read", None);
        m.decision("read", None);
        m.decision("write", Some("CONFIRMATION_REQUIRED"));
        let text = m.render();
        assert!(
            text.contains(r#"toolgate_decisions_total{tool="read",code="ALLOW"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolgate_decisions_total{tool="write",code="CONFIRMATION_REQUIRED"} 1"#),
            "{text}"
        );
        assert!(!m.is_ready());
        m.set_ready(true);
        assert!(m.is_ready());
    }
}
