//! Who is calling: the gateway as an OAuth 2.1 resource server (MCP
//! authorization). A bearer token is checked here, before the MCP session
//! sees the request; its scopes become that caller's decision context and
//! its subject goes into audit lines and confirmation seals.
//!
//! `--auth jwt`: tokens are checked by `jsonwebtoken`: only asymmetric
//! algorithms (a key published in a JWKS can never be used as an HMAC
//! secret, and `none` does not parse), the key's own `alg`/`crv`/`use` must
//! agree with the token's header, and `iss`, `aud` and `exp` are required,
//! `nbf` honoured, with a small clock-skew allowance.
//!
//! `--auth introspection`: opaque tokens are asked about at the
//! authorization server's RFC 7662 endpoint (the gateway authenticates there
//! with its client id and secret). The answer must say `active`, carry this
//! resource's `aud` and a `sub`; `iss`, `exp` and `nbf` are checked when
//! stated. An endpoint that cannot answer refuses the request (503): no
//! token is taken on trust. An active answer is trusted for
//! `--introspection-cache` seconds at most (and never past its `exp`): that
//! is how long a revoked token may still be served.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate::Context;

/// Seconds of clock difference allowed between the issuer and the gateway.
const LEEWAY_SECS: u64 = 60;
/// A token naming a key the gateway does not have makes it fetch the JWKS
/// again, at most this often (a stream of made-up `kid`s cannot turn the
/// gateway into a load generator against the identity provider).
const REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// Signature algorithms accepted: asymmetric only.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The `typ` headers an access token may carry (when it carries one).
const ACCESS_TOKEN_TYPES: [&str; 3] = ["JWT", "at+jwt", "application/at+jwt"];

/// Where the issuer's public keys come from.
#[derive(Debug, Clone)]
pub enum JwksSource {
    File(PathBuf),
    Url(String),
}

impl JwksSource {
    pub fn parse(text: &str) -> JwksSource {
        if text.starts_with("https://") || text.starts_with("http://") {
            JwksSource::Url(text.to_owned())
        } else {
            JwksSource::File(PathBuf::from(text))
        }
    }
}

/// The authenticated caller of one request.
#[derive(Debug)]
pub struct Caller {
    /// The token's `sub`; empty when the gateway does not authenticate.
    pub subject: String,
    /// Who vouches for `subject`: the configured issuer (`--issuer`), empty
    /// without `--auth`. A `sub` is unique only within its issuer, so records
    /// a store shares across deployments (approvals) are kept per realm.
    pub realm: String,
    /// Realm and subject in one text ([`qualified`]): who a record shared
    /// across deployments (an approval, a sealed confirmation) is for.
    pub qualified: String,
    pub context: Context,
    /// `context` as the JSON the engine reads.
    pub context_json: String,
}

/// A subject within its realm: the realm length-prefixed, so no split of
/// the two collides (`sub` is unique only within its issuer, and two
/// deployments may share a store and a state secret).
pub fn qualified(realm: &str, subject: &str) -> String {
    format!("{}:{realm}{subject}", realm.len())
}

impl Caller {
    /// A caller no one vouches for (the gateway without `--auth`).
    pub fn anonymous(context: Context) -> Caller {
        Caller::new(String::new(), String::new(), context)
    }

    pub fn new(realm: String, subject: String, context: Context) -> Caller {
        Caller {
            context_json: context.to_json(),
            qualified: qualified(&realm, &subject),
            subject,
            realm,
            context,
        }
    }
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token: 401 without an error code (RFC 6750 §3.1).
    Missing,
    /// A token that does not check out: 401 `invalid_token`.
    Invalid(String),
    /// A good token without a scope every request needs: 403.
    InsufficientScope,
    /// The token could not be checked (the introspection endpoint did not
    /// answer, or not as RFC 7662 says): 503, and the request goes no further.
    Unavailable(String),
}

impl Refusal {
    /// The metric label (`toolgate_auth_refusals_total{reason}`).
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Invalid(_) => "invalid_token",
            Refusal::InsufficientScope => "insufficient_scope",
            Refusal::Unavailable(_) => "unavailable",
        }
    }
}

/// How tokens are checked.
#[derive(Debug, Clone)]
pub enum TokenCheck {
    /// Signed JWTs, against the issuer's published keys.
    Jwt(JwksSource),
    /// Any token, by asking the authorization server (RFC 7662).
    Introspection(Introspection),
}

/// `--introspection-url`, the gateway's client credentials there, and how
/// long an active answer is trusted.
#[derive(Clone)]
pub struct Introspection {
    pub url: String,
    pub client_id: String,
    pub client_secret: String,
    pub trust_for: Duration,
}

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Introspection")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("trust_for", &self.trust_for)
            .finish_non_exhaustive()
    }
}

/// What a checked token grants, whichever way it was checked.
struct Granted {
    subject: Option<String>,
    scopes: Vec<String>,
    /// Until when (Unix seconds) the answer may be reused.
    until: u64,
}

