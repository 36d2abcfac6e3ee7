//! What the gateway talks to over HTTP: the upstream MCP server
//! (`--upstream http(s)://…`) and the issuer's JWKS. One `reqwest` client
//! with rustls (the `ring` provider), the platform's trust roots plus
//! `--upstream-ca`; the upstream's own headers and bearer token.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::collections::HashMap;
use std::path::Path;

use crate::ProxyError;

/// The HTTP client both the upstream transport and the JWKS fetches use.
/// `ca`: extra PEM roots trusted beside the platform's.
pub fn client(ca: Option<&Path>) -> Result<reqwest::Client, ProxyError> {
    // reqwest is built without a bundled provider; rustls needs one chosen
    // once per process (a second install is refused and harmless).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder();
    if let Some(path) = ca {
        let pem = std::fs::read(path).map_err(|source| ProxyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let roots = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ProxyError::Usage(format!("--upstream-ca {}: {e}", path.display())))?;
        if roots.is_empty() {
            return Err(ProxyError::Usage(format!(
                "--upstream-ca {}: no PEM certificate in the file",
                path.display()
            )));
        }
        builder = builder.tls_certs_merge(roots);
    }
    builder
        .build()
        .map_err(|e| ProxyError::Usage(format!("the HTTP client could not be set up: {}", error_chain(&e))))
}

/// `--upstream-header 'Name: value'`: a value written `${VAR}` is read from
/// the environment (so a secret need not be on the command line); values are
/// never printed.
pub fn headers(specs: &[String]) -> Result<HashMap<HeaderName, HeaderValue>, ProxyError> {
    let mut map = HashMap::new();
    for spec in specs {
        let usage = |why: &str| ProxyError::Usage(format!("--upstream-header {:?}: {why}", name_of(spec)));
        let (name, value) = spec.split_once(':').ok_or_else(|| usage("write it as 'Name: value'"))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| usage("not a header name"))?;
        let value = value.trim();
        let value = match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
            Some(var) => std::env::var(var).map_err(|_| usage(&format!("the environment has no {var}")))?,
            None => value.to_owned(),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| usage("the value is not a valid header value"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// The header's name only, for messages.
fn name_of(spec: &str) -> &str {
    spec.split_once(':').map_or("", |(name, _)| name.trim())
}

/// `--upstream-token-env VAR`: the upstream's bearer token, from the
/// environment.
pub fn bearer(var: Option<&str>) -> Result<Option<String>, ProxyError> {
    let Some(var) = var else { return Ok(None) };
    match std::env::var(var) {
        Ok(token) if !token.trim().is_empty() => Ok(Some(token.trim().to_owned())),
        _ => Err(ProxyError::Usage(format!(
            "--upstream-token-env {var}: the environment has no {var}"
        ))),
    }
}

/// Headers as a `HeaderMap` (for requests made outside the MCP transport).
pub fn header_map(headers: &HashMap<HeaderName, HeaderValue>) -> HeaderMap {
    headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// An error and every cause under it, on one line: a TLS failure's reason
/// (an unknown issuer, a name mismatch) is several levels down.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// Why `url` cannot be reached at all (DNS, TCP, TLS: a certificate the
/// roots and `--upstream-ca` do not vouch for), with every cause. rmcp's
/// transport error keeps only the outermost message, so after a failed
/// `initialize` the gateway asks once more with a bare request (it fails
/// before any HTTP is sent when the cause is the connection) to name the
/// cause. `None` when the server answers: the failure was at the MCP level.
pub async fn connect_failure(client: &reqwest::Client, url: &str) -> Option<String> {
    match client.head(url).send().await {
        Ok(_) => None,
        Err(e) => Some(error_chain(&e)),
    }
}

/// The host of a URL, for messages.
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_come_from_the_environment() {
        let got = headers(&["X-Test: literal".into()]).unwrap();
        assert_eq!(got[&HeaderName::from_static("x-test")], "literal");
        assert!(headers(&["X-Test: ${TOOLGATE_TEST_SURELY_UNSET}".into()]).is_err());
        assert!(headers(&["no colon".into()]).is_err());
        let path = std::env::var("PATH").unwrap();
        let got = headers(&["X-Path: ${PATH}".into()]).unwrap();
        assert_eq!(got[&HeaderName::from_static("x-path")], path.as_str());
    }

    #[test]
    fn hosts() {
        assert_eq!(host_of("https://mcp.example.com:8443/mcp"), "mcp.example.com:8443");
        assert_eq!(host_of("http://127.0.0.1/x?y"), "127.0.0.1");
    }
}
