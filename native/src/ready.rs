//! The ready set: which job runs next.
//!
//! One lock-free skip list per queue ("lane"), ordered by (priority, id): lower priority values
//! run first, and ids grow with creation time, so a lane is FIFO within a priority. The store is
//! the truth; a lane holds only these 10-byte keys as hints. Claiming removes a key, and removal is
//! the claim: when two claimers race for the same front entry, only one `remove` succeeds.

use crossbeam_skiplist::SkipSet;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// (priority, job id): the order in which ready jobs run.
pub type ReadyKey = (u16, u64);

#[derive(Debug, Default)]
pub struct Lane {
    set: SkipSet<ReadyKey>,
    paused: AtomicBool,
}

impl Lane {
    pub fn insert(&self, key: ReadyKey) {
        self.set.insert(key);
    }

    pub fn remove(&self, key: &ReadyKey) -> bool {
        self.set.remove(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// A paused lane keeps its jobs but gives none out.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Release);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    pub fn clear(&self) {
        self.set.clear();
    }
}

/// Take up to `max` of the most urgent keys across `lanes`, in (priority, id) order.
///
/// Returns the index of the lane each key came from with the key itself.
pub fn claim(lanes: &[Arc<Lane>], max: usize) -> Vec<(usize, ReadyKey)> {
    let mut claimed = Vec::with_capacity(max.min(1024));
    while claimed.len() < max {
        let mut best = None;
        for (i, lane) in lanes.iter().enumerate() {
            if lane.is_paused() {
                continue;
            }
            if let Some(front) = lane.set.front() {
                let better = match &best {
                    None => true,
                    Some((_, current)) => {
                        *front.value() < *crossbeam_skiplist::set::Entry::value(current)
                    }
                };
                if better {
                    best = Some((i, front));
                }
            }
        }
        match best {
            None => break,
            Some((i, entry)) => {
                // Losing the race means another claimer took this key: look again.
                if entry.remove() {
                    claimed.push((i, *entry.value()));
                }
            }
        }
    }
    claimed
}

/// Every queue's lane, created on first use.
#[derive(Debug, Default)]
pub struct ReadyIndex {
    lanes: RwLock<HashMap<String, Arc<Lane>>>,
}

impl ReadyIndex {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn lane(&self, queue: &str) -> Arc<Lane> {
        if let Some(lane) = self.lanes.read().unwrap().get(queue) {
            return lane.clone();
        }
        self.lanes
            .write()
            .unwrap()
            .entry(queue.to_owned())
            .or_default()
            .clone()
    }

    pub fn insert(&self, queue: &str, key: ReadyKey) {
        self.lane(queue).insert(key);
    }

    pub fn remove(&self, queue: &str, key: &ReadyKey) -> bool {
        match self.lanes.read().unwrap().get(queue) {
            Some(lane) => lane.remove(key),
            None => false,
        }
    }

    pub fn len(&self, queue: &str) -> usize {
        self.lanes
            .read()
            .unwrap()
            .get(queue)
            .map_or(0, |lane| lane.len())
    }

    pub fn total(&self) -> usize {
        self.lanes
            .read()
            .unwrap()
            .values()
            .map(|lane| lane.len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    pub fn queues(&self) -> Vec<String> {
        let mut names: Vec<_> = self.lanes.read().unwrap().keys().cloned().collect();
        names.sort();
        names
    }

    pub fn clear(&self) {
        for lane in self.lanes.read().unwrap().values() {
            lane.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;

    fn ids(claimed: &[(usize, ReadyKey)]) -> Vec<u64> {
        claimed.iter().map(|(_, (_, id))| *id).collect()
    }

    #[test]
    fn priority_first_then_fifo() {
        let index = ReadyIndex::new();
        index.insert("q", (5, 3));
        index.insert("q", (1, 9));
        index.insert("q", (5, 1));
        index.insert("q", (1, 2));
        let lane = index.lane("q");
        assert_eq!(ids(&claim(&[lane], 10)), vec![2, 9, 1, 3]);
        assert!(index.is_empty());
    }

    #[test]
    fn claim_across_lanes_takes_the_most_urgent_first() {
        let index = ReadyIndex::new();
        index.insert("a", (10, 1));
        index.insert("a", (10, 4));
        index.insert("b", (0, 5));
        index.insert("b", (10, 2));
        let lanes = [index.lane("a"), index.lane("b")];
        let got = claim(&lanes, 3);
        assert_eq!(got, vec![(1, (0, 5)), (0, (10, 1)), (1, (10, 2))]);
        assert_eq!(index.total(), 1);
    }

    #[test]
    fn claim_stops_at_max_and_when_empty() {
        let index = ReadyIndex::new();
        for id in 0..5 {
            index.insert("q", (0, id));
        }
        let lane = index.lane("q");
        assert_eq!(claim(std::slice::from_ref(&lane), 2).len(), 2);
        assert_eq!(claim(std::slice::from_ref(&lane), 10).len(), 3);
        assert!(claim(&[lane], 10).is_empty());
    }

    #[test]
    fn paused_lanes_give_nothing_but_keep_their_jobs() {
        let index = ReadyIndex::new();
        index.insert("a", (0, 1));
        index.insert("b", (9, 2));
        index.lane("a").set_paused(true);
        let lanes = [index.lane("a"), index.lane("b")];
        assert_eq!(ids(&claim(&lanes, 10)), vec![2]);
        assert_eq!(index.len("a"), 1);
        index.lane("a").set_paused(false);
        assert_eq!(ids(&claim(&lanes, 10)), vec![1]);
    }

    #[test]
    fn remove_and_reinsert() {
        let index = ReadyIndex::new();
        index.insert("q", (3, 1));
        assert!(index.remove("q", &(3, 1)));
        assert!(!index.remove("q", &(3, 1)));
        assert!(!index.remove("missing", &(3, 1)));
        index.insert("q", (3, 1));
        index.insert("q", (3, 1));
        assert_eq!(index.len("q"), 1);
    }

    #[test]
    fn concurrent_claimers_never_share_a_job() {
        let index = Arc::new(ReadyIndex::new());
        for id in 0..20_000u64 {
            index.insert(if id % 2 == 0 { "a" } else { "b" }, ((id % 7) as u16, id));
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (index, seen) = (index.clone(), seen.clone());
                std::thread::spawn(move || {
                    let lanes = [index.lane("a"), index.lane("b")];
                    loop {
                        let got = claim(&lanes, 16);
                        if got.is_empty() {
                            break;
                        }
                        seen.lock().unwrap().extend(ids(&got));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 20_000);
        assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 20_000);
    }
}