/// The RFC 7662 §2.2 members the gateway reads.
#[derive(Deserialize)]
struct Introspected {
    active: bool,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    exp: Option<u64>,
    #[serde(default)]
    nbf: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn names(&self, audience: &str) -> bool {
        match self {
            Audience::One(one) => one == audience,
            Audience::Many(many) => many.iter().any(|a| a == audience),
        }
    }
}

#[derive(Debug)]
struct Keys {
    set: JwkSet,
    fetched: Option<Instant>,
}

/// The JWKS and its cache (`--auth jwt`).
#[derive(Debug)]
struct JwtCheck {
    source: JwksSource,
    keys: tokio::sync::RwLock<Keys>,
    /// Serializes refetches, so concurrent unknown-`kid` requests fetch once.
    refetch: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
enum Check {
    Jwt(JwtCheck),
    Introspection(Introspection),
}

/// The resource server's settings and its JWKS cache.
#[derive(Debug)]
pub struct Authenticator {
    issuer: String,
    audience: String,
    check: Check,
    client: reqwest::Client,
    /// Scopes every request needs (`--require-scope`).
    pub required_scopes: Vec<String>,
    /// The protected resource's identifier (`--resource`).
    pub resource: String,
    /// Where the protected-resource metadata is served.
    pub metadata_url: String,
    /// The decision context every caller starts from (surface, allowlist).
    base: Context,
    /// Refusals are counted here.
    metrics: Arc<crate::metrics::Metrics>,
    jwks_max_age: Duration,
    /// Tokens already checked, until they expire: a client sends the same
    /// token on every request of a session, and checking a signature costs
    /// 100-200 µs (an introspection, a round trip). Emptied whenever a
    /// fetched JWKS no longer lists a key it listed (a key the issuer
    /// withdrew stops vouching for tokens at once); an introspected token
    /// stays at most
    /// `Introspection::trust_for`.
    verified: std::sync::Mutex<VerifiedTokens>,
}

#[derive(Debug, Default)]
struct VerifiedTokens {
    tokens: HashMap<String, Verified>,
    /// How many times a refetch withdrew a key and the tokens were
    /// forgotten. A check that began before the last time may have used the
    /// withdrawn key, so its token is not remembered: a request checked
    /// while the refetch ran would otherwise be kept past it, until the
    /// token's `exp`.
    withdrawals: u64,
}

#[derive(Debug)]
struct Verified {
    caller: Arc<Caller>,
    /// The token's `exp` (Unix seconds), without the leeway; for an
    /// introspected token, sooner when the answer's trust runs out first.
    expires: u64,
}

/// Tokens kept in the cache at most; past it, expired entries go, then all.
const VERIFIED_CAPACITY: usize = 4096;

#[derive(Deserialize)]
struct Claims {
    /// Required and checked by the validation; kept to bound the cache.
    exp: u64,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Scp>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Scp {
    One(String),
    Many(Vec<String>),
}

/// The settings `Authenticator::new` needs.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub issuer: String,
    pub audience: String,
    pub check: TokenCheck,
    pub required_scopes: Vec<String>,
    pub resource: String,
    pub metadata_url: String,
    pub base: Context,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// `--auth jwt`: how old the key set in hand may be before a request
    /// fetches it again (a key the issuer withdrew stops vouching then).
    pub jwks_max_age: Duration,
}

impl Authenticator {
    /// Loads the JWKS once now: a gateway that cannot check tokens does not
    /// start. (An introspection endpoint is asked nothing until a token
    /// comes: there is no request to make without one.)
    pub async fn new(settings: AuthSettings, client: reqwest::Client) -> Result<Authenticator, String> {
        let check = match settings.check {
            TokenCheck::Jwt(source) => {
                let set = fetch(&source, &client).await?;
                Check::Jwt(JwtCheck {
                    source,
                    keys: tokio::sync::RwLock::new(Keys {
                        set,
                        fetched: Some(Instant::now()),
                    }),
                    refetch: tokio::sync::Mutex::new(()),
                })
            }
            TokenCheck::Introspection(introspection) => Check::Introspection(introspection),
        };
        Ok(Authenticator {
            issuer: settings.issuer,
            audience: settings.audience,
            check,
            client,
            required_scopes: settings.required_scopes,
            resource: settings.resource,
            metadata_url: settings.metadata_url,
            base: settings.base,
            metrics: settings.metrics,
            jwks_max_age: settings.jwks_max_age,
            verified: std::sync::Mutex::default(),
        })
    }

