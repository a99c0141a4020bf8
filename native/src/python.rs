//! The PyO3 edge: thin wrappers that turn Python calls into calls on the plain-Rust core.
//!
//! Calls are coarse (a claim returns a batch of ids, a rebuild inserts a batch of keys, a record
//! is encoded or decoded whole), and the one call that can block, `Coalescer.take_batch`, releases
//! the GIL while it waits. Errors map to Python exceptions in one place: `closed_error` and
//! `record_error`.

use crate::coalescer::Coalescer as CoreCoalescer;
use crate::keys::{self, Indexed, NameTooLong};
use crate::push;
use crate::ready::{claim, has_claimable, Lane, ReadyIndex as CoreReadyIndex};
use crate::record::{saturate, Record, RecordError};
use crate::timers::TimerSet as CoreTimerSet;
use crate::token::ClaimToken as CoreClaimToken;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOverflowError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
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

/// A name the key format cannot hold: ValueError, as the Python codec's `bytes((len,))` raised.
fn key_error(err: NameTooLong) -> PyErr {
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

    /// Keys read from the store in (priority, id) order, the jobs with a limit key apart; the
    /// lane's horizon moves to the last of either.
    #[pyo3(signature = (queue, keys, keyed=Vec::new()))]
    fn load(&self, queue: &str, keys: Vec<(u16, u64)>, keyed: Vec<(u16, u64, String)>) {
        let lane = self.inner.lane(queue);
        let mut last = None;
        for (priority, job_id, limit_key) in keyed {
            lane.insert_keyed((priority, job_id), &limit_key);
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

    fn remove(&self, queue: &str, priority: u16, job_id: u64) -> bool {
        self.inner.remove(queue, &(priority, job_id))
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

/// A JobRecord's attributes, read once: its strings stay Python strings, borrowed by `record`.
struct Fields<'py> {
    id: u64,
    queue: Bound<'py, PyString>,
    job_type: Bound<'py, PyString>,
    content_type: Bound<'py, PyString>,
    unique_key: Bound<'py, PyString>,
    limit_key: Bound<'py, PyString>,
    options: Bound<'py, PyBytes>,
    numbers: [i64; 12],
}

impl<'py> Fields<'py> {
    fn read(record: &Bound<'py, PyAny>) -> PyResult<Self> {
        let py = record.py();
        let text = |name: &Bound<'py, PyString>| -> PyResult<Bound<'py, PyString>> {
            Ok(record.getattr(name)?.cast_into::<PyString>()?)
        };
        let int =
            |name: &Bound<'py, PyString>| -> PyResult<i64> { record.getattr(name)?.extract() };
        Ok(Fields {
            id: record.getattr(intern!(py, "id"))?.extract()?,
            queue: text(intern!(py, "queue"))?,
            job_type: text(intern!(py, "type"))?,
            content_type: text(intern!(py, "content_type"))?,
            unique_key: text(intern!(py, "unique_key"))?,
            limit_key: text(intern!(py, "limit_key"))?,
            options: record
                .getattr(intern!(py, "options"))?
                .cast_into::<PyBytes>()?,
            numbers: [
                int(intern!(py, "status"))?,
                int(intern!(py, "priority"))?,
                int(intern!(py, "attempts"))?,
                int(intern!(py, "max_retries"))?,
                int(intern!(py, "lost"))?,
                int(intern!(py, "errors"))?,
                int(intern!(py, "lease"))?,
                int(intern!(py, "timeout_ms"))?,
                int(intern!(py, "created_ms"))?,
                int(intern!(py, "updated_ms"))?,
                int(intern!(py, "run_at_ms"))?,
                int(intern!(py, "expires_ms"))?,
            ],
        })
    }

    fn record(&self, started_ms: i64) -> PyResult<Record<'_>> {
        let [status, priority, attempts, max_retries, lost, errors, lease, timeout_ms, created_ms, updated_ms, run_at_ms, expires_ms] =
            self.numbers;
        let narrow =
            |value: i64| PyOverflowError::new_err(format!("{value} is out of range for its field"));
        Ok(Record {
            status: u8::try_from(status).map_err(|_| narrow(status))?,
            priority: u16::try_from(priority).map_err(|_| narrow(priority))?,
            attempts: saturate(u64::try_from(attempts).map_err(|_| narrow(attempts))?),
            max_retries: i16::try_from(max_retries).map_err(|_| narrow(max_retries))?,
            lost: saturate(u64::try_from(lost).map_err(|_| narrow(lost))?),
            errors: saturate(u64::try_from(errors).map_err(|_| narrow(errors))?),
            lease: u32::try_from(lease).map_err(|_| narrow(lease))?,
            timeout_ms: u32::try_from(timeout_ms).map_err(|_| narrow(timeout_ms))?,
            created_ms,
            updated_ms,
            run_at_ms,
            expires_ms,
            queue: self.queue.to_str()?,
            job_type: self.job_type.to_str()?,
            content_type: self.content_type.to_str()?,
            unique_key: self.unique_key.to_str()?,
            options: self.options.as_bytes(),
            started_ms,
            limit_key: self.limit_key.to_str()?,
        })
    }
}

fn read_started(record: &Bound<'_, PyAny>) -> PyResult<i64> {
    record
        .getattr(intern!(record.py(), "started_ms"))?
        .extract()
}

/// A record's bytes and what its index entries derive from.
fn encoded<'a>(
    fields: &'a Fields<'_>,
    started_ms: i64,
) -> PyResult<(Vec<u8>, Indexed<'a>, &'a str)> {
    let r = fields.record(started_ms)?;
    let encoded = r.encode().map_err(record_error)?;
    let indexed = Indexed {
        status: r.status,
        priority: r.priority,
        timer_ms: Indexed::timer(r.status, r.run_at_ms, r.expires_ms),
        queue: r.queue,
    };
    Ok((encoded, indexed, r.limit_key))
}

/// Encode a JobRecord (any object with its attributes) in the record format, version 1.
#[pyfunction]
fn encode_record<'py>(record: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let fields = Fields::read(record)?;
    let encoded = fields
        .record(read_started(record)?)?
        .encode()
        .map_err(record_error)?;
    Ok(PyBytes::new(record.py(), &encoded))
}

