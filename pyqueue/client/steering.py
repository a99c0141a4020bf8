"""Building filters and changes for listing, counting, updating and deleting jobs."""

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyqueue.v1 import queue_pb2 as pb

STATUSES = {
    "scheduled": pb.JOB_STATUS_SCHEDULED,
    "ready": pb.JOB_STATUS_READY,
    "in_flight": pb.JOB_STATUS_IN_FLIGHT,
    "completed": pb.JOB_STATUS_COMPLETED,
    "dead": pb.JOB_STATUS_DEAD,
    "cancelled": pb.JOB_STATUS_CANCELLED,
}
SCOPES = {
    "queued": pb.UNIQUE_SCOPE_QUEUED,
    "active": pb.UNIQUE_SCOPE_ACTIVE,
    "exists": pb.UNIQUE_SCOPE_EXISTS,
}


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""Leave a field as it is (for run_at, None means "clear it": the job becomes ready)."""


def _names(one: str | None, many: Iterable[str] | None) -> list[str]:
    return ([one] if one else []) + list(many or [])


def _range(message: pb.Range, bounds: tuple[Any, Any] | None, convert: Any = int) -> None:
    if bounds is None:
        return
    lo, hi = bounds
    if lo is not None:
        message.min = convert(lo)
    if hi is not None:
        message.max = convert(hi)


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def job_filter(
    *,
    ids: Iterable[int] | None = None,
    queue: str | None = None,
    queues: Iterable[str] | None = None,
    type: str | None = None,
    types: Iterable[str] | None = None,
    status: str | None = None,
    statuses: Iterable[str] | None = None,
    priority: tuple[int | None, int | None] | None = None,
    run_at: tuple[datetime | None, datetime | None] | None = None,
    attempts: tuple[int | None, int | None] | None = None,
) -> pb.JobFilter:
    """All given conditions must hold; several values of one condition match any of them. Ranges
    are inclusive (min, max) with None for an open end."""
    wanted = _names(status, statuses)
    unknown = [s for s in wanted if s not in STATUSES]
    if unknown:
        raise ValueError(f"unknown status {unknown[0]!r}; one of {', '.join(STATUSES)}")
    f = pb.JobFilter(
        ids=list(ids or []),
        queues=_names(queue, queues),
        types=_names(type, types),
        statuses=[STATUSES[s] for s in wanted],
    )
    _range(f.priority, priority)
    _range(f.run_at_ms, run_at, _ms)
    _range(f.attempts, attempts)
    return f


def job_changes(
    *,
    queue: str | None = None,
    priority: int | None = None,
    run_at: datetime | None = UNSET,
    max_retries: int | None = None,
    backoff: tuple[float, float, float] | None = None,
    keep_completed: float | None = None,
    payload: Any = UNSET,
) -> pb.JobChanges:
    from pyqueue.client import codec

    c = pb.JobChanges()
    if queue is not None:
        c.queue = queue
    if priority is not None:
        c.priority = priority
    if run_at is None:
        c.clear_run_at = True
    elif run_at is not UNSET:
        c.run_at_ms = _ms(run_at)
    if max_retries is not None:
        c.max_retries = max_retries
    if backoff is not None:
        c.backoff.CopyFrom(pb.Backoff(base_s=backoff[0], exponent=backoff[1], jitter_s=backoff[2]))
    if keep_completed is not None:
        c.keep_completed_ms = int(keep_completed * 1000)
    if payload is not UNSET:
        raw, content_type = codec.encode(payload)
        c.payload = raw
        c.content_type = content_type
    return c


@dataclass(frozen=True)
class QueueInfo:
    name: str
    paused: bool
    counts: dict[str, int] = field(default_factory=dict)
    max_running: int = 0  # limits (Client.set_queue_limit); 0: none
    rate_per_s: float = 0.0
    burst: float = 0.0
    key_max_running: int = 0
    enqueued_total: int = 0  # since the server started
    completed_total: int = 0
    oldest_ready_seconds: float = 0.0  # 0: none ready

    @classmethod
    def from_pb(cls, message: pb.QueueInfo) -> "QueueInfo":
        return cls(
            message.name,
            message.paused,
            dict(message.counts),
            message.max_running,
            message.rate_per_s,
            message.burst,
            message.key_max_running,
            message.enqueued_total,
            message.completed_total,
            message.oldest_ready_seconds,
        )

    @property
    def limits(self) -> str:
        """The limits in words ("" when none)."""
        parts = [f"max {self.max_running} running"] if self.max_running else []
        if self.rate_per_s:
            parts.append(f"{self.rate_per_s:g}/s" + (f" (burst {self.burst:g})" if self.burst else ""))
        if self.key_max_running:
            parts.append(f"max {self.key_max_running} running per key")
        return ", ".join(parts)


@dataclass(frozen=True)
class FairKey:
    """A fair key of a queue with jobs waiting (Client.fair_keys)."""

    fair_key: str
    waiting: int
    oldest_seconds: float  # since its oldest waiting job was created
    weight: int


@dataclass(frozen=True)
class FairKeys:
    """A queue's fair keys: how many have jobs waiting, the busiest, and every weight set."""

    queue: str
    key_count: int
    keys: list[FairKey]
    weights: dict[str, int]

    @classmethod
    def from_pb(cls, message: pb.FairKeys) -> "FairKeys":
        keys = [FairKey(k.fair_key, k.waiting, k.oldest_seconds, k.weight) for k in message.keys]
        return cls(message.queue, message.key_count, keys, dict(message.weights))


