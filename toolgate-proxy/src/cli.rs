//! `toolgate proxy [--policy FILE] [--surface confirming|direct] [--scopes ...]
//! [--audit FILE] [--listen ADDR] (--upstream URL | -- SERVER_CMD [ARGS...])`

use clap::Parser;
use rmcp::ServiceExt;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use toolgate::{Context, Engine, Surface};

use crate::audit::{Audit, Rotation};
use crate::auth::{AuthSettings, Authenticator, Caller, Introspection, JwksSource, TokenCheck};
use crate::confirm::Sealing;
use crate::gate::RelayList;
use crate::http::GateState;
use crate::ledger::Ledger;
use crate::listen::ConnectionLimits;
use crate::outbound;
use crate::owners::SessionLimits;
use crate::policy::Policy;
use crate::seal::KeyRing;
use crate::stdio::{ClientLines, DropReport};
use crate::{Config, Gateway, ProxyError};

const EXIT_USAGE: u8 = 64;
const EXIT_LOAD: u8 = 2;

/// Put toolgate in front of an MCP server: `tools/list` shows only what the
/// policy exposes, every `tools/call` is decided before it is forwarded, and
/// everything else passes through.
#[derive(Parser, Debug, Clone)]
#[command(name = "toolgate proxy", version)]
pub struct ProxyArgs {
    /// The policy file (tool_policies.yaml). Without it the catalog's own
    /// fields decide.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// confirming (the caller can carry a human confirmation) or direct.
    #[arg(long, value_enum, default_value_t = SurfaceArg::Confirming)]
    pub surface: SurfaceArg,
    /// Granted scopes, comma-separated. Absent: no scope check.
    #[arg(long)]
    pub scopes: Option<String>,
    /// The route's allowlist of tool names, comma-separated. Absent: all.
    #[arg(long)]
    pub allow: Option<String>,
    /// Append one JSON line per decision to this file.
    #[arg(long)]
    pub audit: Option<PathBuf>,
    /// Include argument values in the audit log.
    #[arg(long, requires = "audit")]
    pub audit_args: bool,
    /// Serve Streamable HTTP to clients at http://ADDR/mcp instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// An upstream Streamable HTTP server (http://…) instead of a child.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub upstream: Option<String>,
    /// Seconds a request to the upstream (or an elicitation) may go without
    /// an answer; progress notifications reset it.
    /// At most a week: a longer wait is a configuration mistake.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub timeout: u64,
    /// A custom (non-MCP) method to relay to the upstream as it is; repeat
    /// for several. Every other method the gateway does not handle is
    /// refused (-32601), and MCP's own methods can never be listed here.
    #[arg(long = "relay-method", value_name = "METHOD")]
    pub relay_methods: Vec<String>,
    /// Count the model's own `confirmed: true` as the confirmation (the seed
    /// runtime's argument path, for hosts that keep their own turn state).
    /// Off by default: a write then runs only after a person accepted it
    /// through the client (elicitation); the audit line says `argument`
    /// whenever the model's word was taken.
    #[arg(long)]
    pub trust_model_confirmation: bool,
    /// A file of secrets that seal pending confirmations for MCP 2026-07-28
    /// clients (`requestState`), one per line, the sealing one first; every
    /// line opens (rotation). Replicas that share it accept each other's
    /// states, with a shared `--store redis://…` (under `--store memory` the
    /// secret is not used: a confirmation could run once per process). Also
    /// `TOOLGATE_STATE_SECRET` (comma-separated). Without either: a random
    /// key for this process (one replica).
    #[arg(long, value_name = "FILE")]
    pub state_secret_file: Option<PathBuf>,
    /// Seconds a person's pending confirmation stays valid (at most a day).
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub confirm_ttl: u64,
    /// Where redeemed confirmations are recorded so each runs once:
    /// `memory` (this process; the default) or `redis://HOST:PORT` (Redis
    /// or Valkey, shared by replicas). When the store cannot be reached, no
    /// confirmed call runs.
    #[arg(long, value_name = "URL", default_value = "memory")]
    pub store: String,
    /// Where approval pages are served (links for clients that cannot ask
    /// the person themselves). Default: the `--listen` address; with stdio,
    /// 127.0.0.1:0 (a free loopback port, printed on stderr at start).
    #[arg(long, value_name = "ADDR")]
    pub approve_listen: Option<String>,
    /// The approval links' base as the person's browser reaches it (e.g.
    /// behind a reverse proxy: https://toolgate.example.com). Default:
    /// the address the pages are served on, http:// (https:// on `--listen`
    /// with `--tls-cert`: give the name the certificate is for here).
    #[arg(long, value_name = "URL")]
    pub approve_url: Option<String>,
    /// Who may call: `none` (the default; `--scopes` for everyone), `jwt`
    /// (every `--listen` request carries a signed bearer token; its scopes
    /// are the caller's, its subject is audited and sealed into
    /// confirmations) or `introspection` (the same for opaque tokens, asked
    /// about at the authorization server's RFC 7662 endpoint).
    #[arg(long, value_enum, default_value_t = AuthArg::None, requires = "listen")]
    pub auth: AuthArg,
    /// The issuer's JSON Web Key Set: a file, or an http(s) URL (fetched at
    /// start, again when a token names an unknown key, at most every 10 s,
    /// and whenever the set in hand is `--jwks-max-age` old).
    #[arg(long, value_name = "FILE|URL", required_if_eq("auth", "jwt"))]
    pub jwks: Option<String>,
    /// Seconds the key set in hand is used before a request fetches it again,
    /// so a key the issuer withdrew stops vouching for tokens within this.
    /// (Default 300; not a default clap fills in, so a value given to
    /// `--auth introspection` is seen and refused.)
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub jwks_max_age: Option<u64>,
    /// The `iss` every token must carry (also the authorization server named
    /// in the protected-resource metadata).
    #[arg(long, value_name = "ISS", required_if_eq_any([("auth", "jwt"), ("auth", "introspection")]),
          value_parser = not_blank)]
    pub issuer: Option<String>,
    /// The `aud` every token must carry (this gateway's resource identifier
    /// as the authorization server knows it).
    #[arg(long, value_name = "AUD", required_if_eq_any([("auth", "jwt"), ("auth", "introspection")]),
          value_parser = not_blank)]
    pub audience: Option<String>,
    /// `--auth introspection`: the authorization server's token
    /// introspection endpoint (RFC 7662).
    #[arg(long, value_name = "URL", required_if_eq("auth", "introspection"))]
    pub introspection_url: Option<String>,
    /// `--auth introspection`: the gateway's client id at that endpoint.
    #[arg(long, value_name = "ID", required_if_eq("auth", "introspection"))]
    pub introspection_client_id: Option<String>,
    /// `--auth introspection`: an environment variable holding the gateway's
    /// client secret there (sent with HTTP Basic; never printed).
    #[arg(long, value_name = "VAR", required_if_eq("auth", "introspection"))]
    pub introspection_secret_env: Option<String>,
    /// `--auth introspection`: how long an active answer is trusted, in
    /// seconds (never past the token's `exp`): a revoked token is refused
    /// at most this long after its revocation. (Default 60; given to
    /// `--auth jwt`, which asks no endpoint, it is refused.)
    #[arg(long, value_name = "SECS")]
    pub introspection_cache: Option<u64>,
    /// This resource's URL in its protected-resource metadata (RFC 9728).
    /// Default: http://LISTEN_ADDR/mcp (https with `--tls-cert`).
    #[arg(long, value_name = "URL", requires = "issuer")]
    pub resource: Option<String>,
    /// `--listen`: a browser origin (`https://app.example.com`, a port
    /// `:*` for any) whose pages may call `/mcp`, beside this machine's own
    /// (`http://localhost:*`, `http://127.0.0.1:*`) and `--resource`'s. A
    /// request with any other `Origin` header is refused (403); a client
    /// that sends none (not a browser) is not affected. Pages of these
    /// origins (not this machine's) may also read the answers (CORS).
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "listen")]
    pub allow_origins: Vec<String>,
    /// `--listen`: a name clients reach the gateway by (`toolgate`,
    /// `mcp.internal.example`), accepted in the `Host` header beside this
    /// machine's (`localhost`, its addresses) and `--resource`'s. A request
    /// naming any other host is refused (403): a web page that rebinds its
    /// own name to the gateway's address cannot drive it. Repeatable.
    #[arg(long = "allow-host", value_name = "NAME", requires = "listen", value_parser = host_name)]
    pub allow_hosts: Vec<String>,
    /// `--listen`: how many handshake-era sessions may be open at once in
    /// all (each holds an upstream session; with a stdio upstream, a child
    /// process). An `initialize` past it is answered 429
    /// `TOO_MANY_SESSIONS`; a closed or expired session frees its place.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions: u32,
    /// With `--auth`: how many of those one subject may hold at once
    /// (default 16; refused without `--auth`, where callers cannot be told
    /// apart and only `--max-sessions` applies).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions_per_caller: Option<u32>,
    /// `--listen`: a handshake-era session whose client has sent nothing for
    /// this long, with no request or GET stream of its still open, is
    /// closed and frees its place (messages its upstream sends do not count).
    #[arg(long, value_name = "SECS", default_value_t = 300, requires = "listen",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub session_idle: u64,
    /// `--listen` with `--auth`: how many requests one subject may have in
    /// flight at once, over every session and the shared 2026-07-28 one,
    /// open GET streams included. A request past it is answered 429
    /// `TOO_MANY_REQUESTS`. (Default 64; refused without `--auth`.)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_in_flight_per_caller: Option<u32>,
    /// `--listen`: on SIGTERM or Ctrl-C, `/readyz` answers 503 and the
    /// requests in flight get this many seconds to finish; then the open
    /// streams and sessions are ended and the gateway exits.
    #[arg(long, value_name = "SECS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_grace: u64,
    /// `--listen` over HTTPS: the server's certificate chain (PEM, leaf
    /// first), with `--tls-key`. Read again when the files change (looked at
    /// every 10 s at most), so a renewed certificate is served without a
    /// restart.
    #[arg(long, value_name = "FILE", requires_all = ["listen", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `--tls-cert`; may be the same file.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With `--tls-cert`: every client must present a certificate issued by
    /// one of these CAs (PEM), else its TLS handshake is refused (mutual
    /// TLS). It admits connections; callers are still told apart by
    /// `--auth`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Every HTTP listener (`--listen`, `--metrics`, the approval pages):
    /// a request's headers, and the next request on a kept-alive
    /// connection, must arrive within this many seconds, else the
    /// connection is closed. A response being sent is not limited. Keep it
    /// above the idle timeout of a load balancer in front (60 s for most).
    #[arg(long, value_name = "SECS", default_value_t = 75, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout: u64,
    /// Every HTTP listener: how many connections it serves at once; a client
    /// past it waits (in the kernel's backlog) until one closes.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// A scope every token must grant, else 403 `insufficient_scope`;
    /// repeat for several.
    #[arg(long = "require-scope", value_name = "SCOPE", requires = "issuer")]
    pub require_scopes: Vec<String>,
    /// Listen on a non-loopback address without `--auth` (anyone who can
    /// reach the port can call tools with `--scopes`).
    #[arg(long, requires = "listen")]
    pub insecure_listen: bool,
    /// Extra PEM trust roots for an https:// upstream and JWKS URL (beside
    /// the platform's).
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,
    /// Mutual TLS: the certificate chain (PEM, leaf first) the gateway
    /// presents to an https:// upstream that asks for a client
    /// certificate. With --upstream-key.
    #[arg(long, value_name = "FILE", requires_all = ["upstream", "upstream_key"])]
    pub upstream_cert: Option<PathBuf>,
    /// Mutual TLS: the private key (PEM) of --upstream-cert; may be the same
    /// file.
    #[arg(long, value_name = "FILE", requires = "upstream_cert")]
    pub upstream_key: Option<PathBuf>,
    /// A header sent with every request to the upstream, `'Name: value'`;
    /// each `${VAR}` in a value is read from the environment. Repeatable.
    /// Values are never printed.
    #[arg(long = "upstream-header", value_name = "'NAME: VALUE'", requires = "upstream")]
    pub upstream_headers: Vec<String>,
    /// An environment variable holding a bearer token for the upstream.
    #[arg(long, value_name = "VAR", requires = "upstream")]
    pub upstream_token_env: Option<String>,
    /// Re-read the policy file when it changes; a version that does not
    /// load is reported (file:line:col) and the rules in force stay.
    #[arg(long, requires = "policy")]
    pub watch: bool,
    /// `enforce` (the default), or `shadow`: decide and audit every call,
    /// forward all of them (audit lines say `would_block`), list every tool.
    #[arg(long, value_enum, default_value_t = ModeArg::Enforce)]
    pub mode: ModeArg,
    /// Serve /metrics (Prometheus), /healthz and /readyz at http://ADDR.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Log format on stderr (`RUST_LOG` filters, e.g. `RUST_LOG=info`; default: warnings and errors).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Rotate the audit file: `daily`, or at a size (`10MB`).
    #[arg(long, value_name = "daily|SIZE", requires = "audit")]
    pub audit_rotate: Option<String>,
    /// How many rotated audit files to keep (FILE.1 … FILE.N).
    #[arg(long, value_name = "N", default_value_t = 5, requires = "audit_rotate")]
    pub audit_keep: u32,
    /// Threads serving requests. Default: with `--listen`, one per CPU this
    /// process may use; with stdio (one client), 2.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,
    /// The upstream server's command and arguments (after `--`).
    #[arg(last = true, value_name = "SERVER_CMD")]
    pub command: Vec<String>,
}

