//! Whose handshake-era session is whose, and how many each may hold.
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
//!
//! Every session costs the gateway an upstream session (with a stdio
//! upstream, a child process), so the number open at once is bounded: in all
//! (`--max-sessions`) and, with `--auth`, per subject
//! (`--max-sessions-per-caller`). An `initialize` past a bound is refused
//! before the session layer sees it (`TOO_MANY_SESSIONS`); sessions the
//! client closed (`DELETE`) or the session layer ended (idle) free their
//! place.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::gateway::UpstreamLink;

/// How many handshake-era sessions may be open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    pub total: usize,
    /// Per subject; `None` when callers cannot be told apart (no `--auth`).
    pub per_caller: Option<usize>,
}

/// Session id → the subject that opened it, and whether its upstream
/// session lives.
#[derive(Debug)]
pub struct Owners {
    sessions: Arc<LocalSessionManager>,
    limits: SessionLimits,
    owners: Mutex<Table>,
}

#[derive(Debug)]
struct Owner {
    subject: String,
    upstream: Arc<UpstreamLink>,
    activity: Arc<Activity>,
}

/// What the client has done on a session lately: its idle time is counted
/// from the client's side. rmcp's own idle timer restarts on every message
/// the session sends too, so an upstream that keeps notifying (a log stream,
/// a heartbeat) kept a session its client had left open forever, with its
/// place and its upstream child (review 22).
#[derive(Debug)]
pub(crate) struct Activity {
    /// When the client's last request on it ended (or the session opened).
    last: Mutex<std::time::Instant>,
    /// Its requests whose answers are still being sent (a `GET` stream, a
    /// call waiting for its upstream): a session with one is not idle.
    open: std::sync::atomic::AtomicUsize,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            last: Mutex::new(std::time::Instant::now()),
            open: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn idle_for(&self) -> Option<std::time::Duration> {
        (self.open.load(std::sync::atomic::Ordering::SeqCst) == 0)
            .then(|| self.last.lock().unwrap_or_else(PoisonError::into_inner).elapsed())
    }
}

/// One client request on a session, from when the gate admits it until its
/// answer has been sent or abandoned.
pub(crate) struct Active(Arc<Activity>);

impl Drop for Active {
    fn drop(&mut self) {
        *self.0.last.lock().unwrap_or_else(PoisonError::into_inner) = std::time::Instant::now();
        self.0.open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[derive(Debug)]
struct Table {
    by_session: HashMap<String, Owner>,
    /// `initialize` requests admitted and not yet answered, per subject: a
    /// burst of them is counted before any has a session id.
    opening: HashMap<String, usize>,
    /// The table is pruned of ended sessions when it reaches this size, which
    /// then doubles from what is left, so pruning costs O(1) per session.
    prune_at: usize,
}

impl Table {
    /// Which bound opening one more session for `subject` would pass.
    fn full(&self, subject: &str, limits: SessionLimits) -> Option<Full> {
        let opening: usize = self.opening.values().sum();
        if self.by_session.len() + opening >= limits.total {
            return Some(Full::Gateway);
        }
        let per_caller = limits.per_caller?;
        let own = self
            .by_session
            .values()
            .filter(|owner| owner.subject == subject)
            .count()
            + self.opening.get(subject).copied().unwrap_or(0);
        (own >= per_caller).then_some(Full::Caller)
    }
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

/// The bound a refused `initialize` met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// `--max-sessions`.
    Gateway,
    /// `--max-sessions-per-caller`.
    Caller,
}

/// A place held for a session being opened; given back when dropped (the
/// session, if one was opened, is in the table by then).
#[derive(Debug)]
pub struct Opening {
    owners: Arc<Owners>,
    subject: String,
}

impl Drop for Opening {
    fn drop(&mut self) {
        release(&mut self.owners.table().opening, &self.subject);
    }
}

/// Gives back one of `subject`'s places in a per-subject count; a subject
/// with none left is forgotten, so the table holds only subjects with some.
pub(crate) fn release(counts: &mut HashMap<String, usize>, subject: &str) {
    if let Some(count) = counts.get_mut(subject) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(subject);
        }
    }
}

impl Owners {
    pub fn new(sessions: Arc<LocalSessionManager>, limits: SessionLimits) -> Owners {
        Owners {
            sessions,
            limits,
            owners: Mutex::new(Table {
                by_session: HashMap::new(),
                opening: HashMap::new(),
                prune_at: FIRST_PRUNE,
            }),
        }
    }

    pub fn access(&self, session: &str, subject: &str) -> Access {
        match self.table().by_session.get(session) {
            Some(owner) if owner.subject != subject => Access::Foreign,
            _ => Access::Own,
        }
    }

