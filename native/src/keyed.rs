//! Jobs that carry a limit key (a customer id, say): at most `cap` jobs of one key in flight.
//!
//! Each key keeps its own ordered set of ready jobs, and `heads` holds the front job of every key
//! that may run now (under its cap, with jobs waiting). A claim looks only at `heads`: a key at its
//! cap is not in it, so its jobs cost a claim nothing, and the next allowed job is found in
//! O(log n). When one of the key's jobs leaves flight, its front goes back into `heads`.
//!
//! `owners` maps a job id to its key while the job is ready or in flight: removal (a delete, an
//! update) and the end of an attempt arrive with the id alone. It counts attempts in flight per
//! id, so a hint delivered twice (a claim the store then refuses) is given back exactly once.

use crate::order::ReadyKey;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

#[derive(Debug, Default)]
struct KeyState {
    ready: BTreeSet<ReadyKey>,
    running: u64,
}

#[derive(Debug)]
struct Owner {
    key: Arc<str>,
    ready: Option<u16>, // the priority it waits at, while it is ready
    in_flight: u32,
}

#[derive(Debug, Default)]
pub struct Keyed {
    cap: u64, // 0: no cap
    keys: HashMap<Arc<str>, KeyState>,
    heads: BTreeSet<(ReadyKey, Arc<str>)>,
    owners: HashMap<u64, Owner>,
    len: usize,
}

impl Keyed {
    fn open(&self, state: &KeyState) -> bool {
        self.cap == 0 || state.running < self.cap
    }

    /// Put `key`'s front back in `heads` if the key may run, after its state changed from `old_front`.
    fn reseat(&mut self, key: &Arc<str>, old_front: Option<ReadyKey>) {
        if let Some(front) = old_front {
            self.heads.remove(&(front, key.clone()));
        }
        let Some(state) = self.keys.get(key) else {
            return;
        };
        if self.open(state) {
            if let Some(front) = state.ready.first() {
                self.heads.insert((*front, key.clone()));
            }
        }
    }

    /// The head currently seated for `key`, if any.
    fn seated(&self, key: &Arc<str>) -> Option<ReadyKey> {
        let state = self.keys.get(key)?;
        let front = *state.ready.first()?;
        self.heads.contains(&(front, key.clone())).then_some(front)
    }

    fn forget_if_idle(&mut self, key: &Arc<str>) {
        if self
            .keys
            .get(key)
            .is_some_and(|s| s.ready.is_empty() && s.running == 0)
        {
            self.keys.remove(key);
        }
    }

    pub fn insert(&mut self, job: ReadyKey, key: &str) {
        let key: Arc<str> = match self.owners.get(&job.1) {
            Some(owner) if owner.ready == Some(job.0) => return, // the same hint again
            Some(owner) if &*owner.key == key => owner.key.clone(),
            _ => Arc::from(key),
        };
        if self.owners.get(&job.1).is_some_and(|o| o.ready.is_some()) {
            self.remove(job.1); // ready at another priority: moved
        }
        let owner = self.owners.entry(job.1).or_insert_with(|| Owner {
            key: key.clone(),
            ready: None,
            in_flight: 0,
        });
        owner.ready = Some(job.0);
        let old = self.seated(&key);
        self.keys.entry(key.clone()).or_default().ready.insert(job);
        self.len += 1;
        self.reseat(&key, old);
    }

    /// Remove a ready job (deleted, moved): false if it is not ready here.
    pub fn remove(&mut self, job_id: u64) -> bool {
        let Some(owner) = self.owners.get_mut(&job_id) else {
            return false;
        };
        let Some(priority) = owner.ready.take() else {
            return false;
        };
        let key = owner.key.clone();
        if owner.in_flight == 0 {
            self.owners.remove(&job_id);
        }
        let old = self.seated(&key);
        if let Some(state) = self.keys.get_mut(&key) {
            state.ready.remove(&(priority, job_id));
        }
        self.len -= 1;
        self.reseat(&key, old);
        self.forget_if_idle(&key);
        true
    }

    /// The most urgent job allowed to run now.
    pub fn peek(&self) -> Option<ReadyKey> {
        self.heads.first().map(|(job, _)| *job)
    }

    /// Take `expected` if it is still the most urgent allowed job; it counts as running.
    pub fn take(&mut self, expected: ReadyKey) -> bool {
        match self.heads.first() {
            Some((job, _)) if *job == expected => {}
            _ => return false,
        }
        let (job, key) = self.heads.pop_first().expect("checked above");
        let state = self.keys.get_mut(&key).expect("a seated key has a state");
        state.ready.remove(&job);
        state.running += 1;
        self.len -= 1;
        if let Some(owner) = self.owners.get_mut(&job.1) {
            owner.ready = None;
            owner.in_flight += 1;
        }
        self.reseat(&key, None);
        true
    }