/// `--auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthArg {
    None,
    Jwt,
    Introspection,
}

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    Enforce,
    Shadow,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `--surface` on the command line (the SDK's [`Surface`] carries no
/// command-line parsing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SurfaceArg {
    /// The caller can carry a human confirmation (the default).
    Confirming,
    /// No confirmation round-trip: only read-only tools that need none.
    Direct,
}

impl From<SurfaceArg> for Surface {
    fn from(s: SurfaceArg) -> Surface {
        match s {
            SurfaceArg::Confirming => Surface::Confirming,
            SurfaceArg::Direct => Surface::Direct,
        }
    }
}

/// Parses `args` (the first is the program name) and runs the proxy.
pub fn main_with<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    match ProxyArgs::try_parse_from(args) {
        Ok(args) => run(args),
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            if usage {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}

/// Runs the proxy until the client goes away (stdio) or a signal (HTTP).
pub fn run(args: ProxyArgs) -> ExitCode {
    init_tracing(args.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads(&args))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&ProxyError::Runtime(e)),
    };
    let result = runtime.block_on(async_main(args));
    // Standard input's reader thread may still be blocked: do not wait on it.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// `--worker-threads`, or its default: stdio serves one client, for which two
/// threads are plenty; `--listen` serves many sessions, which a fixed pair of
/// threads would cap on a larger machine whatever its CPUs.
fn worker_threads(args: &ProxyArgs) -> usize {
    match (args.worker_threads, &args.listen) {
        (Some(n), _) => usize::from(n),
        (None, Some(_)) => std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
        (None, None) => 2,
    }
}