    /// Whether `--auth jwt`'s key set holds a key some accepted algorithm
    /// can verify with (true for introspection, which needs none). A start
    /// with none is refused: every caller would get `401` from a gateway
    /// reporting ready (review 22: `{"keys":[]}`, or only an HMAC key).
    pub async fn can_verify(&self) -> bool {
        match &self.check {
            Check::Jwt(jwt) => {
                let keys = jwt.keys.read().await;
                keys.set
                    .keys
                    .iter()
                    .any(|key| ALGORITHMS.iter().any(|alg| fits(key, *alg)))
            }
            Check::Introspection(_) => true,
        }
    }

    /// The caller an `Authorization` header names, or why not.
    pub async fn authenticate(self: &Arc<Self>, authorization: Option<&str>) -> Result<Arc<Caller>, Refusal> {
        let token = bearer(authorization)?;
        let now = unix_now();
        // A key set `--jwks-max-age` old is fetched again beside this
        // request, which goes on with the keys in hand (a slow identity
        // provider must not hold up the request that noticed); a refetch
        // that drops a key empties the cache.
        if let Check::Jwt(jwt) = &self.check
            && jwt.is_older_than(self.jwks_max_age).await
        {
            let this = Arc::clone(self);
            tokio::spawn(async move {
                if let Check::Jwt(jwt) = &this.check {
                    this.refetch_if_older(jwt, this.jwks_max_age, false).await;
                }
            });
        }
        if let Some(caller) = self.already_verified(token, now) {
            return Ok(caller);
        }
        let withdrawals_before = self.verified().withdrawals;
        let granted = match &self.check {
            Check::Jwt(jwt) => self.verify_jwt(jwt, token).await?,
            Check::Introspection(introspection) => self.introspect(introspection, token, now).await?,
        };
        let subject = granted
            .subject
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("the token names no subject (sub)".into()))?;
        if !self.required_scopes.iter().all(|s| granted.scopes.contains(s)) {
            return Err(Refusal::InsufficientScope);
        }
        let context = Context {
            scopes: Some(granted.scopes),
            ..self.base.clone()
        };
        let caller = Arc::new(Caller::new(self.issuer.clone(), subject, context));
        self.remember(token, &caller, granted.until, now, withdrawals_before);
        Ok(caller)
    }

    async fn verify_jwt(&self, jwt: &JwtCheck, token: &str) -> Result<Granted, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(format!("unreadable token: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(invalid(format!("algorithm {:?} is not accepted", header.alg)));
        }
        // RFC 7515 §4.1.11: a recipient must refuse a token whose `crit`
        // names an extension it does not understand; the gateway
        // understands none (review 22: such a token was accepted).
        if let Some(crit) = &header.crit {
            return Err(invalid(format!(
                "the token's header marks extensions the gateway does not understand as critical ({crit:?})"
            )));
        }
        // An ID token (or a logout token…) that happens to carry this
        // resource as its audience is not an access token (RFC 9068 §4:
        // `at+jwt`; many issuers write `JWT`).
        if let Some(typ) = header.typ.as_deref()
            && !ACCESS_TOKEN_TYPES.iter().any(|t| t.eq_ignore_ascii_case(typ))
        {
            return Err(invalid(format!("a token of type {typ:?} is not an access token")));
        }
        let key = match jwt.key_for(header.kid.as_deref(), header.alg).await {
            Some(key) => key,
            None => {
                self.refetch_if_older(jwt, REFETCH_INTERVAL, true).await;
                jwt.key_for(header.kid.as_deref(), header.alg)
                    .await
                    .ok_or_else(|| invalid("no key of the issuer matches the token's kid and algorithm".into()))?
            }
        };
        let claims = self.check(token, header.alg, &key)?;
        Ok(Granted {
            subject: claims.sub,
            scopes: granted_scopes(claims.scope, claims.scp),
            until: claims.exp,
        })
    }

    /// Asks the authorization server about `token` (RFC 7662 §2.1, the
    /// client authenticated with HTTP Basic).
    async fn introspect(&self, settings: &Introspection, token: &str, now: u64) -> Result<Granted, Refusal> {
        let endpoint = crate::outbound::host_of(&settings.url);
        let unavailable = |why: String| Refusal::Unavailable(format!("the introspection endpoint {endpoint}: {why}"));
        // Its own statement: the serializer is not `Send`, and a temporary
        // of the request's statement would live across its `.await`.
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let response = self
            .client
            .post(&settings.url)
            .basic_auth(&settings.client_id, Some(&settings.client_secret))
            .header(header::ACCEPT, "application/json")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| unavailable(crate::outbound::error_chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(unavailable(format!("HTTP {status}")));
        }
        let answer: Introspected = response
            .json()
            .await
            .map_err(|e| unavailable(format!("not an introspection response: {e}")))?;
        self.judge(answer, settings.trust_for, now)
    }