def limit_request(
    queue: str, max_running: int, rate: float | str | None, burst: float, key_max_running: int
) -> pb.SetQueueLimitRequest:
    per_s = parse_rate(rate) if isinstance(rate, str) else float(rate or 0)
    return pb.SetQueueLimitRequest(
        queue=queue, max_running=max_running, rate_per_s=per_s, burst=burst, key_max_running=key_max_running
    )


@dataclass(frozen=True)
class CronInfo:
    """A periodic job as the server keeps it."""

    name: str
    schedule: str
    timezone: str
    type: str
    queue: str
    paused: bool
    next_run: datetime | None
    last_run: datetime | None
    problem: str = ""  # why the server skips it ('' when it runs)

    @classmethod
    def from_pb(cls, message: pb.CronEntry) -> "CronInfo":
        return cls(
            message.name,
            message.schedule,
            message.timezone,
            message.job.type,
            message.job.queue,
            message.paused,
            _when(message.next_run_ms),
            _when(message.last_run_ms),
            message.problem,
        )

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["next_run"] = self.next_run.isoformat() if self.next_run else None
        out["last_run"] = self.last_run.isoformat() if self.last_run else None
        return out


CRON_ACTIONS = {
    "pause": pb.CRON_ACTION_PAUSE,
    "resume": pb.CRON_ACTION_RESUME,
    "delete": pb.CRON_ACTION_DELETE,
}


@dataclass(frozen=True)
class WorkerInfo:
    """One connected worker stream, as the server sees it."""

    host: str
    pid: int
    name: str
    peer: str
    queues: list[str]
    prefetch: int
    in_flight: int  # delivered and not yet answered
    running: int  # of those, started
    connected_at: datetime
    last_ack_at: datetime | None
    acked: int
    failed: int
    shard: int

    @classmethod
    def from_pb(cls, m: pb.WorkerStream) -> "WorkerInfo":
        return cls(
            m.worker.host,
            m.worker.pid,
            m.worker.name,
            m.peer,
            list(m.queues),
            m.prefetch,
            m.in_flight,
            m.running,
            _when(m.connected_at_ms) or datetime.fromtimestamp(0, UTC),
            _when(m.last_ack_at_ms),
            m.acked,
            m.failed,
            m.shard,
        )

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["connected_at"] = self.connected_at.isoformat()
        out["last_ack_at"] = self.last_ack_at.isoformat() if self.last_ack_at else None
        return out


def per_process(streams: Iterable[WorkerInfo]) -> list[WorkerInfo]:
    """One entry per worker process (host, pid, name): a worker on a sharded server holds a
    stream to each shard that owns one of its queues, which ListWorkers lists one by one. Counts
    add up, queues join, `shard` is the first; oldest first."""
    merged: dict[tuple[str, int, str], WorkerInfo] = {}
    for w in streams:
        key = (w.host, w.pid, w.name)
        seen = merged.get(key)
        if seen is None:
            merged[key] = w
            continue
        acks = [t for t in (seen.last_ack_at, w.last_ack_at) if t is not None]
        merged[key] = dataclasses.replace(
            seen,
            queues=sorted({*seen.queues, *w.queues}),
            prefetch=seen.prefetch + w.prefetch,
            in_flight=seen.in_flight + w.in_flight,
            running=seen.running + w.running,
            connected_at=min(seen.connected_at, w.connected_at),
            last_ack_at=max(acks) if acks else None,
            acked=seen.acked + w.acked,
            failed=seen.failed + w.failed,
            shard=min(seen.shard, w.shard),
        )
    return sorted(merged.values(), key=lambda w: w.connected_at)


def _when(ms: int) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms else None


@dataclass(frozen=True)
class Rejected:
    id: int
    code: str
    message: str


@dataclass(frozen=True)
class ChangeResult:
    """What a bulk change did: the ids changed, and the ones refused with why."""

    changed: list[int]
    rejected: list[Rejected]

    @classmethod
    def from_pb(cls, message: pb.ChangeResponse) -> "ChangeResult":
        return cls(list(message.changed), [Rejected(r.id, r.code, r.message) for r in message.rejected])


_PER = {"s": 1, "m": 60, "h": 3600}


def parse_rate(text: str) -> float:
    """'100/s', '5/m' or '60/h' as jobs a second."""
    count, _, per = text.replace(" ", "").partition("/")
    try:
        return float(count) / _PER[per[:1] or "s"]
    except (ValueError, KeyError):
        raise ValueError(f"rate {text!r} is not N/s, N/m or N/h (for example 100/s)") from None
