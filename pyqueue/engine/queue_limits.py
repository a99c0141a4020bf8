"""Per-queue limits as the server keeps them: at most `max_running` jobs of the queue in flight
across all workers, and a rate (token bucket: `rate_per_s`, bursts of `burst`). Stored as
M limit:QUEUE (JSON) and enforced at claim time in the native ready index (native/src/limits.rs):
a limited job stays ready and goes out the moment it is allowed.
"""

import json
from dataclasses import dataclass

from pyqueue.engine.errors import InvalidArgument
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store

PREFIX = "limit:"


@dataclass(frozen=True, slots=True)
class QueueLimit:
    max_running: int = 0  # 0: no cap
    rate_per_s: float = 0.0  # 0: no rate
    burst: float = 0.0  # 0: one second's worth (at least 1)

    @property
    def is_set(self) -> bool:
        return self.max_running > 0 or self.rate_per_s > 0

    @property
    def bucket(self) -> float:
        return self.burst or max(self.rate_per_s, 1.0)

    def encode(self) -> bytes:
        return json.dumps(
            {"max_running": self.max_running, "rate_per_s": self.rate_per_s, "burst": self.burst}
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "QueueLimit":
        data = json.loads(raw)
        return cls(int(data["max_running"]), float(data["rate_per_s"]), float(data["burst"]))

    def check(self) -> None:
        if not 0 <= self.max_running <= 1_000_000:
            raise InvalidArgument(f"max_running {self.max_running} is outside 0..1000000 (0: no cap)")
        if not 0 <= self.rate_per_s <= 1_000_000 or not 0 <= self.burst <= 1_000_000:
            raise InvalidArgument("the rate and the burst must be within 0..1000000 (0: none)")


def key(queue: str) -> bytes:
    return keys.meta_key(PREFIX + queue)


def load(store: Store) -> dict[str, QueueLimit]:
    lo = keys.meta_key(PREFIX)
    return {k[len(lo) :].decode(): QueueLimit.decode(v) for k, v in store.scan(Family.DATA, lo, lo + b"\xff")}
