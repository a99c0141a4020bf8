"""How long, and when, an enqueue is sent again while a shard fails over (a cluster's owner dies
or hands over, a shard process restarts): the one rule both clients follow.

An enqueue is sent again only when that cannot make a second job:
- the request never reached a server that could act on it (no connection, a server already
  stopping that refused it before anything was written): `Unavailable.unsent`;
- or every job in it has a unique key: a retry of one that was committed is answered with the
  job that holds the key (`Job.duplicate`), never a second job.
Any other lost answer (the owner died while the call was in flight) is raised: the job may or may
not exist, and only the caller can tell.
"""

import time
from collections.abc import Callable, Sequence

from pyqueue.errors import PyQueueError, Unavailable
from pyqueue.v1 import queue_pb2 as pb

FAILOVER_S = 30.0  # the default budget: a takeover with the default lease takes well under it


class Failover:
    def __init__(
        self, budget_s: float, messages: Sequence[pb.NewJob], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._deadline = clock() + budget_s
        self._idempotent = bool(messages) and all(m.unique_key for m in messages)
        self._tries = 0

    def next_delay(self, exc: PyQueueError) -> float | None:
        """Seconds to wait before sending again, or None: raise `exc`."""
        if not isinstance(exc, Unavailable) or not (exc.unsent or self._idempotent):
            return None
        delay: float = min(1.0, 0.05 * 2.0**self._tries)
        if self._clock() + delay > self._deadline:
            return None
        self._tries += 1
        return delay
