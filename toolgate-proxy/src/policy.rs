//! The policy file, and `--watch`: the file is re-read when it changes. A
//! version that loads replaces the rules for every call decided from then
//! on (a call already being decided keeps the rules it started with); one
//! that does not load is reported once, at its line and column, and the
//! rules in force stay.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use toolgate::Engine;

use crate::metrics::Metrics;

/// How often `--watch` looks at the file. Polling works the same on every
/// platform and file system (network mounts, container volumes, editors
/// that replace the file), which change notifications do not.
const POLL: Duration = Duration::from_millis(250);
/// Polls (of `POLL`) a policy file may stay unreadable before it is said.
const UNREADABLE_POLLS: u32 = 8;

/// One version of the policy text.
#[derive(Debug)]
pub struct PolicyText {
    pub text: Option<String>,
    /// Bumped on every version taken in; the rules a session holds name the
    /// generation they were built from.
    pub generation: u64,
}

/// The policy in force.
#[derive(Debug)]
pub struct Policy {
    current: RwLock<Arc<PolicyText>>,
}

impl Policy {
    pub fn fixed(text: Option<String>) -> Policy {
        Policy {
            current: RwLock::new(Arc::new(PolicyText { text, generation: 0 })),
        }
    }

    pub fn current(&self) -> Arc<PolicyText> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, text: String) -> u64 {
        let mut slot = self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let generation = slot.generation.saturating_add(1);
        *slot = Arc::new(PolicyText {
            text: Some(text),
            generation,
        });
        generation
    }
}

/// `FILE:LINE:COL: message (CODE)` for a policy the engine refused.
pub fn located(path: &Path, error: &toolgate::Error) -> String {
    match error {
        toolgate::Error::Load(p) if p.line > 0 => {
            format!("{}:{}:{}: {} ({})", path.display(), p.line, p.column, p.message, p.code)
        }
        other => format!("{}: {other} ({})", path.display(), other.code()),
    }
}

/// Watches `path` until the process ends.
pub fn watch(path: PathBuf, policy: Arc<Policy>, engine: Engine, metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        // The text last looked at, good or bad: each version is judged once.
        let mut seen = policy.current().text.clone().unwrap_or_default();
        // Polls in a row the file could not be read: a replace in progress
        // lasts one or two; one that lasts is said, once.
        let mut unreadable = 0u32;
        // A changed text is taken once a second poll reads it unchanged: a
        // file rewritten in place is read whole, not cut at a line that
        // happens to leave valid YAML (write by rename to be sure).
        let mut settling: Option<String> = None;
        loop {
            tokio::time::sleep(POLL).await;
            let text = match tokio::fs::read_to_string(&path).await {
                Ok(text) => {
                    unreadable = 0;
                    text
                }
                Err(e) => {
                    // Mid-replace, or removed: the rules in force stay.
                    unreadable = unreadable.saturating_add(1);
                    if unreadable == UNREADABLE_POLLS {
                        metrics.reloaded(false);
                        say!(
                            Warn,
                            "{} cannot be read ({e}); the previous rules stay in force",
                            path.display()
                        );
                    }
                    continue;
                }
            };
            if text == seen {
                settling = None;
                continue;
            }
            if settling.as_deref() != Some(text.as_str()) {
                settling = Some(text);
                continue;
            }
            settling = None;
            seen.clone_from(&text);
            let engine = engine.clone();
            let candidate = text.clone();
            let checked =
                tokio::task::spawn_blocking(move || engine.load(Some(&candidate), r#"{"tools":[]}"#).map(|_| ())).await;
            match checked {
                // No revision here: a rule set's revision covers the policy
                // and the catalog, so the one over no catalog is on no audit
                // line (review 28); each rule set says its own when loaded.
                Ok(Ok(())) => {
                    let generation = policy.replace(text);
                    metrics.reloaded(true);
                    say!(
                        Info,
                        "{} reloaded: sessions decide by it from their next call (the revision their audit lines carry is said when its rules load)",
                        path.display()
                    );
                    tracing::info!(policy = %path.display(), generation, "policy reloaded");
                }
                Ok(Err(e)) => {
                    metrics.reloaded(false);
                    say!(Warn, "{}; the previous rules stay in force", located(&path, &e));
                }
                Err(e) => {
                    metrics.reloaded(false);
                    say!(
                        Warn,
                        "checking {} failed: {e}; the previous rules stay in force",
                        path.display()
                    );
                }
            }
        }
    });
}
