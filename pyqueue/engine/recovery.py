"""Start-up, before serving: what the store says was in flight goes back to ready, paused queues
are read, and a store written before ready jobs were keyed in run order is brought up to date.
The in-memory sets are then rebuilt while serving (rebuild.py).
"""

from pyqueue.store import keys
from pyqueue.store.contract import Family, Store
from pyqueue.store.records import Status, decode_status_value

CHUNK = 10_000
PAUSED = "paused:"
LAYOUT = keys.meta_key("layout")
READY_IN_RUN_ORDER = b"2"  # the layout version from which ready keys are (queue, priority, id)


def in_flight_ids(store: Store) -> list[int]:
    return [keys.id_suffix(key) for key, _ in store.scan(Family.INDEX, *keys.status_range(Status.IN_FLIGHT))]


def paused_queues(store: Store) -> list[str]:
    lo = keys.meta_key(PAUSED)
    return [key[len(lo) :].decode() for key, _ in store.scan(Family.DATA, lo, lo + b"\xff")]


def rekey_ready(store: Store) -> int:
    """Rewrite ready keys of the old layout (S ready id) as S ready queue priority id; returns how
    many. The value holds the queue and priority, so no record is read. Runs once per store,
    before the writer starts; the layout mark written with the last batch says it is done."""
    if store.get(Family.DATA, LAYOUT) == READY_IN_RUN_ORDER:
        return 0
    moved = 0
    batch = store.batch()
    for key, value in store.scan(Family.INDEX, *keys.status_range(Status.READY)):
        if not keys.is_old_ready_key(key):
            continue
        priority, _, queue = decode_status_value(value)
        batch.delete(Family.INDEX, key)
        batch.put(Family.INDEX, keys.status_key(Status.READY, keys.id_suffix(key), queue, priority), value)
        moved += 1
        if len(batch) >= 2 * CHUNK:
            store.write(batch)
            batch = store.batch()
    batch.put(Family.DATA, LAYOUT, READY_IN_RUN_ORDER)
    store.write(batch)
    store.sync()
    return moved