/// Structured logs on stderr: `RUST_LOG` filters (default: warnings and
/// errors, so a stdio client's stderr stays quiet), text or JSON lines.
fn init_tracing(format: LogFormat) {
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // rmcp logs whole messages (argument values, tool results) at debug:
    // `RUST_LOG=debug` must not put them in the logs behind --audit-args'
    // back. Naming rmcp in RUST_LOG (`debug,rmcp=debug`) shows them.
    let names_rmcp = std::env::var("RUST_LOG").is_ok_and(|spec| {
        spec.split(',').any(|directive| {
            let target = directive.trim().split(['=', '[']).next().unwrap_or_default();
            target == "rmcp" || target.starts_with("rmcp::")
        })
    });
    if !names_rmcp && let Ok(quiet) = "rmcp=warn".parse() {
        filter = filter.add_directive(quiet);
    }
    // rmcp::service logs every error answer at warn, an upstream's message
    // among them, which often repeats the arguments it refused (review 22):
    // the gateway logs its own failures by code. Errors only, unless named.
    if !names_rmcp && let Ok(quieter) = "rmcp::service=error".parse() {
        filter = filter.add_directive(quieter);
    }
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => {
            crate::say::as_json();
            builder.json().try_init()
        }
    };
}

fn fail(e: &ProxyError) -> ExitCode {
    say!(Error, "{e}");
    match e {
        ProxyError::Usage(_) => ExitCode::from(EXIT_USAGE),
        // An audit file that cannot be opened is named like an input: a
        // start-up error to fix, not a gateway that stopped (review 28).
        ProxyError::Policy { .. } | ProxyError::Read { .. } | ProxyError::Input(_) | ProxyError::Audit { .. } => {
            ExitCode::from(EXIT_LOAD)
        }
        _ => ExitCode::FAILURE,
    }
}

/// The sealing keys: `--state-secret-file`, else `TOOLGATE_STATE_SECRET`,
/// else a random key for this process (said at start-up).
fn state_keys(args: &ProxyArgs) -> Result<KeyRing, ProxyError> {
    let ring = match (&args.state_secret_file, std::env::var("TOOLGATE_STATE_SECRET")) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path).map_err(|source| ProxyError::Read {
                path: path.clone(),
                source,
            })?;
            KeyRing::from_text(&text).map_err(|e| ProxyError::Usage(format!("{}: {e}", path.display())))?
        }
        (None, Ok(text)) if !text.trim().is_empty() => {
            KeyRing::from_text(&text).map_err(|e| ProxyError::Usage(format!("TOOLGATE_STATE_SECRET: {e}")))?
        }
        _ => {
            let ring = KeyRing::ephemeral().map_err(|e| ProxyError::Usage(e.to_string()))?;
            say!(
                Warn,
                "no TOOLGATE_STATE_SECRET or --state-secret-file: pending confirmations are sealed with a random key of this process (one replica; they do not survive a restart)"
            );
            ring
        }
    };
    Ok(ring)
}

/// With `--store memory`, redeemed confirmations are known to this process
/// only: a secret other processes share would let each of them (another
/// replica, this one restarted) run a confirmation again, so the secret is
/// checked and then not used, and a random key of this process seals.
async fn sealing(args: &ProxyArgs) -> Result<Sealing, ProxyError> {
    let (keys, ledger) = match args.store.as_str() {
        "memory" => {
            let configured = args.state_secret_file.is_some()
                || std::env::var("TOOLGATE_STATE_SECRET").is_ok_and(|text| !text.trim().is_empty());
            let keys = state_keys(args)?;
            let keys = if configured {
                say!(
                    Warn,
                    "--store memory keeps redeemed confirmations in this process only, so a shared state secret would let another replica, or this one restarted, run a confirmation again: the secret is not used, pending confirmations are sealed with a random key of this process; give the replicas a shared --store redis://… with the secret"
                );
                KeyRing::ephemeral().map_err(|e| ProxyError::Usage(e.to_string()))?
            } else {
                keys
            };
            (keys, Ledger::memory())
        }
        url => (
            state_keys(args)?,
            Ledger::redis(url).await.map_err(|e| match e {
                crate::ledger::LedgerError::Unreachable(_) => ProxyError::Input(e.to_string()),
                _ => ProxyError::Usage(e.to_string()),
            })?,
        ),
    };
    Ok(Sealing {
        keys,
        ledger,
        ttl: Duration::from_secs(args.confirm_ttl.max(1)),
    })
}

