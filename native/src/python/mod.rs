//! The PyO3 edge: thin wrappers that turn Python calls into calls on the plain-Rust core.
//!
//! Calls are coarse (a claim returns a batch of ids, a rebuild inserts a batch of keys, a
//! request's job writes and a read's records cross in one call each: `records.rs`), and the one
//! call that can block, `Coalescer.take_batch`, releases the GIL while it waits. Errors map to
//! Python exceptions in one place: `closed_error`, `record_error` and `write_error`.

mod records;
mod wire;

use records::{read_started, Fields};

use crate::coalescer::Coalescer as CoreCoalescer;
use crate::push;
use crate::ready::{claim, has_claimable, Lane, ReadyIndex as CoreReadyIndex};
use crate::record::RecordError;
use crate::timers::TimerSet as CoreTimerSet;
use crate::token::ClaimToken as CoreClaimToken;
use crate::writes::WriteError;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::sync::Arc;
use std::time::Duration;

create_exception!(
    _native,
    CoalescerClosed,
    PyException,
    "The coalescer was closed: no more requests are taken."
);

fn closed_error() -> PyErr {
    CoalescerClosed::new_err("the writer is shutting down and takes no more requests")
}

/// A record that cannot be encoded or decoded: ValueError, which the records module turns into
/// its CorruptRecordError (decoding) or lets through as a bug (encoding).
fn record_error(err: RecordError) -> PyErr {
    PyValueError::new_err(err.to_string())
}

/// A job's write the formats cannot hold (a record's field, or a name past a key's 255 bytes):
/// ValueError, like a record that cannot be decoded.
fn write_error(err: WriteError) -> PyErr {
    PyValueError::new_err(err.to_string())
}

/// Per-queue skip lists of ready jobs ordered by (priority, id).
#[pyclass(module = "pyqueue._native", frozen)]
struct ReadyIndex {
    inner: CoreReadyIndex,
}

#[pymethods]
impl ReadyIndex {
    #[new]
    fn new() -> Self {
        Self {
            inner: CoreReadyIndex::new(),
        }
    }

    fn insert(&self, queue: &str, priority: u16, job_id: u64) {
        self.inner.insert(queue, (priority, job_id));
    }

    /// Insert a job that carries a limit key: it runs under the queue's per-key cap.
    fn insert_keyed(&self, queue: &str, priority: u16, job_id: u64, limit_key: &str) {
        self.inner
            .lane(queue)
            .insert_keyed((priority, job_id), limit_key);
    }

    /// Insert a job that carries a fair key: it waits for its key's turn.
    fn insert_fair(&self, queue: &str, priority: u16, job_id: u64, fair_key: &str) {
        self.inner
            .lane(queue)
            .insert_fair((priority, job_id), fair_key);
    }

    /// A fair key's share of its queue's turns ("": the jobs without a key), 1 to MAX_FAIR_WEIGHT.
    fn set_fair_weight(&self, queue: &str, fair_key: &str, weight: u32) {
        self.inner.lane(queue).set_fair_weight(fair_key, weight);
    }

    /// The weights set on the queue's fair keys (those at 1 are not listed), sorted by key.
    fn fair_weights(&self, queue: &str) -> Vec<(String, u32)> {
        self.inner.lane(queue).fair_weights()
    }

    /// The queue's fair keys with the most jobs waiting, at most `limit`: (key, waiting,
    /// the oldest waiting job's id).
    fn fair_busiest(&self, py: Python<'_>, queue: &str, limit: usize) -> Vec<(String, usize, u64)> {
        let lane = self.inner.lane(queue);
        py.detach(|| lane.fair_busiest(limit))
    }

    /// How many of the queue's fair keys have jobs waiting.
    fn fair_key_count(&self, queue: &str) -> usize {
        self.inner.lane(queue).fair_keys()
    }

    /// Insert many (priority, id) keys into one queue: the start-up rebuild path.
    fn insert_many(&self, queue: &str, keys: Vec<(u16, u64)>) {
        let lane = self.inner.lane(queue);
        for key in keys {
            lane.insert(key);
        }
    }

    /// Mark these lanes as loading from the store: each gives out nothing until `load`.
    fn begin_loading(&self, queues: Vec<String>) {
        for queue in queues {
            self.inner.lane(&queue).begin_loading();
        }
    }

    /// Keys read from the store in (priority, id) order, the jobs with a limit key and those
    /// with a fair key apart; the lane's horizon moves to the last of any.
    #[pyo3(signature = (queue, keys, keyed=Vec::new(), fair=Vec::new()))]
    fn load(
        &self,
        queue: &str,
        keys: Vec<(u16, u64)>,
        keyed: Vec<(u16, u64, String)>,
        fair: Vec<(u16, u64, String)>,
    ) {
        let lane = self.inner.lane(queue);
        let mut last = None;
        for (priority, job_id, limit_key) in keyed {
            lane.insert_keyed((priority, job_id), &limit_key);
            last = last.max(Some((priority, job_id)));
        }
        for (priority, job_id, fair_key) in fair {
            lane.insert_fair((priority, job_id), &fair_key);
            last = last.max(Some((priority, job_id)));
        }
        lane.load(keys);
        lane.advance_horizon(last);
    }