    /// Holds a place for a session `subject` is opening, or says which bound
    /// is reached. Sessions the session layer has ended are forgotten first.
    pub async fn open(self: &Arc<Self>, subject: &str) -> Result<Opening, Full> {
        if self.table().full(subject, self.limits).is_some() {
            self.prune().await;
        }
        let mut table = self.table();
        if let Some(full) = table.full(subject, self.limits) {
            return Err(full);
        }
        *table.opening.entry(subject.to_owned()).or_default() += 1;
        Ok(Opening {
            owners: self.clone(),
            subject: subject.to_owned(),
        })
    }

    /// Records the subject that opened `session` (from the session header of
    /// the answer to a request that named none), and its link to the
    /// gateway's state for it.
    pub async fn opened(&self, session: &str, subject: &str, upstream: Arc<UpstreamLink>) {
        let prune = {
            let mut table = self.table();
            let owner = Owner {
                subject: subject.to_owned(),
                upstream,
                activity: Arc::new(Activity::new()),
            };
            table.by_session.insert(session.to_owned(), owner);
            table.by_session.len() >= table.prune_at
        };
        if prune {
            self.prune().await;
        }
    }

    /// Whether the session layer has `session` open.
    pub async fn is_open(&self, session: &str) -> bool {
        self.sessions.sessions.read().await.contains_key(session)
    }

    /// Drops the sessions the session layer no longer has.
    async fn prune(&self) {
        let recorded: HashSet<String> = self.table().by_session.keys().cloned().collect();
        let live: HashSet<String> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        // Only sessions recorded before the manager was read may go: one
        // opened meanwhile is live though the snapshot does not have it.
        let mut table = self.table();
        table
            .by_session
            .retain(|session, _| live.contains(session) || !recorded.contains(session));
        table.prune_at = (table.by_session.len() * 2).max(FIRST_PRUNE);
    }

    /// Counts a request of the client on `session` as activity until the
    /// returned guard is dropped (None for a session the gate does not know).
    pub(crate) fn active(&self, session: &str) -> Option<Active> {
        let activity = self.table().by_session.get(session)?.activity.clone();
        activity.open.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(Active(activity))
    }

    /// Closes the sessions whose client has sent nothing for `idle`, with no
    /// request of theirs still being answered, and says how many.
    pub async fn close_idle(&self, idle: std::time::Duration) -> usize {
        let expired: Vec<String> = self
            .table()
            .by_session
            .iter()
            .filter(|(_, owner)| owner.activity.idle_for().is_some_and(|quiet| quiet >= idle))
            .map(|(session, _)| session.clone())
            .collect();
        for session in &expired {
            // Closed before it is forgotten: until then a request naming it
            // is still checked against its owner (review 24). A session the
            // layer ended itself meanwhile is already closed.
            let _ = self.sessions.close_session(&Arc::from(session.as_str())).await;
            self.table().by_session.remove(session);
        }
        expired.len()
    }

