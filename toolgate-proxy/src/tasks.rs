//! Whose upstream task is whose, on every upstream session.
//!
//! Every 2026-07-28 request goes to one upstream session the gateway keeps
//! for them all, so a task the upstream starts for one caller's `tools/call`
//! lives beside every other caller's; and every caller, on any session,
//! reaches the upstream under the gateway's one identity, so an upstream that
//! keeps one task table per process serves any session any task. An
//! upstream's task id is not a credential (many count up: `task-1`,
//! `task-2`), so each session remembers the subject each task was started
//! for on it and answers `tasks/get`, `tasks/update` and `tasks/cancel` only
//! to that subject on that session; any other task id is answered as unknown
//! (`UNKNOWN_TASK`), whether it exists or not, so another caller's task is
//! not told apart from none.

use std::collections::{HashMap, VecDeque};

/// The most tasks remembered per subject; past it the oldest is forgotten
/// (and can no longer be reached through the gateway), so one caller
/// starting tasks without end neither grows the table nor pushes out
/// another caller's tasks.
pub const TASKS_PER_SUBJECT: usize = 1024;

#[derive(Debug, Default)]
pub struct TaskOwners {
    owner: HashMap<String, String>,
    started: HashMap<String, VecDeque<String>>,
}

impl TaskOwners {
    /// Records that the upstream started `task` for `subject`.
    pub fn started(&mut self, task: &str, subject: &str) {
        if let Some(previous) = self.owner.insert(task.to_owned(), subject.to_owned()) {
            // The upstream reused an id: it is the new caller's now.
            if let Some(list) = self.started.get_mut(&previous) {
                list.retain(|t| t != task);
            }
        }
        let list = self.started.entry(subject.to_owned()).or_default();
        list.push_back(task.to_owned());
        while list.len() > TASKS_PER_SUBJECT {
            if let Some(oldest) = list.pop_front() {
                self.owner.remove(&oldest);
            }
        }
    }

    /// Whether `task` was started for `subject`.
    pub fn owns(&self, task: &str, subject: &str) -> bool {
        self.owner.get(task).is_some_and(|owner| owner == subject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_answers_only_the_subject_it_was_started_for() {
        let mut tasks = TaskOwners::default();
        tasks.started("task-1", "alice");
        tasks.started("task-2", "bob");
        assert!(tasks.owns("task-1", "alice"));
        assert!(!tasks.owns("task-1", "bob"));
        assert!(!tasks.owns("task-1", ""));
        assert!(tasks.owns("task-2", "bob"));
        assert!(!tasks.owns("task-3", "alice"));

        // An id the upstream hands out again belongs to the new caller only.
        tasks.started("task-1", "bob");
        assert!(tasks.owns("task-1", "bob"));
        assert!(!tasks.owns("task-1", "alice"));
    }

    #[test]
    fn one_subject_starting_tasks_without_end_forgets_only_its_own_oldest() {
        let mut tasks = TaskOwners::default();
        tasks.started("bobs", "bob");
        for i in 0..TASKS_PER_SUBJECT + 10 {
            tasks.started(&format!("a-{i}"), "alice");
        }
        assert!(tasks.owns("bobs", "bob"));
        assert!(!tasks.owns("a-0", "alice"));
        assert!(!tasks.owns("a-9", "alice"));
        assert!(tasks.owns("a-10", "alice"));
        assert_eq!(tasks.owner.len(), TASKS_PER_SUBJECT + 1);
    }
}
