//! Whose handshake-era session is whose.
//!
//! A session id is not a credential (MCP's security guidance: servers must
//! not use sessions for authentication, and should bind them to the user).
//! With `--auth`, the gateway remembers the subject that opened each
//! session, and a request that names the session with another subject's
//! token is answered as for a session that does not exist: it cannot resume
//! the opener's streams (and read their results), answer the opener's
//! confirmation prompts, make calls the opener's person is asked to confirm,
//! or close the session. Without `--auth` every caller is the same empty
//! subject, and nothing changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// Session id → the subject that opened it.
#[derive(Debug)]
pub struct Owners {
    sessions: Arc<LocalSessionManager>,
    owners: Mutex<Table>,
}

#[derive(Debug)]
struct Table {
    by_session: HashMap<String, String>,
    /// The table is pruned of ended sessions when it reaches this size, which
    /// then doubles from what is left, so pruning costs O(1) per session.
    prune_at: usize,
}

const FIRST_PRUNE: usize = 64;

/// What a request naming a session may do.
#[derive(Debug, PartialEq, Eq)]
pub enum Access {
    /// The session is the caller's, or unknown to the gateway (the session
    /// layer answers an unknown one itself).
    Own,
    /// Another subject opened it.
    Foreign,
}

impl Owners {
    pub fn new(sessions: Arc<LocalSessionManager>) -> Owners {
        Owners {
            sessions,
            owners: Mutex::new(Table {
                by_session: HashMap::new(),
                prune_at: FIRST_PRUNE,
            }),
        }
    }

    pub fn access(&self, session: &str, subject: &str) -> Access {
        match self.table().by_session.get(session) {
            Some(owner) if owner != subject => Access::Foreign,
            _ => Access::Own,
        }
    }

    /// Records the subject that opened `session` (from the session header of
    /// the answer to a request that named none).
    pub async fn opened(&self, session: &str, subject: &str) {
        let prune = {
            let mut table = self.table();
            table.by_session.insert(session.to_owned(), subject.to_owned());
            (table.by_session.len() >= table.prune_at).then(|| {
                table
                    .by_session
                    .keys()
                    .cloned()
                    .collect::<std::collections::HashSet<String>>()
            })
        };
        // Only sessions recorded before the manager was read may go: one
        // opened meanwhile is live though the snapshot does not have it.
        if let Some(recorded) = prune {
            let live: std::collections::HashSet<String> = self
                .sessions
                .sessions
                .read()
                .await
                .keys()
                .map(|id| id.to_string())
                .collect();
            let mut table = self.table();
            table
                .by_session
                .retain(|session, _| live.contains(session) || !recorded.contains(session));
            table.prune_at = (table.by_session.len() * 2).max(FIRST_PRUNE);
        }
    }

    /// Forgets a session its owner closed.
    pub fn closed(&self, session: &str) {
        self.table().by_session.remove(session);
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_is_its_openers_and_the_table_forgets_ended_sessions() {
        let owners = Owners::new(Arc::new(LocalSessionManager::default()));
        owners.opened("s1", "alice").await;
        assert_eq!(owners.access("s1", "alice"), Access::Own);
        assert_eq!(owners.access("s1", "bob"), Access::Foreign);
        assert_eq!(owners.access("s1", ""), Access::Foreign);
        assert_eq!(owners.access("unknown", "bob"), Access::Own);
        owners.closed("s1");
        assert_eq!(owners.access("s1", "bob"), Access::Own);

        // None of these is a live session in the manager: reaching the
        // prune size drops them all but leaves the table usable.
        for i in 0..FIRST_PRUNE {
            owners.opened(&format!("gone-{i}"), "alice").await;
        }
        assert!(owners.table().by_session.is_empty());
        owners.opened("s2", "carol").await;
        assert_eq!(owners.access("s2", "dave"), Access::Foreign);
    }
}