    /// An introspection answer, checked as a JWT's claims are.
    fn judge(&self, answer: Introspected, trust_for: Duration, now: u64) -> Result<Granted, Refusal> {
        if !answer.active {
            return Err(invalid("the token is not active".into()));
        }
        if answer.iss.as_ref().is_some_and(|iss| *iss != self.issuer) {
            return Err(invalid("the token was issued by another issuer (iss)".into()));
        }
        if !answer.aud.as_ref().is_some_and(|aud| aud.names(&self.audience)) {
            return Err(invalid("the token is not for this resource (aud)".into()));
        }
        if answer.exp.is_some_and(|exp| now >= exp.saturating_add(LEEWAY_SECS)) {
            return Err(invalid("the token has expired (exp)".into()));
        }
        if answer.nbf.is_some_and(|nbf| nbf > now.saturating_add(LEEWAY_SECS)) {
            return Err(invalid("the token is not valid yet (nbf)".into()));
        }
        let trusted_until = now.saturating_add(trust_for.as_secs());
        Ok(Granted {
            subject: answer.sub,
            scopes: granted_scopes(answer.scope, None),
            until: answer.exp.map_or(trusted_until, |exp| exp.min(trusted_until)),
        })
    }

    fn verified(&self) -> std::sync::MutexGuard<'_, VerifiedTokens> {
        self.verified.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A token checked before that has not expired since. Only a token that
    /// passed every check is here, so only `exp` can have changed its fate
    /// (`nbf` was already past when it was checked).
    fn already_verified(&self, token: &str, now: u64) -> Option<Arc<Caller>> {
        let cache = self.verified();
        let entry = cache.tokens.get(token)?;
        (now < entry.expires).then(|| entry.caller.clone())
    }

    /// Keeps a token checked after `withdrawals_before` withdrawals (see
    /// [`VerifiedTokens::withdrawals`]).
    fn remember(&self, token: &str, caller: &Arc<Caller>, expires: u64, now: u64, withdrawals_before: u64) {
        // Inside the leeway: accepted now, but not cached, so it is checked
        // again (and refused once the leeway is over).
        if now >= expires {
            return;
        }
        let mut verified = self.verified();
        if verified.withdrawals != withdrawals_before {
            return;
        }
        let cache = &mut verified.tokens;
        if cache.len() >= VERIFIED_CAPACITY {
            cache.retain(|_, entry| now < entry.expires);
            if cache.len() >= VERIFIED_CAPACITY {
                cache.clear();
            }
        }
        cache.insert(
            token.to_owned(),
            Verified {
                caller: caller.clone(),
                expires,
            },
        );
    }

    /// Checks the signature and the registered claims; the claims if good.
    fn check(&self, token: &str, alg: Algorithm, key: &DecodingKey) -> Result<Claims, Refusal> {
        let mut validation = Validation::new(alg);
        validation.algorithms = vec![alg];
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        jsonwebtoken::decode::<Claims>(token, key, &validation)
            .map(|data| data.claims)
            .map_err(|e| invalid(format!("the token was refused: {e}")))
    }

    /// Fetches the key set again if the one in hand is `age` old. `wait`:
    /// behind a fetch already running (a token naming a key not in hand
    /// needs its result); otherwise a request goes on with the keys in hand.
    async fn refetch_if_older(&self, jwt: &JwtCheck, age: Duration, wait: bool) {
        if !jwt.is_older_than(age).await {
            return;
        }
        let _one_at_a_time = if wait {
            jwt.refetch.lock().await
        } else {
            match jwt.refetch.try_lock() {
                Ok(guard) => guard,
                Err(_) => return,
            }
        };
        if !jwt.is_older_than(age).await {
            return;
        }
        let fetched = fetch(&jwt.source, &self.client).await;
        let mut keys = jwt.keys.write().await;
        keys.fetched = Some(Instant::now());
        match fetched {
            Ok(set) => {
                // A token verified under a key the issuer no longer lists (or
                // lists changed) must be checked again; one that only gained
                // keys takes nothing back (review 22: a made-up `kid` every
                // 10 s emptied the cache for every caller).
                let withdrew = keys.set.keys.iter().any(|kept| !set.keys.contains(kept));
                keys.set = set;
                if withdrew {
                    // While the new keys are write-locked in: a check that
                    // read the old ones has read the count before this.
                    let mut verified = self.verified();
                    verified.tokens.clear();
                    verified.withdrawals += 1;
                }
            }
            // The keys in hand stay; a token naming a new key waits for the
            // next successful fetch.
            Err(e) => tracing::warn!(error = %e, "refreshing the JWKS failed; keeping the keys in hand"),
        }
    }

