//! A gRPC transport in plain Rust: HTTP/2 (h2 on tokio) with gRPC's framing and statuses.
//!
//! The hot calls of the official client (one enqueue per call, on a kept-open stream) cost
//! grpcio's Python layer about 0.12 ms of CPU each, as much as a whole enqueue costs the fastest
//! Redis-backed peer. Here a call is one GIL-free round trip: Python hands over the request's
//! bytes and gets the answer's bytes (or a status) back. Messages are never decoded here; the
//! protobuf stays Python's (upb), so this module knows no proto.
//!
//! - `frame`: gRPC's length-prefixed messages;
//! - `status`: grpc-status and grpc-message, in trailers or a trailers-only answer;
//! - `channel`: one HTTP/2 connection, reopened when it breaks; unary calls and bidi streams;
//! - `front`: the server's port for Enqueue and EnqueueStream, requests handed to Python in batches;
//! - `echo`: a server that answers every message with the same short one, the floor in
//!   `bench/grpc_floor.py`.

pub mod channel;
pub mod echo;
pub mod frame;
pub mod front;
pub mod status;

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;
use tokio::runtime::Runtime;

static OWNER: AtomicU32 = AtomicU32::new(0);
static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());
static STARTING: Mutex<()> = Mutex::new(());

/// The process's one runtime for the transport: one worker thread drives every connection, and
/// callers block on their own call (with the GIL released), so a call never waits for a pool.
///
/// A forked child (a Celery prefork worker, a multiprocessing pool) inherits the parent's runtime
/// without its thread, so a call there would wait forever: each process starts its own on its
/// first call, and the parent's is left alone (it cannot be shut down from a copy of its memory).
pub fn runtime() -> &'static Runtime {
    let pid = std::process::id();
    if OWNER.load(Ordering::Acquire) == pid {
        // SAFETY: set below before OWNER names this process, and never freed.
        return unsafe { &*RUNTIME.load(Ordering::Acquire) };
    }
    let _starting = STARTING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if OWNER.load(Ordering::Acquire) != pid {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("pyqueue-wire")
            .enable_all()
            .build()
            .expect("the transport's runtime starts");
        RUNTIME.store(Box::into_raw(Box::new(runtime)), Ordering::Release);
        OWNER.store(pid, Ordering::Release);
    }
    // SAFETY: as above.
    unsafe { &*RUNTIME.load(Ordering::Acquire) }
}

#[cfg(test)]
mod tests {
    use super::runtime;

    #[test]
    fn one_runtime_per_process() {
        let first: *const _ = runtime();
        assert!(std::ptr::eq(first, runtime()));
        assert_eq!(runtime().block_on(async { 7 }), 7);
    }
}