/// A new job's writes: (job key, encoded record, payload key, status key, status value, queue
/// key, type key).
#[pyfunction]
fn create_entries<'py>(record: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let py = record.py();
    let fields = Fields::read(record)?;
    let (value, at, limit_key) = encoded(&fields, read_started(record)?)?;
    let id = fields.id;
    let bytes = |b: &[u8]| PyBytes::new(py, b).into_any();
    PyTuple::new(
        py,
        [
            bytes(&keys::job_key(id)),
            bytes(&value),
            bytes(&keys::payload_key(id)),
            bytes(&keys::status_key(at.status, id, at.queue, at.priority).map_err(key_error)?),
            bytes(&keys::status_value(
                at.priority,
                at.timer_ms,
                at.queue,
                limit_key,
            )),
            bytes(&keys::queue_key(at.queue, at.status, id).map_err(key_error)?),
            bytes(&keys::type_key(fields.job_type.to_str()?, id).map_err(key_error)?),
        ],
    )
}

/// A changed record's writes, against what its entries derived from before: (job key, encoded
/// record, status key to delete, status key to put, its value, queue key to delete, queue key to
/// put), each None where nothing is to be done.
#[pyfunction]
fn save_entries<'py>(
    record: &Bound<'py, PyAny>,
    old_status: u8,
    old_priority: u16,
    old_timer_ms: i64,
    old_queue: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let py = record.py();
    let fields = Fields::read(record)?;
    let (value, after, limit_key) = encoded(&fields, read_started(record)?)?;
    let before = Indexed {
        status: old_status,
        priority: old_priority,
        timer_ms: old_timer_ms,
        queue: old_queue,
    };
    let id = fields.id;
    let moves = keys::moves(id, before, after, limit_key).map_err(key_error)?;
    let bytes = |b: &[u8]| PyBytes::new(py, b).into_any();
    let maybe = |b: Option<&Vec<u8>>| b.map_or_else(|| py.None().into_bound(py), |b| bytes(b));
    let (put_status, status_value) = match &moves.put_status {
        Some((key, value)) => (Some(key), Some(value)),
        None => (None, None),
    };
    let (delete_queue, put_queue) = match &moves.queue {
        Some((old, new)) => (Some(old), Some(new)),
        None => (None, None),
    };
    PyTuple::new(
        py,
        [
            bytes(&keys::job_key(id)),
            bytes(&value),
            maybe(moves.delete_status.as_ref()),
            maybe(put_status),
            maybe(status_value),
            maybe(delete_queue),
            maybe(put_queue),
        ],
    )
}