fn config(args: &ProxyArgs, sealing: Sealing, client: &reqwest::Client) -> Result<Config, ProxyError> {
    let upstream = crate::catalog::named_upstream(
        args.upstream.as_deref(),
        &args.command,
        client,
        &args.upstream_headers,
        args.upstream_token_env.as_deref(),
    )?
    .ok_or_else(|| ProxyError::Usage("no upstream: give -- SERVER_CMD [ARGS...] or --upstream URL".into()))?;
    // A bearer token or headers (which carry keys) go to the upstream on
    // every request: in clear text only to this machine.
    if let Some(url) = &args.upstream
        && (args.upstream_token_env.is_some() || !args.upstream_headers.is_empty())
    {
        encrypted_unless_local("--upstream (with --upstream-token-env or --upstream-header)", url)?;
    }
    let policy = match &args.policy {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|source| ProxyError::Read {
            path: path.clone(),
            source,
        })?),
        None => None,
    };
    let engine = Engine::cached().map_err(|e| ProxyError::Engine(Box::new(e)))?;
    if let (Some(text), Some(path)) = (&policy, &args.policy) {
        // Policy errors are start-up errors, not per-call surprises.
        engine
            .load(Some(text), r#"{"tools":[]}"#)
            .map_err(|source| ProxyError::Policy {
                path: path.clone(),
                source: Box::new(source),
            })?;
    }
    let audit = match &args.audit {
        Some(path) => {
            if path.as_os_str() == "-" && args.listen.is_none() {
                return Err(ProxyError::Usage(
                    "--audit -: standard output is the MCP channel over stdio; use it with --listen".into(),
                ));
            }
            let rotation = match &args.audit_rotate {
                Some(text) => Rotation::parse(text).map_err(ProxyError::Usage)?,
                None => Rotation::Never,
            };
            Some(Audit::open_rotating(path, args.audit_args, rotation, args.audit_keep)?)
        }
        None => None,
    };
    let relay = RelayList::new(args.relay_methods.iter().cloned()).map_err(ProxyError::Usage)?;
    let authenticated = args.auth != AuthArg::None;
    if authenticated && args.scopes.is_some() {
        return Err(ProxyError::Usage(
            "--scopes with --auth: each caller's scopes come from their token".into(),
        ));
    }
    // An issuer's settings without --auth would be ignored, and every
    // caller served as anonymous: a dropped `--auth jwt` line must not turn
    // authentication (and with it every scope check) off without a word.
    if !authenticated {
        // (flags, why they mean nothing without --auth)
        let needing_auth: [(&[(&str, bool)], &str); 2] = [
            (
                &[
                    ("--jwks", args.jwks.is_some()),
                    ("--issuer", args.issuer.is_some()),
                    ("--audience", args.audience.is_some()),
                    ("--resource", args.resource.is_some()),
                    ("--require-scope", !args.require_scopes.is_empty()),
                    ("--introspection-url", args.introspection_url.is_some()),
                    ("--introspection-client-id", args.introspection_client_id.is_some()),
                    ("--introspection-secret-env", args.introspection_secret_env.is_some()),
                    ("--introspection-cache", args.introspection_cache.is_some()),
                    ("--jwks-max-age", args.jwks_max_age.is_some()),
                ],
                "no token would be checked and every caller would be anonymous; add --auth jwt or --auth introspection",
            ),
            // Without a caller's identity a bound per caller bounds nothing:
            // an operator who set one must not believe a shared upstream
            // protected.
            (
                &[
                    ("--max-sessions-per-caller", args.max_sessions_per_caller.is_some()),
                    ("--max-in-flight-per-caller", args.max_in_flight_per_caller.is_some()),
                ],
                "callers cannot be told apart, so no bound per caller would apply; use --max-sessions, or add --auth",
            ),
        ];
        for (flags, why) in needing_auth {
            let given: Vec<&str> = flags
                .iter()
                .filter_map(|&(flag, given)| given.then_some(flag))
                .collect();
            if !given.is_empty() {
                return Err(ProxyError::Usage(format!("{} without --auth: {why}", given.join(", "))));
            }
        }
    }
    // With --auth, a request without a caller is refused; the anonymous
    // caller then grants nothing, as a second line.
    let scopes = if authenticated {
        Some("")
    } else {
        args.scopes.as_deref()
    };
    let context = Context::from_flags(args.surface.into(), scopes, args.allow.as_deref());
    if policy.is_none() {
        // spec §2: without a policy the server's hints decide both ways; an
        // operator putting the gateway in front of a server they do not
        // trust must know its word is taken (review 28).
        say!(
            Warn,
            "no --policy: the server's own annotations decide (a tool it marks readOnlyHint: true runs without confirmation); `toolgate init` writes a policy that does not take its word"
        );
    }
    if scopes.is_none() {
        say!(
            Warn,
            "no --scopes and no --auth: the scopes a policy requires are not checked (every caller may call every exposed tool); give --scopes, or --auth with --listen"
        );
    }
    if args.trust_model_confirmation {
        say!(
            Warn,
            "--trust-model-confirmation: a model-written `confirmed: true` counts as a person's confirmation where the client cannot be asked"
        );
    }
    if args.mode == ModeArg::Shadow {
        say!(
            Warn,
            "--mode shadow: every call is forwarded, blocked or not (audit lines say would_block); nothing is enforced"
        );
    }
    let metrics: Arc<crate::metrics::Metrics> = Arc::default();
    let audit = audit.map(|audit| audit.counting_failures(metrics.audit_write_failures()));
    Ok(Config {
        engine,
        policy: Arc::new(Policy::fixed(policy)),
        anonymous: Arc::new(Caller::anonymous(context)),
        authenticated,
        shadow: args.mode == ModeArg::Shadow,
        metrics,
        trust_model_confirmation: args.trust_model_confirmation,
        sealing,
        upstream,
        timeout: Duration::from_secs(args.timeout.max(1)),
        audit,
        relay,
        approve: Default::default(),
        stateless: Default::default(),
        stateless_opening: Default::default(),
        stateless_failed: Default::default(),
        warming: Default::default(),
        reported: Default::default(),
        shared: Default::default(),
        stopping: Default::default(),
        forwarding: Default::default(),
    })
}

