"""The retry and retention policy: how long a failed job waits, when it is dead, how long finished
jobs are kept.

The default backoff is the curve Sidekiq, Faktory and Asynq users know: attempt^4 + 15 s plus a
random jitter that grows with the attempt; 25 retries add up to about three weeks. A job can carry
its own curve and retry limit.
"""

import functools
import json
import math
import random
from dataclasses import dataclass, replace
from typing import Any

from pyqueue.engine.ranges import DAY_MS, saturate_span_ms


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 25
    base_s: float = 15.0
    exponent: float = 4.0
    jitter_s: float = 10.0
    max_worker_losses: int = 3  # a job that took down this many workers is dead
    max_unknown_handbacks: int = 20  # a job handed back this often as of an unknown type is dead
    keep_completed_ms: int = 0  # 0: delete at the ack
    keep_dead_ms: int = 7 * DAY_MS

    def retries_for(self, record_max_retries: int) -> int:
        return self.max_retries if record_max_retries < 0 else record_max_retries

    def is_exhausted(self, attempts: int, record_max_retries: int) -> bool:
        """After `attempts` deliveries have failed, are the retries used up?"""
        return attempts > self.retries_for(record_max_retries)

    def delay_ms(self, attempts: int, rng: random.Random | None = None) -> int:
        """The wait before the retry after `attempts`, held to the longest span accepted."""
        r = (rng or random).random()
        try:
            seconds = float(attempts) ** self.exponent + self.base_s + r * self.jitter_s * (attempts + 1)
        except OverflowError:
            seconds = math.inf
        return saturate_span_ms(seconds * 1000)

    def for_job(self, options: "JobOptions") -> "RetryPolicy":
        policy = self
        if options.backoff is not None:
            base_s, exponent, jitter_s = options.backoff
            policy = replace(policy, base_s=base_s, exponent=exponent, jitter_s=jitter_s)
        if options.keep_completed_ms is not None:
            policy = replace(policy, keep_completed_ms=options.keep_completed_ms)
        if options.keep_result_ms is not None:  # the result lives with the completed job
            policy = replace(policy, keep_completed_ms=max(policy.keep_completed_ms, options.keep_result_ms))
        return policy


@dataclass(frozen=True, slots=True)
class JobOptions:
    """Rarely used per-job settings, kept as JSON in the record's options blob."""

    backoff: tuple[float, float, float] | None = None
    keep_completed_ms: int | None = None
    headers: dict[str, str] | None = None  # what the producer hands the worker (trace context)
    keep_result_ms: int | None = None  # keep the handler's return value (and the job) this long
    cancelled: bool = False  # in flight, and a cancel was asked for (requests/steering.py)
    # The job's place in a workflow (engine/flows/membership.py): its workflow, its batch and
    # index there, the step after it, and what it is given from the steps before it.
    flow: dict[str, Any] | None = None
    # A folded job (requests/producers.py): its fold key "k", the most payloads "m", and how many
    # it holds "n".
    fold: dict[str, Any] | None = None

    def encode(self) -> bytes:
        data: dict[str, object] = {}
        if self.backoff is not None:
            data["backoff"] = list(self.backoff)
        if self.keep_completed_ms is not None:
            data["keep_completed_ms"] = self.keep_completed_ms
        if self.headers:
            data["headers"] = self.headers
        if self.keep_result_ms is not None:
            data["keep_result_ms"] = self.keep_result_ms
        if self.cancelled:
            data["cancelled"] = True
        if self.flow:
            data["flow"] = self.flow
        if self.fold:
            data["fold"] = self.fold
        return json.dumps(data, separators=(",", ":")).encode() if data else b""

    @classmethod
    def decode(cls, raw: bytes) -> "JobOptions":
        """The options of a record (shared: not to be changed; `replace` makes new ones). An ack
        reads them up to three times (retention, workflow, delete): the last few are kept."""
        return _decoded(raw) if raw else NO_OPTIONS

    @classmethod
    def _decode(cls, raw: bytes) -> "JobOptions":
        data = json.loads(raw)
        backoff = data.get("backoff")
        return cls(
            tuple(backoff) if backoff else None,
            data.get("keep_completed_ms"),
            data.get("headers"),
            data.get("keep_result_ms"),
            data.get("cancelled", False),
            data.get("flow"),
            data.get("fold"),
        )


NO_OPTIONS = JobOptions()
_decoded = functools.lru_cache(maxsize=256)(JobOptions._decode)
