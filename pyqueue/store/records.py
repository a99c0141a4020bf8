"""The job record and its binary codec.

The record is the mutable part of a job (status, attempts, times); the payload lives under its own
key so a status change never rewrites it. Layout, version 1, big-endian:

    version u8, status u8, priority u16, attempts u16, max_retries i16 (-1: server default),
    lost u16 (workers this job took down), errors u16 (error records kept), lease u32, timeout_ms u32,
    created_ms i64, updated_ms i64, run_at_ms i64, expires_ms i64,
    then four length-prefixed (u16) strings: queue, type, content_type, unique_key,
    then a length-prefixed (u32) blob of rarely used options (JSON) for later versions' fields,
    then started_ms i64 (when the attempt in flight began; 0: delivered, not started),
    then a length-prefixed (u16) limit_key (the key its per-key concurrency cap counts under).
    Records written before a trailing field end before it: they decode with 0 or "".
"""

import enum
import struct
from dataclasses import dataclass

from pyqueue.store import keys

VERSION = 1
_HEAD = struct.Struct(">BBHHhHHIIqqqq")
_STATUS_VALUE = struct.Struct(">Hq")
STATUS_VALUE_HEAD = _STATUS_VALUE.size  # then the queue, then NUL and the limit key if any
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")


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
ENDED = frozenset({Status.COMPLETED, Status.DEAD, Status.CANCELLED})  # kept for a while, then purged


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
        )

    def encode(self) -> bytes:
        parts = [
            _HEAD.pack(
                VERSION,
                self.status,
                self.priority,
                min(self.attempts, 0xFFFF),  # counters saturate: a count is never worth a crash
                self.max_retries,
                min(self.lost, 0xFFFF),
                min(self.errors, 0xFFFF),
                self.lease,
                self.timeout_ms,
                self.created_ms,
                self.updated_ms,
                self.run_at_ms,
                self.expires_ms,
            )
        ]
        for text in (self.queue, self.type, self.content_type, self.unique_key):
            raw = text.encode()
            parts.append(_U16.pack(len(raw)))
            parts.append(raw)
        parts.append(_U32.pack(len(self.options)))
        parts.append(self.options)
        parts.append(_I64.pack(self.started_ms))
        if self.limit_key:
            raw = self.limit_key.encode()
            parts.append(_U16.pack(len(raw)))
            parts.append(raw)
        return b"".join(parts)

    @classmethod
    def decode(cls, job_id: int, raw: bytes) -> "JobRecord":
        try:
            (
                version,
                status,
                priority,
                attempts,
                max_retries,
                lost,
                errors,
                lease,
                timeout_ms,
                created,
                updated,
                run_at,
                expires,
            ) = _HEAD.unpack_from(raw, 0)
            if version != VERSION:
                raise CorruptRecordError(f"job {job_id}: record version {version} is not {VERSION}")
            offset = _HEAD.size
            texts = []
            for _ in range(4):
                (n,) = _U16.unpack_from(raw, offset)
                offset += 2
                texts.append(raw[offset : offset + n].decode())
                offset += n
            (n,) = _U32.unpack_from(raw, offset)
            options = bytes(raw[offset + 4 : offset + 4 + n])
            offset += 4 + n
            (started,) = _I64.unpack_from(raw, offset) if len(raw) >= offset + 8 else (0,)
            limit_key = ""
            if len(raw) > offset + 8:
                (n,) = _U16.unpack_from(raw, offset + 8)
                limit_key = raw[offset + 10 : offset + 10 + n].decode()
            return cls(
                id=job_id,
                status=_STATUS_BY_CODE[status],
                queue=texts[0],
                type=texts[1],
                priority=priority,
                created_ms=created,
                updated_ms=updated,
                attempts=attempts,
                max_retries=max_retries,
                lost=lost,
                errors=errors,
                lease=lease,
                timeout_ms=timeout_ms,
                run_at_ms=run_at,
                expires_ms=expires,
                content_type=texts[2],
                unique_key=texts[3],
                options=options,
                started_ms=started,
                limit_key=limit_key,
            )
        except (struct.error, ValueError, KeyError, UnicodeDecodeError) as exc:
            raise CorruptRecordError(f"job {job_id}: undecodable record ({exc})") from exc

    @property
    def timer_ms(self) -> int:
        """The time that matters in this status: when a scheduled job is due, when an in-flight
        lease runs out, when a completed or dead job is purged (0: none)."""
        return self.run_at_ms if self.status == Status.SCHEDULED else self.expires_ms

    def status_key(self) -> bytes:
        return keys.status_key(self.status, self.id, self.queue, self.priority)

    def status_value(self) -> bytes:
        """The status index entry's value: enough to rebuild the in-memory sets without a read."""
        value = _STATUS_VALUE.pack(self.priority, self.timer_ms) + self.queue.encode()
        return value + b"\x00" + self.limit_key.encode() if self.limit_key else value


def decode_status_value(raw: bytes) -> tuple[int, int, str]:
    """(priority, timer_ms, queue) from a status index value."""
    priority, run_at = _STATUS_VALUE.unpack_from(raw, 0)
    queue, _, _ = raw[_STATUS_VALUE.size :].partition(b"\x00")  # queue names hold no NUL
    return priority, run_at, queue.decode()


def limit_key_of(raw: bytes) -> str:
    """The limit key in a status index value ("": the job has none)."""
    _, _, limit_key = raw[_STATUS_VALUE.size :].partition(b"\x00")
    return limit_key.decode()
