"""Moving shards on purpose (`pyqueue cluster move`, `drain`), through keys of the cluster's bucket.

`handover.N` asks shard N's owner to step down: it stops as at a SIGTERM (calls in hand answered,
streams ended, everything written), gives its lease back, and starts again as a standby. While the
key names a node, only that node takes the free lease (for three leases at most: a target that
died does not hold the shard forever); the new owner then deletes the key. `drained.NODE` keeps a
node from taking any shard until `pyqueue cluster undrain`.
"""

import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

HANDOVER_TIMEOUT_LEASES = 3


def handover_key(shard: int) -> str:
    return f"handover.{shard}"


def drained_key(node: str) -> str:
    return f"drained.{node}"


@dataclass(frozen=True)
class Handover:
    source: str  # the owner asked to step down
    target: str  # '' for any other node
    at: float  # wall time it was asked


async def _get(kv: Any, key: str) -> Any:
    from nats.js.errors import KeyNotFoundError

    try:
        return await kv.get(key)
    except KeyNotFoundError:
        return None


async def read_handover(kv: Any, shard: int) -> Handover | None:
    entry = await _get(kv, handover_key(shard))
    if entry is None or not entry.value:
        return None
    value = json.loads(entry.value)
    return Handover(str(value.get("from", "")), str(value.get("to", "")), float(value.get("at", 0)))


async def ask_handover(kv: Any, shard: int, source: str, target: str) -> None:
    await kv.put(handover_key(shard), json.dumps({"from": source, "to": target, "at": time.time()}).encode())


async def is_drained(kv: Any, node: str) -> bool:
    return await _get(kv, drained_key(node)) is not None


async def may_take_free(kv: Any, shard: int, node: str, lease_s: float) -> bool:
    """Whether `node` may take shard `shard`'s free lease now, as far as moves and drains go."""
    if await is_drained(kv, node):
        return False
    handover = await read_handover(kv, shard)
    if handover is None or time.time() - handover.at > HANDOVER_TIMEOUT_LEASES * lease_s:
        return True
    return handover.source != node and handover.target in ("", node)


async def done(kv: Any, shard: int) -> None:
    """The new owner took the shard: the request is fulfilled."""
    from nats.js.errors import KeyNotFoundError

    with contextlib.suppress(KeyNotFoundError):
        await kv.delete(handover_key(shard))
