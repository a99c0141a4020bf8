"""Type stubs for pyqueue._native, the Rust hot path (crate in native/).

Private: the server uses it; applications use pyqueue.Client. Every call is thread-safe.
"""

from typing import Any, TypeVar, final

_R = TypeVar("_R")

__all__ = [
    "MAX_FAIR_WEIGHT",
    "ClaimToken",
    "Coalescer",
    "CoalescerClosed",
    "ReadyIndex",
    "Selection",
    "TimerSet",
    "WireChannel",
    "WireError",
    "WireFront",
    "WireStream",
    "__version__",
    "decode_records",
    "encode_push",
    "encode_record",
    "encode_refusals",
    "job_writes",
    "salvage_wal",
    "serve_echo",
]

__version__: str  # the native crate's version
MAX_FAIR_WEIGHT: int  # the largest weight ReadyIndex.set_fair_weight keeps (larger ones are clamped)

class CoalescerClosed(Exception):
    """Raised by Coalescer.push once the coalescer is closed."""

@final
class ReadyIndex:
    """Per-queue lock-free skip lists of ready jobs, ordered by (priority, id)."""

    def __init__(self) -> None: ...
    def insert(self, queue: str, priority: int, job_id: int) -> None: ...
    def insert_keyed(self, queue: str, priority: int, job_id: int, limit_key: str) -> None:
        """Insert a job that carries a limit key: it runs under the queue's per-key cap."""
    def insert_fair(self, queue: str, priority: int, job_id: int, fair_key: str) -> None:
        """Insert a job that carries a fair key: within its priority it waits for its key's turn
        (the keys take turns in proportion to their weights; FIFO within a key)."""
    def set_fair_weight(self, queue: str, fair_key: str, weight: int) -> None:
        """A fair key's share of its queue's turns ("": the jobs without a key), 1 to 10,000;
        it takes effect on the next claim."""
    def fair_weights(self, queue: str) -> list[tuple[str, int]]:
        """The weights set on the queue's fair keys (those at 1 are not listed), sorted by key."""
    def fair_busiest(self, queue: str, limit: int) -> list[tuple[str, int, int]]:
        """The queue's fair keys with the most jobs waiting, at most `limit`: (key, waiting, the
        oldest waiting job's id)."""
    def fair_key_count(self, queue: str) -> int:
        """How many of the queue's fair keys have jobs waiting."""
    def insert_many(self, queue: str, keys: list[tuple[int, int]]) -> None:
        """Insert many (priority, id) keys into one queue (the start-up rebuild)."""
    def begin_loading(self, queues: list[str]) -> None:
        """Mark these lanes as loading from the store: each gives out nothing until `load`."""
    def load(
        self,
        queue: str,
        keys: list[tuple[int, int]],
        keyed: list[tuple[int, int, str]] = ...,
        fair: list[tuple[int, int, str]] = ...,
    ) -> None:
        """Insert keys read from the store in (priority, id) order, with the jobs that carry a
        limit key apart as (priority, id, limit key), and those with a fair key as (priority, id,
        fair key). While the lane is loading, its horizon moves to the last key of any: claims
        give out nothing beyond it, across lanes too."""
    def finish_loading(self, queue: str) -> None:
        """The store's range is read to its end: every key of the lane may be given out."""
    def loading(self) -> list[str]:
        """The queues whose lanes are still loading, sorted."""
    def set_limit(self, queue: str, max_running: int, rate_per_s: float, burst: float, running: int) -> None:
        """At most `max_running` in flight (0: no cap), `rate_per_s` a second in bursts of `burst`
        (0: no rate); `running` is how many of the queue's jobs are in flight now."""
    def set_key_cap(self, queue: str, cap: int) -> None:
        """At most `cap` jobs of any one limit key of the queue in flight (0: no cap)."""
    def finished(self, queue: str, n: int, keyed: list[int] = ...) -> bool:
        """`n` of the queue's jobs left flight, among them `keyed` (the ids of those with a limit
        key); True if the queue is limited (claimers should look again)."""
    def key_running(self, queue: str, limit_key: str) -> int:
        """How many of the queue's jobs with this limit key are in flight."""
    def running(self, queue: str) -> int:
        """The queue's jobs in flight as its limit counts them."""
    def remove(self, queue: str, priority: int, job_id: int, fair_key: str = "") -> bool:
        """True if this call removed the key. A job queued with a fair key is named with it
        (the index keeps no table from job to key: it would cost every claim)."""
    def count(self, queue: str) -> int: ...
    def total(self) -> int: ...
    def queues(self) -> list[str]: ...
    def set_paused(self, queue: str, paused: bool) -> None:
        """A paused queue keeps its jobs but gives none out."""
    def is_paused(self, queue: str) -> bool: ...
    def clear(self) -> None: ...
    def select(self, queues: list[str]) -> Selection:
        """A claim handle over these queues, resolved once (per Take stream)."""

