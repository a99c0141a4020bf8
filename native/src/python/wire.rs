//! The native transport's edge: a channel and its kept-open streams, bytes in and bytes out,
//! every call with the GIL released. A call that ends without an answer raises `WireError`
//! with (kind, code, message); pyqueue/client/native_wire.py maps it to pyqueue's errors.

use crate::wire::channel::{CallError, Channel as CoreChannel, Stream as CoreStream};
use crate::wire::echo;
use crate::wire::front::{Front, FrontConfig};
use crate::wire::status::Status;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::{Arc, Mutex};
use std::time::Duration;

create_exception!(
    _native,
    WireError,
    PyException,
    "A call on the native transport ended without an answer: args are (kind, code, message)."
);

fn call_error(err: CallError) -> PyErr {
    let (kind, code, message) = match err {
        CallError::Status(s) => ("status", s.code, s.message),
        CallError::Unavailable {
            message,
            sent: false,
        } => ("unsent", 14, message),
        CallError::Unavailable {
            message,
            sent: true,
        } => ("broken", 14, message),
        CallError::DeadlineExceeded => (
            "deadline",
            4,
            "no answer within the call's time".to_string(),
        ),
        CallError::EndedUnanswered => (
            "ended",
            0,
            "the server ended the stream without an answer".to_string(),
        ),
    };
    WireError::new_err((kind, code, message))
}

fn duration(timeout_s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(timeout_s).map_err(|_| {
        PyValueError::new_err(format!("timeout {timeout_s} is not a number of seconds"))
    })
}

/// One HTTP/2 connection to a gRPC server, dialled on the first call and again after it breaks.
#[pyclass(module = "pyqueue._native", frozen)]
struct WireChannel {
    inner: Arc<CoreChannel>,
}

#[pymethods]
impl WireChannel {
    #[new]
    #[pyo3(signature = (address, metadata, max_message))]
    fn new(address: &str, metadata: Vec<(String, String)>, max_message: usize) -> PyResult<Self> {
        let inner =
            CoreChannel::new(address, &metadata, max_message).map_err(PyValueError::new_err)?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    fn unary<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        message: &[u8],
        timeout_s: f64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let timeout = duration(timeout_s)?;
        let answer = py
            .detach(|| self.inner.unary(path, message, timeout))
            .map_err(call_error)?;
        Ok(PyBytes::new(py, &answer))
    }

    fn open_stream(&self, py: Python<'_>, path: &str) -> PyResult<WireStream> {
        let stream = py
            .detach(|| self.inner.open_stream(path))
            .map_err(call_error)?;
        Ok(WireStream {
            channel: self.inner.clone(),
            stream: Mutex::new(stream),
        })
    }
}

/// A bidi stream kept open on a channel: one message out, its answer back. Over after an error.
#[pyclass(module = "pyqueue._native", frozen)]
struct WireStream {
    channel: Arc<CoreChannel>,
    stream: Mutex<CoreStream>,
}

#[pymethods]
impl WireStream {
    fn exchange<'py>(
        &self,
        py: Python<'py>,
        message: &[u8],
        timeout_s: f64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let timeout = duration(timeout_s)?;
        let answer = py
            .detach(|| {
                let mut stream = self.stream.lock().expect("the stream lock");
                stream.exchange(&self.channel, message, timeout)
            })
            .map_err(call_error)?;
        Ok(PyBytes::new(py, &answer))
    }

    fn close(&self, py: Python<'_>) {
        py.detach(|| self.stream.lock().expect("the stream lock").close());
    }

    /// A header of the server's response, once the first answer came.
    fn header(&self, name: &str) -> Option<String> {
        self.stream.lock().expect("the stream lock").header(name)
    }
}

/// The server's port for Enqueue and EnqueueStream (wire/front.rs): requests are taken in
/// batches when `fileno()` is readable and answered by (call, seq).
#[pyclass(module = "pyqueue._native", frozen)]
struct WireFront {
    inner: Front,
}

type Incoming<'py> = (u64, u64, bool, Option<String>, String, Bound<'py, PyBytes>);

#[pymethods]
impl WireFront {
    #[new]
    #[pyo3(signature = (address, max_message, max_connections, ping_every_s, ping_timeout_s))]
    fn new(
        py: Python<'_>,
        address: &str,
        max_message: usize,
        max_connections: usize,
        ping_every_s: f64,
        ping_timeout_s: f64,
    ) -> PyResult<Self> {
        let config = FrontConfig {
            max_message,
            max_connections,
            ping_every: duration(ping_every_s)?,
            ping_timeout: duration(ping_timeout_s)?,
        };
        let inner = py
            .detach(|| Front::bind(address, config))
            .map_err(|e| PyOSError::new_err(format!("cannot listen on {address}: {e}")))?;
        Ok(Self { inner })
    }

    #[getter]
    fn port(&self) -> u16 {
        self.inner.port()
    }

    fn fileno(&self) -> i32 {
        self.inner.wake_fd()
    }

    /// Every request waiting: (call, seq, streaming, authorization, peer, message).
    fn drain<'py>(&self, py: Python<'py>) -> Vec<Incoming<'py>> {
        let incoming = self.inner.drain();
        incoming
            .into_iter()
            .map(|i| {
                let message = PyBytes::new(py, &i.message);
                (i.call, i.seq, i.streaming, i.authorization, i.peer, message)
            })
            .collect()
    }

    fn answer(&self, call: u64, seq: u64, message: &[u8]) {
        self.inner
            .answer(call, seq, bytes::Bytes::copy_from_slice(message));
    }

    fn end(&self, call: u64, code: u32, message: String) {
        self.inner.end(call, Status::new(code, message));
    }

    fn open_calls(&self) -> usize {
        self.inner.open_calls()
    }

    fn close(&self) {
        self.inner.close();
    }
}

/// Serve the echo (every message answered `ok`) on `address`; the port. For the floor bench.
#[pyfunction]
fn serve_echo(py: Python<'_>, address: &str) -> PyResult<u16> {
    py.detach(|| echo::serve(address))
        .map_err(|e| PyOSError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<WireChannel>()?;
    m.add_class::<WireStream>()?;
    m.add_class::<WireFront>()?;
    m.add_function(wrap_pyfunction!(serve_echo, m)?)?;
    m.add("WireError", m.py().get_type::<WireError>())?;
    Ok(())
}
