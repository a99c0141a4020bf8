"""The key codec: every key starts with a one-byte tag; integers are fixed-width big-endian.

data family (point reads, bloom filters):
    J id            -> job record            P id -> payload
    E id attempt    -> error record          M name -> server metadata
index family (range scans):
    S status id     -> priority, timer, queue (what the start-up rebuild needs, without a read)
    Q len queue status id -> ""              T len type id -> ""
    U unique key    -> job id (the job that holds the key; checked against its status)

Names are length-prefixed so that one queue's range never runs into another whose name it
prefixes ("mail" and "mailer").
"""

import struct

JOB = b"J"
PAYLOAD = b"P"
ERROR = b"E"
META = b"M"
STATUS = b"S"
QUEUE = b"Q"
TYPE = b"T"
UNIQUE = b"U"

_ID = struct.Struct(">Q")
_ID_ATTEMPT = struct.Struct(">QI")
ID_BYTES = 8


def job_key(job_id: int) -> bytes:
    return JOB + _ID.pack(job_id)


def payload_key(job_id: int) -> bytes:
    return PAYLOAD + _ID.pack(job_id)


def error_key(job_id: int, attempt: int) -> bytes:
    return ERROR + _ID_ATTEMPT.pack(job_id, attempt)


def error_range(job_id: int) -> tuple[bytes, bytes]:
    return ERROR + _ID.pack(job_id), ERROR + _ID.pack(job_id + 1)


def meta_key(name: str) -> bytes:
    return META + name.encode()


def status_key(status: int, job_id: int) -> bytes:
    return STATUS + bytes((status,)) + _ID.pack(job_id)


def status_range(status: int) -> tuple[bytes, bytes]:
    return STATUS + bytes((status,)), STATUS + bytes((status + 1,))


def _name(tag: bytes, name: str) -> bytes:
    raw = name.encode()
    return tag + bytes((len(raw),)) + raw


def queue_key(queue: str, status: int, job_id: int) -> bytes:
    return queue_prefix(queue, status) + _ID.pack(job_id)


def queue_prefix(queue: str, status: int) -> bytes:
    """One queue's jobs in one status: "which jobs in `mail` are dead?" is a single range."""
    return _name(QUEUE, queue) + bytes((status,))


def type_prefix(job_type: str) -> bytes:
    return _name(TYPE, job_type)


def status_prefix(status: int) -> bytes:
    return STATUS + bytes((status,))


def unique_key(key: str) -> bytes:
    return UNIQUE + key.encode()


def pack_id(job_id: int) -> bytes:
    return _ID.pack(job_id)


def type_key(job_type: str, job_id: int) -> bytes:
    return _name(TYPE, job_type) + _ID.pack(job_id)


def id_suffix(key: bytes) -> int:
    """The job id that ends every job-scoped key."""
    return int(_ID.unpack_from(key, len(key) - ID_BYTES)[0])


def job_range() -> tuple[bytes, bytes]:
    return JOB, bytes((JOB[0] + 1,))
