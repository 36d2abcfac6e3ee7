//! The gateway's own per-request costs, in process, on the real component:
//!
//! - `auth ALG-first-sight|ALG-per-request NS DECIDE_NS RATIO`: accepting
//!   a bearer token (`--auth jwt`) with the issuer's JWKS already in hand,
//!   the first time (signature and claims checked) and on every later
//!   request carrying it (the verified-token cache), against one plain
//!   decision in the same run;
//! - `gateway p50|p99 ADDED_NS (through NS, direct NS) ms=ADDED_MS`: what
//!   one `tools/call` through a gateway session adds over the same call sent
//!   to the same in-process upstream directly (the MCP client and server are
//!   rmcp on in-memory pipes, so the difference is the gateway's own work:
//!   decode, decide, relay); the nanosecond figure stays third on the line
//!   for older readers, `ms=` gives the same figure in milliseconds;
//! - `instrumentation NS ADDED_NS RATIO`: what the gateway's metrics cost per
//!   call, plus one JSON log line through the same `tracing` formatter the
//!   gateway uses (an upper bound: the gateway logs no line per allowed call
//!   at its default level), against the added median above;
//! - `gateway-listen p50|p99 ADDED_MS (through MS, direct MS)`: the same over
//!   Streamable HTTP on loopback with `--sessions` concurrent client sessions
//!   (rmcp's client) each making sequential calls, `--calls` in all, after 20
//!   warm-up calls per session. The upstream is served by rmcp's Streamable
//!   HTTP server on 127.0.0.1, its sockets with `TCP_NODELAY` (without it
//!   each answer's later small writes wait ~40 ms for the client's delayed
//!   ACK); "direct" is the run against it, "through" the same run against a
//!   gateway started by [`toolgate_proxy::main_with`] with `--listen
//!   127.0.0.1:PORT --policy FILE --upstream http://…/mcp`, the code path of
//!   `toolgate proxy --listen` (gate layer included). Both legs run in this
//!   process on the same cores, so "added" holds the gateway's own work, its
//!   second HTTP hop and its share of the CPU under load. The two legs run
//!   in alternating rounds (up to 10 each, new sessions and their warm-up
//!   every round, which leg goes first alternating), so the machine's busy
//!   stretches fall on both;
//! - `gateway-listen rss KB_AFTER_WARMUP KB_HALF KB_END`: this process's
//!   resident set (`VmRSS`; clients, gateway and upstream together; 0 where
//!   there is no `/proc`) after the through leg's first warm-up, at the end
//!   of its middle round and at its end: flat means the gateway does not
//!   grow with the number of calls (nor with the sessions come and gone).
//! - `cold gateway MS` / `cold gateway-direct MS` (with `--data DIR`, the
//!   folder `bench gen` writes): a fresh `toolgate-proxy` process over stdio,
//!   copied with the native code packages ship beside it and given an empty
//!   `TOOLGATE_CACHE_DIR`, in front of a fresh upstream serving the seed
//!   catalog (`DIR/34/catalog.json`) with the bench policy
//!   (`DIR/policy.yaml`), from spawn to the answer of the first `tools/call`
//!   (handshake, the upstream's start, its `tools/list`, loading the rules,
//!   the decision and the relay); the peer is the same exchange with the
//!   upstream spawned directly. The median of `--cold-rounds` (5), the two
//!   alternating. The upstream is this binary (`--serve-stdio CATALOG`: rmcp
//!   on stdio, every call answered at once), so the peer is a process start,
//!   not an interpreter's.
//!
//! Run by `bench/run`: `toolgate-gateway-bench [--iterations N] [--sessions S]
//! [--calls N] [--rate R] [--data DIR] [--cold-rounds N]` (defaults 5 000 iterations and a smoke-sized 8
//! sessions, 400 calls; `bench/run` asks 64 sessions and 100 000 calls,
//! `--smoke` 8 × 50). Without `--rate` every session sends its next call as
//! soon as the last is answered, so on a small machine the `gateway-listen`
//! times are mostly queueing behind a saturated CPU; `--rate R` paces the
//! sessions to R calls a second in all (an open load: a call's time runs
//! from when it was sent, late calls go at once).
//! Figures are printed, never asserted; a call refused or failed ends the run
//! with an error.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use serde_json::{Map, Value, json};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use toolgate::{Context, Surface};
use toolgate_proxy::auth::{AuthSettings, Authenticator, JwksSource, TokenCheck};
use toolgate_proxy::confirm::Sealing;
use toolgate_proxy::ledger::Ledger;
use toolgate_proxy::metrics::Metrics;
use toolgate_proxy::policy::Policy;
use toolgate_proxy::seal::KeyRing;
use toolgate_proxy::{Config, Connector, Gateway, UpstreamSpec};

