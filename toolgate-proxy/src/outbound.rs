//! What the gateway talks to over HTTP: the upstream MCP server
//! (`--upstream http(s)://…`) and the issuer's JWKS. One `reqwest` client
//! with rustls (the `ring` provider), the platform's trust roots plus
//! `--upstream-ca`; the certificate the gateway presents when the upstream
//! asks for one (`--upstream-cert`, `--upstream-key`: mutual TLS); the
//! upstream's own headers and bearer token.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::collections::HashMap;
use std::path::Path;

use crate::ProxyError;

/// `--upstream-cert` and `--upstream-key`: the certificate chain (leaf
/// first) and its private key, PEM, that the gateway shows an upstream
/// asking for a client certificate. They may name the same file.
#[derive(Debug, Clone, Copy)]
pub struct ClientCertificate<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
}

/// An HTTP client: the upstream transport's (with `identity` when mutual TLS
/// is configured) or the JWKS fetches' (never with it: the client
/// certificate is for the upstream alone). `ca`: extra PEM roots trusted
/// beside the platform's, for both.
pub fn client(ca: Option<&Path>, identity: Option<ClientCertificate<'_>>) -> Result<reqwest::Client, ProxyError> {
    // reqwest is built without a bundled provider; rustls needs one chosen
    // once per process (a second install is refused and harmless).
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Redirects within the same origin only (`/mcp` → `/mcp/`): reqwest
    // would follow one to another host carrying the `--upstream-header`
    // values (it strips only `Authorization`), and a JWKS or introspection
    // request redirected elsewhere hands trust to whoever the first host
    // names. A redirect off the origin is an error the operator sees.
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let from = attempt.previous().last().map(reqwest::Url::origin);
        if attempt.previous().len() <= 10 && from.is_some_and(|from| from == attempt.url().origin()) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    let mut builder = reqwest::Client::builder().redirect(same_origin);
    if let Some(identity) = identity {
        builder = builder.identity(client_identity(identity)?);
    }
    if let Some(path) = ca {
        let pem = read_file(path)?;
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

fn read_file(path: &Path) -> Result<Vec<u8>, ProxyError> {
    std::fs::read(path).map_err(|source| ProxyError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A certificate chain and its private key, read and checked: the chain
/// holds a certificate, the key file a private key of a type rustls signs
/// with, and that key belongs to the chain's first certificate. A wrong file
/// is a usage error naming the flag and file (`cert_flag`, `key_flag`:
/// `--upstream-cert`, `--tls-cert`, …), not a TLS failure later.
pub(crate) fn key_pair(
    (cert_flag, cert): (&str, &Path),
    (key_flag, key): (&str, &Path),
) -> Result<(rustls::sign::CertifiedKey, rustls::pki_types::PrivateKeyDer<'static>), ProxyError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let cert_flag = format!("{cert_flag} {}", cert.display());
    let key_flag = format!("{key_flag} {}", key.display());
    let chain = CertificateDer::pem_slice_iter(&read_file(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ProxyError::Usage(format!("{cert_flag}: not readable as PEM: {e}")))?;
    if chain.is_empty() {
        return Err(ProxyError::Usage(format!(
            "{cert_flag}: no PEM certificate in the file"
        )));
    }
    let key = PrivateKeyDer::from_pem_slice(&read_file(key)?)
        .map_err(|e| ProxyError::Usage(format!("{key_flag}: no PEM private key in the file ({e})")))?;
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| ProxyError::Usage(format!("{key_flag}: the key cannot sign TLS handshakes: {e}")))?;
    let certified = rustls::sign::CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| {
        ProxyError::Usage(format!(
            "{key_flag} is not the key of the first certificate in {cert_flag}: {e}"
        ))
    })?;
    Ok((certified, key))
}

/// The upstream's client certificate, checked at start-up (`key_pair`).
fn client_identity(files: ClientCertificate<'_>) -> Result<reqwest::Identity, ProxyError> {
    use base64::Engine as _;
    use rustls::pki_types::PrivateKeyDer;

    let (certified, key) = key_pair(("--upstream-cert", files.cert), ("--upstream-key", files.key))?;
    let chain = &certified.cert;
    let label = match &key {
        PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
        PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
        _ => "PRIVATE KEY",
    };
    // reqwest takes the pair as one PEM text. Written anew from what was
    // read, so that other sections of the files (a key file's `EC
    // PARAMETERS`, a combined file's certificate) do not reach its parser.
    let base64 = base64::engine::general_purpose::STANDARD;
    let mut pem = String::new();
    let sections = chain
        .iter()
        .map(|cert| ("CERTIFICATE", cert.as_ref()))
        .chain([(label, key.secret_der())]);
    for (label, der) in sections {
        pem.push_str(&format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            base64.encode(der)
        ));
    }
    reqwest::Identity::from_pem(pem.as_bytes()).map_err(|e| {
        ProxyError::Usage(format!(
            "--upstream-cert {} / --upstream-key {}: {}",
            files.cert.display(),
            files.key.display(),
            error_chain(&e)
        ))
    })
}

/// `--upstream-header 'Name: value'`: each `${VAR}` in a value is read from
/// the environment (so a secret need not be on the command line:
/// `Authorization: Bearer ${TOKEN}`); values are never printed.
pub fn headers(specs: &[String]) -> Result<HashMap<HeaderName, HeaderValue>, ProxyError> {
    let mut map = HashMap::new();
    for spec in specs {
        let usage = |why: &str| ProxyError::Usage(format!("--upstream-header {:?}: {why}", name_of(spec)));
        let (name, value) = spec.split_once(':').ok_or_else(|| usage("write it as 'Name: value'"))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| usage("not a header name"))?;
        let value = from_environment(value.trim()).map_err(|why| usage(&why))?;
        let mut value = HeaderValue::from_str(&value).map_err(|_| usage("the value is not a valid header value"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// `text` with each `${VAR}` replaced by the variable's value. A `${` that
/// does not start a `${NAME}` (letters, digits, `_`) or names a variable
/// that is unset is refused, never sent as written (review 28: a value
/// with text around `${VAR}` went out literally, `Bearer ${TOK}`).
fn from_environment(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let inner = from.get(2..).unwrap_or_default();
        let name = inner
            .split_once('}')
            .map(|(name, _)| name)
            .filter(|name| {
                name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
            .ok_or("write a variable as ${NAME} (letters, digits and _)")?;
        out.push_str(&std::env::var(name).map_err(|_| format!("the environment has no {name}"))?);
        rest = inner.get(name.len() + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

/// The header's name only, for messages.
fn name_of(spec: &str) -> &str {
    spec.split_once(':').map_or("", |(name, _)| name.trim())
}

/// `--upstream-token-env VAR`: the upstream's bearer token, from the
/// environment.
pub fn bearer(var: Option<&str>) -> Result<Option<String>, ProxyError> {
    var.map(|var| secret_from_env("--upstream-token-env", var)).transpose()
}

/// A secret named by a `--…-env VAR` flag: the variable's value, trimmed; a
/// variable unset or blank is a usage error naming the flag (never the value).
pub fn secret_from_env(flag: &str, var: &str) -> Result<String, ProxyError> {
    match std::env::var(var) {
        Ok(secret) if !secret.trim().is_empty() => Ok(secret.trim().to_owned()),
        _ => Err(ProxyError::Usage(format!("{flag} {var}: the environment has no {var}"))),
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

/// The host (and port) of a URL, for messages: never a user or password.
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority.rsplit_once('@').map_or(authority, |(_, host)| host)
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
        // Anywhere in the value, as often as written.
        let got = headers(&["Authorization: Bearer ${PATH}".into(), "X-Two: a${PATH}b${PATH}".into()]).unwrap();
        assert_eq!(
            got[&HeaderName::from_static("authorization")],
            format!("Bearer {path}").as_str()
        );
        assert_eq!(
            got[&HeaderName::from_static("x-two")],
            format!("a{path}b{path}").as_str()
        );
        // Never sent as written: unset, unclosed, or not a name.
        for refused in [
            "Authorization: Bearer ${TOOLGATE_TEST_SURELY_UNSET}",
            "X-Test: ${PATH",
            "X-Test: ${}",
            "X-Test: ${PA TH}",
            "X-Test: ${1PATH}",
        ] {
            assert!(headers(&[refused.into()]).is_err(), "{refused}");
        }
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mtls")
            .join(name)
    }

    fn with_identity(cert: &str, key: &str) -> Result<reqwest::Client, String> {
        let (cert, key) = (fixture(cert), fixture(key));
        client(None, Some(ClientCertificate { cert: &cert, key: &key })).map_err(|e| e.to_string())
    }

    #[test]
    fn a_client_certificate_and_its_key_make_a_client() {
        with_identity("client.pem", "client-key.pem").unwrap();
        // One file holding both, and a key file led by `EC PARAMETERS`
        // (what `openssl ecparam -genkey` writes).
        with_identity("client-combined.pem", "client-combined.pem").unwrap();
        with_identity("client.pem", "client-key-with-params.pem").unwrap();
    }

    #[test]
    fn a_wrong_certificate_or_key_file_is_a_usage_error_naming_it() {
        let err = with_identity("client-key.pem", "client-key.pem").unwrap_err();
        assert!(
            err.contains("--upstream-cert") && err.contains("no PEM certificate"),
            "{err}"
        );
        let err = with_identity("client.pem", "client.pem").unwrap_err();
        assert!(
            err.contains("--upstream-key") && err.contains("no PEM private key"),
            "{err}"
        );
        let err = with_identity("client.pem", "other-key.pem").unwrap_err();
        assert!(
            err.contains("other-key.pem is not the key of the first certificate in --upstream-cert"),
            "{err}"
        );
        let err = with_identity("client.pem", "missing.pem").unwrap_err();
        assert!(err.contains("missing.pem"), "{err}");
    }

    #[test]
    fn hosts() {
        assert_eq!(host_of("https://mcp.example.com:8443/mcp"), "mcp.example.com:8443");
        assert_eq!(host_of("http://127.0.0.1/x?y"), "127.0.0.1");
        assert_eq!(host_of("http://svc:S3cret@10.0.0.1:8080/mcp"), "10.0.0.1:8080");
    }
}