@final
class Selection:
    def claim(self, max: int) -> list[int]:
        """Remove and return up to `max` job ids, most urgent first across the selected queues.
        Removal is the claim: concurrent claimers never get the same id."""
    def claim_lanes(self, max: int) -> list[tuple[int, int]]:
        """Like `claim`, with the index (in the selected queues) of each id's queue."""
    def limit_wait_ms(self) -> int:
        """Milliseconds until a rate-limited queue with ready jobs gets a token (0: none waits)."""
    def has_ready(self) -> bool:
        """Whether `claim` would give out a job now."""

@final
class TimerSet:
    """(due time in ms, job id) keys, earliest first: scheduled jobs, lease deadlines."""

    def __init__(self) -> None: ...
    def insert(self, due_ms: int, job_id: int) -> None: ...
    def insert_many(self, keys: list[tuple[int, int]]) -> None: ...
    def remove(self, due_ms: int, job_id: int) -> bool: ...
    def next_due(self) -> int | None: ...
    def pop_due(self, now_ms: int, max: int) -> list[tuple[int, int]]: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...

@final
class ClaimToken:
    """Handed to every stream woken by one "jobs available" event; only one can claim it."""

    def __init__(self) -> None: ...
    def try_claim(self) -> bool: ...
    @property
    def claimed(self) -> bool: ...

@final
class Coalescer:
    """The single writer's inbox: push from any thread, take everything waiting as one batch."""

    def __init__(self) -> None: ...
    def push(self, item: Any) -> None: ...
    def take_batch(self, max: int, timeout: float | None = None) -> list[Any]:
        """Block (with the GIL released) until something is waiting, then return up to `max`
        items. Returns [] on timeout, or once closed and drained."""
    def close(self) -> None: ...
    def finish(self, n: int) -> None:
        """The consumer is done with `n` taken items."""
    @property
    def unfinished(self) -> int:
        """Items pushed and not yet finished: queued, or taken and still being handled. While it
        is 0, a producer may handle its item itself without overtaking another."""
    @property
    def closed(self) -> bool: ...
    def __len__(self) -> int: ...

def encode_record(record: Any) -> bytes:
    """Encode a JobRecord (pyqueue.store.records) in the record format, version 1. Counters past
    65535 saturate; a string past 65535 bytes (or a number out of its field's range) raises
    ValueError (OverflowError)."""

def decode_records(
    cls: type[_R], ids: list[int], raws: list[bytes | None], statuses: tuple[Any, ...]
) -> list[_R | None]:
    """Records read from the store, in one call: each made as `cls(id, status, queue, ...)`, its
    fields in JobRecord's order and `statuses[code]` for its status (None where `raws` holds
    None). A damaged, truncated or newer record raises ValueError naming the field: decode one
    at a time to name the job."""

# A job's writes (native/src/writes.rs); the keys are the same bytes as pyqueue.store.keys'. A
# queue or type name past 255 bytes, or a field past its format's range, raises ValueError
# (OverflowError).
def job_writes(
    changes: list[tuple[Any, Any, bytes | None, bool]],
) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]], list[bytes], list[bytes]]:
    """A request's job writes in one call. `changes` holds (record, before, payload, deleted)
    for each job: `before` is None for a job created in this request (its payload then goes
    under its payload key), else the (status, priority, timer_ms, queue) its stored index
    entries derive from; `deleted` says the job goes (its record, payload and the entries
    `before` names). Returns (data puts, index puts, data deletes, index deletes); each record
    is encoded once, in its state now, and only the index entries that moved are named."""

