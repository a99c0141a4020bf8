//! What a listing of the busiest fair keys costs the claims beside it: one lane, 1M ready jobs
//! over 100,000 keys, a thread claiming and refilling one job at a time while the main thread
//! lists the 50 busiest keys over and over. Each claim's time is recorded; the table compares
//! the walk in ranges (`Lane::fair_busiest`) with one hold of the lock for the whole walk.
//! `cargo bench --bench fair_listing` (release).

use pyqueue_native::ready::{claim, Lane, ReadyIndex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

const JOBS: u64 = 1_000_000;
const KEYS: u64 = 100_000;
const LISTINGS: usize = 40;

fn name(k: u64) -> String {
    format!("tenant-{k}")
}

fn loaded_lane() -> Arc<Lane> {
    let index = ReadyIndex::new();
    let lane = index.lane("q");
    for i in 0..JOBS {
        lane.insert_fair(((i % 16) as u16, i), &name(i % KEYS));
    }
    lane
}

/// Claim latencies (ns) while the main thread lists `LISTINGS` times, `range` keys a hold; and
/// the median time of one listing.
fn run(range: usize) -> (Vec<u64>, u64) {
    let lane = loaded_lane();
    let stop = Arc::new(AtomicBool::new(false));
    let claimer = {
        let (lane, stop) = (lane.clone(), stop.clone());
        std::thread::spawn(move || {
            let lanes = [lane.clone()];
            let mut times = Vec::new();
            let mut next = JOBS;
            while !stop.load(Ordering::Relaxed) {
                let start = Instant::now();
                assert_eq!(claim(&lanes, 1).len(), 1);
                times.push(start.elapsed().as_nanos() as u64);
                lane.insert_fair((8, next), &name(next % KEYS));
                next += 1;
            }
            times
        })
    };
    let mut listings = Vec::new();
    for _ in 0..LISTINGS {
        let start = Instant::now();
        assert_eq!(lane.fair_busiest_by(50, range).len(), 50);
        listings.push(start.elapsed().as_nanos() as u64);
    }
    stop.store(true, Ordering::Relaxed);
    let mut times = claimer.join().unwrap();
    times.sort_unstable();
    listings.sort_unstable();
    (times, listings[listings.len() / 2])
}

fn at(sorted: &[u64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q) as usize] as f64 / 1000.0
}

fn main() {
    println!("| walk | claims | claim p50 / p99.9 / max, us | one listing, ms |");
    println!("|---|---|---|---|");
    for round in 1..=2 {
        for (label, range) in [("in ranges of 4,096", 4096), ("one hold", usize::MAX)] {
            let (times, listing) = run(range);
            println!(
                "| {label} (round {round}) | {} | {:.1} / {:.1} / {:.0} | {:.1} |",
                times.len(),
                at(&times, 0.5),
                at(&times, 0.999),
                at(&times, 1.0),
                listing as f64 / 1e6
            );
        }
    }
}
