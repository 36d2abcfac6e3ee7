//! CORS on `--listen`'s `/mcp` and protected-resource metadata, for the
//! `--allow-origin` origins alone: their pages may read the answers, and
//! their requests that need a preflight (`Content-Type: application/json`,
//! `Authorization`, the MCP headers) get one. The preflight is answered
//! before `--auth`, as browsers send it without credentials; it runs
//! nothing (every `OPTIONS` is answered here).
//!
//! This layer only says which pages may read. Which may call is decided by
//! the session layer's own `Origin` check (MCP's transport requires it),
//! which also admits this machine's pages and `--resource`'s origin: those
//! get no CORS, so a page on some localhost port cannot use a loopback
//! gateway that has no `--auth`. The matcher here is the stricter of the
//! two (an entry without a port means the scheme's default port; `null` is
//! never taken): an origin it takes that the check refuses still gets `403`.
//! The approval pages are left out: a page of another origin must never read
//! a person's approval form.

use axum::http::{HeaderName, HeaderValue, Method, header};
use std::time::Duration;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

/// How long a browser may keep a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The layer for `allowed` (entries as `--allow-origin` takes them:
/// `https://app.example.com`, `http://localhost:*` for any port).
pub fn layer(allowed: &[String]) -> CorsLayer {
    let allowed = OriginCheck::new(allowed);
    let origin = AllowOrigin::predicate(move |origin: &HeaderValue, _| allowed.admits(Some(origin)));
    CorsLayer::new()
        .allow_origin(origin)
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        // MCP's own headers include per-tool ones (`Mcp-Param-…`): an origin
        // taken may send what it asks for.
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([
            HeaderName::from_static("mcp-session-id"),
            HeaderName::from_static("mcp-protocol-version"),
            header::WWW_AUTHENTICATE,
            header::RETRY_AFTER,
        ])
        .max_age(PREFLIGHT_MAX_AGE)
}

/// The `Origin` check of `/mcp` (`--allow-origin`'s entries, this machine's
/// pages, `--resource`'s origin): an entry without a port means the
/// scheme's default port, `:*` any port, `null` nothing. The gate runs it on
/// the headers before any body is read; the session layer's own check (the
/// same entries, given explicit ports by [`explicit_port`]) runs after.
pub(crate) struct OriginCheck(Vec<AllowedOrigin>);

impl OriginCheck {
    pub(crate) fn new(entries: &[String]) -> OriginCheck {
        OriginCheck(entries.iter().filter_map(|entry| AllowedOrigin::parse(entry)).collect())
    }

    /// Whether a request with this `Origin` header may call (no header: not
    /// a browser's request, nothing to check).
    pub(crate) fn admits(&self, header: Option<&HeaderValue>) -> bool {
        header.is_none_or(|value| {
            let origin = value.to_str().ok().and_then(Origin::parse);
            origin.is_some_and(|origin| self.0.iter().any(|a| a.admits(&origin)))
        })
    }
}

/// An entry as the session layer reads it: rmcp takes an entry without a
/// port for any port (deprecated there), where `--allow-origin` means the
/// scheme's default one.
pub(crate) fn explicit_port(entry: &str) -> String {
    let entry = entry.trim();
    if entry.ends_with(":*") {
        return entry.to_owned();
    }
    match Origin::parse(entry) {
        Some(Origin {
            scheme,
            host,
            port: Some(port),
        }) => format!("{scheme}://{host}:{port}"),
        _ => entry.to_owned(),
    }
}

/// A serialized origin: scheme, host and port (the scheme's default when
/// none is written).
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    fn parse(text: &str) -> Option<Origin> {
        let url = reqwest::Url::parse(text).ok()?;
        // An origin is only scheme, host and port: anything else written is
        // not one (and an opaque origin, "null", has no host).
        let bare = url.path() == "/" && url.query().is_none() && url.fragment().is_none() && url.username().is_empty();
        let origin = url.origin();
        if !bare || !origin.is_tuple() {
            return None;
        }
        Some(Origin {
            scheme: url.scheme().to_owned(),
            host: url.host_str()?.to_ascii_lowercase(),
            port: url.port_or_known_default(),
        })
    }
}

/// One entry of the list: an origin, or one with any port (`:*`).
#[derive(Debug)]
struct AllowedOrigin {
    origin: Origin,
    any_port: bool,
}

impl AllowedOrigin {
    fn parse(entry: &str) -> Option<AllowedOrigin> {
        let entry = entry.trim();
        match entry.strip_suffix(":*") {
            Some(base) => Some(AllowedOrigin {
                origin: Origin::parse(base)?,
                any_port: true,
            }),
            None => Some(AllowedOrigin {
                origin: Origin::parse(entry)?,
                any_port: false,
            }),
        }
    }

    fn admits(&self, origin: &Origin) -> bool {
        self.origin.scheme == origin.scheme
            && self.origin.host == origin.host
            && (self.any_port || self.origin.port == origin.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(list: &[&str], origin: &str) -> bool {
        let list: Vec<AllowedOrigin> = list.iter().filter_map(|e| AllowedOrigin::parse(e)).collect();
        Origin::parse(origin).is_some_and(|o| list.iter().any(|a| a.admits(&o)))
    }

    #[test]
    fn an_origin_is_admitted_by_scheme_host_and_port() {
        let list = ["https://app.example.com", "http://localhost:*"];
        assert!(admitted(&list, "https://app.example.com"));
        assert!(admitted(&list, "https://app.example.com:443"));
        assert!(admitted(&list, "https://APP.example.com"));
        assert!(!admitted(&list, "https://app.example.com:8443"));
        assert!(!admitted(&list, "http://app.example.com"));
        assert!(!admitted(&list, "https://app.example.com.evil.example"));
        assert!(!admitted(&list, "https://evil.example"));
        assert!(admitted(&list, "http://localhost:5173"));
        assert!(admitted(&list, "http://localhost"));
        assert!(!admitted(&list, "https://localhost:5173"));
        assert!(!admitted(&list, "null"));
        assert!(!admitted(&list, "https://app.example.com/path"));
        assert!(!admitted(&["null"], "null"));
    }

    #[test]
    fn the_session_layer_gets_every_entry_with_its_port() {
        assert_eq!(explicit_port("https://app.example.com"), "https://app.example.com:443");
        assert_eq!(explicit_port("http://app.example.com"), "http://app.example.com:80");
        assert_eq!(
            explicit_port("https://app.example.com:8443"),
            "https://app.example.com:8443"
        );
        assert_eq!(explicit_port("http://localhost:*"), "http://localhost:*");
        assert_eq!(explicit_port("http://[::1]"), "http://[::1]:80");
        assert_eq!(explicit_port("null"), "null");
        let check = OriginCheck::new(&["https://app.example.com".to_owned()]);
        assert!(check.admits(None));
        assert!(check.admits(Some(&HeaderValue::from_static("https://app.example.com"))));
        assert!(!check.admits(Some(&HeaderValue::from_static("https://app.example.com:8443"))));
        assert!(!check.admits(Some(&HeaderValue::from_bytes(b"https://app.example.com\xff").unwrap())));
    }
}
