//! One-time use of sealed confirmations: the ids of seals already redeemed.
//!
//! In process by default (one replica); `--store redis://HOST:PORT` shares
//! it between replicas on Redis or Valkey with an atomic set-if-absent that
//! expires with the seal, so an accepted confirmation runs its call at most
//! once on every replica. A store that cannot be reached redeems nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long a Redis command may take before the call is refused.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);
/// The ledger's key prefix in a shared store.
const KEY_PREFIX: &str = "toolgate:seal:";

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("--store {0}: only redis:// and rediss:// URLs are supported")]
    Scheme(String),
    #[error("--store {0}")]
    Url(String),
    #[error("the confirmation store is unreachable: {0}")]
    Unreachable(String),
}

/// Where redeemed seal ids are kept.
pub enum Ledger {
    Memory(Mutex<HashMap<String, u64>>, Mutex<HashMap<String, (String, u64)>>),
    Redis {
        url_for_messages: String,
        connection: redis::aio::ConnectionManager,
    },
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ledger::Memory(..) => f.write_str("Ledger::Memory"),
            Ledger::Redis { url_for_messages, .. } => write!(f, "Ledger::Redis({url_for_messages})"),
        }
    }
}

impl Ledger {
    pub fn memory() -> Ledger {
        Ledger::Memory(Mutex::new(HashMap::new()), Mutex::new(HashMap::new()))
    }

    /// Connects to a Redis or Valkey server (`redis://HOST:PORT[/DB]`).
    pub async fn redis(url: &str) -> Result<Ledger, LedgerError> {
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(LedgerError::Scheme(redact(url)));
        }
        let client = redis::Client::open(url).map_err(|e| LedgerError::Url(format!("{}: {e}", redact(url))))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            .set_number_of_retries(1);
        let connection = tokio::time::timeout(
            REDIS_TIMEOUT * 2,
            redis::aio::ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| LedgerError::Unreachable(format!("{}: no answer", redact(url))))?
        .map_err(|e| LedgerError::Unreachable(format!("{}: {e}", redact(url))))?;
        Ok(Ledger::Redis {
            url_for_messages: redact(url),
            connection,
        })
    }

    /// Records `id` as redeemed until well past `expires_ms` (`REDEEMED_MARGIN_MS`:
    /// a replica whose clock is behind, or a wall clock stepped back, still
    /// takes the seal as unexpired for a while, and must still find it
    /// spent). `Ok(true)` the first time, `Ok(false)` when it was already
    /// redeemed (on any replica).
    pub async fn redeem(&self, id: &str, expires_ms: u64, now_ms: u64) -> Result<bool, LedgerError> {
        let expires_ms = expires_ms.saturating_add(REDEEMED_MARGIN_MS);
        match self {
            Ledger::Memory(ids, _) => {
                let mut ids = ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                // Expired ids can no longer be presented (the engine refuses
                // an expired seal), so they are dropped as the map grows.
                if ids.len() > 1024 {
                    ids.retain(|_, &mut expires| expires > now_ms);
                }
                if ids.contains_key(id) {
                    return Ok(false);
                }
                ids.insert(id.to_owned(), expires_ms);
                Ok(true)
            }
            Ledger::Redis { connection, .. } => {
                let ttl_ms = expires_ms.saturating_sub(now_ms).max(1);
                let mut connection = connection.clone();
                let set: Option<String> = tokio::time::timeout(
                    REDIS_TIMEOUT,
                    redis::cmd("SET")
                        .arg(format!("{KEY_PREFIX}{id}"))
                        .arg(1)
                        .arg("NX")
                        .arg("PX")
                        .arg(ttl_ms)
                        .query_async(&mut connection),
                )
                .await
                .map_err(|_| LedgerError::Unreachable("no answer in time".into()))?
                .map_err(|e| LedgerError::Unreachable(e.to_string()))?;
                Ok(set.is_some())
            }
        }
    }
}

