//! Records across the boundary, whole and in batches: a request's job writes in one call
//! (`job_writes`), a read's records decoded in one call (`decode_records`).

use super::{record_error, write_error};
use crate::keys::{self, Indexed};
use crate::record::{saturate, Record};
use crate::writes::JobWrites;
use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

/// A JobRecord's attributes, read once: its strings stay Python strings, borrowed by `record`.
pub(super) struct Fields<'py> {
    pub(super) id: u64,
    queue: Bound<'py, PyString>,
    job_type: Bound<'py, PyString>,
    content_type: Bound<'py, PyString>,
    unique_key: Bound<'py, PyString>,
    limit_key: Bound<'py, PyString>,
    fair_key: Bound<'py, PyString>,
    options: Bound<'py, PyBytes>,
    numbers: [i64; 12],
}

impl<'py> Fields<'py> {
    pub(super) fn read(record: &Bound<'py, PyAny>) -> PyResult<Self> {
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
            fair_key: text(intern!(py, "fair_key"))?,
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

    pub(super) fn record(&self, started_ms: i64) -> PyResult<Record<'_>> {
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
            fair_key: self.fair_key.to_str()?,
        })
    }
}

pub(super) fn read_started(record: &Bound<'_, PyAny>) -> PyResult<i64> {
    record
        .getattr(intern!(record.py(), "started_ms"))?
        .extract()
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

/// What a noted job's stored entries derive from: (status, priority, timer_ms, queue).
fn stored<'py>(before: &Bound<'py, PyAny>) -> PyResult<(u8, u16, i64, Bound<'py, PyString>)> {
    before.extract()
}

/// A request's job writes (native/src/writes.rs), from `changes`: for each job, (record, before,
/// payload, deleted). `before` is None for a job created in this request (whose payload is then
/// put under its key), else the (status, priority, timer_ms, queue) its stored entries derive
/// from; `deleted` says the job goes. Returns (data puts, index puts, data deletes, index
/// deletes), the puts as (key, value) pairs.
#[pyfunction]
fn job_writes<'py>(py: Python<'py>, changes: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyTuple>> {
    let mut writes = JobWrites::default();
    let mut payloads: Vec<(u64, Bound<'py, PyAny>)> = Vec::new();
    for change in changes.iter() {
        let change = change.cast_into::<PyTuple>()?;
        let record = change.get_item(0)?;
        let before = change.get_item(1)?;
        if change.get_item(3)?.is_truthy()? {
            let (status, priority, timer_ms, queue) = stored(&before)?;
            let id: u64 = record.getattr(intern!(py, "id"))?.extract()?;
            let job_type = record
                .getattr(intern!(py, "type"))?
                .cast_into::<PyString>()?;
            let at = Indexed {
                status,
                priority,
                timer_ms,
                queue: queue.to_str()?,
            };
            writes
                .deleted(id, job_type.to_str()?, at)
                .map_err(write_error)?;
            continue;
        }
        let fields = Fields::read(&record)?;
        let r = fields.record(read_started(&record)?)?;
        if before.is_none() {
            writes.created(fields.id, &r).map_err(write_error)?;
            payloads.push((fields.id, change.get_item(2)?));
        } else {
            let (status, priority, timer_ms, queue) = stored(&before)?;
            let at = Indexed {
                status,
                priority,
                timer_ms,
                queue: queue.to_str()?,
            };
            writes.saved(fields.id, &r, at).map_err(write_error)?;
        }
    }
    let pair = |(key, value): (Vec<u8>, Vec<u8>)| {
        PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])
    };
    let data = PyList::empty(py);
    for put in writes.data {
        data.append(pair(put)?)?;
    }
    for (id, payload) in payloads {
        let key = PyBytes::new(py, &keys::payload_key(id)).into_any();
        data.append(PyTuple::new(py, [key, payload])?)?;
    }
    let index = PyList::empty(py);
    for put in writes.index {
        index.append(pair(put)?)?;
    }
    let keys_of = |keys: &[Vec<u8>]| PyList::new(py, keys.iter().map(|key| PyBytes::new(py, key)));
    PyTuple::new(
        py,
        [
            data.into_any(),
            index.into_any(),
            keys_of(&writes.data_deletes)?.into_any(),
            keys_of(&writes.deletes)?.into_any(),
        ],
    )
}

/// A record as the JobRecord constructor's arguments, in its field order: (job_id, status,
/// queue, type, priority, created_ms, updated_ms, attempts, max_retries, lost, errors, lease,
/// timeout_ms, run_at_ms, expires_ms, content_type, unique_key, options, started_ms,
/// limit_key, fair_key). `statuses[code]` is what a status code becomes (None: unknown). The tuple stays
/// on this side: `decode_records` hands it to the constructor.
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
    let items: [Bound<'py, PyAny>; 21] = [
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
        PyString::new(py, r.fair_key).into_any(),
    ];
    PyTuple::new(py, items)
}

/// Records read in one batch, made with `cls` (JobRecord) from their fields: None where `raws`
/// holds None (no such job). A damaged record raises ValueError (the caller decodes one at a
/// time to name it).
#[pyfunction]
fn decode_records<'py>(
    cls: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyList>,
    raws: &Bound<'py, PyList>,
    statuses: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyList>> {
    let py = cls.py();
    let out = PyList::empty(py);
    for (job_id, raw) in ids.iter().zip(raws.iter()) {
        if raw.is_none() {
            out.append(py.None())?;
            continue;
        }
        let raw = raw.cast_into::<PyBytes>()?;
        let fields = decode_record(&job_id, raw.as_bytes(), statuses)?;
        out.append(cls.call1(fields)?)?;
    }
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_record, m)?)?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(job_writes, m)?)?;
    Ok(())
}
