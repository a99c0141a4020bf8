"""One table of the figures users feel, each beside its target and, given a peer-harness summary,
the peers measured on this machine: what `make bench` prints.

    python bench/table.py [--quick] [--peers ../shared/peerbench/results/summary-*.md]

Every row runs its own script (bench/*.py) in a fresh server and quotes its median over --runs
runs. Conditions: 100 B jobs, fsync unless the row says buffered, the product's default of 2 shards
unless it says otherwise, one machine. Peers come only from a summary of the peer harness
(../shared/peerbench, run in the same session): this script never starts Redis or PostgreSQL.
"""

import argparse
import functools
import json
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(script: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(HERE / script), *args], capture_output=True, text=True, timeout=900, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@functools.cache
def median_of(runs: int, script: str, *args: str) -> dict[str, float]:
    results = [measure(script, *args) for _ in range(runs)]
    return {
        k: statistics.median(float(r[k]) for r in results)  # type: ignore[arg-type]
        for k, v in results[0].items()
        if _number(v)
    }


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


Row = tuple[str, str, Callable[[], str], str]  # figure, target, how to measure it, peer key


def rows(runs: int, jobs: int, seconds: float) -> list[Row]:
    def single(mode: str, key: str) -> Callable[[], str]:
        return lambda: _figure(
            median_of(runs, "single_enqueue.py", "--seconds", "8", "--commit-mode", mode)[key]
        )

    def drain(kind: str, processes: int) -> Callable[[], str]:
        args = ("--jobs", str(jobs), "--kind", kind, "--processes", str(processes))
        return lambda: f"{median_of(runs, 'worker_drain.py', *args)['jobs_per_s']:,.0f}"

    def load(mode: str, shards: int, key: str = "jobs_per_s") -> Callable[[], str]:
        args: tuple[str, ...] = ("--jobs", str(jobs * 5), "--commit-mode", mode, "--shards", str(shards))
        if shards > 1:
            args += ("--producers", str(shards), "--consumers", str(shards), "--queues", str(shards))
        return lambda: f"{median_of(runs, 'load.py', *args)[key]:,.0f}"

    def latency(key: str) -> Callable[[], str]:
        args = ("--workers", "2", "--seconds", f"{seconds:g}")
        return lambda: _figure(median_of(runs, "start_latency.py", *args)[key])

    return [
        (
            "enqueue, one job per call, 1 producer, fsync (jobs/s)",
            "≥ 2,500",
            single("fsync", "jobs_per_s"),
            "enq",
        ),
        ("the same, buffered (jobs/s)", "≥ 6,000", single("buffered", "jobs_per_s"), "enq:buffered"),
        ("server CPU per call, fsync (ms)", "≤ 0.25", single("fsync", "server_cpu_ms_per_call"), ""),
        ("client CPU per call, fsync (ms)", "≤ 0.15", single("fsync", "client_cpu_ms_per_call"), ""),
        (
            "`pyqueue worker`, no-op `def` (default concurrency 10), 1 process (jobs/s)",
            "≥ 8,000",
            drain("noop", 1),
            "proc1",
        ),
        ("the same, `--processes 2` (jobs/s)", "≥ 12,000", drain("noop", 2), "proc2"),
        (
            "`pyqueue worker`, no-op `async def` (default concurrency 50), 1 process (jobs/s)",
            "≥ 8,000",
            drain("anoop", 1),
            "proc1",
        ),
        ("the same, `--processes 2` (jobs/s)", "≥ 12,000", drain("anoop", 2), "proc2"),
        ("p99 enqueue to start at 500 jobs/s, 2 worker processes (ms)", "≤ 5", latency("p99_ms"), "p99"),
        ("batched full cycle, 1 shard, fsync (jobs/s)", "≥ 60,000", load("fsync", 1), ""),
        ("server CPU per job on it (µs)", "≤ 12", load("fsync", 1, "server_cpu_us_per_job"), ""),
        ("the same, buffered (jobs/s)", "fsync ≥ 0.8 of it", load("buffered", 1), ""),
        ("batched full cycle, 2 shards, fsync (jobs/s)", "≥ 100,000", load("fsync", 2), ""),
    ]


def peers(summary: Path | None) -> dict[str, dict[str, str]]:
    """From a peer-harness summary: per system, its enqueue and processing medians."""
    if summary is None:
        return {}
    out: dict[str, dict[str, str]] = {}
    for line in summary.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 8 or not re.match(r"\d", cells[3]):
            continue
        median = [c.split(" [")[0] for c in cells]
        out[cells[1]] = {"enq": median[3], "proc1": median[4], "proc2": median[5], "p99": median[7]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run each, fewer jobs")
    parser.add_argument("--peers", type=Path, help="a summary-*.md written by the peer harness")
    args = parser.parse_args()
    runs, jobs, seconds = (1, 10_000, 5.0) if args.quick else (args.runs, 30_000, 10.0)
    others = {k: v for k, v in peers(args.peers).items() if not k.startswith("pyqueue")}
    names = sorted(others)
    print(f"| figure | target | pyqueue (median of {runs}) | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for figure, target, how, key in rows(runs, jobs, seconds):
        peer_key = key.split(":")[0]
        cells = [others[n].get(peer_key, "") if peer_key else "" for n in names]
        print(f"| {figure} | {target} | {how()} | " + " | ".join(cells) + " |", flush=True)
    if names:
        print(f"\nPeers from {args.peers}: the harness's medians (their own durable setups: Redis AOF")
        print("everysec, PostgreSQL fsync on), one job per call and their workers' defaults.")


if __name__ == "__main__":
    main()