    /// The protected-resource metadata document (RFC 9728 §2).
    pub fn metadata(&self) -> serde_json::Value {
        let mut doc = json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "toolgate gateway",
        });
        if !self.required_scopes.is_empty()
            && let Some(map) = doc.as_object_mut()
        {
            map.insert("scopes_supported".into(), json!(self.required_scopes));
        }
        doc
    }

    /// The refusal as the HTTP answer MCP authorization prescribes.
    pub fn refuse(&self, refusal: &Refusal) -> Response {
        let quoted = |s: &str| s.replace(['"', '\\'], "'");
        let (status, challenge, body) = match refusal {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                format!("Bearer resource_metadata=\"{}\"", self.metadata_url),
                json!({"error": "invalid_request", "error_description": "a bearer token is required"}),
            ),
            Refusal::Invalid(why) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{}\"",
                    quoted(why),
                    self.metadata_url
                ),
                json!({"error": "invalid_token", "error_description": why}),
            ),
            Refusal::InsufficientScope => {
                let scope = self.required_scopes.join(" ");
                (
                    StatusCode::FORBIDDEN,
                    format!(
                        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
                        quoted(&scope),
                        self.metadata_url
                    ),
                    json!({"error": "insufficient_scope", "error_description": format!("the token lacks a required scope: {scope}")}),
                )
            }
            // Not the token's fault, so no `invalid_token`: the client may
            // retry the same token.
            Refusal::Unavailable(why) => {
                let mut response = crate::http::json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &json!({"error": "temporarily_unavailable", "error_description": why}),
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                return response;
            }
        };
        let mut response = crate::http::json(status, &body);
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

impl JwtCheck {
    /// Whether the key set in hand was fetched `age` ago or more.
    async fn is_older_than(&self, age: Duration) -> bool {
        self.keys.read().await.fetched.is_none_or(|at| at.elapsed() >= age)
    }

    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        let keys = self.keys.read().await;
        let usable = |jwk: &&Jwk| fits(jwk, alg);
        let jwk = match kid {
            Some(kid) => keys
                .set
                .keys
                .iter()
                .filter(usable)
                .find(|k| k.common.key_id.as_deref() == Some(kid)),
            // No kid: only an unambiguous key will do.
            None => {
                let mut candidates = keys.set.keys.iter().filter(usable);
                match (candidates.next(), candidates.next()) {
                    (Some(only), None) => Some(only),
                    _ => None,
                }
            }
        }?;
        DecodingKey::from_jwk(jwk).ok()
    }
}

fn invalid(why: String) -> Refusal {
    Refusal::Invalid(why)
}

fn bearer(authorization: Option<&str>) -> Result<&str, Refusal> {
    let value = authorization.ok_or(Refusal::Missing)?;
    let (scheme, token) = value.split_once(' ').ok_or(Refusal::Missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(Refusal::Missing);
    }
    Ok(token.trim())
}

/// `scope` (space-separated, RFC 8693/9068) and `scp` (a string or an array,
/// as some providers write it), merged.
fn granted_scopes(scope: Option<String>, scp: Option<Scp>) -> Vec<String> {
    let mut scopes: Vec<String> = scope
        .iter()
        .flat_map(|s| s.split_whitespace())
        .map(str::to_owned)
        .collect();
    match scp {
        Some(Scp::One(s)) => scopes.extend(s.split_whitespace().map(str::to_owned)),
        Some(Scp::Many(list)) => scopes.extend(list),
        None => {}
    }
    scopes.sort();
    scopes.dedup();
    scopes
}

/// Whether a published key may verify a token signed with `alg`: the key's
/// type fits the algorithm, and its own `alg`, `crv` and `use`, when it
/// states them, agree.
fn fits(jwk: &Jwk, alg: Algorithm) -> bool {
    if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
        return false;
    }
    if let Some(stated) = jwk.common.key_algorithm
        && key_algorithm(alg) != Some(stated)
    {
        return false;
    }
    match (&jwk.algorithm, alg) {
        (AlgorithmParameters::RSA(_), Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512)
        | (AlgorithmParameters::RSA(_), Algorithm::PS256 | Algorithm::PS384 | Algorithm::PS512) => true,
        (AlgorithmParameters::EllipticCurve(ec), Algorithm::ES256) => ec.curve == EllipticCurve::P256,
        (AlgorithmParameters::EllipticCurve(ec), Algorithm::ES384) => ec.curve == EllipticCurve::P384,
        (AlgorithmParameters::OctetKeyPair(okp), Algorithm::EdDSA) => okp.curve == EllipticCurve::Ed25519,
        _ => false,
    }
}

fn key_algorithm(alg: Algorithm) -> Option<KeyAlgorithm> {
    Some(match alg {
        Algorithm::RS256 => KeyAlgorithm::RS256,
        Algorithm::RS384 => KeyAlgorithm::RS384,
        Algorithm::RS512 => KeyAlgorithm::RS512,
        Algorithm::PS256 => KeyAlgorithm::PS256,
        Algorithm::PS384 => KeyAlgorithm::PS384,
        Algorithm::PS512 => KeyAlgorithm::PS512,
        Algorithm::ES256 => KeyAlgorithm::ES256,
        Algorithm::ES384 => KeyAlgorithm::ES384,
        Algorithm::EdDSA => KeyAlgorithm::EdDSA,
        _ => return None,
    })
}