def salvage_wal(log: bytes) -> tuple[bytes, int, int]:
    """A damaged RocksDB write-ahead log with every damaged span dropped (native/src/wal.rs): (the
    new log, logical records kept, damaged spans dropped). Releases the GIL."""

def encode_refusals(ids: list[int], code: str, message: str) -> bytes:
    """The `rejected` entries (field 2) of an AckResult or FailResult, one per id, each with
    `code` and `message` (native/src/refusals.rs): merged into an answer with MergeFromString,
    so refusing 10,000 ids builds no Python object per id. Releases the GIL."""

def encode_push(views: list[Any], ack_result: bytes) -> bytes:
    """A push's bytes (native/src/push.rs): a TakeResponse whose JobBatch holds each JobView of
    `views` (plain jobs only: no unique key, no options, no result; pyqueue.server.convert sends
    the others) and `ack_result`, an AckResult already serialised (empty: none)."""

# The native gRPC transport (native/src/wire/): plaintext HTTP/2 to one address, messages as
# their protobuf bytes. Every call releases the GIL until its answer; a call that ends without
# one raises WireError (pyqueue.client.native_wire maps it to pyqueue's errors).
class WireError(Exception):
    """args: (kind, code, message). kind: "status" (the server's grpc-status `code`, never 0),
    "unsent" (no connection: the request never left), "broken" (the connection broke with the
    request sent), "deadline" (no answer within the call's time), "ended" (the server ended the
    stream cleanly before answering)."""

@final
class WireChannel:
    """One HTTP/2 connection to `address` (host:port), dialled on the first call and again after
    it breaks; `metadata` goes with every call; answers past `max_message` bytes are refused."""

    def __new__(cls, address: str, metadata: list[tuple[str, str]], max_message: int) -> WireChannel: ...
    def unary(self, path: str, message: bytes, timeout_s: float) -> bytes:
        """One request on `path` ("/package.Service/Method"), its one answer."""
    def open_stream(self, path: str) -> WireStream:
        """A bidi stream kept open on `path`."""

@final
class WireStream:
    """A kept-open bidi stream: one message out, the next answer back. Over after any error."""

    def exchange(self, message: bytes, timeout_s: float) -> bytes: ...
    def close(self) -> None:
        """End the stream (the server sees it cancelled)."""
    def header(self, name: str) -> str | None:
        """A header of the server's response (known once the first answer came)."""

@final
class WireFront:
    """The server's port for Enqueue and EnqueueStream (native/src/wire/front.rs), listening on
    `address` (host:port, port 0 for any) from the transport's runtime. Requests over
    `max_message` bytes are refused RESOURCE_EXHAUSTED there; other paths UNIMPLEMENTED; past
    `max_connections` open at once, a new connection is answered UNAVAILABLE unread; a connection
    whose peer leaves a ping (sent every `ping_every_s`) unanswered for `ping_timeout_s` is closed.
    `fileno()` turns readable when requests wait; `drain()` takes them all, and each is answered
    by its (call, seq): on a stream the answers go out in the order of the requests."""

    def __new__(
        cls, address: str, max_message: int, max_connections: int, ping_every_s: float, ping_timeout_s: float
    ) -> WireFront: ...
    @property
    def port(self) -> int: ...
    def fileno(self) -> int: ...
    def drain(self) -> list[tuple[int, int, bool, str | None, str, bytes]]:
        """(call, seq, streaming, authorization header, peer "ipv4:host:port", message)."""
    def answer(self, call: int, seq: int, message: bytes) -> None:
        """The answer to request `seq` of `call`; dropped if the call is over."""
    def end(self, call: int, code: int, message: str) -> None:
        """End `call` with gRPC status `code` now (OK ends a stream; answers not out are dropped)."""
    def open_calls(self) -> int: ...
    def close(self) -> None:
        """Take no more calls: a request not yet drained is never read (its client sends it
        again), what was drained is answered, then every call and connection ends."""

def serve_echo(address: str) -> int:
    """Serve a gRPC echo on `address` (every message on any path answered `ok`) from the
    transport's runtime; the port. What bench/grpc_floor.py measures the wire alone against."""