/// Reports a dropped client notification (it cannot be answered).
fn drop_report() -> DropReport {
    Arc::new(|method: &str, why: &str| {
        say!(Warn, "dropped a notification {method:?}: {why}");
    })
}

async fn async_main(args: ProxyArgs) -> Result<(), ProxyError> {
    if let Some(addr) = &args.listen {
        check_exposure(&args, addr).await?;
    }
    let identity = match (&args.upstream_cert, &args.upstream_key) {
        (Some(cert), Some(key)) => Some(outbound::ClientCertificate { cert, key }),
        _ => None,
    };
    // A client certificate only means something over TLS: with an http://
    // upstream it would never be sent, and the operator would believe the
    // upstream knows who calls.
    if identity.is_some() && !args.upstream.as_deref().is_some_and(|u| u.starts_with("https://")) {
        return Err(ProxyError::Usage(
            "--upstream-cert: the upstream is not https://, so no client certificate would be sent".into(),
        ));
    }
    let upstream_client = outbound::client(args.upstream_ca.as_deref(), identity)?;
    let sealing = sealing(&args).await?;
    let config = Arc::new(config(&args, sealing, &upstream_client)?);
    let auth = match args.auth {
        AuthArg::Jwt | AuthArg::Introspection => {
            // The issuer (its JWKS, its introspection endpoint) is asked
            // without the upstream's client certificate: that identity is
            // the upstream's business alone.
            let issuer_client = match identity {
                Some(_) => outbound::client(args.upstream_ca.as_deref(), None)?,
                None => upstream_client.clone(),
            };
            Some(Arc::new(authenticator(&args, &config, &issuer_client).await?))
        }
        AuthArg::None => None,
    };
    if let (true, Some(path)) = (args.watch, &args.policy) {
        crate::policy::watch(
            path.clone(),
            config.policy.clone(),
            config.engine.clone(),
            config.metrics.clone(),
        );
    }
    // Read before the upstream is started: a wrong file is a usage error.
    let listen_tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::acceptor(
            &crate::tls::ListenTls {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: args.tls_client_ca.clone(),
            },
            config.metrics.clone(),
        )?),
        _ => None,
    };
    let connection_limits = ConnectionLimits {
        header_timeout: Duration::from_secs(args.header_timeout),
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
    };
    // The metrics and the pages' own listeners: plain HTTP, served until the
    // process ends.
    let serve_plain = |listener, router| {
        tokio::spawn(crate::listen::serve(
            listener,
            router,
            connection_limits,
            None,
            config.metrics.clone(),
            std::future::pending(),
        ))
    };
    if let Some(addr) = &args.metrics {
        let (listener, local) = bind(addr).await?;
        let mut router = crate::metrics::router(config.metrics.clone());
        say!(Info, "metrics at http://{local}/metrics");
        if local.ip().is_loopback() {
            // On loopback a web page that rebinds its own name to 127.0.0.1
            // could read every tool name (review 22): this machine's names
            // and `--allow-host`'s only, and no browser's `Origin`. Beyond
            // loopback scrapers and probes name the address they reach.
            let check = crate::headers::HeaderCheck::new(&own_hosts(local, &args.allow_hosts), &[]);
            router = router.layer(axum::middleware::from_fn_with_state(
                Arc::new(check),
                crate::headers::check,
            ));
        } else {
            // Not refused: a scraper on a private network is the usual set-up.
            say!(
                Warn,
                "WARNING: --metrics {addr} is reachable beyond this machine without authentication, and its labels name every tool, hidden ones included: keep it on a network only the scraper reaches"
            );
        }
        serve_plain(("metrics", listener), router);
    }
    let own_pages = match (&args.approve_listen, &args.listen) {
        (Some(addr), _) => Some(addr.as_str()),
        (None, None) => Some("127.0.0.1:0"),
        (None, Some(_)) => None,
    };
    if let Some(addr) = own_pages {
        let (listener, local) = bind(addr).await?;
        let behind_tls = args
            .approve_url
            .as_deref()
            .is_some_and(|url| url.starts_with("https://"));
        if !local.ip().is_loopback() && !behind_tls {
            // As for --metrics: the pages carry each pending call's tool and
            // arguments, and a link is all it takes to approve one.
            say!(
                Warn,
                "WARNING: --approve-listen {addr} serves the approval pages beyond this machine over plain HTTP: a link is all it takes to approve a call; serve them behind TLS (--approve-url https://…)"
            );
        }
        let router = approve_router(&config, (local, &args.allow_hosts), args.approve_url.as_deref(), "http");
        serve_plain(("approve", listener), router);
    }
    let served = match &args.listen {
        Some(addr) => {
            crate::gateway::warm_up(config.clone());
            let served = Served {
                with_pages: own_pages.is_none(),
                public: args.approve_url.as_deref(),
                auth,
                resource_host: args.resource.as_deref().map(|r| outbound::host_of(r).to_owned()),
                origins: allowed_origins(&args),
                readable_by: args.allow_origins.clone(),
                allowed_hosts: &args.allow_hosts,
                limits: SessionLimits {
                    total: usize::try_from(args.max_sessions).unwrap_or(usize::MAX),
                    per_caller: (args.auth != AuthArg::None).then(|| {
                        usize::try_from(args.max_sessions_per_caller.unwrap_or(DEFAULT_SESSIONS_PER_CALLER))
                            .unwrap_or(usize::MAX)
                    }),
                },
                grace: Duration::from_secs(args.shutdown_grace),
                session_idle: Duration::from_secs(args.session_idle),
                connections: connection_limits,
                tls: listen_tls,
                in_flight_per_caller: (args.auth != AuthArg::None).then(|| {
                    usize::try_from(args.max_in_flight_per_caller.unwrap_or(DEFAULT_IN_FLIGHT_PER_CALLER))
                        .unwrap_or(usize::MAX)
                }),
            };
            serve_http(config.clone(), addr, served).await
        }
        None => serve_stdio(config.clone()).await,
    };
    config.shutdown_stateless().await;
    served
}