    fn finish_loading(&self, queue: &str) {
        self.inner.lane(queue).finish_loading();
    }

    fn loading(&self) -> Vec<String> {
        self.inner.loading()
    }

    /// Limit the queue: at most `max_running` in flight (0: no cap) and `rate_per_s` jobs a
    /// second with bursts of `burst` (0: no rate); `running` is how many are in flight now.
    fn set_limit(&self, queue: &str, max_running: u64, rate_per_s: f64, burst: f64, running: u64) {
        self.inner
            .lane(queue)
            .limit
            .set(max_running, rate_per_s, burst, running);
    }

    /// At most `cap` jobs of any one limit key of the queue in flight (0: no cap).
    fn set_key_cap(&self, queue: &str, cap: u64) {
        self.inner.lane(queue).set_key_cap(cap);
    }

    /// `n` of the queue's jobs left flight, among them `keyed` (ids of jobs with a limit key);
    /// true if the queue is limited (claimers should look again).
    #[pyo3(signature = (queue, n, keyed=Vec::new()))]
    fn finished(&self, queue: &str, n: u64, keyed: Vec<u64>) -> bool {
        let lane = self.inner.lane(queue);
        lane.limit.finished(n);
        let mut reopened = false;
        for job_id in keyed {
            reopened |= lane.finished_keyed(job_id);
        }
        reopened || lane.limit.is_limited()
    }

    /// How many of the queue's jobs with this limit key are in flight.
    fn key_running(&self, queue: &str, limit_key: &str) -> u64 {
        self.inner.lane(queue).key_running(limit_key)
    }

    /// The queue's jobs in flight as its limit counts them.
    fn running(&self, queue: &str) -> u64 {
        self.inner.lane(queue).limit.running()
    }

    /// Take a ready job out; one queued with a fair key is named with it ("": none).
    #[pyo3(signature = (queue, priority, job_id, fair_key=""))]
    fn remove(&self, queue: &str, priority: u16, job_id: u64, fair_key: &str) -> bool {
        let fair_key = (!fair_key.is_empty()).then_some(fair_key);
        self.inner.remove(queue, &(priority, job_id), fair_key)
    }

    fn count(&self, queue: &str) -> usize {
        self.inner.len(queue)
    }

    fn total(&self) -> usize {
        self.inner.total()
    }

    fn queues(&self) -> Vec<String> {
        self.inner.queues()
    }

    fn set_paused(&self, queue: &str, paused: bool) {
        self.inner.lane(queue).set_paused(paused);
    }

    fn is_paused(&self, queue: &str) -> bool {
        self.inner.lane(queue).is_paused()
    }

    fn clear(&self) {
        self.inner.clear();
    }

    /// A claim handle over a fixed list of queues, resolved once per stream.
    fn select(&self, queues: Vec<String>) -> Selection {
        let lanes = queues.iter().map(|q| self.inner.lane(q)).collect();
        Selection { lanes }
    }
}

/// The queues one Take stream serves.
#[pyclass(module = "pyqueue._native", frozen)]
struct Selection {
    lanes: Vec<Arc<Lane>>,
}

#[pymethods]
impl Selection {
    /// Remove and return up to `max` job ids, most urgent first, across the selected queues.
    fn claim(&self, max: usize) -> Vec<u64> {
        claim(&self.lanes, max)
            .into_iter()
            .map(|(_, (_, id))| id)
            .collect()
    }

    /// Like `claim`, with the index (in the selected queues) of the queue each id came from.
    fn claim_lanes(&self, max: usize) -> Vec<(usize, u64)> {
        claim(&self.lanes, max)
            .into_iter()
            .map(|(lane, (_, id))| (lane, id))
            .collect()
    }

    /// Milliseconds until a rate-limited queue with ready jobs gets its next token (0: none is
    /// waiting on a rate).
    fn limit_wait_ms(&self) -> u64 {
        self.lanes
            .iter()
            .filter(|lane| !lane.is_paused() && !lane.is_empty())
            .map(|lane| lane.limit.wait_ms())
            .filter(|&ms| ms > 0)
            .min()
            .unwrap_or(0)
    }

    /// Whether `claim` would give out a job now.
    fn has_ready(&self) -> bool {
        has_claimable(&self.lanes)
    }
}

/// (due time in ms, id) keys: the scheduled set and the lease deadlines.
#[pyclass(module = "pyqueue._native", frozen)]
struct TimerSet {
    inner: CoreTimerSet,
}

#[pymethods]
impl TimerSet {
    #[new]
    fn new() -> Self {
        Self {
            inner: CoreTimerSet::new(),
        }
    }

    fn insert(&self, due_ms: i64, job_id: u64) {
        self.inner.insert((due_ms, job_id));
    }

