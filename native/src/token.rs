//! The claim token that settles the wake-up race between waiting streams.
//!
//! When jobs become available in a queue, one token is handed to every stream waiting on that
//! queue. Only the stream that flips it goes to the store; the others go back to sleep. This turns
//! a thundering herd into one claimer per event.

use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Default)]
pub struct ClaimToken {
    taken: AtomicBool,
}

impl ClaimToken {
    pub fn new() -> Self {
        Self::default()
    }

    /// True for exactly one caller over the token's life.
    pub fn try_claim(&self) -> bool {
        self.taken
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub fn is_claimed(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn only_one_claimer_wins() {
        let token = Arc::new(ClaimToken::new());
        let winners = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..16)
            .map(|_| {
                let (token, winners) = (token.clone(), winners.clone());
                std::thread::spawn(move || {
                    if token.try_claim() {
                        winners.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(winners.load(Ordering::SeqCst), 1);
        assert!(token.is_claimed());
        assert!(!token.try_claim());
    }
}