/// The keys a job's deletion removes besides its error and result records: (job key, payload
/// key, status key, queue key, type key).
#[pyfunction]
fn delete_keys<'py>(record: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let py = record.py();
    let id: u64 = record.getattr(intern!(py, "id"))?.extract()?;
    let status: u8 = record.getattr(intern!(py, "status"))?.extract()?;
    let priority: u16 = record.getattr(intern!(py, "priority"))?.extract()?;
    let queue = record
        .getattr(intern!(py, "queue"))?
        .cast_into::<PyString>()?;
    let job_type = record
        .getattr(intern!(py, "type"))?
        .cast_into::<PyString>()?;
    let queue = queue.to_str()?;
    let bytes = |b: &[u8]| PyBytes::new(py, b).into_any();
    PyTuple::new(
        py,
        [
            bytes(&keys::job_key(id)),
            bytes(&keys::payload_key(id)),
            bytes(&keys::status_key(status, id, queue, priority).map_err(key_error)?),
            bytes(&keys::queue_key(queue, status, id).map_err(key_error)?),
            bytes(&keys::type_key(job_type.to_str()?, id).map_err(key_error)?),
        ],
    )
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

/// Decode a record into the JobRecord constructor's arguments, in its field order:
/// (job_id, status, queue, type, priority, created_ms, updated_ms, attempts, max_retries, lost,
/// errors, lease, timeout_ms, run_at_ms, expires_ms, content_type, unique_key, options,
/// started_ms, limit_key). `statuses[code]` is what a status code becomes (None: unknown).
#[pyfunction]
fn decode_record<'py>(
    job_id: &Bound<'py, PyAny>,
    raw: &[u8],
    statuses: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyTuple>> {
    let py = job_id.py();
    let r = Record::decode(raw).map_err(record_error)?;
    let status = statuses
        .get_item(r.status as usize)
        .ok()
        .filter(|s| !s.is_none())
        .ok_or_else(|| PyValueError::new_err(format!("unknown status code {}", r.status)))?;
    let items: [Bound<'py, PyAny>; 20] = [
        job_id.clone(),
        status,
        PyString::new(py, r.queue).into_any(),
        PyString::new(py, r.job_type).into_any(),
        r.priority.into_bound_py_any(py)?,
        r.created_ms.into_bound_py_any(py)?,
        r.updated_ms.into_bound_py_any(py)?,
        r.attempts.into_bound_py_any(py)?,
        r.max_retries.into_bound_py_any(py)?,
        r.lost.into_bound_py_any(py)?,
        r.errors.into_bound_py_any(py)?,
        r.lease.into_bound_py_any(py)?,
        r.timeout_ms.into_bound_py_any(py)?,
        r.run_at_ms.into_bound_py_any(py)?,
        r.expires_ms.into_bound_py_any(py)?,
        PyString::new(py, r.content_type).into_any(),
        PyString::new(py, r.unique_key).into_any(),
        PyBytes::new(py, r.options).into_any(),
        r.started_ms.into_bound_py_any(py)?,
        PyString::new(py, r.limit_key).into_any(),
    ];
    PyTuple::new(py, items)
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
    m.add_function(wrap_pyfunction!(encode_record, m)?)?;
    m.add_function(wrap_pyfunction!(decode_record, m)?)?;
    m.add_function(wrap_pyfunction!(create_entries, m)?)?;
    m.add_function(wrap_pyfunction!(save_entries, m)?)?;
    m.add_function(wrap_pyfunction!(delete_keys, m)?)?;
    m.add_function(wrap_pyfunction!(encode_push, m)?)?;
    m.add_function(wrap_pyfunction!(encode_refusals, m)?)?;
    m.add_function(wrap_pyfunction!(salvage_wal, m)?)?;
    m.add("CoalescerClosed", m.py().get_type::<CoalescerClosed>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
