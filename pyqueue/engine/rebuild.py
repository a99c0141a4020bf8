"""Start-up: rebuild the in-memory sets from the status index while the server already delivers.

Ready keys are stored in the order jobs run (queue, priority, id), so each queue's lane can be
filled front to back, and delivery need not wait for the whole backlog:

1. heads: every queue with ready jobs has its lane marked *loading* and its first HEAD keys
   loaded, one seek per queue. Delivery opens here. A loading lane gives out keys up to the last
   one loaded (its horizon) and never one past it, across lanes too, so priority and FIFO order
   hold for every job delivered (native/src/ready.rs).
2. ready: one pass over the writer's snapshot of the ready range, queue after queue, moving each
   lane's horizon chunk by chunk and finishing the lane at the end of its range.
3. the rest: scheduled, completed and dead entries fill the timer sets.

Every status is counted on the way. The snapshot comes from the single writer, which resets the
counts in the same step, so the counts it publishes afterwards are exactly what the scan misses.
The hints need no such care: whatever is committed after an iterator opens is inserted live by
the writer, and a stale hint costs nothing, since a claim re-reads the record and takes only a job
that is still ready (so none is delivered while its lease may be held).
"""

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from pyqueue import failpoints
from pyqueue._native import TimerSet
from pyqueue.engine.memory import Memory
from pyqueue.engine.recovery import CHUNK, paused_queues
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store
from pyqueue.store.records import Status, decode_status_value, fair_key_of, has_job_keys, limit_key_of

HEAD = 1_000  # keys per queue loaded before delivery opens: enough for a first claim or two

Entries = Iterator[tuple[bytes, bytes]]
Announce = Callable[[str], None]


@dataclass
class Snapshot:
    """The status index as the writer saw it in one step: ready entries, then all the others."""

    ready: Entries
    others: list[Entries] = field(default_factory=list)


def snapshot(store: Store) -> Snapshot:
    """Open every iterator now (RocksDB pins what an iterator sees when it is opened)."""
    ready_lo, ready_hi = keys.status_range(Status.READY)
    return Snapshot(
        ready=_opened(store, ready_lo, ready_hi),
        others=[
            _opened(store, keys.STATUS, ready_lo),
            _opened(store, ready_hi, bytes((keys.STATUS[0] + 1,))),
        ],
    )


def _opened(store: Store, lo: bytes, hi: bytes) -> Entries:
    entries = store.scan(Family.INDEX, lo, hi)
    first = next(entries, None)
    return iter(()) if first is None else _chain(first, entries)


def _chain(first: tuple[bytes, bytes], rest: Entries) -> Entries:
    yield first
    yield from rest


def ready_queues(store: Store) -> list[str]:
    """The queues with ready jobs: one seek per queue, skipping over each queue's range."""
    queues = []
    lo, hi = keys.status_range(Status.READY)
    while (first := next(store.scan(Family.INDEX, lo, hi), None)) is not None:
        queue, _, _ = keys.split_ready_key(first[0])
        queues.append(queue)
        lo = keys.after_ready_queue(queue)
    return queues


def load_heads(store: Store, memory: Memory) -> list[str]:
    """Step 1: mark every queue with ready jobs as loading and load its head; returns the queues."""
    for queue in paused_queues(store):
        memory.ready.set_paused(queue, True)
    queues = ready_queues(store)
    memory.ready.begin_loading(queues)
    for queue in queues:
        scan = store.scan(Family.INDEX, keys.ready_prefix(queue), keys.after_ready_queue(queue))
        entries = list(islice(scan, HEAD))
        lane = _LaneKeys()
        for key, value in entries:
            lane.add(key, value)
        memory.ready.load(queue, lane.plain, lane.keyed, lane.fair)
        if len(entries) < HEAD:
            memory.ready.finish_loading(queue)
    return queues


class _LaneKeys:
    """Ready entries as lane keys: plain (priority, id), and apart (priority, id, limit key) and
    (priority, id, fair key)."""

    def __init__(self) -> None:
        self.plain: list[tuple[int, int]] = []
        self.keyed: list[tuple[int, int, str]] = []
        self.fair: list[tuple[int, int, str]] = []

    def add(self, key: bytes, value: bytes) -> None:
        _, priority, job_id = keys.split_ready_key(key)
        if not has_job_keys(value):
            self.plain.append((priority, job_id))
        elif fair_key := fair_key_of(value):
            self.fair.append((priority, job_id, fair_key))
        else:
            self.keyed.append((priority, job_id, limit_key_of(value)))

    def __len__(self) -> int:
        return len(self.plain) + len(self.keyed) + len(self.fair)

    def clear(self) -> None:
        self.plain.clear()
        self.keyed.clear()
        self.fair.clear()


def load_ready(memory: Memory, entries: Entries, announce: Announce) -> int:
    """Step 2: load every lane to its end from the snapshot; returns how many ready jobs it held."""
    total = 0
    queue: str | None = None
    pending = _LaneKeys()

    def flush(finished: bool) -> None:
        assert queue is not None
        memory.ready.load(queue, pending.plain, pending.keyed, pending.fair)
        memory.counts.apply(Counter({(queue, Status.READY): len(pending)}))
        if finished:
            memory.ready.finish_loading(queue)
        announce(queue)
        pending.clear()

    for key, value in entries:
        name, _, _ = keys.split_ready_key(key)
        if name != queue:
            if queue is not None:
                flush(finished=True)
            queue = name
        pending.add(key, value)
        total += 1
        if len(pending) >= CHUNK:
            flush(finished=False)
    if queue is not None:
        flush(finished=True)
    # Queues whose first ready job came after the snapshot: what the heads did not hold is live.
    for late in memory.ready.loading():
        memory.ready.finish_loading(late)
        announce(late)
    return total


def load_others(memory: Memory, entries: list[Entries]) -> int:
    """Step 3: the timer sets and the counts of every other status; returns how many are scheduled."""
    counts: Counter[tuple[str, int]] = Counter()
    timers: dict[int, tuple[TimerSet, list[tuple[int, int]]]] = {
        Status.SCHEDULED: (memory.scheduled, []),
        Status.COMPLETED: (memory.expiring, []),
        Status.DEAD: (memory.expiring, []),
        Status.CANCELLED: (memory.expiring, []),
    }
    scheduled = 0
    for key, value in (entry for part in entries for entry in part):
        status = key[1]
        _, timer_ms, queue = decode_status_value(value)
        counts[queue, status] += 1
        if status in timers and timer_ms:
            target, due = timers[status]
            due.append((timer_ms, keys.id_suffix(key)))
            scheduled += status == Status.SCHEDULED
            if len(due) >= CHUNK:
                target.insert_many(due)
                due.clear()
    for target, due in timers.values():
        target.insert_many(due)
    memory.counts.apply(counts)
    return scheduled


def rebuild(store: Store, memory: Memory) -> tuple[int, int]:
    """All three steps at once, from a fresh snapshot (the offline check); returns (ready, scheduled)."""
    memory.counts.reset(Counter())
    taken = snapshot(store)
    failpoints.wait("rebuild")
    load_heads(store, memory)
    ready = load_ready(memory, taken.ready, lambda queue: None)
    return ready, load_others(memory, taken.others)
