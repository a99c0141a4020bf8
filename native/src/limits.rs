//! Per-queue limits, enforced where jobs are given out: at most `max_running` in flight, and a
//! token-bucket rate. A lane at its limit offers nothing, so claims pass it by in O(1) and other
//! queues go on; nothing scans past its blocked jobs.
//!
//! `try_take` is the reservation a claim makes before it removes a key (refunded if another
//! claimer wins the key); `finished` gives a slot back when a job leaves flight. With no limit set
//! both are a single atomic load.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Debug)]
struct Bucket {
    per_ms: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.duration_since(self.at).as_secs_f64() * 1000.0;
        self.tokens = (self.tokens + elapsed * self.per_ms).min(self.burst);
        self.at = now;
    }
}

#[derive(Debug, Default)]
pub struct Limit {
    limited: AtomicBool,
    max_running: AtomicU64, // 0: no cap
    running: AtomicU64,
    bucket: Mutex<Option<Bucket>>,
}

impl Limit {
    /// Set the limits (0 and 0.0: none). `running` is how many of the queue's jobs are in flight
    /// now, so a cap set under load counts them.
    pub fn set(&self, max_running: u64, rate_per_s: f64, burst: f64, running: u64) {
        self.max_running.store(max_running, Ordering::Release);
        self.running.store(running, Ordering::Release);
        *self.bucket.lock().unwrap() = (rate_per_s > 0.0).then(|| {
            let burst = burst.max(1.0);
            Bucket {
                per_ms: rate_per_s / 1000.0,
                burst,
                tokens: burst,
                at: Instant::now(),
            }
        });
        self.limited
            .store(max_running > 0 || rate_per_s > 0.0, Ordering::Release);
    }

    pub fn is_limited(&self) -> bool {
        self.limited.load(Ordering::Acquire)
    }

    /// Whether a job may be given out now (no reservation).
    pub fn allows(&self) -> bool {
        if !self.is_limited() {
            return true;
        }
        let cap = self.max_running.load(Ordering::Acquire);
        if cap > 0 && self.running.load(Ordering::Acquire) >= cap {
            return false;
        }
        match self.bucket.lock().unwrap().as_mut() {
            Some(bucket) => {
                bucket.refill(Instant::now());
                bucket.tokens >= 1.0
            }
            None => true,
        }
    }

    /// Reserve a slot and a token; false if either is gone.
    pub fn try_take(&self) -> bool {
        if !self.is_limited() {
            return true;
        }
        let cap = self.max_running.load(Ordering::Acquire);
        let mut running = self.running.load(Ordering::Acquire);
        loop {
            if cap > 0 && running >= cap {
                return false;
            }
            match self.running.compare_exchange_weak(
                running,
                running + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => running = now,
            }
        }
        if let Some(bucket) = self.bucket.lock().unwrap().as_mut() {
            bucket.refill(Instant::now());
            if bucket.tokens < 1.0 {
                self.finished(1);
                return false;
            }
            bucket.tokens -= 1.0;
        }
        true
    }

    /// Undo a reservation whose key another claimer took.
    pub fn refund(&self) {
        if !self.is_limited() {
            return;
        }
        self.finished(1);
        if let Some(bucket) = self.bucket.lock().unwrap().as_mut() {
            bucket.tokens = (bucket.tokens + 1.0).min(bucket.burst);
        }
    }

    /// `n` of the queue's jobs left flight (or were never taken after all).
    pub fn finished(&self, n: u64) {
        let _ = self
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                Some(r.saturating_sub(n))
            });
    }

    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Acquire)
    }

    /// Milliseconds until the rate gives the next token (0: not held back by the rate).
    pub fn wait_ms(&self) -> u64 {
        match self.bucket.lock().unwrap().as_mut() {
            Some(bucket) => {
                bucket.refill(Instant::now());
                if bucket.tokens >= 1.0 {
                    0
                } else {
                    ((1.0 - bucket.tokens) / bucket.per_ms).ceil().max(1.0) as u64
                }
            }
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_takes_anything() {
        let limit = Limit::default();
        assert!((0..1000).all(|_| limit.try_take()));
        assert!(limit.allows());
    }

    #[test]
    fn max_running_caps_and_finished_frees() {
        let limit = Limit::default();
        limit.set(2, 0.0, 0.0, 0);
        assert!(limit.try_take() && limit.try_take());
        assert!(!limit.allows() && !limit.try_take());
        limit.finished(1);
        assert!(limit.try_take());
        limit.refund();
        assert_eq!(limit.running(), 1);
    }

    #[test]
    fn the_rate_allows_a_burst_then_waits_for_tokens() {
        let limit = Limit::default();
        limit.set(0, 10.0, 3.0, 0);
        assert!((0..3).all(|_| limit.try_take()));
        assert!(!limit.try_take());
        let wait = limit.wait_ms();
        assert!((1..=100).contains(&wait), "{wait}");
        std::thread::sleep(std::time::Duration::from_millis(wait + 5));
        assert!(limit.try_take());
    }
}
