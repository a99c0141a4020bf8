"""The figures users feel, before and after a change, interleaved in one session: what a closing
note quotes when it claims a speed-up.

    git worktree add /tmp/before <rev> && cp pyqueue/_native*.so /tmp/before/pyqueue/  # or build it there
    python bench/before_after.py --before /tmp/before [--rounds 3] [--only 2,5]

Each round runs every script once from the `--before` checkout, then once from this one (each
with its own pyqueue: server, worker and client), so the machine's drift falls on both alike. It
prints one markdown table: medians [min-max] over the rounds, and after/before. Conditions are
each script's defaults unless set below: 100 B jobs, fsync unless the row says buffered, 2 shards
for the single enqueue and the worker, 1 shard for the batched cycle.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

RUNS: list[tuple[str, list[str], list[tuple[str, str]]]] = [
    (
        "single_enqueue.py",
        ["--seconds", "8", "--commit-mode", "fsync"],
        [
            ("`fn.enqueue()`, one sequential producer, fsync (jobs/s)", "jobs_per_s"),
            ("server CPU per call, fsync (ms)", "server_cpu_ms_per_call"),
            ("client CPU per call, fsync (ms)", "client_cpu_ms_per_call"),
        ],
    ),
    (
        "single_enqueue.py",
        ["--seconds", "8", "--commit-mode", "buffered"],
        [
            ("the same producer, buffered (jobs/s)", "jobs_per_s"),
            ("server CPU per call, buffered (ms)", "server_cpu_ms_per_call"),
            ("client CPU per call, buffered (ms)", "client_cpu_ms_per_call"),
        ],
    ),
    (
        "worker_drain.py",
        ["--jobs", "30000", "--kind", "noop"],
        [
            ("`pyqueue worker`, no-op `def`, defaults (jobs/s)", "jobs_per_s"),
            ("server CPU per job (µs)", "server_cpu_us_per_job"),
            ("worker CPU per job (µs)", "worker_cpu_us_per_job"),
        ],
    ),
    (
        "worker_drain.py",
        ["--jobs", "30000", "--kind", "anoop"],
        [("the same, `async def` (jobs/s)", "jobs_per_s")],
    ),
    (
        "worker_drain.py",
        ["--jobs", "30000", "--kind", "noop", "--processes", "2"],
        [("the same, `def`, `--processes 2` (jobs/s)", "jobs_per_s")],
    ),
    (
        "load.py",
        ["--jobs", "150000", "--commit-mode", "fsync"],
        [
            ("batched full cycle, 1 shard, fsync (jobs/s)", "jobs_per_s"),
            ("server CPU per job, fsync (µs)", "server_cpu_us_per_job"),
        ],
    ),
    (
        "load.py",
        ["--jobs", "150000", "--commit-mode", "buffered"],
        [
            ("the same, buffered (jobs/s)", "jobs_per_s"),
            ("server CPU per job, buffered (µs)", "server_cpu_us_per_job"),
        ],
    ),
    (
        "python_side.py",
        ["--jobs", "20000"],
        [
            (
                "64 threads, `fn.enqueue()`, the client's batching (jobs/s)",
                "64_threads_enqueue_batched_jobs_per_s",
            ),
            ("64 threads, batching off (jobs/s)", "64_threads_enqueue_unbatched_jobs_per_s"),
        ],
    ),
]


def measure(checkout: Path, script: str, args: list[str]) -> dict[str, float]:
    """One run of this checkout's `script` with `checkout`'s pyqueue first on the path: its server,
    its worker and its client (the scripts start them all from the pyqueue they import)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    for attempt in (1, 2):
        done = subprocess.run(
            [sys.executable, str(HERE / script), *args],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=checkout,
            env=env,
        )
        if done.returncode == 0:
            break
        # Say why, then run it once more: one failed run should not throw away the others.
        print(
            f"{script} {' '.join(args)} failed in {checkout} (try {attempt}):\n{done.stderr[-2000:]}",
            file=sys.stderr,
        )
    done.check_returncode()
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _cell(values: list[float]) -> str:
    return f"{_figure(statistics.median(values))} [{_figure(min(values))}-{_figure(max(values))}]"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--before", type=Path, required=True, help="a checkout of the earlier revision, built"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated row numbers of RUNS to run (0: single_enqueue fsync ...), default all",
    )
    args = parser.parse_args()
    runs = [RUNS[int(i)] for i in args.only.split(",")] if args.only else RUNS
    after = HERE.parent
    seen: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, checkout in (("before", args.before.resolve()), ("after", after)):
            for script, script_args, figures in runs:
                result = measure(checkout, script, script_args)
                for label, key in figures:
                    seen.setdefault((label, name), []).append(float(result[key]))
    print("| figure | before | after | after/before |")
    print("|---|---|---|---|")
    for _, _, figures in runs:
        for label, _ in figures:
            before, now = seen[label, "before"], seen[label, "after"]
            ratio = statistics.median(now) / statistics.median(before)
            print(f"| {label} | {_cell(before)} | {_cell(now)} | {ratio:.2f} |")
    print(f"\nMedians [min-max] of {args.rounds} interleaved rounds, before = {args.before}.")


if __name__ == "__main__":
    main()
