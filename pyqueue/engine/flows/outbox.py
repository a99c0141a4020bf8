"""Entries for other shards, written in the same write as what caused them, and carried by the
server's relay once they are on disk. Each shard applies another's entries in sequence order and
keeps the last applied in the same write, so an entry carried twice is applied once
(`ApplyInbox` in requests.py).

An entry is JSON: {"to": SHARD, "p": PREVIOUS, "k": "job" | "ev", ...}, where PREVIOUS is the
sequence of this shard's entry before it for the same shard (0: none, or made before entries
said), so the receiver can tell an entry left out from one that never was:
- "job": a workflow's job to create on the shard of its queue ({"job", "flow", "d": delay});
- "ev": a batch member's new state, for the batch's home ({"b", "i", "s", "j", "r"}).
"""

import json
from typing import Any

from pyqueue.engine.flows.context import SEQ_META, Flows, last_to_meta
from pyqueue.engine.view import BatchView, dump_doc
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store


def put(view: BatchView, writes: Any, flows: Flows, to: int, entry: dict[str, Any]) -> None:
    seq = flows.next_seq
    flows.next_seq += 1
    # Read from the write, not kept in memory: a write abandoned or failed leaves no gap.
    previous_key = keys.meta_key(last_to_meta(to))
    previous = int(view.get_meta(previous_key) or 0)
    view.put_meta(keys.outbox_key(seq), dump_doc({"to": to, "p": previous, **entry}))
    view.put_meta(previous_key, str(seq).encode())
    view.put_meta(keys.meta_key(SEQ_META), str(seq).encode())
    writes.outbox_high = seq
    writes.outbox_of = flows
    flows.count("outbox_entries")


def last_seq(store: Store) -> int:
    """The last sequence this shard gave an entry (kept when the outbox is empty)."""
    raw = store.get(Family.DATA, keys.meta_key(SEQ_META))
    stored = int(raw) if raw else 0
    last = store.last_key(Family.DATA, *keys.outbox_range())
    return max(stored, keys.id_suffix(last) if last else 0)


def read(store: Store, after: int, upto: int, limit: int) -> list[tuple[int, int, bytes]]:
    """(sequence, destination, entry) of the durable entries past `after`, in order."""
    out: list[tuple[int, int, bytes]] = []
    for key, raw in store.scan(Family.DATA, *keys.outbox_range(after)):
        seq = keys.id_suffix(key)
        if seq > upto or len(out) >= limit:
            break
        out.append((seq, int(json.loads(raw)["to"]), raw))
    return out
