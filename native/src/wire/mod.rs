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
//! - `echo`: a server that answers every message with the same short one, the floor in
//!   `bench/grpc_floor.py`.

pub mod channel;
pub mod echo;
pub mod frame;
pub mod status;

use std::sync::OnceLock;
use tokio::runtime::Runtime;

/// The process's one runtime for the transport: one worker thread drives every connection, and
/// callers block on their own call (with the GIL released), so a call never waits for a pool.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("pyqueue-wire")
            .enable_all()
            .build()
            .expect("the transport's runtime starts")
    })
}