    /// Closes idle sessions every so often until `stop`.
    pub async fn expire_idle(self: Arc<Self>, idle: std::time::Duration, stop: tokio_util::sync::CancellationToken) {
        let every = (idle / 4).clamp(
            std::time::Duration::from_millis(250),
            std::time::Duration::from_secs(30),
        );
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let closed = self.close_idle(idle).await;
            if closed > 0 {
                tracing::info!(closed, "handshake-era sessions closed: their clients were idle");
            }
        }
    }

    /// Forgets a session its owner closed.
    pub fn closed(&self, session: &str) {
        self.table().by_session.remove(session);
    }

    /// Closes `session` if its upstream session has ended, and says so: the
    /// client is answered as for any session that is gone, and initializes
    /// again on a new upstream session (whose catalog is read anew) rather
    /// than failing on the dead one.
    pub async fn close_if_upstream_ended(&self, session: &str) -> bool {
        let ended = self
            .table()
            .by_session
            .get(session)
            .is_some_and(|o| o.upstream.upstream_ended());
        if ended {
            // Closed before it is forgotten, as in `close_idle`. A session
            // the layer no longer has is already closed.
            let _ = self.sessions.close_session(&Arc::from(session)).await;
            self.table().by_session.remove(session);
        }
        ended
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNBOUNDED: SessionLimits = SessionLimits {
        total: usize::MAX,
        per_caller: None,
    };

    #[tokio::test]
    async fn a_session_is_its_openers_and_the_table_forgets_ended_sessions() {
        let owners = Owners::new(Arc::new(LocalSessionManager::default()), UNBOUNDED);
        owners.opened("s1", "alice", Arc::default()).await;
        assert_eq!(owners.access("s1", "alice"), Access::Own);
        assert_eq!(owners.access("s1", "bob"), Access::Foreign);
        assert_eq!(owners.access("s1", ""), Access::Foreign);
        assert_eq!(owners.access("unknown", "bob"), Access::Own);
        owners.closed("s1");
        assert_eq!(owners.access("s1", "bob"), Access::Own);

        // None of these is a live session in the manager: reaching the
        // prune size drops them all but leaves the table usable.
        for i in 0..FIRST_PRUNE {
            owners.opened(&format!("gone-{i}"), "alice", Arc::default()).await;
        }
        assert!(owners.table().by_session.is_empty());
        owners.opened("s2", "carol", Arc::default()).await;
        assert_eq!(owners.access("s2", "dave"), Access::Foreign);
    }

    /// Opens a session in the manager itself (as an `initialize` would), so
    /// pruning sees it live.
    async fn live_session(manager: &LocalSessionManager) -> String {
        use rmcp::transport::streamable_http_server::session::SessionManager as _;
        let (id, _transport) = manager.create_session().await.expect("session");
        id.to_string()
    }

    #[tokio::test]
    async fn open_sessions_are_bounded_per_caller_and_in_all_and_places_come_back() {
        let manager = Arc::new(LocalSessionManager::default());
        let limits = SessionLimits {
            total: 3,
            per_caller: Some(2),
        };
        let owners = Arc::new(Owners::new(manager.clone(), limits));

        // Two places held at once (a burst before either is answered).
        let first = owners.open("alice").await.expect("first");
        let second = owners.open("alice").await.expect("second");
        assert_eq!(owners.open("alice").await.unwrap_err(), Full::Caller);
        let (a1, a2) = (live_session(&manager).await, live_session(&manager).await);
        owners.opened(&a1, "alice", Arc::default()).await;
        owners.opened(&a2, "alice", Arc::default()).await;
        drop((first, second));
        assert_eq!(owners.open("alice").await.unwrap_err(), Full::Caller);

        // Another caller has a place of their own, until the gateway's bound.
        let bob = owners.open("bob").await.expect("bob");
        let b1 = live_session(&manager).await;
        owners.opened(&b1, "bob", Arc::default()).await;
        drop(bob);
        assert_eq!(owners.open("carol").await.unwrap_err(), Full::Gateway);

        // A session the client closed frees its place.
        owners.closed(&a1);
        drop(owners.open("alice").await.expect("after a close"));

        // So does one the session layer ended without telling the gate (idle).
        use rmcp::transport::streamable_http_server::session::SessionManager as _;
        manager.close_session(&b1.clone().into()).await.expect("close");
        let carol = owners.open("carol").await.expect("after the layer ended one");
        drop(carol);

        // A place given back without a session (the initialize failed) is free again.
        let failed = owners.open("dave").await.expect("dave");
        drop(failed);
        drop(owners.open("dave").await.expect("dave again"));
    }

    #[tokio::test]
    async fn a_session_whose_client_is_idle_is_closed_whatever_its_upstream_sends() {
        use rmcp::transport::streamable_http_server::session::SessionManager as _;
        let manager = Arc::new(LocalSessionManager::default());
        let owners = Owners::new(manager.clone(), UNBOUNDED);
        let (quiet, busy) = (live_session(&manager).await, live_session(&manager).await);
        owners.opened(&quiet, "alice", Arc::default()).await;
        owners.opened(&busy, "alice", Arc::default()).await;
        let streaming = owners.active(&busy).expect("known session");
        assert!(owners.active("unknown").is_none());
        let idle = std::time::Duration::from_millis(50);
        tokio::time::sleep(idle * 2).await;
        // The quiet one goes, in the gate's table and the session layer; the
        // one with a request still being answered (a GET stream) stays.
        assert_eq!(owners.close_idle(idle).await, 1);
        assert!(!manager.has_session(&Arc::from(quiet.as_str())).await.unwrap());
        assert!(manager.has_session(&Arc::from(busy.as_str())).await.unwrap());
        assert_eq!(owners.access(&quiet, "bob"), Access::Own, "forgotten");
        // Once its stream ends, its idle time starts from then.
        drop(streaming);
        assert_eq!(owners.close_idle(idle).await, 0);
        tokio::time::sleep(idle * 2).await;
        assert_eq!(owners.close_idle(idle).await, 1);
        assert!(!manager.has_session(&Arc::from(busy.as_str())).await.unwrap());
    }

    #[tokio::test]
    async fn without_a_per_caller_bound_one_subject_may_fill_the_gateway() {
        let manager = Arc::new(LocalSessionManager::default());
        let owners = Arc::new(Owners::new(
            manager.clone(),
            SessionLimits {
                total: 2,
                per_caller: None,
            },
        ));
        for _ in 0..2 {
            let place = owners.open("").await.expect("place");
            let id = live_session(&manager).await;
            owners.opened(&id, "", Arc::default()).await;
            drop(place);
        }
        assert_eq!(owners.open("").await.unwrap_err(), Full::Gateway);
    }
}
