//! Claim plus refill in one lane, 1M ready jobs over 16 priorities, with and without 100,000
//! fair keys: the Rust side of `bench/test_native_ready.py`'s fair-key case, without Python's
//! call overhead. `cargo bench --bench fair_claim` (release); prints ns per claim plus insert.

use pyqueue_native::ready::{claim, ReadyIndex};
use std::time::Instant;

const JOBS: u64 = 1_000_000;
const ROUNDS: u64 = 2_000_000;

fn run(keys: u64) -> f64 {
    let index = ReadyIndex::new();
    let lane = index.lane("q");
    let names: Vec<String> = (0..keys).map(|k| format!("tenant-{k}")).collect();
    for i in 0..JOBS {
        let key = ((i % 16) as u16, i);
        if keys > 0 {
            lane.insert_fair(key, &names[(i % keys) as usize]);
        } else {
            lane.insert(key);
        }
    }
    let lanes = [lane.clone()];
    let start = Instant::now();
    for round in 0..ROUNDS {
        assert_eq!(claim(&lanes, 1).len(), 1);
        let key = (8, JOBS + round);
        if keys > 0 {
            lane.insert_fair(key, &names[(round % keys) as usize]);
        } else {
            lane.insert(key);
        }
    }
    let per = start.elapsed().as_nanos() as f64 / ROUNDS as f64;
    assert_eq!(lane.len() as u64, JOBS);
    per
}

fn main() {
    if std::env::args().any(|a| a == "--fair-only") {
        println!("100,000 fair keys {:.0} ns", run(100_000));
        return;
    }
    for attempt in 1..=3 {
        let plain = run(0);
        let fair = run(100_000);
        println!(
            "round {attempt}: no keys {plain:.0} ns, 100,000 fair keys {fair:.0} ns ({:.2}x)",
            fair / plain
        );
    }
}
