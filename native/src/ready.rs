//! The ready set: which job runs next.
//!
//! One lock-free skip list per queue ("lane"), ordered by (priority, id): lower priority values
//! run first, and ids grow with creation time, so a lane is FIFO within a priority. The store is
//! the truth; a lane holds only these 10-byte keys as hints. Claiming removes a key, and removal is
//! the claim: when two claimers race for the same front entry, only one `remove` succeeds.
//!
//! At start-up a lane can be *loading*: its keys are being read from the store in (priority, id)
//! order, and the lane gives out only keys up to its *horizon*, the last key loaded so far. Beyond
//! the horizon the store may still hold a more urgent job than what the lane has, so a claim
//! stops there (across lanes too) rather than break the order. Serving starts as soon as each
//! lane's first keys are in, not when the whole backlog is.

use crate::fair::Fair;
use crate::keyed::Keyed;
use crate::limits::Limit;
use crossbeam_skiplist::set::Entry;
use crossbeam_skiplist::SkipSet;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Keys per hold of the lock in a walk over a lane's fair keys (`Lane::fair_busiest`).
const FAIR_WALK_SLOTS: usize = 4096;
/// The pause between two ranges of such a walk.
const FAIR_WALK_PAUSE: std::time::Duration = std::time::Duration::from_micros(20);

pub use crate::order::ReadyKey;

#[derive(Debug, Default)]
pub struct Lane {
    set: SkipSet<ReadyKey>,
    paused: AtomicBool,
    loading: AtomicBool,
    /// While loading: every stored key up to this one is in the set (None: none loaded yet).
    horizon: Mutex<Option<ReadyKey>>,
    /// The queue's limits (max running, rate): a lane at its limit offers nothing.
    pub limit: Limit,
    /// Jobs with a limit key, each key under its own cap (only locked once a lane has had one).
    keyed: Mutex<Keyed>,
    has_keyed: AtomicBool,
    /// Jobs with a fair key, served by turns between keys (only locked once a lane has had one).
    fair: Mutex<Fair>,
    has_fair: AtomicBool,
}

/// What one lane offers a claimer next.
enum Next<'a> {
    Take(Entry<'a, ReadyKey>),
    /// The front of the keys allowed to run (taken under the lane's keyed lock).
    TakeKeyed(ReadyKey),
    /// The next job of the fair key whose turn it is (taken under the lane's fair lock).
    TakeFair(ReadyKey),
    /// Loading and nothing here up to the horizon: a key after it may be the most urgent.
    Wait(Option<ReadyKey>),
}

impl Next<'_> {
    /// Whether this lane's offer must be served before `other`'s.
    fn before(&self, other: &Next<'_>) -> bool {
        match (self.bound(), other.bound()) {
            (None, _) => true,
            (_, None) => false,
            (Some(a), Some(b)) => a < b,
        }
    }

    fn bound(&self) -> Option<ReadyKey> {
        match self {
            Next::Take(entry) => Some(*entry.value()),
            Next::TakeKeyed(key) | Next::TakeFair(key) => Some(*key),
            Next::Wait(horizon) => *horizon,
        }
    }
}

impl Lane {
    pub fn insert(&self, key: ReadyKey) {
        self.set.insert(key);
    }

    /// Insert a job that carries a limit key.
    pub fn insert_keyed(&self, key: ReadyKey, limit_key: &str) {
        self.has_keyed.store(true, Ordering::Release);
        self.keyed.lock().unwrap().insert(key, limit_key);
    }

    /// Insert a job that carries a fair key: it waits for its key's turn.
    pub fn insert_fair(&self, key: ReadyKey, fair_key: &str) {
        self.has_fair.store(true, Ordering::Release);
        self.fair.lock().unwrap().insert(key, fair_key);
    }

    /// Take `key` out (a cancel, a delete, a change); a job with a fair key is named with it.
    pub fn remove(&self, key: &ReadyKey, fair_key: Option<&str>) -> bool {
        match fair_key {
            Some(fair_key) => self.has_fair() && self.fair.lock().unwrap().remove(*key, fair_key),
            None => {
                self.set.remove(key).is_some()
                    || (self.has_keyed() && self.keyed.lock().unwrap().remove(key.1))
            }
        }
    }

    fn has_fair(&self) -> bool {
        self.has_fair.load(Ordering::Acquire)
    }

