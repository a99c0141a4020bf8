//! A timer-free coalescing queue: the single writer's inbox.
//!
//! Producers `push` requests. The one consumer calls `take_batch`, which blocks until at least one
//! request is waiting and then returns it together with everything else that queued meanwhile (up
//! to a cap). A quiet system therefore commits batches of one at once, and a busy one grows its
//! batches by itself: no timer, nothing to tune. The same primitive serves group commit: batches
//! waiting for durability are taken together and covered by one fsync.
//!
//! It also counts the requests pushed and not yet `finish`ed by the consumer. While that count is
//! zero, nothing is queued or being handled, so a producer may handle its request itself without
//! overtaking any other (the committer's inline commit).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

#[derive(Debug)]
struct State<T> {
    items: VecDeque<T>,
    closed: bool,
    unfinished: usize,
}

#[derive(Debug)]
pub struct Coalescer<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Default for Coalescer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Coalescer<T> {
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State {
                items: VecDeque::new(),
                closed: false,
                unfinished: 0,
            }),
            ready: Condvar::new(),
        }
    }

    /// Queue one request; refused once the coalescer is closed.
    pub fn push(&self, item: T) -> Result<(), Closed> {
        let mut state = self.state.lock().unwrap();
        if state.closed {
            return Err(Closed);
        }
        state.items.push_back(item);
        state.unfinished += 1;
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// Wait for at least one request (or close, or the timeout) and return up to `max` of them.
    ///
    /// An empty result means the timeout passed with nothing waiting, or the coalescer is closed
    /// and drained; `is_closed` tells which.
    pub fn take_batch(&self, max: usize, timeout: Option<Duration>) -> Vec<T> {
        let mut state = self.state.lock().unwrap();
        while state.items.is_empty() && !state.closed {
            match timeout {
                None => state = self.ready.wait(state).unwrap(),
                Some(t) => {
                    let (guard, result) = self.ready.wait_timeout(state, t).unwrap();
                    state = guard;
                    if result.timed_out() {
                        break;
                    }
                }
            }
        }
        let n = state.items.len().min(max.max(1));
        state.items.drain(..n).collect()
    }

    /// Refuse further pushes and wake the consumer; what is queued can still be taken.
    pub fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.ready.notify_all();
    }

    /// The consumer is done with `n` taken requests.
    pub fn finish(&self, n: usize) {
        let mut state = self.state.lock().unwrap();
        state.unfinished = state.unfinished.saturating_sub(n);
    }

    /// Requests pushed and not yet finished: queued, or taken and still being handled.
    pub fn unfinished(&self) -> usize {
        self.state.lock().unwrap().unfinished
    }

    pub fn is_closed(&self) -> bool {
        self.state.lock().unwrap().closed
    }

    pub fn len(&self) -> usize {
        self.state.lock().unwrap().items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_lone_request_is_taken_at_once() {
        let c = Coalescer::new();
        c.push(1).unwrap();
        assert_eq!(c.take_batch(100, None), vec![1]);
    }

    #[test]
    fn requests_that_queue_meanwhile_come_as_one_batch_in_order() {
        let c = Coalescer::new();
        for i in 0..10 {
            c.push(i).unwrap();
        }
        assert_eq!(c.take_batch(4, None), vec![0, 1, 2, 3]);
        assert_eq!(c.take_batch(100, None), (4..10).collect::<Vec<_>>());
    }

    #[test]
    fn take_blocks_until_a_push() {
        let c = Arc::new(Coalescer::new());
        let consumer = {
            let c = c.clone();
            std::thread::spawn(move || c.take_batch(10, None))
        };
        c.push(7).unwrap();
        assert_eq!(consumer.join().unwrap(), vec![7]);
    }

    #[test]
    fn a_request_stays_unfinished_until_the_consumer_finishes_it() {
        let c = Coalescer::new();
        assert_eq!(c.unfinished(), 0);
        c.push(1).unwrap();
        c.push(2).unwrap();
        let taken = c.take_batch(10, None);
        assert!(c.is_empty());
        assert_eq!(c.unfinished(), 2, "taken is not finished");
        c.finish(taken.len());
        assert_eq!(c.unfinished(), 0);
    }

    #[test]
    fn timeout_returns_empty() {
        let c: Coalescer<u8> = Coalescer::new();
        assert!(c.take_batch(10, Some(Duration::from_millis(5))).is_empty());
        assert!(!c.is_closed());
    }

    #[test]
    fn close_wakes_the_consumer_and_refuses_pushes_but_keeps_what_is_queued() {
        let c = Arc::new(Coalescer::new());
        c.push(1).unwrap();
        c.close();
        assert_eq!(c.push(2), Err(Closed));
        assert_eq!(c.take_batch(10, None), vec![1]);
        let waiter = {
            let c = c.clone();
            std::thread::spawn(move || c.take_batch(10, None))
        };
        assert!(waiter.join().unwrap().is_empty());
    }

    #[test]
    fn many_producers_lose_nothing() {
        let c = Arc::new(Coalescer::new());
        let producers: Vec<_> = (0..8)
            .map(|p| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        c.push(p * 1000 + i).unwrap();
                    }
                })
            })
            .collect();
        let mut seen = Vec::new();
        while seen.len() < 8000 {
            seen.extend(c.take_batch(512, None));
        }
        for p in producers {
            p.join().unwrap();
        }
        seen.sort();
        assert_eq!(seen, (0..8000).collect::<Vec<_>>());
    }
}
