"""Fair share's weights as the server keeps them: per queue, the keys whose share of the queue's
turns is not 1 (jobs enqueued with `fair_key`; "" weighs the jobs without one). Stored as
M fair:QUEUE (JSON, key to weight) and applied to the queue's lane in the native ready index
(native/src/fair.rs), where a claim serves the keys in turn in proportion to their weights.
"""

import json
from dataclasses import dataclass

from pyqueue._native import MAX_FAIR_WEIGHT, ReadyIndex
from pyqueue.engine.errors import InvalidArgument, ResourceExhausted
from pyqueue.engine.ids import created_ms_of
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store

PREFIX = "fair:"
MAX_WEIGHT = MAX_FAIR_WEIGHT  # what the native index keeps (native/src/fair.rs)
MAX_WEIGHTED_KEYS = 10_000  # per queue: what one stored entry (and one listing) may hold
DEFAULT_LIST = 20
MAX_LIST = 1_000


def check_weight(weight: int) -> None:
    if not 1 <= weight <= MAX_WEIGHT:
        raise InvalidArgument(f"weight {weight} is outside 1..{MAX_WEIGHT} (1 is every key's default)")


def changed(weights: dict[str, int], fair_key: str, weight: int) -> dict[str, int]:
    """The queue's weights with `fair_key` at `weight` (1: forgotten); refused past the bound."""
    check_weight(weight)
    after = {k: w for k, w in weights.items() if k != fair_key}
    if weight != 1:
        after[fair_key] = weight
    if len(after) > MAX_WEIGHTED_KEYS:
        raise ResourceExhausted(
            f"the queue has {MAX_WEIGHTED_KEYS} keys with a weight already, the most it keeps; "
            "set one back to 1 first"
        )
    return after


def encode(weights: dict[str, int]) -> bytes:
    return json.dumps(weights, sort_keys=True).encode()


def key(queue: str) -> bytes:
    return keys.meta_key(PREFIX + queue)


def load(store: Store) -> dict[str, dict[str, int]]:
    lo = keys.meta_key(PREFIX)
    found = {}
    for k, v in store.scan(Family.DATA, lo, lo + b"\xff"):
        found[k[len(lo) :].decode()] = {str(name): int(w) for name, w in json.loads(v).items()}
    return found


def apply(ready: ReadyIndex, queue: str, before: dict[str, int], after: dict[str, int]) -> None:
    for fair_key in before.keys() - after.keys():
        ready.set_fair_weight(queue, fair_key, 1)
    for fair_key, weight in after.items():
        ready.set_fair_weight(queue, fair_key, weight)


@dataclass(frozen=True, slots=True)
class KeyWaiting:
    fair_key: str
    waiting: int
    oldest_seconds: float  # since its oldest waiting job was created
    weight: int


def busiest(
    ready: ReadyIndex, queue: str, limit: int, weights: dict[str, int], now_ms: int
) -> list[KeyWaiting]:
    """The queue's fair keys with the most jobs waiting, at most `limit` (0: the default)."""
    if not 0 <= limit <= MAX_LIST:
        raise InvalidArgument(f"limit {limit} is outside 0..{MAX_LIST} (0: {DEFAULT_LIST})")
    return [
        KeyWaiting(name, waiting, max(0, now_ms - created_ms_of(oldest)) / 1000, weights.get(name, 1))
        for name, waiting, oldest in ready.fair_busiest(queue, limit or DEFAULT_LIST)
    ]
