"""The cluster on NATS JetStream against one machine, in one run (docs/cluster.md quotes it).

    python bench/cluster.py latency [--jobs 3000] [--rounds 3]
        one sequential producer, one job per call: p50, p99 and jobs/s, on one node (fsync, 2
        shards) and on a 3-node cluster (2 shards, R3 changelogs on 3 NATS servers), interleaved;
        then the batched full cycle (bench/load.py) on each, and the changelog's bytes per job
    python bench/cluster.py catch-up [--jobs 100000] [--batch 500]
        a fourth node joins a cluster that holds a changelog: how fast its standbys apply it
    python bench/cluster.py snapshot [--jobs 200000]
        the owners snapshot a store of that many jobs; a fourth node restores it: sizes and times
    python bench/cluster.py takeover [--kills 20] [--lease 5]
        SIGKILL the owner of a shard again and again (restarting it each time): the time from the
        kill to the first job a worker gets from the successor

Everything runs on loopback: NATS servers, nodes, clients. The machine has 2 cores, so every
process of the cluster shares them: the figures are what the protocol costs here, not what three
hosts would give.
"""

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent / "tests" / "cluster"), str(HERE)]

from cluster_nodes import Cluster, Node, wait_until  # noqa: E402
from harness import ServerProcess  # noqa: E402
from nats_servers import NatsCluster  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.cluster import Topology  # noqa: E402


def queue_on(shard: int, shards: int = 2) -> str:
    topology = Topology(("",) * shards)
    return next(f"q{i}" for i in range(100) if topology.shard_of_queue(f"q{i}") == shard)