/// How long past its expiry a redeemed seal id is kept: more than any clock
/// skew between replicas a deployment should have.
pub const REDEEMED_MARGIN_MS: u64 = 10 * 60 * 1000;

/// Compare-and-set of a record in a shared store: `KEYS[1]` is replaced by
/// `ARGV[2]` only while it still holds `ARGV[1]`; then `KEYS[2]` is set to
/// `ARGV[4]` for `ARGV[5]` ms (`ARGV[6]` = `set`) or deleted (`del`).
const CAS_SCRIPT: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if ARGV[6] == 'set' then redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
elseif ARGV[6] == 'del' then redis.call('DEL', KEYS[2]) end
return 1
";

/// `count_up` on Redis: INCR, and the expiry when the count starts, in one
/// step.
const COUNT_SCRIPT: &str =
    "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n";

/// A value also written by [`Ledger::swap`]: `key` set to `value` for
/// `ttl_ms`; an empty `value` deletes `key`.
#[derive(Debug, Clone, Copy)]
pub struct Also<'a> {
    pub key: &'a str,
    pub value: &'a str,
    pub ttl_ms: u64,
}

/// Small records kept beside the seal ids (pending approvals): the same
/// store, so every replica sees them.
impl Ledger {
    fn kv(&self, now_ms: u64) -> Option<std::sync::MutexGuard<'_, HashMap<String, (String, u64)>>> {
        match self {
            Ledger::Memory(_, kv) => {
                let mut kv = kv.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if kv.len() > 1024 {
                    kv.retain(|_, (_, expires)| *expires > now_ms);
                }
                Some(kv)
            }
            Ledger::Redis { .. } => None,
        }
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: redis::Cmd) -> Result<T, LedgerError> {
        let Ledger::Redis { connection, .. } = self else {
            return Err(LedgerError::Unreachable("not a shared store".into()));
        };
        let mut connection = connection.clone();
        tokio::time::timeout(REDIS_TIMEOUT, cmd.query_async(&mut connection))
            .await
            .map_err(|_| LedgerError::Unreachable("no answer in time".into()))?
            .map_err(|e| LedgerError::Unreachable(e.to_string()))
    }

    /// Stores `value` under `key` for `ttl_ms` unless the key exists.
    pub async fn put_new(&self, key: &str, value: &str, ttl_ms: u64, now_ms: u64) -> Result<bool, LedgerError> {
        if let Some(mut kv) = self.kv(now_ms) {
            if kv.get(key).is_some_and(|(_, e)| *e > now_ms) {
                return Ok(false);
            }
            kv.insert(key.to_owned(), (value.to_owned(), now_ms.saturating_add(ttl_ms)));
            return Ok(true);
        }
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value).arg("NX").arg("PX").arg(ttl_ms.max(1));
        let set: Option<String> = self.query(cmd).await?;
        Ok(set.is_some())
    }

    /// The value under `key`, if any and not expired.
    pub async fn get(&self, key: &str, now_ms: u64) -> Result<Option<String>, LedgerError> {
        if let Some(kv) = self.kv(now_ms) {
            return Ok(kv.get(key).filter(|(_, e)| *e > now_ms).map(|(v, _)| v.clone()));
        }
        let mut cmd = redis::cmd("GET");
        cmd.arg(key);
        self.query(cmd).await
    }

    /// Replaces `old` under `key` by `new` (kept `ttl_ms`) only while the
    /// key still holds `old`, and then writes `also`, atomically (a Lua
    /// script on Redis). `Ok(false)` when someone changed it first.
    pub async fn swap(
        &self,
        key: &str,
        old: &str,
        new: &str,
        ttl_ms: u64,
        also: Option<Also<'_>>,
        now_ms: u64,
    ) -> Result<bool, LedgerError> {
        if let Some(mut kv) = self.kv(now_ms) {
            if kv.get(key).is_none_or(|(v, e)| v != old || *e <= now_ms) {
                return Ok(false);
            }
            kv.insert(key.to_owned(), (new.to_owned(), now_ms.saturating_add(ttl_ms)));
            match also {
                Some(also) if also.value.is_empty() => {
                    kv.remove(also.key);
                }
                Some(also) => {
                    kv.insert(
                        also.key.to_owned(),
                        (also.value.to_owned(), now_ms.saturating_add(also.ttl_ms)),
                    );
                }
                None => {}
            }
            return Ok(true);
        }
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(CAS_SCRIPT).arg(2).arg(key).arg(also.map_or(key, |a| a.key));
        cmd.arg(old).arg(new).arg(ttl_ms.max(1));
        cmd.arg(also.map_or("", |a| a.value))
            .arg(also.map_or(1, |a| a.ttl_ms.max(1)))
            .arg(match also {
                None => "",
                Some(a) if a.value.is_empty() => "del",
                Some(_) => "set",
            });
        let done: i64 = self.query(cmd).await?;
        Ok(done == 1)
    }

    /// Adds one to the count under `key`, a count that starts at its first
    /// step and lasts `ttl_ms` from then (a fixed window: steps do not
    /// extend it); the count after, atomically (a Lua script on Redis).
    pub async fn count_up(&self, key: &str, ttl_ms: u64, now_ms: u64) -> Result<u64, LedgerError> {
        if let Some(mut kv) = self.kv(now_ms) {
            let (count, expires) = kv
                .get(key)
                .filter(|(_, e)| *e > now_ms)
                .and_then(|(v, e)| Some((v.parse::<u64>().ok()?, *e)))
                .unwrap_or((0, now_ms.saturating_add(ttl_ms)));
            let count = count.saturating_add(1);
            kv.insert(key.to_owned(), (count.to_string(), expires));
            return Ok(count);
        }
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(COUNT_SCRIPT).arg(1).arg(key).arg(ttl_ms.max(1));
        let count: i64 = self.query(cmd).await?;
        Ok(u64::try_from(count).unwrap_or(u64::MAX))
    }

    /// Takes the value under `key` and deletes it, atomically (`GETDEL`):
    /// of several replicas asking at once, one gets it.
    pub async fn take(&self, key: &str, now_ms: u64) -> Result<Option<String>, LedgerError> {
        if let Some(mut kv) = self.kv(now_ms) {
            return Ok(kv.remove(key).filter(|(_, e)| *e > now_ms).map(|(v, _)| v));
        }
        let mut cmd = redis::cmd("GETDEL");
        cmd.arg(key);
        self.query(cmd).await
    }
}

