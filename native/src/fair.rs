//! Fair share by key: within a queue and a priority, the next job comes from the fair keys (a
//! tenant, say) in turn, in proportion to their weights, FIFO within a key.
//!
//! Stride scheduling: every key has a *pass*, and a claim serves the key with the lowest pass at
//! the most urgent priority, then moves that key's pass on by its stride (`STRIDE_UNIT / weight`).
//! Over many claims a key with weight 2 is served twice as often as one with weight 1. A key that
//! had nothing waiting joins at the current virtual time (the pass last served), so an idle key
//! neither loses its turn nor banks turns while idle.
//!
//! `heads` holds each key's front job, ordered by (priority, pass, id): a claim looks at its first
//! entry, O(log k) in the keys with jobs waiting, and nothing else. A key's state is dropped when
//! its last job goes, so memory follows the keys that have work. Keys live in a slab and the hot
//! path names them by slot: a claim hashes no string and touches no key's text. Jobs without a fair key are not
//! here (they stay in the lane's skip list); the lane treats them as one more key, the unkeyed
//! one, whose pass this struct keeps too (`plain_pass`).

use crate::order::ReadyKey;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Arc;

/// The stride of weight 1. Divisible by every weight up to 16 and by most small ones beyond,
/// so common ratios are exact.
const STRIDE_UNIT: u64 = 720_720 << 16;

/// The highest weight a key may have (the API refuses more).
pub const MAX_WEIGHT: u32 = 10_000;

fn stride(weight: u32) -> u64 {
    STRIDE_UNIT / u64::from(weight.clamp(1, MAX_WEIGHT))
}

#[derive(Debug)]
struct Group {
    name: Arc<str>,
    ready: BTreeSet<ReadyKey>,
    pass: u64,
    stride: u64,
}

impl Group {
    fn head(&self, slot: Slot) -> Option<Head> {
        let (priority, id) = *self.ready.first()?;
        Some((priority, self.pass, id, slot))
    }
}

type Slot = u32;

/// A seated key: its front job's priority, its pass, its front job's id, its slot.
type Head = (u16, u64, u64, Slot);

#[derive(Debug, Default)]
pub struct Fair {
    slots: Vec<Option<Group>>,
    free: Vec<Slot>,
    names: HashMap<Arc<str>, Slot>,
    heads: BTreeSet<Head>,
    /// Weights set for this queue's keys (absent: 1); "" is the unkeyed jobs' weight.
    weights: HashMap<Arc<str>, u32>,
    /// The pass of the key served last.
    vtime: u64,
    plain_pass: u64,
    len: usize,
}

/// What a fair lane offers next: the front job and the pass it is served at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Offer {
    pub priority: u16,
    pub pass: u64,
    pub id: u64,
}

impl Offer {
    pub fn key(&self) -> ReadyKey {
        (self.priority, self.id)
    }
}

impl Fair {
    fn weight(&self, key: &str) -> u32 {
        self.weights.get(key).copied().unwrap_or(1)
    }

    fn group(&mut self, slot: Slot) -> &mut Group {
        self.slots[slot as usize]
            .as_mut()
            .expect("a seated slot has a group")
    }