    fn insert_many(&self, keys: Vec<(i64, u64)>) {
        for key in keys {
            self.inner.insert(key);
        }
    }

    fn remove(&self, due_ms: i64, job_id: u64) -> bool {
        self.inner.remove(&(due_ms, job_id))
    }

    fn next_due(&self) -> Option<i64> {
        self.inner.next_due()
    }

    fn pop_due(&self, now_ms: i64, max: usize) -> Vec<(i64, u64)> {
        self.inner.pop_due(now_ms, max)
    }

    fn clear(&self) {
        self.inner.clear();
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// One per "jobs available" event: only the stream that flips it goes to the store.
#[pyclass(module = "pyqueue._native", frozen)]
struct ClaimToken {
    inner: CoreClaimToken,
}

#[pymethods]
impl ClaimToken {
    #[new]
    fn new() -> Self {
        Self {
            inner: CoreClaimToken::new(),
        }
    }

    fn try_claim(&self) -> bool {
        self.inner.try_claim()
    }

    #[getter]
    fn claimed(&self) -> bool {
        self.inner.is_claimed()
    }
}

/// The single writer's inbox: push from anywhere, take everything waiting in one batch.
#[pyclass(module = "pyqueue._native", frozen)]
struct Coalescer {
    inner: CoreCoalescer<Py<PyAny>>,
}

#[pymethods]
impl Coalescer {
    #[new]
    fn new() -> Self {
        Self {
            inner: CoreCoalescer::new(),
        }
    }

    fn push(&self, item: Py<PyAny>) -> PyResult<()> {
        self.inner.push(item).map_err(|_| closed_error())
    }

    /// Block (without the GIL) until something is waiting, then return up to `max` items.
    #[pyo3(signature = (max, timeout=None))]
    fn take_batch(&self, py: Python<'_>, max: usize, timeout: Option<f64>) -> Vec<Py<PyAny>> {
        let timeout = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        py.detach(|| self.inner.take_batch(max, timeout))
    }

    fn close(&self) {
        self.inner.close();
    }

    /// The consumer is done with `n` taken items.
    fn finish(&self, n: usize) {
        self.inner.finish(n);
    }

    /// Items pushed and not yet finished (queued, or taken and being handled).
    #[getter]
    fn unfinished(&self) -> usize {
        self.inner.unfinished()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// A push's bytes, a `TakeResponse` with a `JobBatch`: each of `views` (JobViews of plain jobs:
/// no unique key, no options, no result) and `ack_result`, an `AckResult` already serialised
/// (empty: none).
#[pyfunction]
fn encode_push<'py>(
    views: &Bound<'py, PyList>,
    ack_result: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let py = views.py();
    let mut jobs = Vec::with_capacity(views.len());
    for view in views.iter() {
        let record = view.getattr(intern!(py, "record"))?;
        let payload = view
            .getattr(intern!(py, "payload"))?
            .cast_into::<PyBytes>()?;
        let fields = Fields::read(&record)?;
        let r = fields.record(read_started(&record)?)?;
        let mut encoded =
            Vec::with_capacity(64 + payload.as_bytes().len() + r.queue.len() + r.job_type.len());
        push::job(&mut encoded, fields.id, &r, payload.as_bytes());
        jobs.push(encoded);
    }
    Ok(PyBytes::new(py, &push::take_response(&jobs, ack_result)))
}

/// The `rejected` entries of an AckResult or FailResult, one per id, all with `code` and
/// `message` (native/src/refusals.rs). Releases the GIL while it writes.
#[pyfunction]
fn encode_refusals<'py>(
    py: Python<'py>,
    ids: Vec<u64>,
    code: &str,
    message: &str,
) -> Bound<'py, PyBytes> {
    let out = py.detach(|| crate::refusals::encode(&ids, code, message));
    PyBytes::new(py, &out)
}

/// A damaged RocksDB write-ahead log with every damaged span dropped (native/src/wal.rs):
/// (the new log's bytes, logical records kept, damaged spans dropped). Releases the GIL.
#[pyfunction]
fn salvage_wal<'py>(py: Python<'py>, log: &[u8]) -> (Bound<'py, PyBytes>, usize, usize) {
    let (salvaged, kept, dropped) = py.detach(|| crate::wal::salvage(log));
    (PyBytes::new(py, &salvaged), kept, dropped)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ReadyIndex>()?;
    m.add_class::<Selection>()?;
    m.add_class::<TimerSet>()?;
    m.add_class::<ClaimToken>()?;
    m.add_class::<Coalescer>()?;
    records::register(m)?;
    wire::register(m)?;
    m.add_function(wrap_pyfunction!(encode_push, m)?)?;
    m.add_function(wrap_pyfunction!(encode_refusals, m)?)?;
    m.add_function(wrap_pyfunction!(salvage_wal, m)?)?;
    m.add("CoalescerClosed", m.py().get_type::<CoalescerClosed>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_FAIR_WEIGHT", crate::fair::MAX_WEIGHT)?;
    Ok(())
}
