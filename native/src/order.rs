//! The order of ready jobs, shared by the ready set (`ready.rs`) and its per-key fair lanes
//! (`keyed.rs`), so that neither needs the other's module for it.

/// (priority, job id): the order in which ready jobs run.
pub type ReadyKey = (u16, u64);