// Keys made for this benchmark only: they sign nothing anywhere else.
const ES256_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg0aldBnuH25J6WS0F\nqv8PdRSX/dNf5iheFAI2LAZb9cmhRANCAAQRPGmqRTaKFLvIL1dNOnjxAzk1Fg5B\ny735l5RCH19p3U7oSgHLZTa/tOcCiyncp/szAJLAYiJs6pfXVIQL9FMy\n-----END PRIVATE KEY-----\n";
const RS256_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDLyQQo8VBmuirw\n5tlz6wXHnjiSLHsawoRbCHWsBK8cbr+gssIDlzv7eORoEhdQ7rZdFLAom2sglTxQ\nUzb3xg5Z6EXcmOVDneGrESJeoVoHjXc5KLYmrKwQtNzhCTiitOgzFsNCiCy7zbb0\n5rYFetx9cdPXaS4NOJASvobGyem/o8nnsQRgXi6+hCxPRM2Vk1FsLuAvjSbngF02\nTv/lj0DDesB9Tpwwot0I9CRg+mczAuCvxTaIziv88TlPTBJc8XNzelo3kzV6lakz\nVBQZadb8iEl6mDTYG00/ZORQNxyUPX4f5g1K6+0UT6I+XXjaL8J/wdOJvuFGArR5\n9I7fwJtTAgMBAAECggEALtezmZeytBJaGYru9DrTVsnTViJcX8/Trbs5lUN0XxRD\n/zPn7fxfANSOqC90ZZmhmK7POV5UVyaGuS4Ppg/EL715BZatqIfLnk9vd5IeSDsn\n6x8lE6nAWYzBcwb0Gk58S3YRhyMXKUpFonC/6W2O7lTybYMTX12fnHdoMpyqGu8p\nveOQTwLVJ/eOpuWvmOmXoRNuhKA3UF7rvmijY4VtiYL06IuDjVt2oyyROLswMzrv\niGXanW6X5x6S/2O571JlOGOGqe4FrLmRof2T0jzCKSXUlWOHRmWz+yaiMmGPnKRR\nPO5GCffjYAbWJTlkONzZqaY3JE0P8lKmX0LN/8y2YQKBgQDtdzfWJIWBQgBHiNO4\n5zfPkZSchtfecv22DzIBDakfaxml2iRzQrEIjkiUoOAMV9A8VcwO9rvTh2yT50Y1\nLWsjRr15A/gRpIUK54C4x9GCvX1Umyn0ZC4C06E6zBX3/7Edm/PbJ2cm5gmsqodd\nJWg3B3n5Rnu2A4Sl9t7vP5izYQKBgQDbsNTXN4CLyp9lUMOK087gRHi+KjQvB/5o\nJuT0PJSi8H00TmBgVK3dPK67i9uQkwpsFHrZdpKOeDZHNiJoYR1nCxYYXRE1rwsh\nv8cf4NdX0zOcGl79HfK9PZuV2rLuWaqv57/Pc+zR8Re+Bj6/SD16285EWFBglmwQ\nzsVbvjA/MwKBgQC7VDUkJaN8GIkH5ZTAZQbOJFZMNMPOpIApQ0t7MT+dnWuaPsBK\nfO4ThcsUFOUqV4vaTQSxOUtqz4aEFwp3oODH72JBOTRVFqgttfsBygApVzqrp8wt\nE2qIqFKkg6NBBODALursk+T39rjjEZO/k2bnImrCjyvApn3aPyoXKuBXgQKBgAgb\n389N0iXWxclkkMMoDEPE4zwJrMFrpx1LCjplngrhm415sx77ISvAWKa9g84zTzgs\nDVjHgqNVlpNMUTrPEtnB0//0N3Vmz59gR8ZKc0hfmFETvBvVpicMBhki6GXZ024I\nvNC4c65QGtM9wcUnsnU9dcCaDeVyx+xa5Xf8biV3AoGBAJ3S7O7DKbG9WVwd5Qqo\nwEiHK+qXixzUtSbTO+W0W2+UN4LTJaGGoZmxnJri9cdP9lBagTDElGxwbCNwiyXB\nRpj7TyQpI0VFSpNLuY4UJTNAnycnjejArRBQhlphrkt07JX7Cdfe7w3glKUgSCEQ\nhhmbbGixw0eliBlHPgUe90Qh\n-----END PRIVATE KEY-----\n";
const JWKS: &str = r#"{"keys": [{"kty": "EC", "crv": "P-256", "x": "ETxpqkU2ihS7yC9XTTp48QM5NRYOQcu9-ZeUQh9fad0", "y": "TuhKActlNr-05wKLKdyn-zMAksBiImzql9dUhAv0UzI", "kid": "bench-es256", "alg": "ES256", "use": "sig"}, {"kty": "RSA", "n": "y8kEKPFQZroq8ObZc-sFx544kix7GsKEWwh1rASvHG6_oLLCA5c7-3jkaBIXUO62XRSwKJtrIJU8UFM298YOWehF3JjlQ53hqxEiXqFaB413OSi2JqysELTc4Qk4orToMxbDQogsu8229Oa2BXrcfXHT12kuDTiQEr6Gxsnpv6PJ57EEYF4uvoQsT0TNlZNRbC7gL40m54BdNk7_5Y9Aw3rAfU6cMKLdCPQkYPpnMwLgr8U2iM4r_PE5T0wSXPFzc3paN5M1epWpM1QUGWnW_IhJepg02BtNP2TkUDcclD1-H-YNSuvtFE-iPl142i_Cf8HTib7hRgK0efSO38CbUw", "e": "AQAB", "kid": "bench-rs256", "alg": "RS256", "use": "sig"}]}"#;

