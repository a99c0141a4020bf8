"""Start-up: what the store says was in flight goes back to ready before serving, then the
in-memory sets are rebuilt from the status index, in the background, while enqueues are taken.

The status index entry carries priority, due time and queue, so the rebuild is one range scan per
status with no record reads.
"""

from collections import defaultdict

from pyqueue import failpoints
from pyqueue._native import TimerSet
from pyqueue.engine.memory import Memory
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store
from pyqueue.store.records import Status, decode_status_value

CHUNK = 10_000


def in_flight_ids(store: Store) -> list[int]:
    return [keys.id_suffix(key) for key, _ in store.scan(Family.INDEX, *keys.status_range(Status.IN_FLIGHT))]


def rebuild(store: Store, memory: Memory) -> tuple[int, int]:
    """Fill the ready set and the timer sets from the store; returns (ready, scheduled) counts.

    Safe beside live enqueues: inserting a key twice leaves one entry, and every entry is a hint
    that claims and promotions re-check against the record.
    """
    failpoints.wait("rebuild")
    ready = 0
    by_queue: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for key, value in store.scan(Family.INDEX, *keys.status_range(Status.READY)):
        priority, _, queue = decode_status_value(value)
        pending = by_queue[queue]
        pending.append((priority, keys.id_suffix(key)))
        if len(pending) >= CHUNK:
            memory.ready.insert_many(queue, pending)
            ready += len(pending)
            pending.clear()
    for queue, pending in by_queue.items():
        memory.ready.insert_many(queue, pending)
        ready += len(pending)

    scheduled = _fill(store, Status.SCHEDULED, memory.scheduled)
    _fill(store, Status.COMPLETED, memory.expiring)
    _fill(store, Status.DEAD, memory.expiring)
    return ready, scheduled


def _fill(store: Store, status: Status, timers: TimerSet) -> int:
    """(timer, id) keys of every job in `status` that has a timer; returns how many."""
    count = 0
    pending: list[tuple[int, int]] = []
    for key, value in store.scan(Family.INDEX, *keys.status_range(status)):
        _, timer_ms, _ = decode_status_value(value)
        if timer_ms:
            pending.append((timer_ms, keys.id_suffix(key)))
        if len(pending) >= CHUNK:
            timers.insert_many(pending)
            count += len(pending)
            pending.clear()
    timers.insert_many(pending)
    return count + len(pending)