    fn fair_len(&self) -> usize {
        if self.has_fair() {
            self.fair.lock().unwrap().len()
        } else {
            0
        }
    }

    /// A fair key's share of the lane's turns, in proportion to `weight` ("": the unkeyed jobs).
    pub fn set_fair_weight(&self, fair_key: &str, weight: u32) {
        self.fair.lock().unwrap().set_weight(fair_key, weight);
    }

    pub fn fair_weights(&self) -> Vec<(String, u32)> {
        self.fair.lock().unwrap().weights()
    }

    /// The fair keys with the most jobs waiting: (key, waiting, oldest job id).
    ///
    /// The walk over the keys takes the lock a range of `FAIR_WALK_SLOTS` keys at a time, so a
    /// listing over 100,000 keys holds the claims back for one range, not for the whole walk. The
    /// price: it is not one instant's picture (a key served meanwhile may show a count it had a
    /// moment before), which a view of the busiest keys can afford and a claim could not.
    pub fn fair_busiest(&self, limit: usize) -> Vec<(String, usize, u64)> {
        self.fair_busiest_by(limit, FAIR_WALK_SLOTS)
    }

    /// `fair_busiest`, walking `range` keys per hold of the lock (benches compare one hold).
    pub fn fair_busiest_by(&self, limit: usize, range: usize) -> Vec<(String, usize, u64)> {
        let mut found = Vec::new();
        let mut start: usize = 0;
        loop {
            let end = start.saturating_add(range.max(1));
            let (more, slots) = {
                let fair = self.fair.lock().unwrap();
                (
                    fair.busiest_among(start..end, limit),
                    end < fair.slot_count(),
                )
            };
            found.extend(more);
            found = crate::fair::top(found, limit);
            if !slots {
                break;
            }
            // std's lock is not fair: taken again at once, it would go back to this walk
            // before the claimer it just woke could run. A pause lets the claims through.
            std::thread::sleep(FAIR_WALK_PAUSE);
            start = end;
        }
        let fair = self.fair.lock().unwrap();
        found
            .into_iter()
            .filter_map(|(name, waiting)| Some((name.to_string(), waiting, fair.oldest_of(&name)?)))
            .collect()
    }

    /// How many fair keys have jobs waiting.
    pub fn fair_keys(&self) -> usize {
        if self.has_fair() {
            self.fair.lock().unwrap().keys()
        } else {
            0
        }
    }

    /// An unkeyed job was taken: in a lane with fair keys, the unkeyed jobs' turn moves on.
    fn charge_plain(&self) {
        if self.has_fair() {
            self.fair.lock().unwrap().charge_plain();
        }
    }

    fn has_keyed(&self) -> bool {
        self.has_keyed.load(Ordering::Acquire)
    }

    pub fn len(&self) -> usize {
        self.set.len() + self.keyed_len() + self.fair_len()
    }

    fn keyed_len(&self) -> usize {
        if self.has_keyed() {
            self.keyed.lock().unwrap().len()
        } else {
            0
        }
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.keyed_len() == 0 && self.fair_len() == 0
    }

    /// At most `cap` jobs of any one limit key in flight (0: no cap).
    pub fn set_key_cap(&self, cap: u64) {
        if cap > 0 {
            self.has_keyed.store(true, Ordering::Release);
        }
        self.keyed.lock().unwrap().set_cap(cap);
    }

    /// An attempt of a job left flight: if it carried a limit key, the key may run one more.
    /// Returns whether the lane caps its keys (claimers should look again).
    pub fn finished_keyed(&self, job_id: u64) -> bool {
        if !self.has_keyed() {
            return false;
        }
        let mut keyed = self.keyed.lock().unwrap();
        keyed.finished(job_id) && keyed.cap() > 0
    }

    /// How many jobs with this limit key are in flight.
    pub fn key_running(&self, limit_key: &str) -> u64 {
        self.keyed.lock().unwrap().running(limit_key)
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
        self.keyed.lock().unwrap().clear();
        self.fair.lock().unwrap().clear();
    }

    /// Start loading from the store: nothing is given out until `load` moves the horizon.
    pub fn begin_loading(&self) {
        *self.horizon.lock().unwrap() = None;
        self.loading.store(true, Ordering::Release);
    }