const POLICY: &str = "version: 1\ndefaults:\n  operation_type: read_only\n  require_confirmation: false\n";
const ISSUER: &str = "https://issuer.bench.invalid";
const AUDIENCE: &str = "https://gateway.bench.invalid/mcp";

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(catalog) = value_after(&args, "--serve-stdio") {
        return serve_stdio(catalog);
    }
    let flag = |name: &str, default: u64| -> Result<u64, String> {
        match args.iter().position(|a| a == name) {
            None => Ok(default),
            Some(i) => args
                .get(i + 1)
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("{name} takes a number")),
        }
    };
    let iterations = flag("--iterations", 5_000)?;
    let sessions = flag("--sessions", 8)?.max(1);
    let calls = flag("--calls", 400)?.max(sessions);
    let rate = flag("--rate", 0)?;
    let cold_rounds = flag("--cold-rounds", 5)?.max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let engine = toolgate::Engine::cached().map_err(|e| e.to_string())?;
    let decide_ns = one_decision(&engine, iterations)?;
    runtime.block_on(token_validation(iterations, decide_ns))?;
    let added = runtime.block_on(added_latency(engine, iterations))?;
    instrumentation(iterations, added)?;
    runtime.block_on(listen_latency(sessions, calls, rate))?;
    if let Some(data) = value_after(&args, "--data") {
        cold_start(std::path::Path::new(data), cold_rounds)?;
    }
    Ok(())
}

fn value_after<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).map(String::as_str)
}

