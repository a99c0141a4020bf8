"""The job record; its binary codec is the native crate's (native/src/record.rs).

The record is the mutable part of a job (status, attempts, times); the payload lives under its own
key so a status change never rewrites it. Layout, version 1, big-endian:

    version u8, status u8, priority u16, attempts u16, max_retries i16 (-1: server default),
    lost u16 (workers this job took down), errors u16 (error records kept), lease u32, timeout_ms u32,
    created_ms i64, updated_ms i64, run_at_ms i64, expires_ms i64,
    then four length-prefixed (u16) strings: queue, type, content_type, unique_key,
    then a length-prefixed (u32) blob of rarely used options (JSON) for later versions' fields,
    then started_ms i64 (when the attempt in flight began; 0: delivered, not started),
    then a length-prefixed (u16) limit_key (the key its per-key concurrency cap counts under),
    then a length-prefixed (u16) fair_key (the key whose turn it waits for; limit_key is written,
    empty or not, whenever fair_key is).
    Records written before a trailing field end before it: they decode with 0 or "".
"""

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from pyqueue._native import decode_records, encode_record
from pyqueue.store import keys

_STATUS_VALUE = struct.Struct(">Hq")
STATUS_VALUE_HEAD = _STATUS_VALUE.size  # then the queue, then NUL and the limit key, 0x01 and the fair key


class Status(enum.IntEnum):
    """A job's place in its life: scheduled -> ready -> in_flight -> completed | dead | cancelled."""

    SCHEDULED = 1
    READY = 2
    IN_FLIGHT = 3
    COMPLETED = 4
    DEAD = 5
    CANCELLED = 6

    # Members are ints: hash them as ints (Enum.__hash__ is Python code, and statuses key the
    # counts on every write).
    __hash__ = int.__hash__

    @property
    def label(self) -> str:
        return self.name.lower()


_STATUS_BY_CODE = {s.value: s for s in Status}
_STATUSES = tuple(_STATUS_BY_CODE.get(code) for code in range(max(_STATUS_BY_CODE) + 1))  # by code
ENDED = frozenset({Status.COMPLETED, Status.DEAD, Status.CANCELLED})  # kept for a while, then purged
# For the per-job paths: a module constant is read in a quarter of the time an Enum member takes
# (23 against 89 ns), and a job's life reads these a few dozen times.
SCHEDULED, READY, IN_FLIGHT = Status.SCHEDULED, Status.READY, Status.IN_FLIGHT


class CorruptRecordError(Exception):
    """A stored record could not be decoded: the data directory is damaged or from a newer version."""


@dataclass(slots=True)
class JobRecord:
    id: int
    status: Status
    queue: str
    type: str
    priority: int
    created_ms: int
    updated_ms: int
    attempts: int = 0
    max_retries: int = -1
    lost: int = 0
    errors: int = 0
    lease: int = 0
    timeout_ms: int = 0
    run_at_ms: int = 0
    expires_ms: int = 0
    content_type: str = ""
    unique_key: str = ""
    options: bytes = b""
    started_ms: int = 0  # in flight: when its worker began this attempt (0: prefetched, not begun)
    limit_key: str = ""  # its queue's per-key cap counts it under this key (a customer id, say)
    fair_key: str = ""  # within its priority it waits for this key's turn (fair share)

    def clone(self) -> "JobRecord":
        """A snapshot (much cheaper than copy.copy on a slotted dataclass)."""
        return JobRecord(
            self.id,
            self.status,
            self.queue,
            self.type,
            self.priority,
            self.created_ms,
            self.updated_ms,
            self.attempts,
            self.max_retries,
            self.lost,
            self.errors,
            self.lease,
            self.timeout_ms,
            self.run_at_ms,
            self.expires_ms,
            self.content_type,
            self.unique_key,
            self.options,
            self.started_ms,
            self.limit_key,
            self.fair_key,
        )

    def encode(self) -> bytes:
        return encode_record(self)

    @classmethod
    def decode(cls, job_id: int, raw: bytes) -> "JobRecord":
        try:
            (record,) = decode_records(cls, [job_id], [raw], _STATUSES)
        except ValueError as exc:
            raise CorruptRecordError(f"job {job_id}: undecodable record ({exc})") from exc
        assert record is not None
        return record

    @classmethod
    def decode_many(cls, job_ids: list[int], raws: Sequence[bytes | None]) -> "list[JobRecord | None]":
        """Many records in one native call (None where `raws` holds None); a damaged one raises
        CorruptRecordError naming it."""
        try:
            return decode_records(cls, job_ids, list(raws), _STATUSES)
        except ValueError:
            return [None if raw is None else cls.decode(i, raw) for i, raw in zip(job_ids, raws, strict=True)]

    @property
    def timer_ms(self) -> int:
        """The time that matters in this status: when a scheduled job is due, when an in-flight
        lease runs out, when a completed or dead job is purged (0: none)."""
        return self.run_at_ms if self.status == SCHEDULED else self.expires_ms

    def status_key(self) -> bytes:
        return keys.status_key(self.status, self.id, self.queue, self.priority)

    def status_value(self) -> bytes:
        """The status index entry's value: enough to rebuild the in-memory sets without a read."""
        timer = self.run_at_ms if self.status == SCHEDULED else self.expires_ms
        value = _STATUS_VALUE.pack(self.priority, timer) + self.queue.encode()
        if self.limit_key:
            value += b"\x00" + self.limit_key.encode()
        if self.fair_key:
            value += b"\x01" + self.fair_key.encode()
        return value


def decode_status_value(raw: bytes) -> tuple[int, int, str]:
    """(priority, timer_ms, queue) from a status index value."""
    priority, run_at = _STATUS_VALUE.unpack_from(raw, 0)
    rest = raw[_STATUS_VALUE.size :]
    end = _keys_start(rest)
    return priority, run_at, rest[:end].decode()


def _keys_start(rest: bytes) -> int:
    """Where the job's keys begin after the queue's name (names hold neither NUL nor 0x01)."""
    ends = [at for at in (rest.find(b"\x00"), rest.find(b"\x01")) if at >= 0]
    return min(ends) if ends else len(rest)


def has_job_keys(raw: bytes) -> bool:
    """Whether a status index value carries a limit key or a fair key."""
    return raw.find(b"\x00", STATUS_VALUE_HEAD) >= 0 or raw.find(b"\x01", STATUS_VALUE_HEAD) >= 0


def limit_key_of(raw: bytes) -> str:
    """The limit key in a status index value ("": the job has none)."""
    _, _, rest = raw[_STATUS_VALUE.size :].partition(b"\x00")
    limit_key, _, _ = rest.partition(b"\x01")
    return limit_key.decode()


def fair_key_of(raw: bytes) -> str:
    """The fair key in a status index value ("": the job has none)."""
    _, _, fair_key = raw[_STATUS_VALUE.size :].partition(b"\x01")
    return fair_key.decode()