    /// Insert keys read from the store in order; while loading, the horizon moves to the last.
    pub fn load(&self, keys: impl IntoIterator<Item = ReadyKey>) {
        let mut last = None;
        for key in keys {
            self.set.insert(key);
            last = Some(key);
        }
        self.advance_horizon(last);
    }

    /// While loading: every stored key up to `last` is in (call after inserting them).
    pub fn advance_horizon(&self, last: Option<ReadyKey>) {
        if self.is_loading() && last.is_some() {
            let mut horizon = self.horizon.lock().unwrap();
            if last > *horizon {
                *horizon = last; // after the inserts: a claimer that sees it finds the keys
            }
        }
    }

    /// The store's range is read to its end: every key may be given out.
    pub fn finish_loading(&self) {
        self.loading.store(false, Ordering::Release);
    }

    pub fn is_loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    fn next(&self) -> Option<Next<'_>> {
        if self.is_paused() || !self.limit.allows() {
            return None; // held back, not more urgent than anything: other lanes go on
        }
        let front = self.set.front().map(Next::Take);
        let front = match (front, self.keyed_front()) {
            (Some(plain), Some(keyed)) if keyed < plain.bound().expect("a take has a key") => {
                Some(Next::TakeKeyed(keyed))
            }
            (None, Some(keyed)) => Some(Next::TakeKeyed(keyed)),
            (plain, _) => plain,
        };
        let front = if self.has_fair() {
            self.fair_turn(front)
        } else {
            front
        };
        if !self.is_loading() {
            return front;
        }
        let horizon = *self.horizon.lock().unwrap();
        match front {
            Some(next) if next.bound() <= horizon => Some(next),
            _ => Some(Next::Wait(horizon)),
        }
    }

    /// Between the unkeyed jobs' front (`unkeyed`) and the fair keys', whose turn it is.
    fn fair_turn<'a>(&self, unkeyed: Option<Next<'a>>) -> Option<Next<'a>> {
        let fair = self.fair.lock().unwrap();
        match (unkeyed, fair.peek()) {
            (Some(plain), Some(keyed)) => {
                let front = plain.bound().expect("a take has a key");
                if fair.plain_offer(front) < keyed {
                    Some(plain)
                } else {
                    Some(Next::TakeFair(keyed.key()))
                }
            }
            (None, Some(keyed)) => Some(Next::TakeFair(keyed.key())),
            (plain, None) => plain,
        }
    }

    /// Take `key` from the fair jobs if it is still the next of them.
    fn take_fair(&self, key: ReadyKey) -> bool {
        self.fair.lock().unwrap().take(key)
    }

    fn keyed_front(&self) -> Option<ReadyKey> {
        if self.has_keyed() {
            self.keyed.lock().unwrap().peek()
        } else {
            None
        }
    }

    /// Take `key` from the keyed jobs if it is still their most urgent allowed one.
    fn take_keyed(&self, key: ReadyKey) -> bool {
        self.keyed.lock().unwrap().take(key)
    }
}

