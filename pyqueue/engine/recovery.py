"""Start-up: what the store says was in flight goes back to ready before serving, then the
in-memory sets are rebuilt from the status index, in the background, while enqueues are taken.

The status index entry carries priority, due time and queue, so the rebuild is one range scan per
status with no record reads.
"""

from collections import defaultdict

from pyqueue import failpoints
from pyqueue.engine.memory import Memory
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store
from pyqueue.store.records import Status, decode_status_value

CHUNK = 10_000


def in_flight_ids(store: Store) -> list[int]:
    return [keys.id_suffix(key) for key, _ in store.scan(Family.INDEX, *keys.status_range(Status.IN_FLIGHT))]


def rebuild(store: Store, memory: Memory) -> tuple[int, int]:
    """Fill the ready and scheduled sets from the store; returns (ready, scheduled) counts.

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

    scheduled = 0
    due: list[tuple[int, int]] = []
    for key, value in store.scan(Family.INDEX, *keys.status_range(Status.SCHEDULED)):
        _, run_at, _ = decode_status_value(value)
        due.append((run_at, keys.id_suffix(key)))
        if len(due) >= CHUNK:
            memory.scheduled.insert_many(due)
            scheduled += len(due)
            due.clear()
    memory.scheduled.insert_many(due)
    scheduled += len(due)
    return ready, scheduled
