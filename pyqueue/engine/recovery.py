"""Start-up: what the store says was in flight goes back to ready before serving, then the
in-memory sets are rebuilt from the status index, in the background, while enqueues are taken.

The status index entry carries priority, timer and queue, so the rebuild is one pass over the
status index with no record reads: it fills the ready set, the timer sets and the counts.
"""

from collections import Counter, defaultdict
from collections.abc import Iterator

from pyqueue import failpoints
from pyqueue._native import TimerSet
from pyqueue.engine.memory import Memory
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store
from pyqueue.store.records import Status, decode_status_value

CHUNK = 10_000
PAUSED = "paused:"


def in_flight_ids(store: Store) -> list[int]:
    return [keys.id_suffix(key) for key, _ in store.scan(Family.INDEX, *keys.status_range(Status.IN_FLIGHT))]


def paused_queues(store: Store) -> list[str]:
    lo = keys.meta_key(PAUSED)
    return [key[len(lo) :].decode() for key, _ in store.scan(Family.DATA, lo, lo + b"\xff")]


Entries = Iterator[tuple[bytes, bytes]]


def status_entries(store: Store) -> Entries:
    """Every status index entry, from a snapshot taken now (the iterator is opened at once)."""
    entries = store.scan(Family.INDEX, keys.STATUS, bytes((keys.STATUS[0] + 1,)))
    first = next(entries, None)
    return iter(()) if first is None else _chain(first, entries)


def _chain(first: tuple[bytes, bytes], rest: Entries) -> Entries:
    yield first
    yield from rest


def rebuild(store: Store, memory: Memory, entries: Entries | None = None) -> tuple[int, int]:
    """Fill the ready set, the timer sets and the counts from the store; returns (ready, scheduled).

    `entries` is a snapshot of the status index taken by the single writer (which reset the counts
    in the same step): counts published after it are added to what the scan finds. Without it
    (an offline check) the scan starts here. Safe beside live enqueues: inserting a key twice
    leaves one entry, and every entry is a hint that claims and promotions re-check.
    """
    if entries is None:
        memory.counts.reset(Counter())
        entries = status_entries(store)
    failpoints.wait("rebuild")
    for queue in paused_queues(store):
        memory.ready.set_paused(queue, True)
    counts: Counter[tuple[str, int]] = Counter()
    ready_by_queue: dict[str, list[tuple[int, int]]] = defaultdict(list)
    timers: dict[int, tuple[TimerSet, list[tuple[int, int]]]] = {
        Status.SCHEDULED: (memory.scheduled, []),
        Status.COMPLETED: (memory.expiring, []),
        Status.DEAD: (memory.expiring, []),
    }
    ready = scheduled = 0
    for key, value in entries:
        status = key[1]
        priority, timer_ms, queue = decode_status_value(value)
        job_id = keys.id_suffix(key)
        counts[queue, status] += 1
        if status == Status.READY:
            pending = ready_by_queue[queue]
            pending.append((priority, job_id))
            ready += 1
            if len(pending) >= CHUNK:
                memory.ready.insert_many(queue, pending)
                pending.clear()
        elif status in timers and timer_ms:
            target, due = timers[status]
            due.append((timer_ms, job_id))
            scheduled += status == Status.SCHEDULED
            if len(due) >= CHUNK:
                target.insert_many(due)
                due.clear()
    for queue, pending in ready_by_queue.items():
        memory.ready.insert_many(queue, pending)
    for target, due in timers.values():
        target.insert_many(due)
    memory.counts.apply(counts)
    return ready, scheduled
