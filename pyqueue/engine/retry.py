"""The retry policy: how long a failed job waits, and when it is dead.

The default curve is the one Sidekiq, Faktory and Asynq users know: attempt^4 + 15 s plus a random
jitter that grows with the attempt; 25 retries add up to about three weeks.
"""

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 25
    base_s: float = 15.0
    exponent: float = 4.0
    jitter_s: float = 10.0

    def retries_for(self, record_max_retries: int) -> int:
        return self.max_retries if record_max_retries < 0 else record_max_retries

    def is_exhausted(self, attempts: int, record_max_retries: int) -> bool:
        """After `attempts` deliveries have failed, are the retries used up?"""
        return attempts > self.retries_for(record_max_retries)

    def delay_ms(self, attempts: int, rng: random.Random | None = None) -> int:
        r = (rng or random).random()
        seconds = attempts**self.exponent + self.base_s + r * self.jitter_s * (attempts + 1)
        return int(seconds * 1000)
