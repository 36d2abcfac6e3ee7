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
    #[error("the confirmation store is unreachable: {0}")]
    Unreachable(String),
}

/// Where redeemed seal ids are kept.
pub enum Ledger {
    Memory(Mutex<HashMap<String, u64>>),
    Redis {
        url_for_messages: String,
        connection: redis::aio::ConnectionManager,
    },
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ledger::Memory(_) => f.write_str("Ledger::Memory"),
            Ledger::Redis { url_for_messages, .. } => write!(f, "Ledger::Redis({url_for_messages})"),
        }
    }
}

impl Ledger {
    pub fn memory() -> Ledger {
        Ledger::Memory(Mutex::new(HashMap::new()))
    }

    /// Connects to a Redis or Valkey server (`redis://HOST:PORT[/DB]`).
    pub async fn redis(url: &str) -> Result<Ledger, LedgerError> {
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(LedgerError::Scheme(redact(url)));
        }
        let client = redis::Client::open(url).map_err(|e| LedgerError::Unreachable(e.to_string()))?;
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

    /// Records `id` as redeemed until `expires_ms`. `Ok(true)` the first
    /// time, `Ok(false)` when it was already redeemed (on any replica).
    pub async fn redeem(&self, id: &str, expires_ms: u64, now_ms: u64) -> Result<bool, LedgerError> {
        match self {
            Ledger::Memory(ids) => {
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
