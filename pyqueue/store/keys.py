"""The key codec: every key starts with a one-byte tag; integers are fixed-width big-endian.

data family (point reads, bloom filters):
    J id            -> job record            P id -> payload
    R id            -> result (the handler's return value, JSON, when the job keeps it)
    E id attempt    -> error record          M name -> server metadata
index family (range scans):
    S status id     -> priority, timer, queue (what the start-up rebuild needs, without a read)
    S ready len queue priority id -> the same, for ready jobs: keyed in the order they run, so the
                       start-up loads each queue's most urgent jobs first and serves while it loads
    Q len queue status id -> ""              T len type id -> ""
    U unique key    -> job id (the job that holds the key; checked against its status)

Names are length-prefixed so that one queue's range never runs into another whose name it
prefixes ("mail" and "mailer").

The keys a job's writes name (J, P, S, Q, T) are also built in native/src/keys.rs, one call per
record written (pyqueue.engine.view); tests/store/test_entries.py holds both to the same bytes.
This module stays the reference, and what reads and scans use.
"""

import functools
import struct

JOB = b"J"
PAYLOAD = b"P"
ERROR = b"E"
RESULT = b"R"
META = b"M"
STATUS = b"S"
QUEUE = b"Q"
TYPE = b"T"
UNIQUE = b"U"

_ID = struct.Struct(">Q")
_MAX_ID = (1 << 64) - 1
_PRIORITY_ID = struct.Struct(">HQ")
READY_STATUS = 2  # records.Status.READY (the codec sits below the records)
_ID_ATTEMPT = struct.Struct(">QI")
ID_BYTES = 8


def job_key(job_id: int) -> bytes:
    return JOB + _ID.pack(job_id)


def payload_key(job_id: int) -> bytes:
    return PAYLOAD + _ID.pack(job_id)


def result_key(job_id: int) -> bytes:
    return RESULT + _ID.pack(job_id)


def error_key(job_id: int, attempt: int) -> bytes:
    return ERROR + _ID_ATTEMPT.pack(job_id, attempt)


def error_range(job_id: int) -> tuple[bytes, bytes]:
    return _under(ERROR, job_id)


def meta_key(name: str) -> bytes:
    return META + name.encode()


def status_key(status: int, job_id: int, queue: str, priority: int) -> bytes:
    if status == READY_STATUS:
        return ready_prefix(queue) + _PRIORITY_ID.pack(priority, job_id)
    return STATUS + bytes((status,)) + _ID.pack(job_id)


def status_range(status: int) -> tuple[bytes, bytes]:
    return STATUS + bytes((status,)), STATUS + bytes((status + 1,))


@functools.lru_cache(maxsize=4096)  # a few queue names serve millions of keys
def ready_prefix(queue: str) -> bytes:
    """One queue's ready jobs, in the order they run."""
    return STATUS + bytes((READY_STATUS,)) + _name(b"", queue)


def after_ready_queue(queue: str) -> bytes:
    """The first key past every ready key of `queue` (the next queue's range starts beyond it)."""
    return ready_prefix(queue) + b"\xff" * (_PRIORITY_ID.size + 1)


def split_ready_key(key: bytes) -> tuple[str, int, int]:
    """(queue, priority, id) of a ready key."""
    end = 3 + key[2]
    priority, job_id = _PRIORITY_ID.unpack_from(key, end)
    return key[3:end].decode(), priority, job_id


def is_old_ready_key(key: bytes) -> bool:
    """A ready key written by a version that keyed ready jobs by id alone (S ready id)."""
    return len(key) == 2 + ID_BYTES


def _name(tag: bytes, name: str) -> bytes:
    raw = name.encode()
    return tag + bytes((len(raw),)) + raw


def queue_key(queue: str, status: int, job_id: int) -> bytes:
    return queue_prefix(queue, status) + _ID.pack(job_id)


@functools.lru_cache(maxsize=4096)
def queue_prefix(queue: str, status: int) -> bytes:
    """One queue's jobs in one status: "which jobs in `mail` are dead?" is a single range."""
    return _name(QUEUE, queue) + bytes((status,))


@functools.lru_cache(maxsize=4096)
def type_prefix(job_type: str) -> bytes:
    return _name(TYPE, job_type)


def status_prefix(status: int) -> bytes:
    return STATUS + bytes((status,))


def unique_key(key: str) -> bytes:
    return UNIQUE + key.encode()


def pack_id(job_id: int) -> bytes:
    return _ID.pack(job_id)


def type_key(job_type: str, job_id: int) -> bytes:
    return type_prefix(job_type) + _ID.pack(job_id)


def id_suffix(key: bytes) -> int:
    """The job id that ends every job-scoped key."""
    return int(_ID.unpack_from(key, len(key) - ID_BYTES)[0])


def job_range() -> tuple[bytes, bytes]:
    return JOB, bytes((JOB[0] + 1,))


# Workflows (pyqueue/engine/flows): batches, their members, the outbox to other shards, cancelled
# workflows; in the index family, each workflow's jobs on this shard and when bookkeeping expires.
FLOW = b"W"
_INDEX4 = struct.Struct(">I")


def batch_key(batch_id: int) -> bytes:
    return b"Wb" + _ID.pack(batch_id)


def batch_range() -> tuple[bytes, bytes]:
    return b"Wb", b"Wc"


def member_key(batch_id: int, index: int) -> bytes:
    return b"Wm" + _ID.pack(batch_id) + _INDEX4.pack(index)


def member_range(batch_id: int) -> tuple[bytes, bytes]:
    return _under(b"Wm", batch_id)


def outbox_key(seq: int) -> bytes:
    return b"Wo" + _ID.pack(seq)


def outbox_range(after: int = 0) -> tuple[bytes, bytes]:
    return (b"Wo" + _ID.pack(after + 1) if after < _MAX_ID else b"Wp"), b"Wp"


def cancelled_flow_key(flow_id: int) -> bytes:
    return b"Wc" + _ID.pack(flow_id)


def flow_job_key(flow_id: int, job_id: int) -> bytes:
    return b"Wj" + _ID.pack(flow_id) + _ID.pack(job_id)


def flow_jobs_range(flow_id: int) -> tuple[bytes, bytes]:
    return _under(b"Wj", flow_id)


def flow_expiry_key(expires_ms: int, kind: bytes, some_id: int) -> bytes:
    """`kind` b"b": a finished batch; b"c": a cancelled workflow's mark."""
    return b"Wx" + _ID.pack(max(expires_ms, 0)) + kind + _ID.pack(some_id)


def flow_expiry_range(until_ms: int) -> tuple[bytes, bytes]:
    return b"Wx", _under(b"Wx", max(until_ms, 0))[1]


def split_flow_expiry(key: bytes) -> tuple[int, bytes, int]:
    return int(_ID.unpack_from(key, 2)[0]), key[10:11], int(_ID.unpack_from(key, 11)[0])


def fold_key(queue: str, key: str) -> bytes:
    """The waiting job of `queue` that payloads with the fold key `key` join."""
    return _name(b"Wf", queue) + key.encode()


def _under(prefix: bytes, n: int) -> tuple[bytes, bytes]:
    """The keys that start with `prefix` and the 8 bytes of `n`: from them up to (not including)
    the next number's, or past the prefix for the largest (n + 1 does not fit in 8 bytes: an id
    of 2**64 - 1, which any client may send, made the range itself fail)."""
    upper = prefix + _ID.pack(n + 1) if n < _MAX_ID else prefix[:-1] + bytes([prefix[-1] + 1])
    return prefix + _ID.pack(n), upper
