"""The engine's configuration, with its defaults: on its own so that what the engine builds (the
consumer, the services) can read it without importing the engine."""

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from pyqueue.engine.limits import Limits
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.services.alarm import AlarmConfig


def _exit_now(exc: BaseException) -> None:
    logging.getLogger("pyqueue").critical("stopping at once after a storage failure: %s", exc)
    logging.shutdown()
    os._exit(70)


@dataclass(frozen=True)
class EngineConfig:
    shard: int = 0
    durable: bool = True
    limits: Limits = field(default_factory=Limits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    alarms: AlarmConfig = field(default_factory=AlarmConfig)
    min_free_bytes: int = 0  # refuse enqueues below this much free disk (0: no guard)
    # Every unique key holds within its queue: a queue lives on one shard, so this holds on any
    # number of shards. False (one process only): a key holds across every queue.
    unique_per_queue: bool = True
    # How long past an attempt's time limit the server fails it, when its worker reported the start:
    # a live worker fails it itself at the limit (with its own error), and this is the backstop.
    time_limit_grace_ms: int = 1000
    # Commit on the event loop while the writer is idle (committer.py). Off where a write waits on
    # the network (a cluster's changelog): the loop must never block on it.
    inline_commits: bool = True
    on_fatal: Callable[[BaseException], None] = _exit_now
    # The shard of each queue (a sharded server's slot map), for workflows whose jobs span shards;
    # None: every queue is on this shard (a lone server).
    queue_shard: Callable[[str], int] | None = None