async fn serve_stdio(config: Arc<Config>) -> Result<(), ProxyError> {
    let transport = ClientLines::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
        config.relay.clone(),
        drop_report(),
    );
    let flusher = transport.flusher();
    let (stopping, forwarding) = (config.stopping.clone(), config.forwarding.clone());
    let gateway = Gateway::new(config);
    let session = gateway.clone();
    let served = tokio::select! {
        served = gateway.serve(transport) => served,
        () = shutdown_signal() => {
            session.shutdown().await;
            return Ok(());
        }
    };
    let running = match served {
        Ok(running) => running,
        Err(e) => {
            // The client's answer (e.g. why initialize failed) goes out first.
            flusher.flush().await;
            session.shutdown().await;
            return Err(ProxyError::Serve(e.to_string()));
        }
    };
    let (ended, signalled) = tokio::select! {
        _ = running.waiting() => (false, false),
        () = shutdown_signal() => (false, true),
        () = session.upstream_ended() => (true, false),
    };
    if signalled {
        // Calls still waiting for the upstream are cancelled there and
        // answered `CANCELLED` (their audit lines written) before the
        // session ends, rather than left with no answer (review 22).
        stopping.cancel();
        let answered_by = tokio::time::Instant::now() + ANSWER_AFTER_STOP;
        while forwarding.load(std::sync::atomic::Ordering::SeqCst) > 0 && tokio::time::Instant::now() < answered_by {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The session writes each answer once its handler returns.
        tokio::time::sleep(STDIO_ANSWER_WAIT).await;
    }
    // The client went away (or we were told to stop): stop the server. Or
    // the server ended: every later call would fail, while the host shows
    // the server as connected; exiting lets the host start both again.
    flusher.flush().await;
    session.shutdown().await;
    if ended {
        return Err(ProxyError::Serve(
            "the upstream MCP server ended; stopping so that the host starts both again".into(),
        ));
    }
    Ok(())
}

/// The approval pages' router, and their links' base set and said on stderr.
/// The approval pages' router; `scheme`: the listener's (`https` on
/// `--listen` with `--tls-cert`), for the links when `public` is not given.
fn approve_router(
    config: &Arc<Config>,
    (local, allowed_hosts): (std::net::SocketAddr, &[String]),
    public: Option<&str>,
    scheme: &str,
) -> axum::Router {
    let mut hosts = own_hosts(local, allowed_hosts);
    let base = match public {
        Some(url) => {
            let url = url.trim_end_matches('/').to_owned();
            let host = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
            let host = host.split(['/', ':']).next().unwrap_or_default();
            hosts.push(host.to_owned());
            url
        }
        None => {
            let ip = match local.ip() {
                std::net::IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_owned(),
                std::net::IpAddr::V6(v6) if v6.is_unspecified() => "[::1]".to_owned(),
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                std::net::IpAddr::V4(v4) => v4.to_string(),
            };
            format!("{scheme}://{ip}:{}", local.port())
        }
    };
    say!(Info, "approval pages at {base}/approve/");
    let _ = config.approve.base.set(base);
    crate::approve::router(crate::approve::Served {
        config: config.clone(),
        hosts: Arc::new(hosts),
    })
}

/// How the HTTP listener serves, beside the MCP endpoint.
struct Served<'a> {
    with_pages: bool,
    public: Option<&'a str>,
    auth: Option<Arc<Authenticator>>,
    /// `--resource`'s host, accepted in `Host` headers.
    resource_host: Option<String>,
    /// `--allow-host` names, accepted in `Host` headers.
    allowed_hosts: &'a [String],
    /// Browser origins whose requests `/mcp` answers.
    origins: Vec<String>,
    /// Browser origins whose pages may read the answers (CORS): the
    /// `--allow-origin` ones alone. This machine's pages are answered but
    /// not given CORS: any local web page (a dev server, another app's UI)
    /// could otherwise drive a gateway that has no `--auth` on loopback.
    readable_by: Vec<String>,
    /// How many handshake-era sessions may be open.
    limits: SessionLimits,
    /// How long a stop waits for the requests in flight.
    grace: Duration,
    /// `--session-idle`.
    session_idle: Duration,
    connections: ConnectionLimits,
    /// Requests in flight per subject (with `--auth`).
    in_flight_per_caller: Option<usize>,
    /// `--tls-cert`: every connection is TLS.
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// The names accepted in a `Host` header on a listener bound to `local`:
/// this machine's, its address, and the `--allow-host` ones.
fn own_hosts(local: std::net::SocketAddr, allowed: &[String]) -> Vec<String> {
    let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    hosts.push(local.ip().to_string());
    hosts.extend(allowed.iter().cloned());
    hosts
}

/// `--issuer`, `--audience`: an empty value (an unset shell variable) would
/// start a gateway that refuses every token.
fn not_blank(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("an empty value: every token would be refused".into());
    }
    Ok(text.to_owned())
}

/// `--allow-host`: a DNS name or an address, without scheme, port or path.
fn host_name(text: &str) -> Result<String, String> {
    let fits = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'[' | b']'));
    let has_port = text
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        && !text.starts_with('[')
        && text.matches(':').count() == 1;
    if !fits || has_port {
        return Err(format!(
            "{text:?}: a host name alone (`toolgate`, `mcp.example.com`), without scheme, port or path"
        ));
    }
    Ok(text.to_ascii_lowercase())
}

/// The browser origins `/mcp` answers (MCP's transport: a server must
/// check `Origin`, so a web page the person visits cannot drive it).
fn allowed_origins(args: &ProxyArgs) -> Vec<String> {
    let mut origins = vec!["http://localhost:*".to_owned(), "http://127.0.0.1:*".to_owned()];
    // An opaque origin (`api://…`) serializes as "null", which sandboxed
    // frames and `file:` pages send: never allowed by accident.
    if let Some(origin) = args
        .resource
        .as_deref()
        .and_then(|r| reqwest::Url::parse(r).ok())
        .map(|url| url.origin())
        .filter(|origin| origin.is_tuple())
    {
        origins.push(origin.ascii_serialization());
    }
    origins.extend(args.allow_origins.iter().cloned());
    origins
}

/// `--listen` beyond loopback needs `--auth` or `--insecure-listen`.
async fn check_exposure(args: &ProxyArgs, addr: &str) -> Result<(), ProxyError> {
    let resolved: Vec<std::net::SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|source| ProxyError::Listen {
            addr: addr.to_owned(),
            source,
        })?
        .collect();
    let exposed = resolved.iter().any(|a| !a.ip().is_loopback());
    if !exposed || args.auth != AuthArg::None {
        return Ok(());
    }
    if !args.insecure_listen {
        return Err(ProxyError::Usage(format!(
            "--listen {addr} is reachable beyond this machine and no caller is authenticated: add --auth jwt (with --jwks, --issuer, --audience), listen on 127.0.0.1, or say --insecure-listen"
        )));
    }
    say!(
        Warn,
        "WARNING: --insecure-listen: {addr} accepts tool calls from anyone who can reach it, with no authentication"
    );
    Ok(())
}

