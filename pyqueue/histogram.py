"""A Prometheus-style histogram kept as plain numbers, and the bounds in seconds most of pyqueue's
use: what the engine's telemetry and the cluster's changelog both count with. A leaf: it imports
nothing of pyqueue, so any layer may use it."""

import bisect
from collections.abc import Iterable, Sequence

# Seconds: from 0.5 ms (a buffered commit) to a minute (a queue that waited).
SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Histogram:
    """Cumulative-on-read bucket counts, a sum and a count; one writer thread per histogram."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def observe_many(self, values: Iterable[float]) -> None:
        counts, bounds, total = self.counts, self.bounds, 0.0
        for value in values:
            counts[bisect.bisect_left(bounds, value)] += 1
            total += value
        self.sum += total

    def buckets(self) -> list[tuple[str, int]]:
        """(upper bound, cumulative count) pairs ending with +Inf, as Prometheus wants them."""
        out, running = [], 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), list(self.counts), strict=True):
            running += n
            out.append((bound, running))
        return out