/// The peer of the `auth` lines: one plain decision on the engine.
fn one_decision(engine: &toolgate::Engine, iterations: u64) -> Result<f64, String> {
    let catalog = r#"{"tools":[{"name":"read","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}]}"#;
    let rules = engine.load(Some(POLICY), catalog).map_err(|e| e.to_string())?;
    let started = Instant::now();
    for i in 0..iterations {
        let call = format!(r#"{{"name":"read","arguments":{{"q":"{i}"}}}}"#);
        if rules
            .decide(call.as_bytes(), "{}", toolgate::Confirmation::None)
            .forward
            .is_none()
        {
            return Err("the plain decision denied".into());
        }
    }
    Ok(per(started, iterations))
}

async fn token_validation(iterations: u64, decide_ns: f64) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("toolgate-gateway-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, JWKS).map_err(|e| e.to_string())?;
    let settings = AuthSettings {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        check: TokenCheck::Jwt(JwksSource::File(jwks)),
        required_scopes: vec![],
        resource: AUDIENCE.into(),
        metadata_url: format!("{AUDIENCE}/.well-known/oauth-protected-resource"),
        base: Context::from_flags(Surface::Confirming, Some("user"), None),
        metrics: Arc::default(),
        jwks_max_age: std::time::Duration::from_secs(300),
    };
    let client = toolgate_proxy::outbound::client(None, None).map_err(|e| e.to_string())?;
    let auth = Arc::new(Authenticator::new(settings, client).await?);
    let _ = std::fs::remove_dir_all(&dir);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "bench", "exp": now + 3600, "nbf": now - 5, "scope": "read write"});
    for (alg, kid, key) in [
        (
            jsonwebtoken::Algorithm::ES256,
            "bench-es256",
            jsonwebtoken::EncodingKey::from_ec_pem(ES256_KEY.as_bytes()),
        ),
        (
            jsonwebtoken::Algorithm::RS256,
            "bench-rs256",
            jsonwebtoken::EncodingKey::from_rsa_pem(RS256_KEY.as_bytes()),
        ),
    ] {
        let key = key.map_err(|e| e.to_string())?;
        let mut header = jsonwebtoken::Header::new(alg);
        header.kid = Some(kid.into());
        // First sight: a token never seen before, so its signature and
        // claims are checked (distinct `jti`s defeat the verified cache).
        let fresh = iterations.min(500);
        let tokens = (0..fresh)
            .map(|i| {
                let mut claims = claims.clone();
                if let Some(object) = claims.as_object_mut() {
                    object.insert("jti".into(), json!(i));
                }
                jsonwebtoken::encode(&header, &claims, &key).map(|t| format!("Bearer {t}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        for authorization in &tokens {
            let caller = auth
                .authenticate(Some(authorization))
                .await
                .map_err(|e| format!("{e:?}"))?;
            if caller.subject != "bench" {
                return Err("the token named another subject".into());
            }
        }
        let ns = per(started, fresh);
        println!("auth {alg:?}-first-sight {ns:.0} {decide_ns:.0} {:.2}", ns / decide_ns);
        // Every later request of the session: the same token again.
        let authorization = tokens.first().ok_or("no token")?;
        let started = Instant::now();
        for _ in 0..iterations {
            let caller = auth
                .authenticate(Some(authorization))
                .await
                .map_err(|e| format!("{e:?}"))?;
            if caller.subject != "bench" {
                return Err("the token named another subject".into());
            }
        }
        let ns = per(started, iterations);
        println!("auth {alg:?}-per-request {ns:.0} {decide_ns:.0} {:.2}", ns / decide_ns);
    }
    Ok(())
}

/// An upstream whose tools answer at once: one read-only tool, or a
/// catalog's (`--serve-stdio`).
#[derive(Clone)]
struct Upstream {
    tools: Arc<Vec<Tool>>,
}

impl Upstream {
    fn one_tool() -> Result<Upstream, String> {
        let tool: Tool = serde_json::from_value(json!({
            "name": "read",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "annotations": {"readOnlyHint": true},
        }))
        .map_err(|e| e.to_string())?;
        Ok(Upstream {
            tools: Arc::new(vec![tool]),
        })
    }
}

#[allow(clippy::manual_async_fn, reason = "the trait asks for `impl Future + Send`")]
impl rmcp::ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + Send + '_ {
        async move { Ok(ListToolsResult::with_all_items(self.tools.to_vec())) }
    }

    fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + '_ {
        async move {
            Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::text("ok"),
            ])))
        }
    }
}

fn pipe_to_upstream() -> tokio::io::DuplexStream {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let Ok(upstream) = Upstream::one_tool() else { return };
        if let Ok(running) = upstream.serve(theirs).await {
            let _ = running.waiting().await;
        }
    });
    ours
}