/// `--jwks-max-age` and `--introspection-cache` when not given.
const DEFAULT_JWKS_MAX_AGE_SECS: u64 = 300;
const DEFAULT_INTROSPECTION_CACHE_SECS: u64 = 60;

/// `--auth jwt` or `--auth introspection`, with what each needs.
fn token_check(args: &ProxyArgs) -> Result<TokenCheck, ProxyError> {
    // A flag of the other way is a misunderstanding worth stopping for: an
    // operator who gives --introspection-url to `--auth jwt` believes
    // revoked tokens are refused.
    let introspection_flags = args.introspection_url.is_some()
        || args.introspection_client_id.is_some()
        || args.introspection_secret_env.is_some()
        || args.introspection_cache.is_some();
    match args.auth {
        AuthArg::Jwt if introspection_flags => {
            return Err(ProxyError::Usage(
                "--introspection-* flags go with --auth introspection, not --auth jwt".into(),
            ));
        }
        AuthArg::Introspection if args.jwks.is_some() || args.jwks_max_age.is_some() => {
            return Err(ProxyError::Usage(
                "--jwks and --jwks-max-age go with --auth jwt; --auth introspection asks --introspection-url".into(),
            ));
        }
        _ => {}
    }
    if args.auth != AuthArg::Introspection {
        let source = JwksSource::parse(args.jwks.as_deref().unwrap_or_default());
        if let JwksSource::Url(url) = &source {
            encrypted_unless_local("--jwks", url)?;
        }
        return Ok(TokenCheck::Jwt(source));
    }
    let url = args.introspection_url.clone().unwrap_or_default();
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(ProxyError::Usage(format!(
            "--introspection-url {url:?}: give the endpoint's http(s) URL"
        )));
    }
    encrypted_unless_local("--introspection-url", &url)?;
    let client_secret = outbound::secret_from_env(
        "--introspection-secret-env",
        args.introspection_secret_env.as_deref().unwrap_or_default(),
    )?;
    Ok(TokenCheck::Introspection(Introspection {
        url,
        client_id: args.introspection_client_id.clone().unwrap_or_default(),
        client_secret,
        trust_for: Duration::from_secs(args.introspection_cache.unwrap_or(DEFAULT_INTROSPECTION_CACHE_SECS)),
    }))
}

async fn authenticator(
    args: &ProxyArgs,
    config: &Config,
    client: &reqwest::Client,
) -> Result<Authenticator, ProxyError> {
    let listen = args.listen.as_deref().unwrap_or("127.0.0.1");
    let scheme = if args.tls_cert.is_some() { "https" } else { "http" };
    let resource = args
        .resource
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{listen}/mcp"));
    // RFC 9728 §3.1: the well-known path, then the resource's own path.
    let (origin, path) = match resource.split_once("://") {
        Some((scheme, rest)) => match rest.find('/') {
            Some(at) => (
                format!("{scheme}://{}", rest.get(..at).unwrap_or(rest)),
                rest.get(at..).unwrap_or(""),
            ),
            None => (resource.clone(), ""),
        },
        None => (resource.clone(), ""),
    };
    let settings = AuthSettings {
        issuer: args.issuer.clone().unwrap_or_default(),
        audience: args.audience.clone().unwrap_or_default(),
        check: token_check(args)?,
        required_scopes: args.require_scopes.clone(),
        metadata_url: format!("{origin}/.well-known/oauth-protected-resource{path}"),
        resource,
        base: config.anonymous.context.clone(),
        metrics: config.metrics.clone(),
        jwks_max_age: Duration::from_secs(args.jwks_max_age.unwrap_or(DEFAULT_JWKS_MAX_AGE_SECS)),
    };
    // Only the JWKS fetch can fail here: introspection asks nothing before
    // the first token.
    let auth = Authenticator::new(settings, client.clone())
        .await
        .map_err(|e| ProxyError::Input(format!("--auth jwt: {e}")))?;
    if !auth.can_verify().await {
        return Err(ProxyError::Input(
            "--auth jwt: the key set holds no key that can verify a token (an RSA, EC P-256/P-384 or Ed25519 \
             signing key): every caller would be refused"
                .into(),
        ));
    }
    Ok(auth)
}

/// The issuer's keys and its introspection endpoint vouch for every caller:
/// over plain HTTP anyone on the path could swap the keys (and mint tokens)
/// or read the client secret and every token sent there. Plain HTTP is
/// taken only on this machine (a loopback address or `localhost`).
fn encrypted_unless_local(flag: &str, url: &str) -> Result<(), ProxyError> {
    if url.starts_with("https://") {
        return Ok(());
    }
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|parsed| parsed.host_str().map(|h| h.trim_matches(['[', ']']).to_owned()))
        .unwrap_or_default();
    let local =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if local {
        Ok(())
    } else {
        Err(ProxyError::Usage(format!(
            "{flag} {url:?}: use https (plain http is taken only for a loopback address)"
        )))
    }
}

