"""A server restarting on a large backlog: how soon it listens, takes an enqueue, delivers, and has
every job takeable, after a clean stop and after a kill -9 with jobs in flight.

    python bench/restart_backlog.py [--jobs 5000000] [--payload 100]

The backlog (one queue, 100 B payloads) is written by the engine in-process in a child process,
buffered, to build it quickly; every start after that is a real `pyqueue serve --shards 1` (fsync)
on that store. Times are from the server process's start, as its client sees them:
- listen: the server logs that it listens;
- enqueue: a client's first enqueue is answered (the client connects after the listen line);
- first job: a Take stream opened then receives its first job (checked to be the oldest one);
- all takeable: the server logs that the in-memory sets are fully rebuilt.
RSS per job is the server's RSS once rebuilt, less that of a server on an empty store, over the
backlog; disk per job is the data directory's size over the backlog.
"""

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

from harness import ServerProcess  # noqa: E402

import pyqueue  # noqa: E402


async def fill(path: str, jobs: int, payload: int) -> int:
    """Write the backlog; returns the first (oldest) job's id."""
    from pyqueue.engine import Engine, EngineConfig
    from pyqueue.store import RocksStore

    store = RocksStore(path)
    engine = Engine(store, EngineConfig(durable=False))
    await engine.start()
    await engine.wait_rebuilt()
    body = b"x" * payload
    oldest = 0
    for start in range(0, jobs, 1000):
        created = await engine.enqueue(
            [engine.new_job(i, "t", "default", None, body) for i in range(min(1000, jobs - start))]
        )
        oldest = oldest or created[0][0]
    await engine.stop()
    store.close()
    return oldest


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def start(server: ServerProcess, hold: int = 0) -> tuple[dict[str, float], pyqueue.Client, object]:
    """Start and time the milestones; with `hold`, leave that many jobs in flight on an open stream."""
    began = time.perf_counter()
    server.start(timeout=600)
    times = {"listen_s": time.perf_counter() - began}
    client = pyqueue.Client(server.address)
    client.enqueue("t", b"late")
    times["enqueue_s"] = time.perf_counter() - began
    stream = client.take("default", prefetch=max(hold, 1))
    stream.__enter__()
    first = stream.next(timeout=600)
    times["first_job_s"] = time.perf_counter() - began
    assert first is not None
    times["first_job_id"] = first.id
    if hold:
        for _ in range(hold - 1):
            assert stream.next(timeout=60) is not None
    server.wait_for("rebuilt the in-memory sets", timeout=1200)
    times["all_takeable_s"] = time.perf_counter() - began
    return times, client, stream


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5_000_000)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--hold", type=int, default=1000, help="jobs in flight at the kill -9")
    parser.add_argument("--fill", nargs=3)
    args = parser.parse_args()
    if args.fill:
        print(asyncio.run(fill(args.fill[0], int(args.fill[1]), int(args.fill[2]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        empty = ServerProcess(Path(tmp) / "empty").start()
        base_rss = rss_bytes(empty.proc.pid)  # type: ignore[union-attr]
        empty.close()

        data = Path(tmp) / "data"
        began = time.perf_counter()
        filled = subprocess.run(
            [sys.executable, __file__, "--fill", str(data), str(args.jobs), str(args.payload)],
            check=True,
            capture_output=True,
            text=True,
        )
        oldest = int(filled.stdout.split()[-1])
        fill_s = time.perf_counter() - began
        server = ServerProcess(data)
        results: dict[str, object] = {
            "jobs": args.jobs,
            "payload_bytes": args.payload,
            "fill_s": round(fill_s, 1),
        }

        # A clean restart (the fill stopped its engine cleanly).
        clean, client, stream = start(server)
        first_ids = [clean.pop("first_job_id")]
        rss = rss_bytes(server.proc.pid)  # type: ignore[union-attr]
        results["clean"] = {k: round(v, 3) for k, v in clean.items()}
        results["rss_bytes_per_job"] = round((rss - base_rss) / args.jobs, 1)
        stream.__exit__(None, None, None)  # type: ignore[attr-defined]
        client.close()
        server.stop()
        results["disk_bytes_per_job"] = round(disk_bytes(data) / args.jobs, 1)

        # A kill -9 with jobs in flight: they go back to ready first, then the same milestones.
        _, client, stream = start(server, hold=args.hold)
        server.kill()
        server.proc.wait()  # type: ignore[union-attr]
        client.close()
        killed, client, stream = start(server)
        recovered = server.wait_for("returned")
        first_ids.append(killed.pop("first_job_id"))
        results["kill9"] = {k: round(v, 3) for k, v in killed.items()}
        results["kill9_recovered"] = recovered.split(": ", 1)[-1].strip()
        stream.__exit__(None, None, None)  # type: ignore[attr-defined]
        client.close()
        server.close()
        results["first_job_is_the_oldest"] = first_ids == [oldest, oldest]
        print(json.dumps(results))


if __name__ == "__main__":
    main()
