"""Per-queue limits as the server keeps them: at most `max_running` jobs of the queue in flight
across all workers, a rate (token bucket: `rate_per_s`, bursts of `burst`), and at most
`key_max_running` in flight per limit key (jobs enqueued with `limit_key`). Stored as
M limit:QUEUE (JSON) and enforced at claim time in the native ready index (native/src/limits.rs):
a limited job stays ready and goes out the moment it is allowed.
"""

import json
from dataclasses import dataclass

from pyqueue._native import ReadyIndex
from pyqueue.engine.errors import InvalidArgument
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store

PREFIX = "limit:"


@dataclass(frozen=True, slots=True)
class QueueLimit:
    max_running: int = 0  # 0: no cap
    rate_per_s: float = 0.0  # 0: no rate
    burst: float = 0.0  # 0: one second's worth (at least 1)
    key_max_running: int = 0  # per limit key; 0: no cap

    @property
    def is_set(self) -> bool:
        return self.max_running > 0 or self.rate_per_s > 0 or self.key_max_running > 0

    @property
    def bucket(self) -> float:
        return self.burst or max(self.rate_per_s, 1.0)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "max_running": self.max_running,
                "rate_per_s": self.rate_per_s,
                "burst": self.burst,
                "key_max_running": self.key_max_running,
            }
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "QueueLimit":
        data = json.loads(raw)
        return cls(
            int(data["max_running"]),
            float(data["rate_per_s"]),
            float(data["burst"]),
            int(data.get("key_max_running", 0)),  # absent before per-key caps
        )

    def check(self) -> None:
        for name, value in (("max_running", self.max_running), ("key_max_running", self.key_max_running)):
            if not 0 <= value <= 1_000_000:
                raise InvalidArgument(f"{name} {value} is outside 0..1000000 (0: no cap)")
        if not 0 <= self.rate_per_s <= 1_000_000 or not 0 <= self.burst <= 1_000_000:
            raise InvalidArgument("the rate and the burst must be within 0..1000000 (0: none)")


def apply(ready: ReadyIndex, queue: str, limit: QueueLimit, running: int) -> None:
    """Put `limit` on the queue's lane; `running` is how many of its jobs are in flight now."""
    bucket = limit.bucket if limit.rate_per_s else 0
    ready.set_limit(queue, limit.max_running, limit.rate_per_s, bucket, running)
    ready.set_key_cap(queue, limit.key_max_running)


def key(queue: str) -> bytes:
    return keys.meta_key(PREFIX + queue)


def load(store: Store) -> dict[str, QueueLimit]:
    lo = keys.meta_key(PREFIX)
    return {k[len(lo) :].decode(): QueueLimit.decode(v) for k, v in store.scan(Family.DATA, lo, lo + b"\xff")}
