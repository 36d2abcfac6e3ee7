//! A server's whole tool catalog, read once over MCP (every page of
//! `tools/list`): what `toolgate check -- SERVER` checks a policy against,
//! and what `toolgate init` starts a policy from.

use rmcp::ServiceExt;
use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::{Peer, RoleClient, ServiceError};
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
    let tools = every_tool(client.peer()).await.map_err(|e| e.to_string());
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

/// The most tools a catalog may have: ten times the largest the benchmarks
/// load. A catalog is held in memory as text, as parsed tools and as the
/// engine's rules, so an upstream that lists without end (review 22: over
/// 13 000 pages in 6 s, 814 MB) is refused at this bound, not at the timeout.
pub(crate) const MAX_CATALOG_TOOLS: usize = 100_000;
/// The most `tools/list` pages one catalog read asks for.
pub(crate) const MAX_CATALOG_PAGES: usize = 10_000;

/// Why an upstream's whole catalog could not be read.
#[derive(Debug)]
pub(crate) enum ListFailure {
    /// The upstream failed a `tools/list` request.
    Upstream(ServiceError),
    /// Past a bound, or a cursor given twice: reading on would never end.
    Unbounded(String),
}

impl std::fmt::Display for ListFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListFailure::Upstream(e) => e.fmt(f),
            ListFailure::Unbounded(why) => f.write_str(why),
        }
    }
}

/// Every page of the upstream's `tools/list`, within [`MAX_CATALOG_TOOLS`]
/// and [`MAX_CATALOG_PAGES`], refusing a cursor the upstream gave before.
pub(crate) async fn every_tool(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, ListFailure> {
    let mut tools = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_CATALOG_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer.list_tools(Some(params)).await.map_err(ListFailure::Upstream)?;
        tools.extend(page.tools);
        if tools.len() > MAX_CATALOG_TOOLS {
            return Err(ListFailure::Unbounded(format!(
                "the upstream lists more than {MAX_CATALOG_TOOLS} tools"
            )));
        }
        let Some(next) = page.next_cursor else {
            return Ok(tools);
        };
        if !seen.insert(next.clone()) {
            return Err(ListFailure::Unbounded(
                "the upstream's tools/list gave the same nextCursor twice (its pages would never end)".into(),
            ));
        }
        cursor = Some(next);
    }
    Err(ListFailure::Unbounded(format!(
        "the upstream's tools/list has more than {MAX_CATALOG_PAGES} pages"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ErrorData, ListToolsResult, ServerCapabilities, ServerConfig};
    use rmcp::service::{RequestContext, RoleServer};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// How the test upstream pages its catalog.
    #[derive(Clone, Copy)]
    enum Paging {
        /// `tools` tools, `per_page` a page.
        Finite { tools: usize, per_page: usize },
        /// A new cursor on every page, for ever.
        Endless,
        /// The same cursor on every page.
        Repeating,
    }

    #[derive(Clone)]
    struct Pager {
        paging: Paging,
        asked: Arc<AtomicUsize>,
    }

    fn tool(n: usize) -> Tool {
        Tool::new(format!("t{n}"), "", Arc::new(serde_json::Map::new()))
    }

    impl rmcp::ServerHandler for Pager {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            let page: usize = request.and_then(|r| r.cursor).map_or(0, |c| c.parse().unwrap_or(0));
            let mut result = ListToolsResult::with_all_items(vec![tool(page)]);
            match self.paging {
                Paging::Finite { tools, per_page } => {
                    let start = page * per_page;
                    let end = (start + per_page).min(tools);
                    result.tools = (start..end).map(tool).collect();
                    result.next_cursor = (end < tools).then(|| (page + 1).to_string());
                }
                Paging::Endless => result.next_cursor = Some((page + 1).to_string()),
                Paging::Repeating => result.next_cursor = Some("1".into()),
            }
            Ok(result)
        }
    }

    /// Lists the test upstream's catalog through the real rmcp client.
    async fn listed(paging: Paging) -> (Result<Vec<Tool>, ListFailure>, usize) {
        let asked = Arc::new(AtomicUsize::new(0));
        let server = Pager {
            paging,
            asked: asked.clone(),
        };
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            if let Ok(running) = server.serve(theirs).await {
                let _ = running.waiting().await;
            }
        });
        let client = ().serve(ours).await.unwrap();
        let result = every_tool(client.peer()).await;
        let _ = client.cancel().await;
        (result, asked.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn every_page_is_read_up_to_the_bounds() {
        let (tools, asked) = listed(Paging::Finite { tools: 7, per_page: 3 }).await;
        let names: Vec<String> = tools.unwrap().iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, ["t0", "t1", "t2", "t3", "t4", "t5", "t6"]);
        assert_eq!(asked, 3);

        let (tools, _) = listed(Paging::Finite {
            tools: MAX_CATALOG_TOOLS,
            per_page: 5_000,
        })
        .await;
        assert_eq!(tools.unwrap().len(), MAX_CATALOG_TOOLS);
    }

    #[tokio::test]
    async fn a_catalog_past_the_bounds_is_refused_not_read_until_the_timeout() {
        let (tools, asked) = listed(Paging::Finite {
            tools: MAX_CATALOG_TOOLS + 1,
            per_page: 5_000,
        })
        .await;
        assert!(
            matches!(&tools, Err(ListFailure::Unbounded(why)) if why.contains("more than 100000 tools")),
            "{tools:?}"
        );
        assert_eq!(asked, MAX_CATALOG_TOOLS / 5_000 + 1);

        let (tools, asked) = listed(Paging::Endless).await;
        assert!(
            matches!(&tools, Err(ListFailure::Unbounded(why)) if why.contains("more than 10000 pages")),
            "{tools:?}"
        );
        assert_eq!(asked, MAX_CATALOG_PAGES);

        let (tools, asked) = listed(Paging::Repeating).await;
        assert!(
            matches!(&tools, Err(ListFailure::Unbounded(why)) if why.contains("same nextCursor twice")),
            "{tools:?}"
        );
        assert_eq!(asked, 2);
    }
}