/// Median and 99th percentile of `iterations` sequential calls on `pipe`.
async fn call_times(pipe: tokio::io::DuplexStream, iterations: u64) -> Result<(f64, f64), String> {
    let client = ().serve(pipe).await.map_err(|e| e.to_string())?;
    let mut arguments = Map::new();
    arguments.insert("q".into(), Value::String("x".into()));
    let call = CallToolRequestParams::new("read").with_arguments(arguments);
    for _ in 0..200 {
        client.call_tool(call.clone()).await.map_err(|e| e.to_string())?;
    }
    let mut times = Vec::with_capacity(usize::try_from(iterations).unwrap_or(0));
    for _ in 0..iterations {
        let started = Instant::now();
        let result = client.call_tool(call.clone()).await.map_err(|e| e.to_string())?;
        times.push(started.elapsed().as_nanos() as f64);
        if result.is_error == Some(true) {
            return Err(format!("the call was refused: {result:?}"));
        }
    }
    let _ = client.cancel().await;
    times.sort_by(f64::total_cmp);
    let at = |q: f64| {
        times
            .get(((times.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    Ok((at(0.5), at(0.99)))
}

async fn added_latency(engine: toolgate::Engine, iterations: u64) -> Result<f64, String> {
    let (direct_p50, direct_p99) = call_times(pipe_to_upstream(), iterations).await?;
    let sealing = Sealing {
        keys: KeyRing::ephemeral().map_err(|e| e.to_string())?,
        ledger: Ledger::memory(),
        ttl: Duration::from_secs(60),
    };
    let policy = Arc::new(Policy::fixed(Some(POLICY.to_owned())));
    let upstream = UpstreamSpec::InProcess(Connector(Arc::new(pipe_to_upstream)));
    let config = Arc::new(Config::new(engine, policy, upstream, sealing));
    let (client_side, gateway_side) = tokio::io::duplex(1 << 20);
    let gateway = Gateway::new(config);
    tokio::spawn(async move {
        if let Ok(running) = gateway.serve(gateway_side).await {
            let _ = running.waiting().await;
        }
    });
    let (through_p50, through_p99) = call_times(client_side, iterations).await?;
    let added_p50 = through_p50 - direct_p50;
    let added_p99 = through_p99 - direct_p99;
    println!(
        "gateway p50 {added_p50:.0} (through {through_p50:.0}, direct {direct_p50:.0}) ms={:.3}",
        added_p50 / 1e6
    );
    println!(
        "gateway p99 {added_p99:.0} (through {through_p99:.0}, direct {direct_p99:.0}) ms={:.3}",
        added_p99 / 1e6
    );
    Ok(added_p50)
}

/// Calls each client session makes before the measured ones.
const WARM_UP_CALLS: usize = 20;

/// The `gateway-listen` lines: `sessions` concurrent Streamable HTTP client
/// sessions, `calls` calls in all, straight to the upstream, then through a
/// gateway listening on loopback in front of it; `rate` calls a second in
/// all, or (0) each session's next call as soon as the last is answered.
async fn listen_latency(sessions: u64, calls: u64, rate: u64) -> Result<(), String> {
    let upstream = serve_upstream_http().await?;
    let http = toolgate_proxy::outbound::client(None, None).map_err(|e| e.to_string())?;
    let (gateway, dir) = start_gateway(&http, &upstream).await?;
    let legs = interleaved(&http, &upstream, &gateway, sessions, calls, rate).await;
    let _ = std::fs::remove_dir_all(&dir);
    let [direct, through] = legs?;
    let ms = |ns: u64| ns as f64 / 1e6;
    for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
        let (t, d) = (ms(through.at(q)), ms(direct.at(q)));
        println!("gateway-listen {name} {:.3} (through {t:.3}, direct {d:.3})", t - d);
    }
    let [warm, half, end] = through.rss_kb;
    println!("gateway-listen rss {warm} {half} {end}");
    let paced = match rate {
        0 => "unpaced".to_owned(),
        rate => format!("paced at {rate} calls/s"),
    };
    eprintln!(
        "gateway-listen: {calls} calls on {sessions} sessions ({paced}) in {:.1} s through the gateway, {:.1} s direct",
        through.elapsed.as_secs_f64(),
        direct.elapsed.as_secs_f64()
    );
    Ok(())
}

/// The direct and the through leg in alternating rounds (as many as give
/// every session at least 50 calls a round, at least one and up to
/// [`MAX_ROUNDS`]; which leg goes first alternates too), so a busy stretch of
/// a shared machine falls on both legs alike instead of on whichever ran
/// then. Each leg's times are merged over its rounds; its resident set is the
/// first round's after warm-up, the middle round's end and the last round's
/// end; its elapsed time the sum of its rounds.
async fn interleaved(
    http: &reqwest::Client,
    direct: &str,
    through: &str,
    sessions: u64,
    calls: u64,
    rate: u64,
) -> Result<[Load; 2], String> {
    struct Leg<'a> {
        name: &'static str,
        url: &'a str,
        rounds: Vec<Load>,
    }
    let rounds = (calls / (sessions * 50)).clamp(1, MAX_ROUNDS);
    let mut legs = [("direct", direct), ("through", through)].map(|(name, url)| Leg {
        name,
        url,
        rounds: Vec::new(),
    });
    for round in 0..rounds {
        let share = calls / rounds + u64::from(round < calls % rounds);
        let order: Vec<&mut Leg> = match round % 2 {
            0 => legs.iter_mut().collect(),
            _ => legs.iter_mut().rev().collect(),
        };
        for leg in order {
            let measured = load(http, leg.url, sessions, share, rate).await?;
            // Each round's tail on stderr: a leg that slows as the calls
            // mount up shows here, where the merged lines would hide it.
            eprintln!(
                "gateway-listen round {round} {}: p50 {:.3} p99 {:.3} ms",
                leg.name,
                measured.at(0.5) as f64 / 1e6,
                measured.at(0.99) as f64 / 1e6
            );
            leg.rounds.push(measured);
        }
    }
    Ok(legs.map(|leg| merged(leg.rounds)))
}

/// Up to this many rounds of each leg in [`interleaved`].
const MAX_ROUNDS: u64 = 10;

fn merged(rounds: Vec<Load>) -> Load {
    let rss_at = |i: usize, which: usize| {
        rounds
            .get(i)
            .and_then(|round| round.rss_kb.get(which))
            .copied()
            .unwrap_or(0)
    };
    let last = rounds.len().saturating_sub(1);
    let rss_kb = [rss_at(0, 0), rss_at(last / 2, 2), rss_at(last, 2)];
    let elapsed = rounds.iter().map(|round| round.elapsed).sum();
    let mut times: Vec<u64> = rounds.into_iter().flat_map(|round| round.times).collect();
    times.sort_unstable();
    Load { times, rss_kb, elapsed }
}

/// The in-process upstream on rmcp's Streamable HTTP server at
/// `http://127.0.0.1:PORT/mcp`.
async fn serve_upstream_http() -> Result<String, String> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let upstream = Upstream::one_tool()?;
    let service = StreamableHttpService::new(
        move || Ok(upstream.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            eprintln!("toolgate-gateway-bench: the upstream listener stopped: {e}");
        }
    });
    Ok(format!("http://{local}/mcp"))
}