async fn fetch(source: &JwksSource, client: &reqwest::Client) -> Result<JwkSet, String> {
    let text = match source {
        JwksSource::File(path) => tokio::fs::read_to_string(path)
            .await
            .map_err(|e| format!("the JWKS {}: {e}", path.display()))?,
        JwksSource::Url(url) => {
            let response = client
                .get(url)
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .map_err(|e| format!("the JWKS {url}: {}", crate::outbound::error_chain(&e)))?;
            if !response.status().is_success() {
                return Err(format!("the JWKS {url}: HTTP {}", response.status()));
            }
            response.text().await.map_err(|e| format!("the JWKS {url}: {e}"))?
        }
    };
    serde_json::from_str(&text).map_err(|e| format!("the JWKS is not a JSON Web Key Set: {e}"))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The middleware in front of `/mcp`: no request reaches the MCP session
/// without a caller.
pub async fn require(State(auth): State<Arc<Authenticator>>, mut request: Request, next: Next) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match auth.authenticate(authorization).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refusal) => {
            tracing::info!(?refusal, "request refused");
            auth.metrics.auth_refused(refusal.reason());
            crate::http::answer_after_body(request.into_body(), auth.refuse(&refusal)).await
        }
    }
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`.
pub async fn metadata(State(auth): State<Arc<Authenticator>>) -> Response {
    crate::http::json(StatusCode::OK, &auth.metadata())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_merge_both_claims() {
        let scopes = granted_scopes(Some("b a".into()), Some(Scp::Many(vec!["c".into(), "a".into()])));
        assert_eq!(scopes, vec!["a", "b", "c"]);
        assert!(granted_scopes(None, None).is_empty());
    }

    #[test]
    fn only_bearer_tokens() {
        assert_eq!(bearer(None), Err(Refusal::Missing));
        assert_eq!(bearer(Some("Basic abc")), Err(Refusal::Missing));
        assert_eq!(bearer(Some("Bearer  ")), Err(Refusal::Missing));
        assert_eq!(bearer(Some("bearer x.y.z")), Ok("x.y.z"));
    }

    /// A gateway on this machine checking tokens against the key set in
    /// the file `jwks`.
    fn jwt_settings(jwks: std::path::PathBuf) -> AuthSettings {
        AuthSettings {
            issuer: "https://issuer.example".into(),
            audience: "toolgate".into(),
            check: TokenCheck::Jwt(JwksSource::File(jwks)),
            required_scopes: Vec::new(),
            resource: "http://127.0.0.1/mcp".into(),
            metadata_url: "http://127.0.0.1/.well-known/oauth-protected-resource/mcp".into(),
            base: Context::default(),
            metrics: Arc::default(),
            jwks_max_age: Duration::from_secs(300),
        }
    }

    /// A refusal made on the headers waits for the request's body, so hyper
    /// keeps the connection and the client's next request on it is answered.
    /// The body is sent after a pause so it is not in hyper's buffer when the
    /// refusal is made; without the wait, hyper closes the connection after
    /// the 401 and the second request reads end-of-file.
    #[tokio::test]
    async fn a_refused_request_keeps_its_connection_usable() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = std::env::temp_dir().join(format!("toolgate-auth-keepalive-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jwks = dir.join("jwks.json");
        std::fs::write(&jwks, r#"{"keys":[]}"#).unwrap();
        let settings = jwt_settings(jwks);
        let auth = Arc::new(
            Authenticator::new(settings, crate::outbound::client(None, None).unwrap())
                .await
                .unwrap(),
        );
        let router = axum::Router::new()
            .route("/mcp", axum::routing::post(|| async { "served" }))
            .layer(axum::middleware::from_fn_with_state(auth.clone(), require));
        let auth_for_check = auth;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });

        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let mut answers = String::new();
        for _ in 0..2 {
            // A write into a connection the server closed fails: the
            // assertion below then reports the one answer.
            if stream.write_all(head.as_bytes()).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            if stream.write_all(body.as_bytes()).await.is_err() {
                break;
            }
            let mut buffer = vec![0u8; 4096];
            let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
                .await
                .unwrap()
                .unwrap_or(0);
            answers.push_str(&String::from_utf8_lossy(&buffer[..read]));
            answers.push('|');
        }
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(answers.matches("HTTP/1.1 401").count(), 2, "{answers}");
        assert!(!auth_for_check.can_verify().await, "an empty key set verifies nothing");
        assert!(!answers.to_ascii_lowercase().contains("connection: close"), "{answers}");
    }

    async fn introspecting() -> Arc<Authenticator> {
        let settings = AuthSettings {
            issuer: "https://issuer.example".into(),
            audience: "https://gateway.example/mcp".into(),
            check: TokenCheck::Introspection(Introspection {
                url: "http://127.0.0.1:9/introspect".into(),
                client_id: "gateway".into(),
                client_secret: "s3cret".into(),
                trust_for: Duration::from_secs(60),
            }),
            required_scopes: Vec::new(),
            resource: "https://gateway.example/mcp".into(),
            metadata_url: "https://gateway.example/.well-known/oauth-protected-resource/mcp".into(),
            base: Context::default(),
            metrics: Arc::default(),
            jwks_max_age: Duration::from_secs(300),
        };
        Arc::new(
            Authenticator::new(settings, crate::outbound::client(None, None).unwrap())
                .await
                .unwrap(),
        )
    }

    fn answer(value: serde_json::Value) -> Introspected {
        serde_json::from_value(value).unwrap()
    }

    #[tokio::test]
    async fn an_introspection_answer_is_checked_like_a_tokens_claims() {
        let auth = introspecting().await;
        let now = 1_000_000;
        let aud = "https://gateway.example/mcp";
        let good = json!({"active": true, "sub": "ana", "scope": "b a", "aud": aud,
                          "iss": "https://issuer.example", "exp": now + 600});
        let granted = auth.judge(answer(good.clone()), Duration::from_secs(60), now).unwrap();
        assert_eq!(granted.subject.as_deref(), Some("ana"));
        assert_eq!(granted.scopes, vec!["a", "b"]);
        // Trusted for the cache time, never past `exp`.
        assert_eq!(granted.until, now + 60);
        let mut soon = good.clone();
        soon["exp"] = json!(now + 5);
        assert_eq!(
            auth.judge(answer(soon), Duration::from_secs(60), now).unwrap().until,
            now + 5
        );
        let mut many = good.clone();
        many["aud"] = json!(["other", aud]);
        assert!(auth.judge(answer(many), Duration::from_secs(60), now).is_ok());

        let refused = |change: &dyn Fn(&mut serde_json::Value)| {
            let mut value = good.clone();
            change(&mut value);
            match auth.judge(answer(value), Duration::from_secs(60), now) {
                Err(Refusal::Invalid(why)) => why,
                other => panic!("not refused as invalid: {:?}", other.map(|g| g.subject)),
            }
        };
        assert!(refused(&|v| v["active"] = json!(false)).contains("not active"));
        assert!(refused(&|v| v["iss"] = json!("https://elsewhere.example")).contains("iss"));
        assert!(refused(&|v| v["aud"] = json!("other")).contains("aud"));
        assert!(refused(&|v| v["aud"] = json!([])).contains("aud"));
        assert!(
            refused(&|v| {
                v.as_object_mut().unwrap().remove("aud");
            })
            .contains("aud")
        );
        assert!(refused(&|v| v["exp"] = json!(now - LEEWAY_SECS)).contains("exp"));
        assert!(refused(&|v| v["nbf"] = json!(now + LEEWAY_SECS + 1)).contains("nbf"));
        // `active: false` alone (RFC 7662 §2.2: nothing else need be said).
        assert!(
            auth.judge(answer(json!({"active": false})), Duration::from_secs(60), now)
                .is_err()
        );
    }

    /// An endpoint that cannot be reached refuses the request as
    /// unavailable (503), never as a pass.
    #[tokio::test]
    async fn an_unreachable_introspection_endpoint_refuses() {
        let auth = introspecting().await;
        match auth.authenticate(Some("Bearer opaque-token")).await {
            Err(Refusal::Unavailable(why)) => assert!(why.contains("127.0.0.1:9"), "{why}"),
            other => panic!("{:?}", other.map(|c| c.subject.clone())),
        }
        let response = auth.refuse(&Refusal::Unavailable("down".into()));
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(response.headers().contains_key(header::RETRY_AFTER));
    }

    /// An authenticator checking tokens against the key set in the file `jwks`.
    async fn jwks_file_authenticator(jwks: &std::path::Path) -> Authenticator {
        Authenticator::new(
            jwt_settings(jwks.to_path_buf()),
            crate::outbound::client(None, None).unwrap(),
        )
        .await
        .unwrap()
    }

    fn jwt_check(auth: &Authenticator) -> &JwtCheck {
        let Check::Jwt(jwt) = &auth.check else {
            panic!("not a JWT check")
        };
        jwt
    }

    /// A refetch that only adds keys (an unknown `kid`, a key rotated in)
    /// keeps the tokens already checked; one that drops or changes a key
    /// forgets them all.
    #[tokio::test]
    async fn a_refetch_forgets_checked_tokens_only_when_a_key_was_withdrawn() {
        let dir = std::env::temp_dir().join(format!("toolgate-auth-withdrawn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jwks = dir.join("jwks.json");
        let key = |kid: &str, n: &str| json!({"kty": "RSA", "n": n, "e": "AQAB", "kid": kid});
        let write = |keys: Vec<serde_json::Value>| std::fs::write(&jwks, json!({ "keys": keys }).to_string()).unwrap();
        write(vec![key("one", "AQAB")]);
        let auth = jwks_file_authenticator(&jwks).await;
        let jwt = jwt_check(&auth);
        let (caller, now) = (Arc::new(Caller::anonymous(Context::default())), 1_000);
        let refetched_keeps = async |keys: Vec<serde_json::Value>| {
            let withdrawals = auth.verified().withdrawals;
            auth.remember("checked", &caller, now + 600, now, withdrawals);
            write(keys);
            auth.refetch_if_older(jwt, Duration::ZERO, true).await;
            auth.verified().tokens.contains_key("checked")
        };
        assert!(refetched_keeps(vec![key("one", "AQAB")]).await, "the same set");
        assert!(
            refetched_keeps(vec![key("one", "AQAB"), key("two", "AQAB")]).await,
            "a key added"
        );
        assert!(!refetched_keeps(vec![key("two", "AQAB")]).await, "a key withdrawn");
        assert!(
            !refetched_keeps(vec![key("two", "AQAC")]).await,
            "a key changed under its kid"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A token checked while a refetch withdrew a key may have been checked
    /// with that key: it is not kept past the refetch (it was, until `exp`).
    #[tokio::test]
    async fn a_token_checked_across_a_withdrawal_is_not_remembered() {
        let dir = std::env::temp_dir().join(format!("toolgate-auth-across-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jwks = dir.join("jwks.json");
        let key = |kid: &str| json!({"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": kid}]});
        std::fs::write(&jwks, key("old").to_string()).unwrap();
        let auth = jwks_file_authenticator(&jwks).await;
        let jwt = jwt_check(&auth);
        let (caller, now) = (Arc::new(Caller::anonymous(Context::default())), 1_000);
        // The check began here, under the old key...
        let before = auth.verified().withdrawals;
        // ...and the refetch that withdrew it ended before the check did.
        std::fs::write(&jwks, key("new").to_string()).unwrap();
        auth.refetch_if_older(jwt, Duration::ZERO, true).await;
        auth.remember("checked-under-old", &caller, now + 600, now, before);
        assert!(auth.already_verified("checked-under-old", now).is_none());
        // A check that began after it is kept.
        let after = auth.verified().withdrawals;
        auth.remember("checked-under-new", &caller, now + 600, now, after);
        assert!(auth.already_verified("checked-under-new", now).is_some());
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The request that finds the key set `--jwks-max-age` old goes on with
    /// the keys in hand while the set is fetched beside it: an identity
    /// provider that does not answer holds up no request (it held up that
    /// one for the fetch's 10 s timeout).
    #[tokio::test]
    async fn a_due_refetch_holds_up_no_request() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = fetches.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = vec![0u8; 4096];
                let _ = stream.read(&mut request).await;
                // The first fetch (at start) is answered; later ones never are.
                if counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    let body = r#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"k"}]}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                } else {
                    held.push(stream);
                }
            }
        });
        let mut settings = jwt_settings(std::path::PathBuf::new());
        settings.check = TokenCheck::Jwt(JwksSource::Url(format!("http://{address}/jwks")));
        settings.jwks_max_age = Duration::ZERO;
        let auth = Arc::new(
            Authenticator::new(settings, crate::outbound::client(None, None).unwrap())
                .await
                .unwrap(),
        );
        let caller = Arc::new(Caller::anonymous(Context::default()));
        let now = unix_now();
        let withdrawals = auth.verified().withdrawals;
        auth.remember("checked", &caller, now + 600, now, withdrawals);
        let answered = tokio::time::timeout(Duration::from_secs(3), auth.authenticate(Some("Bearer checked"))).await;
        assert!(matches!(answered, Ok(Ok(_))), "held up or refused");
        // The refetch did start, beside the request.
        for _ in 0..100 {
            if fetches.load(std::sync::atomic::Ordering::SeqCst) >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(fetches.load(std::sync::atomic::Ordering::SeqCst) >= 2, "no refetch");
    }

    #[test]
    fn a_key_fits_only_its_own_family() {
        let rsa: Jwk = serde_json::from_value(json!({"kty":"RSA","n":"AQAB","e":"AQAB","kid":"r"})).unwrap();
        assert!(fits(&rsa, Algorithm::RS256));
        assert!(!fits(&rsa, Algorithm::HS256));
        assert!(!fits(&rsa, Algorithm::ES256));
        let stated: Jwk = serde_json::from_value(json!({"kty":"RSA","n":"AQAB","e":"AQAB","alg":"RS512"})).unwrap();
        assert!(!fits(&stated, Algorithm::RS256));
        let enc: Jwk = serde_json::from_value(json!({"kty":"RSA","n":"AQAB","e":"AQAB","use":"enc"})).unwrap();
        assert!(!fits(&enc, Algorithm::RS256));
        let hmac: Jwk = serde_json::from_value(json!({"kty":"oct","k":"c2VjcmV0"})).unwrap();
        assert!(!fits(&hmac, Algorithm::HS256));
    }
}