    /// The slot of `key`'s group, made (joining at the virtual time) if it has none.
    fn seat(&mut self, key: &str) -> Slot {
        if let Some(slot) = self.names.get(key) {
            return *slot;
        }
        let name: Arc<str> = Arc::from(key);
        let group = Group {
            name: name.clone(),
            ready: BTreeSet::new(),
            pass: self.vtime,
            stride: stride(self.weight(key)),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(group);
                slot
            }
            None => {
                self.slots.push(Some(group));
                Slot::try_from(self.slots.len() - 1).expect("fewer than 2^32 keys")
            }
        };
        self.names.insert(name, slot);
        slot
    }

    /// Change `slot`'s group with `change`, keeping its seat in `heads` right; a group left
    /// without jobs is dropped.
    fn update(&mut self, slot: Slot, change: impl FnOnce(&mut Group)) {
        let group = self.slots[slot as usize]
            .as_mut()
            .expect("a seated slot has a group");
        let old = group.head(slot);
        change(group);
        let new = group.head(slot);
        let empty = group.ready.is_empty();
        if old != new {
            if let Some(old) = old {
                self.heads.remove(&old);
            }
            self.heads.extend(new);
        }
        if empty {
            self.unseat(slot);
        }
    }

    /// Drop `slot`'s group (it has no jobs left): its key's memory goes with it.
    fn unseat(&mut self, slot: Slot) {
        let group = self.slots[slot as usize].take().expect("seated");
        self.names.remove(&group.name);
        self.free.push(slot);
    }

    /// Queue `job` under `key`; the same job again is a no-op (false).
    pub fn insert(&mut self, job: ReadyKey, key: &str) -> bool {
        let slot = self.seat(key);
        let mut inserted = false;
        self.update(slot, |group| inserted = group.ready.insert(job));
        self.len += usize::from(inserted);
        inserted
    }

    /// Take `job` out of `key`'s jobs (a cancel, a delete, a change). The caller names the key:
    /// a table from job to key would cost two cache misses on every claim and every insert
    /// (it was measured: 430 of 1,050 ns a claim plus insert over 100,000 keys).
    pub fn remove(&mut self, job: ReadyKey, key: &str) -> bool {
        let Some(&slot) = self.names.get(key) else {
            return false;
        };
        let mut removed = false;
        self.update(slot, |group| removed = group.ready.remove(&job));
        self.len -= usize::from(removed);
        removed
    }

    pub fn peek(&self) -> Option<Offer> {
        self.heads
            .first()
            .map(|&(priority, pass, id, _)| Offer { priority, pass, id })
    }

    /// What the unkeyed jobs offer, their front being `front`: they bid as one more key.
    pub fn plain_offer(&self, front: ReadyKey) -> Offer {
        Offer {
            priority: front.0,
            pass: self.plain_pass.max(self.vtime),
            id: front.1,
        }
    }

    /// Serve the keyed front `expected` (if it is still the front): the job leaves, and its key's
    /// pass moves on by the key's stride.
    pub fn take(&mut self, expected: ReadyKey) -> bool {
        let Some(&(priority, pass, id, slot)) = self.heads.first() else {
            return false;
        };
        if (priority, id) != expected {
            return false;
        }
        // The served head is the first of `heads` and the first of its group: both leave by
        // their front, which walks no comparisons (the hot path of every claim).
        self.heads.pop_first();
        let group = self.group(slot);
        group.ready.pop_first();
        group.pass = pass + group.stride;
        match group.head(slot) {
            Some(head) => {
                self.heads.insert(head);
            }
            None => self.unseat(slot),
        }
        self.vtime = self.vtime.max(pass);
        self.len -= 1;
        true
    }

    /// An unkeyed job was served: the unkeyed bid's pass moves on.
    pub fn charge_plain(&mut self) {
        let pass = self.plain_pass.max(self.vtime);
        self.vtime = pass;
        self.plain_pass = pass + stride(self.weight(""));
    }

    /// A key's weight, 1 to MAX_WEIGHT (1 forgets it); it counts from the key's next turn.
    pub fn set_weight(&mut self, key: &str, weight: u32) {
        let weight = weight.clamp(1, MAX_WEIGHT);
        if weight == 1 {
            self.weights.remove(key);
        } else {
            self.weights.insert(Arc::from(key), weight);
        }
        if let Some(&slot) = self.names.get(key) {
            self.group(slot).stride = stride(weight);
        }
    }

    pub fn weights(&self) -> Vec<(String, u32)> {
        let mut all: Vec<_> = self
            .weights
            .iter()
            .map(|(k, w)| (k.to_string(), *w))
            .collect();
        all.sort();
        all
    }

    /// How many slots a walk over the keys covers (some may be empty).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The keys seated in `slots` with the most jobs waiting, at most `limit`, in no order
    /// (`top` sorts them): (key, waiting).
    /// A walk over every key goes a range at a time, each under its own hold of the lane's lock,
    /// so claims go on between the ranges (see `Lane::fair_busiest`).
    pub fn busiest_among(&self, slots: Range<usize>, limit: usize) -> Vec<(Arc<str>, usize)> {
        let end = slots.end.min(self.slots.len());
        let start = slots.start.min(end);
        if limit == 0 {
            return Vec::new();
        }
        // Only the top `limit` names are copied: a walk that cloned every name would spend most
        // of its hold of the lock on the clones' atomic counts.
        let mut groups: Vec<&Group> = self.slots[start..end].iter().flatten().collect();
        let most = |a: &&Group, b: &&Group| {
            b.ready
                .len()
                .cmp(&a.ready.len())
                .then_with(|| a.name.cmp(&b.name))
        };
        if limit < groups.len() {
            groups.select_nth_unstable_by(limit - 1, most);
            groups.truncate(limit);
        }
        groups
            .into_iter()
            .map(|group| (group.name.clone(), group.ready.len()))
            .collect()
    }

    /// The lowest id waiting under `key` (None: it has none).
    pub fn oldest_of(&self, key: &str) -> Option<u64> {
        let slot = *self.names.get(key)?;
        let group = self.slots[slot as usize].as_ref()?;
        Some(oldest(&group.ready))
    }

    /// The keys with the most jobs waiting, at most `limit`: (key, waiting, oldest job id), in
    /// one walk (tests, and small lanes).
    pub fn busiest(&self, limit: usize) -> Vec<(String, usize, u64)> {
        top(self.busiest_among(0..self.slots.len(), limit), limit)
            .into_iter()
            .map(|(name, waiting)| {
                let oldest = self.oldest_of(&name).unwrap_or(0);
                (name.to_string(), waiting, oldest)
            })
            .collect()
    }

    pub fn keys(&self) -> usize {
        self.names.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drop every ready job; weights stay (they are settings, not state).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.names.clear();
        self.heads.clear();
        self.len = 0;
    }
}