/// `toolgate proxy --listen 127.0.0.1:PORT --upstream UPSTREAM` on a thread
/// of its own (it runs its own runtime until the process ends); its URL once
/// `/readyz` says the upstream catalog is loaded, and its temporary folder.
async fn start_gateway(http: &reqwest::Client, upstream: &str) -> Result<(String, std::path::PathBuf), String> {
    // A free loopback port: `main_with` says the port it got only on stderr.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let dir = std::env::temp_dir().join(format!("toolgate-gateway-bench-listen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let policy = dir.join("tool_policies.yaml");
    std::fs::write(&policy, POLICY).map_err(|e| e.to_string())?;
    let args: Vec<std::ffi::OsString> = vec![
        "toolgate-proxy".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}").into(),
        "--policy".into(),
        policy.into_os_string(),
        "--upstream".into(),
        upstream.into(),
    ];
    let gateway = std::thread::spawn(move || toolgate_proxy::main_with(args));
    let ready = format!("http://127.0.0.1:{port}/readyz");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if gateway.is_finished() {
            return Err(format!("the gateway stopped at start (port {port})"));
        }
        if let Ok(answer) = http.get(&ready).send().await
            && answer.status().is_success()
        {
            return Ok((format!("http://127.0.0.1:{port}/mcp"), dir));
        }
        if Instant::now() > deadline {
            return Err("the gateway was not ready within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every measured call's latency (ns, sorted), the resident set after the
/// warm-up, at half and at the end, and how long the measured calls took.
struct Load {
    times: Vec<u64>,
    rss_kb: [u64; 3],
    elapsed: Duration,
}

impl Load {
    fn at(&self, q: f64) -> u64 {
        self.times
            .get(((self.times.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    }
}

/// `sessions` client sessions on `url`, each making sequential calls,
/// `calls` measured calls in all; with a `rate`, each session sends on a
/// schedule (`sessions / rate` seconds apart, the sessions staggered), late
/// calls at once, and a call's time runs from when it was sent.
async fn load(http: &reqwest::Client, url: &str, sessions: u64, calls: u64, rate: u64) -> Result<Load, String> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut arguments = Map::new();
    arguments.insert("q".into(), Value::String("x".into()));
    let call = CallToolRequestParams::new("read").with_arguments(arguments);
    let mut clients = Vec::new();
    for _ in 0..sessions {
        let transport = StreamableHttpClientTransport::with_client(
            http.clone(),
            StreamableHttpClientTransportConfig::with_uri(url),
        );
        clients.push(().serve(transport).await.map_err(|e| format!("{url}: {e}"))?);
    }
    // The buffers are written now, so they are resident before the first sample.
    let share = |i: u64| usize::try_from(calls / sessions + u64::from(i < calls % sessions)).unwrap_or(0);
    let buffers: Vec<Vec<u64>> = (0..sessions).map(|i| vec![1; share(i)]).collect();
    let mut warming = Vec::new();
    for client in clients {
        let call = call.clone();
        warming.push(tokio::spawn(async move {
            for _ in 0..WARM_UP_CALLS {
                answered(client.call_tool(call.clone()).await)?;
            }
            Ok::<_, String>(client)
        }));
    }
    let mut clients = Vec::new();
    for task in warming {
        clients.push(task.await.map_err(|e| e.to_string())??);
    }
    let warm = rss_kb();
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let half = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let gap = (rate > 0).then(|| Duration::from_secs_f64(sessions as f64 / rate as f64));
    let mut running = Vec::new();
    for (i, (client, mut times)) in clients.into_iter().zip(buffers).enumerate() {
        let (call, done, half) = (call.clone(), done.clone(), half.clone());
        let mut next = tokio::time::Instant::from_std(started);
        if let Some(gap) = gap {
            next += gap.mul_f64(i as f64 / sessions as f64);
        }
        running.push(tokio::spawn(async move {
            for slot in &mut times {
                if let Some(gap) = gap {
                    tokio::time::sleep_until(next).await;
                    next += gap;
                }
                let sent = Instant::now();
                let result = client.call_tool(call.clone()).await;
                *slot = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
                answered(result)?;
                if done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 == (calls / 2).max(1) {
                    half.store(rss_kb(), std::sync::atomic::Ordering::Relaxed);
                }
            }
            Ok::<_, String>((client, times))
        }));
    }
    let mut times = Vec::with_capacity(usize::try_from(calls).unwrap_or(0));
    let mut clients = Vec::new();
    for task in running {
        let (client, mine) = task.await.map_err(|e| e.to_string())??;
        times.extend(mine);
        clients.push(client);
    }
    let elapsed = started.elapsed();
    let end = rss_kb();
    for client in clients {
        let _ = client.cancel().await;
    }
    times.sort_unstable();
    Ok(Load {
        times,
        rss_kb: [warm, half.load(std::sync::atomic::Ordering::Relaxed), end],
        elapsed,
    })
}

/// An error unless the call was answered and allowed.
fn answered(result: Result<CallToolResult, rmcp::ServiceError>) -> Result<(), String> {
    match result {
        Ok(result) if result.is_error == Some(true) => Err(format!("the call was refused: {result:?}")),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("the call failed: {e}")),
    }
}

/// This process's resident set in KB (`VmRSS`), 0 where it cannot be read.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// What the gateway records for one allowed call, plus one JSON log line.
fn instrumentation(iterations: u64, added_ns: f64) -> Result<(), String> {
    let metrics = Metrics::new();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::sink)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let started = tracing::subscriber::with_default(subscriber, || {
        let started = Instant::now();
        for i in 0..iterations {
            metrics.decision("read", None);
            metrics.decided_in(Duration::from_nanos(2_000 + i % 7));
            metrics.upstream_answered_in("tools/call", Duration::from_micros(100 + i % 7));
            tracing::info!(tool = "read", code = "ALLOW", "decided");
        }
        started
    });
    let ns = per(started, iterations);
    if !metrics
        .render()
        .contains("toolgate_decisions_total{tool=\"read\",code=\"ALLOW\"}")
    {
        return Err("the decisions counter was not recorded".into());
    }
    println!("instrumentation {ns:.0} {added_ns:.0} {:.3}", ns / added_ns.max(1.0));
    Ok(())
}

fn per(started: Instant, iterations: u64) -> f64 {
    started.elapsed().as_nanos() as f64 / iterations.max(1) as f64
}

/// `--serve-stdio CATALOG`: the `cold` lines' upstream, rmcp on stdio
/// serving the tools of CATALOG (a file with a `tools` list).
fn serve_stdio(catalog: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(catalog).map_err(|e| format!("{catalog}: {e}"))?;
    let mut document: Value = serde_json::from_str(&text).map_err(|e| format!("{catalog}: {e}"))?;
    let tools: Vec<Tool> = document
        .get_mut("tools")
        .map(Value::take)
        .ok_or_else(|| format!("{catalog}: no `tools` list"))
        .and_then(|tools| serde_json::from_value(tools).map_err(|e| format!("{catalog}: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let upstream = Upstream { tools: Arc::new(tools) };
        let running = upstream
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| e.to_string())?;
        running.waiting().await.map(drop).map_err(|e| e.to_string())
    })
}

/// The tool the `cold` lines call: read-only in the seed catalog, no
/// arguments, so the bench policy allows it.
const COLD_TOOL: &str = "get_capabilities";

/// The `cold gateway` and `cold gateway-direct` lines (see the top).
fn cold_start(data: &std::path::Path, rounds: u64) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("toolgate-gateway-bench-cold-{}", std::process::id()));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
    let proxy = bin.join("toolgate-proxy");
    std::fs::copy(exe.with_file_name("toolgate-proxy"), &proxy).map_err(|e| format!("toolgate-proxy: {e}"))?;
    // The native code beside the binary, as the npm and PyPI packages ship it.
    let shipped = std::process::Command::new(exe.with_file_name("toolgate"))
        .arg("precompile")
        .arg(&bin)
        .output()
        .map_err(|e| format!("toolgate precompile: {e}"))?;
    if !shipped.status.success() {
        return Err(format!("toolgate precompile failed: {shipped:?}"));
    }
    let policy = data.join("policy.yaml");
    let catalog = data.join("34").join("catalog.json");
    let mut through = Vec::new();
    let mut direct = Vec::new();
    for round in 0..rounds {
        let cache = dir.join(format!("cache-{round}"));
        let mut gateway = std::process::Command::new(&proxy);
        gateway
            .env("TOOLGATE_CACHE_DIR", &cache)
            .arg("--policy")
            .arg(&policy)
            .arg("--")
            .arg(&exe)
            .arg("--serve-stdio")
            .arg(&catalog);
        let mut upstream = std::process::Command::new(&exe);
        upstream.arg("--serve-stdio").arg(&catalog);
        // Which goes first alternates, so a busy stretch falls on both.
        if round % 2 == 0 {
            through.push(first_call(&mut gateway)?);
            direct.push(first_call(&mut upstream)?);
        } else {
            direct.push(first_call(&mut upstream)?);
            through.push(first_call(&mut gateway)?);
        }
        if cache.exists() {
            return Err(format!(
                "{} compiled the component instead of loading the code beside it",
                proxy.display()
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (through, direct) = (median(through), median(direct));
    println!("cold gateway {through:.1}");
    println!("cold gateway-direct {direct:.1}");
    eprintln!(
        "cold gateway: {:.1} ms added to an upstream's start by the gateway's ({rounds} rounds)",
        through - direct
    );
    Ok(())
}

/// Milliseconds from spawning `command` (an MCP server on stdio) to the
/// answer of its first `tools/call` of [`COLD_TOOL`], after the handshake;
/// an error unless the tool ran.
fn first_call(command: &mut std::process::Command) -> Result<f64, String> {
    use std::io::{BufRead, Write};
    let started = Instant::now();
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{command:?}: {e}"))?;
    let answer = (|| -> Result<Value, String> {
        let mut input = child.stdin.take().ok_or("no stdin")?;
        let mut output = std::io::BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut send = |message: Value| writeln!(input, "{message}").and_then(|()| input.flush());
        let mut answer_to = |id: u64| -> Result<Value, String> {
            let mut line = String::new();
            loop {
                line.clear();
                if output.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                    return Err("the server closed its output".into());
                }
                let message: Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))?;
                if message.get("id") == Some(&json!(id)) {
                    return Ok(message);
                }
            }
        };
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "toolgate-gateway-bench", "version": "0"}}});
        send(initialize).map_err(|e| e.to_string())?;
        answer_to(1)?;
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).map_err(|e| e.to_string())?;
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": COLD_TOOL, "arguments": {}}});
        send(call).map_err(|e| e.to_string())?;
        answer_to(2)
    })();
    let took = started.elapsed().as_secs_f64() * 1e3;
    let _ = child.kill();
    let finished = child.wait_with_output();
    let ran = answer
        .as_ref()
        .ok()
        .and_then(|answer| answer.pointer("/result/content/0/text"))
        .and_then(Value::as_str)
        == Some("ok");
    if !ran {
        let stderr = finished.map(|out| String::from_utf8_lossy(&out.stderr).into_owned());
        return Err(format!(
            "{command:?}: the first call did not run: {answer:?}; stderr: {stderr:?}"
        ));
    }
    Ok(took)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}
