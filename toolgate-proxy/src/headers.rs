//! What `/mcp` (and a loopback `--metrics`) refuses on a request's headers alone, before any of its body
//! is read: a `Host` this gateway does not answer (DNS rebinding), an
//! `Origin` it does not admit, and a `POST` that is not JSON. The session
//! layer (rmcp) checks the same, but only after the gate has read and parsed
//! the body, so a web page the person visits could make a loopback gateway
//! read and parse 16 MiB bodies, in parallel, with `text/plain` posts (a
//! CORS "simple request", sent without a preflight), or after rebinding a
//! name of its own to 127.0.0.1. Outermost on `/mcp` but for CORS's
//! preflight: nothing, not even `--auth`, reads a body first.

use crate::cors::OriginCheck;
use crate::http::answer_after_body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header, uri::Authority};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The hosts and origins `/mcp` answers.
pub(crate) struct HeaderCheck {
    /// Host names (any port), or `host:port`.
    hosts: Vec<(String, Option<u16>)>,
    origins: OriginCheck,
}

impl HeaderCheck {
    /// `hosts` and `origins` as the session layer is given them.
    pub(crate) fn new(hosts: &[String], origins: &[String]) -> HeaderCheck {
        let hosts = hosts
            .iter()
            .map(|entry| match Authority::try_from(entry.trim()) {
                Ok(authority) => (bare_host(authority.host()), authority.port_u16()),
                Err(_) => (bare_host(entry), None),
            })
            .collect();
        HeaderCheck {
            hosts,
            origins: OriginCheck::new(origins),
        }
    }

    /// The refusal for these headers, if any.
    fn refusal(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<(StatusCode, &'static str)> {
        let host = headers
            .get(header::HOST)
            .map(|value| value.to_str().ok().and_then(|text| Authority::try_from(text).ok()))
            .unwrap_or_else(|| uri.authority().cloned());
        let Some(host) = host else {
            return Some((StatusCode::BAD_REQUEST, "Bad Request: missing or invalid Host header"));
        };
        let (name, port) = (bare_host(host.host()), host.port_u16());
        if !self
            .hosts
            .iter()
            .any(|(allowed, allowed_port)| *allowed == name && allowed_port.is_none_or(|p| Some(p) == port))
        {
            return Some((StatusCode::FORBIDDEN, "Forbidden: Host header is not allowed"));
        }
        if !self.origins.admits(headers.get(header::ORIGIN)) {
            return Some((StatusCode::FORBIDDEN, "Forbidden: Origin header is not allowed"));
        }
        if method == Method::POST && !is_json(headers) {
            return Some((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: Content-Type must be application/json",
            ));
        }
        None
    }
}

fn bare_host(host: &str) -> String {
    host.trim_matches(['[', ']']).to_ascii_lowercase()
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|text| {
            let essence = text.split_once(';').map_or(text, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

pub(crate) async fn check(State(check): State<Arc<HeaderCheck>>, request: Request, next: Next) -> Response {
    match check.refusal(request.method(), request.uri(), request.headers()) {
        None => next.run(request).await,
        Some((status, why)) => {
            tracing::warn!(
                status = status.as_u16(),
                why,
                "a request to /mcp was refused on its headers"
            );
            answer_after_body(request.into_body(), (status, why).into_response()).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn refusal(check: &HeaderCheck, method: Method, headers: &[(&str, &str)]) -> Option<StatusCode> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        check
            .refusal(&method, &Uri::from_static("/mcp"), &map)
            .map(|(status, _)| status)
    }

    #[test]
    fn a_request_is_refused_on_its_host_origin_or_content_type_before_its_body() {
        let check = HeaderCheck::new(
            &[
                "localhost".into(),
                "127.0.0.1".into(),
                "::1".into(),
                "mcp.example.com:8443".into(),
            ],
            &["http://localhost:*".into(), "https://app.example.com".into()],
        );
        let json = ("content-type", "application/json; charset=utf-8");
        assert_eq!(refusal(&check, Method::POST, &[("host", "127.0.0.1:3000"), json]), None);
        assert_eq!(refusal(&check, Method::POST, &[("host", "LOCALHOST"), json]), None);
        assert_eq!(refusal(&check, Method::POST, &[("host", "[::1]:3000"), json]), None);
        assert_eq!(
            refusal(&check, Method::POST, &[("host", "mcp.example.com:8443"), json]),
            None
        );
        assert_eq!(refusal(&check, Method::GET, &[("host", "localhost:1")]), None);
        let origin = |o| [("host", "localhost:3000"), ("origin", o), json];
        assert_eq!(refusal(&check, Method::POST, &origin("http://localhost:5173")), None);
        assert_eq!(refusal(&check, Method::POST, &origin("https://app.example.com")), None);
        // Refused: a rebound name, a port the entry does not give, no host.
        let forbidden = Some(StatusCode::FORBIDDEN);
        assert_eq!(
            refusal(&check, Method::POST, &[("host", "evil.example:3000"), json]),
            forbidden
        );
        assert_eq!(
            refusal(&check, Method::POST, &[("host", "mcp.example.com:443"), json]),
            forbidden
        );
        assert_eq!(refusal(&check, Method::POST, &[json]), Some(StatusCode::BAD_REQUEST));
        // An origin not listed, or a listed one on another port.
        assert_eq!(refusal(&check, Method::POST, &origin("http://evil.example")), forbidden);
        assert_eq!(
            refusal(&check, Method::POST, &origin("https://app.example.com:8443")),
            forbidden
        );
        assert_eq!(refusal(&check, Method::POST, &origin("null")), forbidden);
        // A body that is not JSON is not read (a page's `text/plain` post).
        let plain = [("host", "localhost"), ("content-type", "text/plain")];
        assert_eq!(
            refusal(&check, Method::POST, &plain),
            Some(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            refusal(&check, Method::POST, &[("host", "localhost")]),
            Some(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(refusal(&check, Method::DELETE, &[("host", "localhost")]), None);
    }
}