/// The lane whose offer comes first, with that offer.
fn most_urgent<'a>(lanes: &'a [Arc<Lane>]) -> Option<(usize, Next<'a>)> {
    let mut best: Option<(usize, Next<'a>)> = None;
    for (i, lane) in lanes.iter().enumerate() {
        if let Some(next) = lane.next() {
            if best
                .as_ref()
                .is_none_or(|(_, current)| next.before(current))
            {
                best = Some((i, next));
            }
        }
    }
    best
}

/// Whether a claim over `lanes` would give out a key now.
pub fn has_claimable(lanes: &[Arc<Lane>]) -> bool {
    matches!(
        most_urgent(lanes),
        Some((_, Next::Take(_) | Next::TakeKeyed(_) | Next::TakeFair(_)))
    )
}

/// Take up to `max` of the most urgent keys across `lanes`, in (priority, id) order.
///
/// Returns the index of the lane each key came from with the key itself.
/// A loading lane with nothing up to its horizon stops the claim: its next key is unknown.
pub fn claim(lanes: &[Arc<Lane>], max: usize) -> Vec<(usize, ReadyKey)> {
    let mut claimed = Vec::with_capacity(max.min(1024));
    while claimed.len() < max {
        match most_urgent(lanes) {
            Some((i, Next::Take(entry))) => {
                if !lanes[i].limit.try_take() {
                    continue; // the lane reached its limit meanwhile: it offers nothing now
                }
                // Losing the race means another claimer took this key: look again.
                if entry.remove() {
                    lanes[i].charge_plain();
                    claimed.push((i, *entry.value()));
                } else {
                    lanes[i].limit.refund();
                }
            }
            Some((i, Next::TakeKeyed(key))) => {
                if !lanes[i].limit.try_take() {
                    continue;
                }
                if lanes[i].take_keyed(key) {
                    lanes[i].charge_plain();
                    claimed.push((i, key));
                } else {
                    lanes[i].limit.refund();
                }
            }
            Some((i, Next::TakeFair(key))) => {
                if !lanes[i].limit.try_take() {
                    continue;
                }
                if lanes[i].take_fair(key) {
                    claimed.push((i, key));
                } else {
                    lanes[i].limit.refund();
                }
            }
            Some((_, Next::Wait(_))) | None => break,
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

    pub fn remove(&self, queue: &str, key: &ReadyKey, fair_key: Option<&str>) -> bool {
        match self.lanes.read().unwrap().get(queue) {
            Some(lane) => lane.remove(key, fair_key),
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

    /// The queues whose lanes are still loading, sorted.
    pub fn loading(&self) -> Vec<String> {
        let mut names: Vec<_> = self
            .lanes
            .read()
            .unwrap()
            .iter()
            .filter(|(_, lane)| lane.is_loading())
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
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
    fn a_loading_lane_gives_out_nothing_beyond_its_horizon() {
        let index = ReadyIndex::new();
        let lane = index.lane("q");
        lane.begin_loading();
        lane.insert((0, 50)); // a live enqueue while nothing is loaded yet
        assert!(claim(std::slice::from_ref(&lane), 10).is_empty());
        lane.load([(0, 1), (0, 2)]);
        assert!(has_claimable(std::slice::from_ref(&lane)));
        assert_eq!(ids(&claim(std::slice::from_ref(&lane), 10)), vec![1, 2]);
        assert!(!has_claimable(std::slice::from_ref(&lane)));
        lane.load([(0, 3)]);
        lane.finish_loading();
        assert_eq!(ids(&claim(&[lane], 10)), vec![3, 50]);
    }

    #[test]
    fn a_loading_lane_holds_back_less_urgent_lanes_only() {
        let index = ReadyIndex::new();
        let (a, b) = (index.lane("a"), index.lane("b"));
        a.begin_loading();
        a.load([(1, 1)]);
        b.insert((0, 7)); // more urgent than anything a may still hold: free to go
        b.insert((5, 8)); // a's unloaded keys (after (1, 1)) may come first: held back
        let lanes = [a.clone(), b];
        assert_eq!(ids(&claim(&lanes, 10)), vec![7, 1]);
        a.load([(3, 4)]);
        a.finish_loading();
        assert_eq!(ids(&claim(&lanes, 10)), vec![4, 8]);
        assert!(index.loading().is_empty());
    }

    #[test]
    fn a_lane_at_its_limit_is_passed_by_and_comes_back_when_a_job_finishes() {
        let index = ReadyIndex::new();
        let (a, b) = (index.lane("a"), index.lane("b"));
        a.limit.set(2, 0.0, 0.0, 0);
        for id in 0..5 {
            a.insert((0, id));
        }
        b.insert((9, 100)); // less urgent, but a is held back by its cap
        let lanes = [a.clone(), b];
        assert_eq!(ids(&claim(&lanes, 10)), vec![0, 1, 100]);
        assert!(!has_claimable(&lanes));
        a.limit.finished(1);
        assert_eq!(ids(&claim(&lanes, 10)), vec![2]);
    }

    #[test]
    fn keyed_jobs_keep_the_lane_order_and_a_capped_key_is_passed_by() {
        let index = ReadyIndex::new();
        let lane = index.lane("q");
        lane.set_key_cap(1);
        lane.insert_keyed((0, 1), "acme");
        lane.insert_keyed((0, 2), "acme");
        lane.insert((0, 3));
        lane.insert_keyed((1, 4), "zeta");
        assert_eq!(lane.len(), 4);
        let lanes = [lane.clone()];
        assert_eq!(ids(&claim(&lanes, 10)), vec![1, 3, 4]); // 2 waits for acme's slot
        assert!(!has_claimable(&lanes));
        assert!(lane.finished_keyed(1));
        assert_eq!(ids(&claim(&lanes, 10)), vec![2]);
        assert!(!lane.remove(&(0, 2), None) && lane.is_empty());
    }

    #[test]
    fn a_loading_lane_holds_keyed_jobs_to_its_horizon_too() {
        let index = ReadyIndex::new();
        let lane = index.lane("q");
        lane.begin_loading();
        lane.insert_keyed((0, 9), "k"); // live, beyond anything loaded
        lane.insert_keyed((0, 1), "k");
        lane.advance_horizon(Some((0, 1)));
        let lanes = [lane.clone()];
        assert_eq!(ids(&claim(&lanes, 10)), vec![1]);
        lane.finish_loading();
        assert_eq!(ids(&claim(&lanes, 10)), vec![9]);
    }

    #[test]
    fn fair_keys_take_turns_with_the_unkeyed_jobs_as_one_more_key() {
        let index = ReadyIndex::new();
        let lane = index.lane("q");
        for id in 1..=3 {
            lane.insert_fair((0, id), "big");
        }
        lane.insert((0, 4));
        lane.insert((0, 5));
        lane.insert_fair((0, 6), "small");
        lane.insert_fair((1, 7), "small"); // a lower priority waits for every priority-0 job
        assert_eq!(lane.len(), 7);
        assert_eq!(lane.fair_keys(), 2);
        let lanes = [lane.clone()];
        assert!(has_claimable(&lanes));
        assert_eq!(ids(&claim(&lanes, 10)), vec![1, 4, 6, 2, 5, 3, 7]);
        assert!(lane.is_empty() && lane.fair_keys() == 0);
    }

    #[test]
    fn a_fair_lane_keeps_its_limit_and_its_removals() {
        let index = ReadyIndex::new();
        let lane = index.lane("q");
        lane.limit.set(1, 0.0, 0.0, 0);
        lane.insert_fair((0, 1), "a");
        lane.insert_fair((0, 2), "b");
        lane.insert_fair((0, 3), "b");
        assert!(index.remove("q", &(0, 2), Some("b")));
        let lanes = [lane.clone()];
        assert_eq!(ids(&claim(&lanes, 10)), vec![1]);
        lane.limit.finished(1);
        assert_eq!(ids(&claim(&lanes, 10)), vec![3]);
    }

    #[test]
    fn the_busiest_keys_come_out_whole_from_a_walk_in_ranges() {
        let index = ReadyIndex::new();
        let lane = index.lane("q");
        let keys = FAIR_WALK_SLOTS * 2 + 100; // three ranges
        let mut id = 0;
        for key in 0..keys {
            let jobs = if key % 1000 == 7 { 3 + key / 1000 } else { 1 };
            for _ in 0..jobs {
                id += 1;
                lane.insert_fair((0, id), &format!("k{key}"));
            }
        }
        let walked = lane.fair_busiest(5);
        assert_eq!(
            walked,
            lane.fair.lock().unwrap().busiest(5),
            "as one walk finds them"
        );
        let names: Vec<&str> = walked.iter().map(|(name, _, _)| name.as_str()).collect();
        assert_eq!(names, ["k8007", "k7007", "k6007", "k5007", "k4007"]);
        assert_eq!(walked[0].1, 11);
        assert_eq!(lane.fair_busiest(keys + 10).len(), keys);
        assert!(lane.fair_busiest(0).is_empty());
    }

    #[test]
    fn a_key_met_twice_in_a_walk_counts_once() {
        let found = vec![
            ("a".into(), 3),
            ("b".into(), 2),
            ("a".into(), 1),
            ("c".into(), 1),
        ];
        let top = crate::fair::top(found, 2);
        let names: Vec<(&str, usize)> = top.iter().map(|(n, w)| (&**n, *w)).collect();
        assert_eq!(names, [("a", 3), ("b", 2)]);
    }

    #[test]
    fn remove_and_reinsert() {
        let index = ReadyIndex::new();
        index.insert("q", (3, 1));
        assert!(index.remove("q", &(3, 1), None));
        assert!(!index.remove("q", &(3, 1), None));
        assert!(!index.remove("missing", &(3, 1), None));
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