    /// An attempt of `job_id` left flight (or was never confirmed): its key may run one more.
    /// Returns whether the job was one of ours.
    pub fn finished(&mut self, job_id: u64) -> bool {
        let Some(owner) = self.owners.get_mut(&job_id) else {
            return false;
        };
        if owner.in_flight == 0 {
            return false;
        }
        owner.in_flight -= 1;
        let key = owner.key.clone();
        if owner.in_flight == 0 && owner.ready.is_none() {
            self.owners.remove(&job_id);
        }
        let old = self.seated(&key);
        if let Some(state) = self.keys.get_mut(&key) {
            state.running = state.running.saturating_sub(1);
        }
        self.reseat(&key, old);
        self.forget_if_idle(&key);
        true
    }

    /// Change the per-key cap; keys that reach or leave it move in or out of `heads`.
    pub fn set_cap(&mut self, cap: u64) {
        self.cap = cap;
        self.heads.clear();
        let open: Vec<_> = self
            .keys
            .iter()
            .filter(|(_, state)| self.open(state))
            .filter_map(|(key, state)| state.ready.first().map(|front| (*front, key.clone())))
            .collect();
        self.heads.extend(open);
    }

    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// How many of `key`'s jobs are in flight.
    pub fn running(&self, key: &str) -> u64 {
        self.keys.get(key).map_or(0, |s| s.running)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drop every ready job (in-flight counts stay: those jobs still end).
    pub fn clear(&mut self) {
        self.heads.clear();
        self.len = 0;
        self.owners.retain(|_, owner| {
            owner.ready = None;
            owner.in_flight > 0
        });
        self.keys.retain(|_, state| {
            state.ready.clear();
            state.running > 0
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(keyed: &mut Keyed) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(job) = keyed.peek() {
            assert!(keyed.take(job));
            out.push(job.1);
        }
        out
    }

    #[test]
    fn a_key_at_its_cap_gives_nothing_until_one_finishes() {
        let mut keyed = Keyed::default();
        keyed.set_cap(1);
        for id in 1..=3 {
            keyed.insert((0, id), "acme");
        }
        keyed.insert((5, 10), "other");
        assert_eq!(drain(&mut keyed), vec![1, 10]);
        assert_eq!(keyed.running("acme"), 1);
        assert_eq!(keyed.len(), 2);
        assert!(keyed.finished(1));
        assert_eq!(drain(&mut keyed), vec![2]);
        assert!(!keyed.finished(1), "an attempt ends once");
    }

    #[test]
    fn order_holds_across_keys() {
        let mut keyed = Keyed::default();
        keyed.insert((3, 1), "a");
        keyed.insert((1, 2), "b");
        keyed.insert((1, 3), "a");
        keyed.insert((2, 4), "b");
        assert_eq!(drain(&mut keyed), vec![2, 3, 4, 1]); // no cap: (priority, id) order
    }

    #[test]
    fn removing_the_front_seats_the_next() {
        let mut keyed = Keyed::default();
        keyed.insert((0, 1), "a");
        keyed.insert((0, 2), "a");
        assert!(keyed.remove(1));
        assert!(!keyed.remove(1));
        assert_eq!(keyed.peek(), Some((0, 2)));
        keyed.insert((0, 2), "a"); // the same hint twice
        assert_eq!(keyed.len(), 1);
    }

    #[test]
    fn raising_the_cap_opens_keys_and_idle_keys_are_forgotten() {
        let mut keyed = Keyed::default();
        keyed.set_cap(1);
        keyed.insert((0, 1), "a");
        keyed.insert((0, 2), "a");
        assert_eq!(drain(&mut keyed), vec![1]);
        keyed.set_cap(2);
        assert_eq!(drain(&mut keyed), vec![2]);
        keyed.finished(1);
        keyed.finished(2);
        assert!(keyed.keys.is_empty() && keyed.owners.is_empty() && keyed.heads.is_empty());
    }

    #[test]
    fn a_job_claimed_twice_is_given_back_once_per_claim() {
        let mut keyed = Keyed::default();
        keyed.set_cap(5);
        keyed.insert((0, 1), "a");
        assert!(keyed.take((0, 1)));
        keyed.insert((0, 1), "a"); // a stale hint of the job in flight
        assert!(keyed.take((0, 1)));
        assert_eq!(keyed.running("a"), 2);
        assert!(keyed.finished(1)); // the store refused the second claim
        assert!(keyed.finished(1)); // the first attempt ends
        assert_eq!(keyed.running("a"), 0);
        assert!(!keyed.finished(1));
    }
}
