//! A set of (due time, id) keys: scheduled jobs by when they are due, in-flight jobs by deadline.
//!
//! The scheduler is an alarm clock over this set: it sleeps until `next_due`, then pops what is
//! due in one batch. Like the ready set it holds only keys; the store is the truth.

use crossbeam_skiplist::SkipSet;

/// (due time in milliseconds since the epoch, job id).
pub type TimerKey = (i64, u64);

#[derive(Debug, Default)]
pub struct TimerSet {
    set: SkipSet<TimerKey>,
}

impl TimerSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&self, key: TimerKey) {
        self.set.insert(key);
    }

    pub fn remove(&self, key: &TimerKey) -> bool {
        self.set.remove(key).is_some()
    }

    /// The earliest due time, if any.
    pub fn next_due(&self) -> Option<i64> {
        self.set.front().map(|e| e.value().0)
    }

    /// Remove and return up to `max` keys due at or before `now`, earliest first.
    pub fn pop_due(&self, now: i64, max: usize) -> Vec<TimerKey> {
        let mut due = Vec::new();
        while due.len() < max {
            match self.set.front() {
                Some(entry) if entry.value().0 <= now => {
                    if entry.remove() {
                        due.push(*entry.value());
                    }
                }
                _ => break,
            }
        }
        due
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    pub fn clear(&self) {
        self.set.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_only_what_is_due_in_order() {
        let timers = TimerSet::new();
        timers.insert((300, 1));
        timers.insert((100, 2));
        timers.insert((100, 1));
        timers.insert((200, 3));
        assert_eq!(timers.next_due(), Some(100));
        assert_eq!(timers.pop_due(150, 10), vec![(100, 1), (100, 2)]);
        assert_eq!(timers.pop_due(150, 10), vec![]);
        assert_eq!(timers.pop_due(1_000, 1), vec![(200, 3)]);
        assert_eq!(timers.next_due(), Some(300));
    }

    #[test]
    fn remove_and_empty() {
        let timers = TimerSet::new();
        assert_eq!(timers.next_due(), None);
        timers.insert((5, 5));
        assert!(timers.remove(&(5, 5)));
        assert!(!timers.remove(&(5, 5)));
        assert!(timers.is_empty());
    }
}