/// A store URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!(
            "{}://…@{}",
            url.get(..scheme).unwrap_or_default(),
            url.get(at + 1..).unwrap_or_default()
        ),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_redeems_once() {
        let ledger = Ledger::memory();
        assert!(ledger.redeem("id-aaaaaaaaaaaaaaaa", 2_000, 1_000).await.unwrap());
        assert!(!ledger.redeem("id-aaaaaaaaaaaaaaaa", 2_000, 1_500).await.unwrap());
        assert!(ledger.redeem("id-bbbbbbbbbbbbbbbb", 2_000, 1_500).await.unwrap());
    }

    #[tokio::test]
    async fn memory_records_swap_and_take_once() {
        let store = Ledger::memory();
        assert!(store.put_new("k", "v1", 1_000, 0).await.unwrap());
        assert!(!store.put_new("k", "other", 1_000, 10).await.unwrap());
        assert_eq!(store.get("k", 10).await.unwrap().as_deref(), Some("v1"));
        // A swap from a stale value changes nothing.
        assert!(!store.swap("k", "v0", "v2", 1_000, None, 10).await.unwrap());
        let also = Also {
            key: "a",
            value: "id",
            ttl_ms: 500,
        };
        assert!(store.swap("k", "v1", "v2", 1_000, Some(also), 10).await.unwrap());
        assert!(!store.swap("k", "v1", "v3", 1_000, Some(also), 10).await.unwrap());
        assert_eq!(store.get("k", 20).await.unwrap().as_deref(), Some("v2"));
        assert_eq!(store.take("a", 20).await.unwrap().as_deref(), Some("id"));
        assert_eq!(store.take("a", 20).await.unwrap(), None);
        // An empty value deletes.
        assert!(store.swap("k", "v2", "v2b", 1_000, Some(also), 10).await.unwrap());
        let delete = Also { value: "", ..also };
        assert!(store.swap("k", "v2b", "v2", 1_000, Some(delete), 10).await.unwrap());
        assert_eq!(store.take("a", 20).await.unwrap(), None);
        // Expired values are gone.
        assert!(store.swap("k", "v2", "v3", 1_000, Some(also), 20).await.unwrap());
        assert_eq!(store.take("a", 600).await.unwrap(), None);
        assert_eq!(store.get("k", 2_000).await.unwrap(), None);
        assert!(store.put_new("k", "fresh", 1_000, 2_000).await.unwrap());
    }

    #[tokio::test]
    async fn memory_counts_up_within_the_window() {
        let store = Ledger::memory();
        assert_eq!(store.count_up("c", 1_000, 0).await.unwrap(), 1);
        assert_eq!(store.count_up("c", 1_000, 900).await.unwrap(), 2);
        assert_eq!(store.count_up("other", 1_000, 900).await.unwrap(), 1);
        // The window is fixed at the first step: a step does not extend it.
        assert_eq!(store.count_up("c", 1_000, 1_000).await.unwrap(), 1);
        assert_eq!(store.count_up("c", 1_000, 1_999).await.unwrap(), 2);
        assert_eq!(store.count_up("c", 1_000, 2_000).await.unwrap(), 1);
    }

    /// The same operations on a real Redis, when `TOOLGATE_TEST_REDIS`
    /// names one (the e2e run starts one; skipped otherwise).
    #[tokio::test]
    async fn redis_records_swap_and_take_once() {
        let Ok(url) = std::env::var("TOOLGATE_TEST_REDIS") else {
            return;
        };
        let store = Ledger::redis(&url).await.unwrap();
        let key = format!("toolgate:test:{}", std::process::id());
        let also_key = format!("{key}:also");
        assert!(store.put_new(&key, "v1", 5_000, 0).await.unwrap());
        assert!(!store.put_new(&key, "x", 5_000, 0).await.unwrap());
        assert!(!store.swap(&key, "v0", "v2", 5_000, None, 0).await.unwrap());
        let also = Also {
            key: &also_key,
            value: "id",
            ttl_ms: 5_000,
        };
        assert!(store.swap(&key, "v1", "v2", 5_000, Some(also), 0).await.unwrap());
        assert_eq!(store.get(&key, 0).await.unwrap().as_deref(), Some("v2"));
        assert_eq!(store.take(&also_key, 0).await.unwrap().as_deref(), Some("id"));
        assert_eq!(store.take(&also_key, 0).await.unwrap(), None);
        // An empty value deletes.
        assert!(store.swap(&key, "v2", "v2b", 5_000, Some(also), 0).await.unwrap());
        let delete = Also { value: "", ..also };
        assert!(store.swap(&key, "v2b", "v2", 5_000, Some(delete), 0).await.unwrap());
        assert_eq!(store.take(&also_key, 0).await.unwrap(), None);
        assert_eq!(store.take(&key, 0).await.unwrap().as_deref(), Some("v2"));
        let count_key = format!("{key}:count");
        assert_eq!(store.count_up(&count_key, 5_000, 0).await.unwrap(), 1);
        assert_eq!(store.count_up(&count_key, 5_000, 0).await.unwrap(), 2);
        assert!(store.take(&count_key, 0).await.unwrap().is_some());
    }

    #[test]
    fn urls_are_redacted_and_checked() {
        assert_eq!(redact("redis://user:secret@host:6379/0"), "redis://…@host:6379/0");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert!(matches!(
            rt.block_on(Ledger::redis("memcached://x")),
            Err(LedgerError::Scheme(_))
        ));
    }
}
