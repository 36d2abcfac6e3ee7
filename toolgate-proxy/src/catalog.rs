//! A server's whole tool catalog, read once over MCP (every page of
//! `tools/list`): what `toolgate check -- SERVER` checks a policy against,
//! and what `toolgate init` starts a policy from.

use rmcp::ServiceExt;
use std::sync::Arc;
use std::time::Duration;

use crate::gateway::{HttpUpstream, UpstreamSpec};
use crate::{ProxyError, upstream};

/// The upstream `--upstream URL` or `-- SERVER_CMD [ARGS...]` names, with
/// the `--upstream-header`s and `--upstream-token-env` for a URL; `None`
/// when neither is given.
pub fn named_upstream(
    url: Option<&str>,
    command: &[String],
    client: &reqwest::Client,
    headers: &[String],
    token_env: Option<&str>,
) -> Result<Option<UpstreamSpec>, ProxyError> {
    match (url, command.split_first()) {
        (Some(url), None) => {
            // Messages name the URL's host only: it may carry a password.
            if !url.starts_with("http://") && !url.starts_with("https://") {
                return Err(ProxyError::Usage("--upstream: give an http:// or https:// URL".into()));
            }
            let parsed =
                reqwest::Url::parse(url).map_err(|e| ProxyError::Usage(format!("--upstream: not a URL ({e})")))?;
            // A user or password in the URL would be sent as Basic auth, and
            // also shown in every error a client gets while the upstream is
            // down, and in the logs.
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(ProxyError::Usage(
                    "--upstream: a user or password in the URL would be shown in errors and logs; give it as --upstream-header 'Authorization: Basic ${VAR}' with the credentials in VAR".into(),
                ));
            }
            Ok(Some(UpstreamSpec::Url(HttpUpstream {
                url: url.to_owned(),
                client: client.clone(),
                headers: crate::outbound::headers(headers)?,
                bearer: crate::outbound::bearer(token_env)?,
            })))
        }
        (None, Some((program, rest))) => Ok(Some(UpstreamSpec::Command {
            program: program.clone(),
            args: rest.to_vec(),
        })),
        (Some(_), Some(_)) => Err(ProxyError::Usage(
            "give either --upstream URL or -- SERVER_CMD, not both".into(),
        )),
        (None, None) => Ok(None),
    }
}

/// The catalog as the engine reads it: `{"tools":[…]}`, every page.
pub async fn fetch(spec: &UpstreamSpec, timeout: Duration) -> Result<String, ProxyError> {
    let failed = |e: &dyn std::fmt::Display| ProxyError::Catalog(e.to_string());
    match spec {
        UpstreamSpec::Command { program, args } => {
            let fault = Arc::new(upstream::Fault::default());
            let upstream::Spawned {
                mut child,
                reader,
                writer,
            } = upstream::spawn(program, args, fault.clone())?;
            let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(reader, writer);
            let listed = tokio::time::timeout(timeout, list(transport)).await;
            child.stop().await;
            match listed {
                Ok(Ok(catalog)) => Ok(catalog),
                Ok(Err(e)) => Err(match fault.describe().await {
                    Some(why) => ProxyError::Catalog(format!("{e} ({why})")),
                    None => failed(&e),
                }),
                Err(_) => Err(failed(&format!(
                    "`{program}` did not list its tools within {} s",
                    timeout.as_secs()
                ))),
            }
        }
        UpstreamSpec::Url(http) => {
            let mut settings = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                http.url.as_str(),
            );
            settings.auth_header = http.bearer.clone();
            settings.custom_headers = http.headers.clone();
            let transport = rmcp::transport::StreamableHttpClientTransport::with_client(http.client.clone(), settings);
            match tokio::time::timeout(timeout, list(transport)).await {
                Ok(Ok(catalog)) => Ok(catalog),
                Ok(Err(e)) => {
                    let cause = crate::outbound::connect_failure(&http.client, &http.url).await;
                    Err(failed(&format!(
                        "{}: {}",
                        crate::outbound::host_of(&http.url),
                        cause.unwrap_or(e)
                    )))
                }
                Err(_) => Err(failed(&format!(
                    "{} did not list its tools within {} s",
                    http.url,
                    timeout.as_secs()
                ))),
            }
        }
        UpstreamSpec::InProcess(connect) => {
            let (read, write) = tokio::io::split((connect.0)());
            let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(read, write);
            match tokio::time::timeout(timeout, list(transport)).await {
                Ok(result) => result.map_err(|e| failed(&e)),
                Err(_) => Err(failed(&"no answer")),
            }
        }
    }
}

async fn list<T, E, A>(transport: T) -> Result<String, String>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = ().serve(transport).await.map_err(|e| crate::outbound::error_chain(&e))?;
    let tools = client.list_all_tools().await.map_err(|e| e.to_string());
    let _ = client.cancel().await;
    let tools = tools?;
    serde_json::to_string(&serde_json::json!({ "tools": tools })).map_err(|e| e.to_string())
}

/// For the CLI: the catalog of the server `--upstream URL` or
/// `-- SERVER_CMD…` names (platform roots for TLS, no extra headers),
/// with a name for messages; `None` when neither is given.
pub fn read_live(
    url: Option<&str>,
    command: &[String],
    timeout: Duration,
) -> Result<Option<(String, String)>, ProxyError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(ProxyError::Runtime)?;
    runtime.block_on(async {
        let client = crate::outbound::client(None, None)?;
        let Some(spec) = named_upstream(url, command, &client, &[], None)? else {
            return Ok(None);
        };
        let name = match &spec {
            UpstreamSpec::Url(http) => http.url.clone(),
            _ => command.join(" "),
        };
        let catalog = fetch(&spec, timeout).await?;
        Ok(Some((name, catalog)))
    })
}