def sequential(address: str, jobs: int) -> dict[str, float]:
    times = []
    with pyqueue.Client(address) as client:
        client.enqueue("warm", queue="q0")
        started = time.perf_counter()
        for n in range(jobs):
            t = time.perf_counter()
            client.enqueue("bench", {"n": n}, queue=f"q{n % 4}")
            times.append(time.perf_counter() - t)
        elapsed = time.perf_counter() - started
    times.sort()
    return {
        "p50_ms": round(times[len(times) // 2] * 1000, 3),
        "p99_ms": round(times[int(len(times) * 0.99)] * 1000, 3),
        "jobs_per_s": round(jobs / elapsed),
    }


def changelog_bytes(nats: NatsCluster, cluster: str, shards: int) -> tuple[int, int]:
    async def read() -> tuple[int, int]:
        import nats as nats_py

        nc = await nats_py.connect(servers=nats.urls.split(","))
        js = nc.jetstream()
        total_bytes = total_msgs = 0
        for shard in range(shards):
            info = await js.stream_info(f"PYQUEUE_{cluster}_{shard}")
            total_bytes += info.state.bytes
            total_msgs += info.state.messages
        await nc.close()
        return total_bytes, total_msgs

    return asyncio.run(read())


def latency(args: argparse.Namespace, root: Path) -> None:
    import load

    nats = NatsCluster(root / "nats").start()
    single = ServerProcess(root / "single", "--shards", "2").start()
    cluster = Cluster(root, nats).start()
    try:
        rows: dict[str, list[dict[str, float]]] = {"one node": [], "cluster": []}
        for _ in range(args.rounds):
            rows["one node"].append(sequential(single.address, args.jobs))
            rows["cluster"].append(sequential(cluster.addresses, args.jobs))
        for name, runs in rows.items():
            medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(json.dumps({"setup": name, "single_enqueue_medians": medians, "runs": runs}))
        before = changelog_bytes(nats, cluster.name, 2)
        cycle = argparse.Namespace(
            jobs=args.cycle_jobs, batch=500, payload=100, producers=1, consumers=1, prefetch=2000,
            queues=4, lister=False, commit_mode="fsync",
        )  # fmt: skip
        for name, address in (("one node", single.address), ("cluster", cluster.addresses)):
            print(json.dumps({"setup": name, "full_cycle": load.run(address, cycle)}))
        after = changelog_bytes(nats, cluster.name, 2)
        print(json.dumps({
            "changelog_bytes_per_job": round((after[0] - before[0]) / args.cycle_jobs),
            "changelog_entries": after[1] - before[1], "jobs": args.cycle_jobs,
        }))  # fmt: skip
    finally:
        cluster.close()
        single.close()
        nats.stop()


def catch_up(args: argparse.Namespace, root: Path) -> None:
    nats = NatsCluster(root / "nats").start()
    cluster = Cluster(root, nats).start()
    try:
        with pyqueue.Client(cluster.addresses) as client:
            for start in range(0, args.jobs, args.batch):
                queue = f"q{start // args.batch % 4}"
                client.enqueue_many([{"type": "t", "payload": "x" * 100, "queue": queue}] * args.batch)
        newcomer = Node(root, "d", nats.urls, cluster.name, 2, 2.0).start(timeout=120)
        lines = [newcomer.wait_for(f"shard {s}: caught up", timeout=600) for s in range(2)]
        for line in lines:
            print(line.strip())
        entries = sum(int(line.split("(")[1].split()[0]) for line in lines)
        seconds = max(float(line.split(" in ")[1].split("s)")[0]) for line in lines)
        print(json.dumps({"jobs": args.jobs, "enqueue_batch": args.batch, "entries": entries, "seconds": seconds,
                          "jobs_per_s": round(args.jobs / seconds), "entries_per_s": round(entries / seconds)}))  # fmt: skip
        newcomer.close()
    finally:
        cluster.close()
        nats.stop()


def snapshot(args: argparse.Namespace, root: Path) -> None:
    """A snapshot of a store of `--jobs` jobs, and a fourth node restoring it."""
    import re

    nats = NatsCluster(root / "nats").start()
    cluster = Cluster(root, nats, 2, 2.0, "--snapshot-bytes", str(args.snapshot_bytes)).start()
    try:
        queues = [queue_on(0), queue_on(1)]
        owners = [cluster.owner(s) for s in (0, 1)]
        with pyqueue.Client(cluster.addresses) as client:
            for start in range(0, args.jobs, 500):
                client.enqueue_many(
                    [{"type": "t", "payload": "x" * 100, "queue": queues[start // 500 % 2]}] * 500
                )
            # The snapshots to measure are the first ones taken after every job is in: one more
            # changelog's worth of jobs makes each owner take one.
            before = [sum(f"shard {s}: snapshot at" in line for line in owners[s].lines) for s in (0, 1)]
            for start in range(0, 2 * args.snapshot_bytes // 200 + 1000, 500):
                client.enqueue_many(
                    [{"type": "t", "payload": "x" * 100, "queue": queues[start // 500 % 2]}] * 500
                )
        taken = [
            owners[s].output.wait_lines(f"shard {s}: snapshot at", before[s] + 1, 300)[-1] for s in (0, 1)
        ]  # type: ignore[union-attr]
        started = time.monotonic()
        newcomer = Node(root, "d", nats.urls, cluster.name, 2, 2.0).start(timeout=120)
        restored = [newcomer.wait_for(f"shard {s}: caught up", timeout=600) for s in (0, 1)]
        ready = time.monotonic() - started
        for line in taken + restored:
            print(line.strip())
        sizes = [float(re.search(r"\(([\d.]+) MB in ([\d.]+)s\)", line).group(1)) for line in taken]  # type: ignore[union-attr]
        seconds = [float(re.search(r"\(([\d.]+) MB in ([\d.]+)s\)", line).group(2)) for line in taken]  # type: ignore[union-attr]
        print(json.dumps({
            "jobs": args.jobs, "snapshot_mb": sizes, "snapshot_s": seconds,
            "new_node_caught_up_s": round(ready, 2),
        }))  # fmt: skip
        newcomer.close()
    finally:
        cluster.close()
        nats.stop()


class Watcher:
    """A producer of one job per 10 ms and a worker, on a queue of shard 0, through the cluster's
    addresses; the worker counts its take streams, so a delivery knows which stream brought it."""

    def __init__(self, addresses: str, queue: str) -> None:
        self.addresses, self.queue = addresses, queue
        self.generation = 0
        self.deliveries: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._produce, self._consume)]
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        with pyqueue.Client(self.addresses, timeout=5) as client:
            while not self.stop.is_set():
                with contextlib.suppress(pyqueue.PyQueueError):
                    client.enqueue("t", queue=self.queue)
                time.sleep(0.01)

    def _consume(self) -> None:
        with pyqueue.Client(self.addresses, timeout=5) as client:
            while not self.stop.is_set():
                try:
                    with client.take(self.queue, prefetch=10) as stream:
                        self.generation += 1
                        while not self.stop.is_set():
                            job = stream.next(timeout=0.2)
                            if job is None:
                                if stream.server_stopping:
                                    break
                                continue
                            self.deliveries.append((time.monotonic(), self.generation))
                            job.ack()
                except pyqueue.PyQueueError:
                    time.sleep(0.02)


def takeover(args: argparse.Namespace, root: Path) -> None:
    nats = NatsCluster(root / "nats").start()
    cluster = Cluster(root, nats, lease_s=args.lease).start()
    watcher = Watcher(cluster.addresses, queue_on(0))
    times = []
    try:
        for kill in range(args.kills):
            wait_until(lambda: len(watcher.deliveries) > 20, 60, "deliveries")
            victim = cluster.owner(0)
            generation = watcher.generation
            killed_at = time.monotonic()
            victim.kill()
            wait_until(
                lambda g=generation, k=killed_at: any(
                    gen > g and t > k for t, gen in watcher.deliveries[-50:]
                ),  # type: ignore[misc]
                120,
                "a delivery from the successor",
            )
            first = next(t for t, gen in watcher.deliveries if gen > generation and t > killed_at)
            times.append(first - killed_at)
            print(f"kill {kill + 1}: {times[-1]:.2f}s", flush=True)
            victim.restart(120)
        print(json.dumps({
            "lease_s": args.lease, "kills": len(times), "median_s": round(statistics.median(times), 2),
            "worst_s": round(max(times), 2), "best_s": round(min(times), 2),
        }))  # fmt: skip
    finally:
        watcher.stop.set()
        cluster.close()
        nats.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["latency", "catch-up", "takeover", "snapshot"])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--cycle-jobs", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500, help="catch-up: jobs per enqueue call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--lease", type=float, default=5.0)
    parser.add_argument("--snapshot-bytes", type=int, default=1 << 20, help="snapshot: the owners' threshold")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        {"latency": latency, "catch-up": catch_up, "takeover": takeover, "snapshot": snapshot}[args.what](
            args, Path(tmp)
        )


if __name__ == "__main__":
    main()
