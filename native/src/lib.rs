//! The hot path of pyqueue, in plain Rust.
//!
//! Every type here is usable (and tested) without Python. The PyO3 edge in `python.rs` is a thin
//! wrapper compiled only with the `python` feature, which maturin enables.

pub mod coalescer;
pub mod fair;
pub mod keyed;
pub mod keys;
pub mod limits;
pub mod order;
pub mod push;
pub mod ready;
pub mod record;
pub mod refusals;
pub mod timers;
pub mod token;
pub mod wal;
pub mod wire;
pub mod writes;

#[cfg(feature = "python")]
mod python;
