"""Micro benchmarks of the native ready set, as called from Python.

Run with `make bench` (pytest-benchmark). Memory is measured as RSS growth (Linux), so run these in
a fresh process for a clean figure.
"""

import gc
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from pyqueue import _native

MILLION = 1_000_000


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def filled(n: int, start: int = 0) -> "_native.ReadyIndex":
    ready = _native.ReadyIndex()
    chunk = 100_000
    for lo in range(start, start + n, chunk):
        ready.insert_many("q", [(i % 16, i) for i in range(lo, min(lo + chunk, start + n))])
    return ready


def test_claim_one_from_a_million(benchmark) -> None:  # type: ignore[no-untyped-def]
    ready = filled(MILLION)
    selection = ready.select(["q"])
    counter = iter(range(MILLION, 10**12))

    def claim_and_refill() -> None:
        # Claim one; put one back so the set stays at 1M for every round.
        selection.claim(1)
        ready.insert("q", 8, next(counter))

    benchmark.extra_info["ready_jobs"] = MILLION
    benchmark(claim_and_refill)


def test_claim_only_from_a_million(benchmark) -> None:  # type: ignore[no-untyped-def]
    ready = filled(MILLION)
    selection = ready.select(["q"])
    benchmark.pedantic(selection.claim, args=(1,), rounds=200_000, iterations=1)
    assert ready.total() == MILLION - 200_000


@pytest.mark.parametrize("passed_through", [0, MILLION, 5 * MILLION])
def test_claim_after_jobs_passed_through(benchmark, passed_through: int) -> None:  # type: ignore[no-untyped-def]
    """No tombstones in memory: claim cost must not grow with what went through before."""
    ready = _native.ReadyIndex()
    selection = ready.select(["q"])
    ready.insert_many("q", [(0, i) for i in range(100_000)])
    next_id = 100_000
    for _ in range(passed_through // 100_000):
        assert len(selection.claim(100_000)) == 100_000
        ready.insert_many("q", [(0, i) for i in range(next_id, next_id + 100_000)])
        next_id += 100_000
    benchmark.extra_info["passed_through"] = passed_through
    benchmark.pedantic(selection.claim, args=(1,), rounds=50_000, iterations=1)


MEASURE = """
import gc, sys
sys.path.insert(0, sys.argv[1])
from test_native_ready import MILLION, filled, rss_bytes
gc.collect(); before = rss_bytes()
ready = filled(MILLION)
gc.collect(); print((rss_bytes() - before) / MILLION)
"""


def test_memory_per_ready_job_at_a_million(benchmark) -> None:  # type: ignore[no-untyped-def]
    # In a fresh process: RSS growth is only honest when no freed memory is waiting for reuse.
    def measure() -> float:
        out = subprocess.run(
            [sys.executable, "-c", MEASURE, str(Path(__file__).parent)],
            capture_output=True,
            text=True,
            check=True,
        )
        return float(out.stdout)

    per_job = benchmark.pedantic(measure, rounds=3, iterations=1)
    benchmark.extra_info["bytes_per_ready_job"] = round(per_job, 1)
    print(f"\nmemory per ready job at 1M: {per_job:.1f} bytes (RSS growth, fresh process)")


@pytest.mark.parametrize("blocked_percent", [0, 50, 99])
def test_claim_with_jobs_blocked_by_limits(benchmark, blocked_percent: int) -> None:  # type: ignore[no-untyped-def]
    """1M ready jobs, `blocked_percent` of them in a queue at its max_running: a claim over both
    queues passes the blocked queue by in O(1) (no scan past its jobs)."""
    ready = _native.ReadyIndex()
    blocked = MILLION * blocked_percent // 100
    for queue, lo, hi in (("limited", 0, blocked), ("free", blocked, MILLION)):
        for start in range(lo, hi, 100_000):
            ready.insert_many(queue, [(0, i) for i in range(start, min(start + 100_000, hi))])
    ready.set_limit("limited", 1, 0.0, 0.0, 1)  # one running already: the cap is reached
    selection = ready.select(["limited", "free"])
    counter = iter(range(MILLION, 10**12))

    def claim_and_refill() -> None:
        assert len(selection.claim(1)) == 1
        ready.insert("free", 0, next(counter))
        ready.finished("free", 1)

    benchmark.extra_info["ready_jobs"] = MILLION
    benchmark.extra_info["blocked_percent"] = blocked_percent
    benchmark(claim_and_refill)
    assert ready.count("limited") == blocked, "the blocked queue gave nothing out"


@pytest.mark.parametrize("blocked_percent", [0, 50, 99])
def test_claim_with_keys_blocked_by_their_cap(benchmark, blocked_percent: int) -> None:  # type: ignore[no-untyped-def]
    """1M ready jobs with limit keys (10,000 keys of 100 jobs), `blocked_percent` of the keys at
    their per-key cap: a claim looks only at the keys allowed to run (no scan past blocked jobs)."""
    ready = _native.ReadyIndex()
    ready.set_key_cap("q", 1)
    keys = [f"customer-{k}" for k in range(10_000)]
    blocked = keys[: len(keys) * blocked_percent // 100]
    free = keys[len(blocked) :]
    for i, key in enumerate(blocked):  # one job of each blocked key runs: its cap is reached
        ready.insert_keyed("q", 0, i, key)
    assert len(ready.select(["q"]).claim(len(blocked))) == len(blocked)
    job_id = len(blocked)
    for key in keys:
        for _ in range(100):
            ready.insert_keyed("q", 1, job_id, key)
            job_id += 1
    selection = ready.select(["q"])
    counter = iter(range(job_id, 10**12))
    refill = itertools.cycle(free)

    def claim_and_refill() -> None:
        claimed = selection.claim(1)
        assert len(claimed) == 1
        ready.insert_keyed("q", 1, next(counter), next(refill))
        ready.finished("q", 1, claimed)

    benchmark.extra_info["ready_jobs"] = MILLION
    benchmark.extra_info["blocked_keys_percent"] = blocked_percent
    benchmark(claim_and_refill)
    assert ready.count("q") == MILLION, "every claim was refilled, and blocked keys gave nothing out"


@pytest.mark.parametrize("keys", [0, 100_000])
def test_claim_one_from_a_million_over_fair_keys(benchmark, keys: int) -> None:  # type: ignore[no-untyped-def]
    """1M ready jobs spread over `keys` fair keys (0: no fair key, the same as
    test_claim_one_from_a_million) with 16 priorities: claim one and put one back (on the next
    key in turn), so the index stays at 1M jobs and `keys` keys."""
    ready = _native.ReadyIndex()
    ready.begin_loading(["q"])
    for lo in range(0, MILLION, 100_000):
        span = range(lo, lo + 100_000)
        if keys:
            ready.load("q", [], [], [(i % 16, i, f"tenant-{i % keys}") for i in span])
        else:
            ready.load("q", [(i % 16, i) for i in span])
    ready.finish_loading("q")
    gc.collect()  # the loading's lists: a collection inside the timed rounds would be noise
    selection = ready.select(["q"])
    counter = iter(range(MILLION, 10**12))
    names = [f"tenant-{k}" for k in range(keys)]
    refill = itertools.cycle(names)

    def claim_and_refill() -> None:
        selection.claim(1)
        if keys:
            ready.insert_fair("q", 8, next(counter), next(refill))
        else:
            ready.insert("q", 8, next(counter))

    benchmark.extra_info["ready_jobs"] = MILLION
    benchmark.extra_info["fair_keys"] = keys
    benchmark(claim_and_refill)
    assert ready.count("q") == MILLION and ready.fair_key_count("q") == keys