/// The `limit` entries with the most jobs waiting, most first, ties by name; a name twice (a walk
/// in ranges can meet a key that moved to another slot) counts once, at its larger count.
pub fn top(mut all: Vec<(Arc<str>, usize)>, limit: usize) -> Vec<(Arc<str>, usize)> {
    if limit == 0 {
        return Vec::new();
    }
    let most =
        |a: &(Arc<str>, usize), b: &(Arc<str>, usize)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0));
    // Keep a margin past `limit` before the dedup, so a key met twice cannot push one out.
    let keep = limit.saturating_mul(2);
    if keep < all.len() {
        all.select_nth_unstable_by(keep - 1, most);
        all.truncate(keep);
    }
    all.sort_unstable_by(most);
    let mut seen = std::collections::HashSet::new();
    all.retain(|(name, _)| seen.insert(name.clone()));
    all.truncate(limit);
    all
}

/// The lowest id waiting: the first job of each priority, one seek per priority.
fn oldest(ready: &BTreeSet<ReadyKey>) -> u64 {
    let mut lowest = u64::MAX;
    let mut next = ready.first().copied();
    while let Some((priority, id)) = next {
        lowest = lowest.min(id);
        next = match priority.checked_add(1) {
            Some(after) => ready.range((after, 0)..).next().copied(),
            None => None,
        };
    }
    if lowest == u64::MAX {
        0
    } else {
        lowest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(fair: &mut Fair) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(offer) = fair.peek() {
            assert!(fair.take(offer.key()));
            out.push(offer.id);
        }
        out
    }

    #[test]
    fn keys_take_turns_and_each_key_is_fifo() {
        let mut fair = Fair::default();
        for id in 1..=4 {
            fair.insert((0, id), "a"); // a's backlog first
        }
        fair.insert((0, 10), "b");
        fair.insert((0, 11), "b");
        fair.insert((0, 20), "c");
        assert_eq!(drain(&mut fair), vec![1, 10, 20, 2, 11, 3, 4]);
        assert!(fair.is_empty() && fair.keys() == 0 && fair.slots.iter().all(Option::is_none));
    }

    #[test]
    fn priority_comes_before_turns() {
        let mut fair = Fair::default();
        fair.insert((5, 1), "a");
        fair.insert((5, 2), "a");
        fair.insert((0, 3), "b");
        fair.insert((5, 4), "b");
        // b's priority-0 job was its turn: a's next goes before b's.
        assert_eq!(drain(&mut fair), vec![3, 1, 2, 4]);
    }

    #[test]
    fn weights_give_shares_in_proportion() {
        let mut fair = Fair::default();
        fair.set_weight("b", 2);
        fair.set_weight("c", 4);
        for id in 0..700u64 {
            fair.insert((0, id * 3), "a");
            fair.insert((0, id * 3 + 1), "b");
            fair.insert((0, id * 3 + 2), "c");
        }
        let first: Vec<u64> = drain(&mut fair).into_iter().take(700).collect();
        let share = |r: u64| first.iter().filter(|id| *id % 3 == r).count();
        assert_eq!((share(0), share(1), share(2)), (100, 200, 400));
    }

    #[test]
    fn an_idle_key_joins_at_the_current_turn_without_banked_turns() {
        let mut fair = Fair::default();
        for id in 0..10 {
            fair.insert((0, id), "a");
        }
        assert_eq!(drain(&mut fair).len(), 10);
        for id in 100..105 {
            fair.insert((0, id), "a");
        }
        fair.insert((0, 200), "b"); // b was idle the whole time: one turn, not ten
        fair.insert((0, 201), "b");
        assert_eq!(drain(&mut fair), vec![100, 200, 101, 201, 102, 103, 104]);
    }

    #[test]
    fn remove_and_moves_keep_the_heads_right() {
        let mut fair = Fair::default();
        fair.insert((0, 1), "a");
        fair.insert((0, 2), "a");
        fair.insert((0, 3), "b");
        assert!(fair.remove((0, 1), "a"));
        assert!(!fair.remove((0, 1), "a"));
        assert!(!fair.remove((0, 3), "a"), "b's job is not a's");
        assert!(!fair.insert((0, 3), "b"), "the same hint again");
        assert!(fair.remove((0, 2), "a")); // job 2 moves to priority 7
        assert!(fair.insert((7, 2), "a"));
        assert_eq!(fair.len(), 2);
        assert_eq!(drain(&mut fair), vec![3, 2]);
        assert!(!fair.take((0, 99)));
    }

    #[test]
    fn the_unkeyed_jobs_take_their_turn_as_one_key() {
        let mut fair = Fair::default();
        fair.insert((0, 5), "a");
        fair.insert((0, 6), "a");
        // The lane compares the plain front's offer with the keyed one; play it by hand.
        let plain = fair.plain_offer((0, 1));
        let keyed = fair.peek().unwrap();
        assert!(plain < keyed, "equal passes: the older job first");
        fair.charge_plain();
        let plain = fair.plain_offer((0, 2));
        assert!(fair.peek().unwrap() < plain, "then a's turn");
    }

    #[test]
    fn busiest_lists_keys_by_waiting_jobs() {
        let mut fair = Fair::default();
        fair.insert((0, 9), "small");
        for id in 1..=3 {
            fair.insert((0, id), "big");
        }
        assert_eq!(
            fair.busiest(10),
            vec![("big".into(), 3, 1), ("small".into(), 1, 9)]
        );
        assert_eq!(fair.busiest(1), vec![("big".into(), 3, 1)]);
        assert!(fair.busiest(0).is_empty());
    }

    #[test]
    fn the_oldest_job_is_found_across_priorities() {
        let mut fair = Fair::default();
        for (priority, id) in [(0, 40), (0, 41), (3, 7), (3, 50), (u16::MAX, 2)] {
            fair.insert((priority, id), "a");
        }
        assert_eq!(fair.busiest(5), vec![("a".into(), 5, 2)]);
        fair.remove((u16::MAX, 2), "a");
        assert_eq!(fair.busiest(5), vec![("a".into(), 4, 7)]);
    }
}