async fn serve_http(config: Arc<Config>, addr: &str, served: Served<'_>) -> Result<(), ProxyError> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let (listener, local) = bind(addr).await?;
    let mut hosts = own_hosts(local, served.allowed_hosts);
    if let Some(host) = served.resource_host {
        hosts.push(host.split(':').next().unwrap_or_default().to_owned());
        hosts.push(host);
    }
    let Served {
        with_pages,
        public,
        auth,
        origins,
        limits,
        grace,
        session_idle,
        connections,
        in_flight_per_caller,
        tls,
        readable_by,
        allowed_hosts,
        ..
    } = served;
    // rmcp's own idle timer is off: it restarts on what the upstream sends
    // (an abandoned session lived for good) and never sees a GET stream or
    // a call still open (review 24: a busy session was closed under its
    // client). The gate's counts the client alone: `Owners::expire_idle`.
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = None;
    let sessions = Arc::new(sessions);
    let busy: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let owners = Arc::new(crate::owners::Owners::new(sessions.clone(), limits));
    tokio::spawn(owners.clone().expire_idle(session_idle, stop.clone()));
    let gate = Arc::new(GateState {
        relay: config.relay.clone(),
        report: drop_report(),
        in_flight: Arc::default(),
        busy: busy.clone(),
        per_caller: in_flight_per_caller.map(|limit| Arc::new(crate::http::CallerLoad::new(limit))),
        owners: owners.clone(),
        body_wait: crate::http::BODY_WAIT,
        large: crate::http::large_messages(),
        health: config.metrics.clone(),
    });
    let scheme = if tls.is_some() { "https" } else { "http" };
    let pages = with_pages.then(|| approve_router(&config, (local, allowed_hosts), public, scheme));
    let metrics = config.metrics.clone();
    let stopping = config.stopping.clone();
    let readiness = metrics.clone();
    let connection_metrics = metrics.clone();
    let header_check = Arc::new(crate::headers::HeaderCheck::new(&hosts, &origins));
    let origins = origins
        .iter()
        .map(|entry| crate::cors::explicit_port(entry))
        .collect::<Vec<_>>();
    let service = StreamableHttpService::new(
        move || Ok(Gateway::new(config.clone())),
        sessions,
        // The gate reads and bounds every body first (`MAX_MESSAGE_BYTES`,
        // answered in JSON-RPC); the session layer's own bound is the same.
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(crate::gate::MAX_MESSAGE_BYTES)
            .with_cancellation_token(stop.clone()),
    );
    let mut router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(gate, crate::http::gate));
    if let Some(auth) = auth {
        // Outermost: a request without a good token reaches neither the gate
        // nor the session (its body is only read to be discarded).
        router = router.layer(axum::middleware::from_fn_with_state(auth.clone(), crate::auth::require));
        let metadata = axum::Router::new()
            .route(
                "/.well-known/oauth-protected-resource",
                axum::routing::get(crate::auth::metadata),
            )
            .route(
                "/.well-known/oauth-protected-resource/{*path}",
                axum::routing::get(crate::auth::metadata),
            )
            .with_state(auth);
        router = router.merge(metadata);
    }
    // Before `--auth` and the gate read any body: the headers' own refusals.
    router = router.layer(axum::middleware::from_fn_with_state(
        header_check,
        crate::headers::check,
    ));
    // Outermost on `/mcp` and the metadata: a preflight is answered before
    // `--auth` (browsers send it without the token). Not on the pages.
    router = router.layer(crate::cors::layer(&readable_by));
    router = router.merge(crate::metrics::health_router(metrics));
    // After the gate's layer: the pages' form POSTs are not JSON-RPC.
    if let Some(pages) = pages {
        router = router.merge(pages);
    }
    say!(Info, "listening on {scheme}://{local}/mcp");
    // A stop drains: not ready (a load balancer sends no more), the
    // requests in flight finish within the grace, then the open streams and
    // sessions end (a client's GET stream would hold the server forever),
    // and whatever still runs a few seconds later is cut.
    let drain = {
        let stop = stop.clone();
        async move {
            shutdown_signal().await;
            readiness.drain();
            let in_flight = busy.load(std::sync::atomic::Ordering::SeqCst);
            say!(
                Info,
                "stopping: {in_flight} request(s) in flight get {} s to finish",
                grace.as_secs()
            );
            let deadline = tokio::time::Instant::now() + grace;
            while busy.load(std::sync::atomic::Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // The grace is over: the requests still waiting for the upstream
            // are cancelled there and answered (their audit lines written),
            // which takes a moment; then the sessions end.
            stopping.cancel();
            let answered_by = tokio::time::Instant::now() + ANSWER_AFTER_STOP;
            while busy.load(std::sync::atomic::Ordering::SeqCst) > 0 && tokio::time::Instant::now() < answered_by {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stop.cancel();
        }
    };
    let served = crate::listen::serve(("mcp", listener), router, connections, tls, connection_metrics, drain);
    tokio::select! {
        () = served => Ok(()),
        () = async {
            stop.cancelled().await;
            tokio::time::sleep(STOP_AFTER_DRAIN).await;
        } => {
            say!(Warn, "connections still open after the grace: stopping anyway");
            Ok(())
        }
    }
}

/// Over stdio (no grace: the client asked to stop), how long a stop gives
/// the session to write the answers of the calls it cancelled, once their
/// handlers have returned.
const STDIO_ANSWER_WAIT: Duration = Duration::from_millis(50);

/// `--max-sessions-per-caller` when not given (with `--auth`).
const DEFAULT_SESSIONS_PER_CALLER: u32 = 16;
/// `--max-in-flight-per-caller` when not given (with `--auth`).
const DEFAULT_IN_FLIGHT_PER_CALLER: u32 = 64;

/// How long the requests cancelled at the end of the grace have to be
/// answered before the sessions end.
const ANSWER_AFTER_STOP: Duration = Duration::from_secs(2);

/// How long connections may stay after the drain ended the streams.
const STOP_AFTER_DRAIN: Duration = Duration::from_secs(5);

/// A listener on `addr` and the address it got (port 0: chosen now).
async fn bind(addr: &str) -> Result<(tokio::net::TcpListener, std::net::SocketAddr), ProxyError> {
    let listen_error = |source| ProxyError::Listen {
        addr: addr.to_owned(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(listen_error)?;
    let local = listener.local_addr().map_err(listen_error)?;
    Ok((listener, local))
}

async fn shutdown_signal() {
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    // Windows has no SIGTERM: Ctrl-C (and Ctrl-Break) stop the gateway.
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::{ProxyArgs, encrypted_unless_local, worker_threads};
    use clap::Parser;

    #[test]
    fn the_issuers_endpoints_need_https_unless_on_this_machine() {
        for ok in [
            "https://login.example.com/jwks.json",
            "http://127.0.0.1:8080/jwks",
            "http://localhost/introspect",
            "http://[::1]:9000/jwks",
        ] {
            assert!(encrypted_unless_local("--jwks", ok).is_ok(), "{ok}");
        }
        for refused in [
            "http://login.example.com/jwks.json",
            "http://10.0.0.5/jwks",
            "http://127.0.0.1.evil.example/jwks",
            "http://localhost.evil.example/",
        ] {
            let error = encrypted_unless_local("--jwks", refused).unwrap_err().to_string();
            assert!(error.contains("use https"), "{refused}: {error}");
        }
    }

    fn parsed(args: &[&str]) -> Result<ProxyArgs, clap::Error> {
        ProxyArgs::try_parse_from(std::iter::once("proxy").chain(args.iter().copied()))
    }

    #[test]
    fn worker_threads_default_by_transport_and_refuse_zero() {
        let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        let listen = ["--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1/mcp"];
        assert_eq!(worker_threads(&parsed(&listen).unwrap()), cpus);
        assert_eq!(worker_threads(&parsed(&["--", "server"]).unwrap()), 2);
        let four = [&listen[..], &["--worker-threads", "4"]].concat();
        assert_eq!(worker_threads(&parsed(&four).unwrap()), 4);
        let zero = [&listen[..], &["--worker-threads", "0"]].concat();
        assert!(parsed(&zero).is_err());
    }
}
