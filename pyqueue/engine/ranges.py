"""The one table of ranges every client-given number is checked against, in Enqueue, UpdateJobs,
Fail and Extend alike, before anything is written.

The bounds keep every sum the engine makes on a stored value (now + delay, attempt^exponent, ...)
inside a signed 64-bit millisecond time, so arithmetic on a job can never overflow later, at a
claim, an ack or a failure. Refusals are INVALID_ARGUMENT and name the field and its range.
"""

import math

from pyqueue.engine.errors import InvalidArgument

DAY_MS = 24 * 3600 * 1000
YEAR_MS = 365 * DAY_MS
LATEST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the latest absolute time accepted
LONGEST_MS = 100 * YEAR_MS  # the longest span (delay, retention, backoff) accepted

# field -> (lowest, highest, unit)
RANGES: dict[str, tuple[float, float, str]] = {
    "run_at_ms": (0, LATEST_MS, "ms since the epoch"),
    "retry_at_ms": (0, LATEST_MS, "ms since the epoch"),
    "delay_ms": (0, LONGEST_MS, "ms"),
    "keep_completed_ms": (0, LONGEST_MS, "ms"),
    "keep_result_ms": (0, LONGEST_MS, "ms"),
    "keep_ms": (0, LONGEST_MS, "ms"),  # a workflow group's bookkeeping after it succeeded
    "timeout_ms": (0, 30 * DAY_MS, "ms"),
    "extend_ms": (0, 30 * DAY_MS, "ms"),
    "max_retries": (0, 10_000, ""),
    "backoff.base_s": (0, 365 * 24 * 3600, "s"),
    "backoff.exponent": (0, 10, ""),
    "backoff.jitter_s": (0, 24 * 3600, "s"),
}


def check(field: str, value: float, where: str = "") -> None:
    """Refuse a value outside its field's range (and any float that is not finite)."""
    low, high, unit = RANGES[field]
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"{where}{field} is {value}; it must be a finite number in {low:g}..{high:g}")
    if not low <= value <= high:
        raise InvalidArgument(
            f"{where}{field} {value:g} is outside {low:g}..{high:g}{' ' + unit if unit else ''}"
        )


def check_backoff(backoff: tuple[float, float, float] | None, where: str = "") -> None:
    if backoff is None:
        return
    for name, value in zip(("base_s", "exponent", "jitter_s"), backoff, strict=True):
        check(f"backoff.{name}", value, where)


def saturate_span_ms(ms: float) -> int:
    """A computed span (a backoff delay), held to the longest one accepted."""
    if not ms < LONGEST_MS:  # also NaN
        return LONGEST_MS
    return max(int(ms), 0)


def clip_text(text: str, limit: int) -> str:
    """Error text from a worker, cut to `limit` bytes (with a note) rather than refused: the
    failure is still recorded, its size bounded."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[:limit].decode(errors="ignore") + f"\n[cut: {len(raw)} bytes, the limit is {limit}]"
