"""Reads beside writes: an honest producer of single enqueues (its own process) while 4 callers
make one kind of read back to back (another process), in quiet and flood phases of equal length,
interleaved, on one server with 300 busy queues. Per kind: the producer's calls, p50 and p99 in
each phase, and the ratios the target holds them to (p99 within 2x of quiet, calls within 20%).

    python bench/read_flood.py [--seconds 3] [--rounds 2] [--kinds history,list_jobs,...] [--read-share 0.1]

Kinds: none (the control: the flooding process is there and reads nothing, so the ratios it
gets are the machine's own noise), history (as the dashboard asks: the total), history_queue (one queue's chart),
history_every (every queue's hour, what an old client asks), list_jobs (a page of 100),
list_jobs_raw (the same page over a bare grpcio stub, left as protobuf: what the server costs
without the reader's own decoding, which shares this machine's 2 cores with the server),
count_jobs (every job), list_batches, list_workers, metrics (GET /metrics), dashboard_queues
(GET /api/queues). The server: 1 shard, fsync, 300 queues of 50 ready jobs each, with an hour's
history for each, 50 batches, 4 worker streams.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import grpc

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE)]

from flood_acks import latencies, pct  # noqa: E402
from harness import ServerProcess  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.v1 import queue_pb2 as pb  # noqa: E402
from pyqueue.v1.queue_pb2_grpc import QueueStub  # noqa: E402

KINDS = (
    "none",
    "history",
    "history_queue",
    "history_every",
    "list_jobs",
    "list_jobs_raw",
    "count_jobs",
    "list_batches",
    "list_workers",
    "metrics",
    "dashboard_queues",
)
QUEUES = [f"busy-{i:03d}" for i in range(300)]
_BARE: dict[int, QueueStub] = {}  # list_jobs_raw's stub beside each client, by the client's id


def one_read(kind: str, client: pyqueue.Client, http: str) -> None:
    if kind == "none":
        time.sleep(0.01)  # the control: a flood phase with no reads in it
    elif kind == "history":
        client.history(total=True)
    elif kind == "history_queue":
        client.history(QUEUES[7])
    elif kind == "history_every":
        client.history()
    elif kind == "list_jobs_raw":
        _BARE[id(client)].ListJobs(pb.ListJobsRequest(limit=100), timeout=60)
    elif kind == "list_jobs":
        client.list_page(limit=100)
    elif kind == "count_jobs":
        client.count_jobs()
    elif kind == "list_batches":
        client.batches(100)
    elif kind == "list_workers":
        client.workers()
    elif kind == "metrics":
        urllib.request.urlopen(f"http://{http}/metrics", timeout=60).read()
    else:
        urllib.request.urlopen(f"http://{http}/api/queues", timeout=60).read()


def flood(kind: str, address: str, http: str, seconds: float) -> None:
    """4 callers, back to back, for `seconds` once told to go; prints how many reads they made.
    The process starts and connects before the phase does (it prints "ready", then waits for a
    line), so the flood phase measures the reads, not an interpreter starting up."""
    clients = [pyqueue.Client(address) for _ in range(4)]
    for client in clients:
        _BARE[id(client)] = QueueStub(grpc.insecure_channel(address))
    for client in clients:
        one_read(kind, client, http)
    print("ready", flush=True)
    sys.stdin.readline()
    end = time.monotonic() + seconds
    done = [0] * 4

    def caller(n: int) -> None:
        while time.monotonic() < end:
            one_read(kind, clients[n], http)
            done[n] += 1

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(sum(done), flush=True)


def fill(server: ServerProcess) -> list[subprocess.Popen[bytes]]:
    """300 busy queues with history, 50 batches, and 4 worker streams kept open (in a process of
    their own, which prints a line once its streams are open)."""
    with pyqueue.Client(server.address) as client:
        for queue in QUEUES:
            client.enqueue_many([{"type": "t", "queue": queue, "payload": {"n": i}} for i in range(60)])
        with client.take(QUEUES[:256], prefetch=1000) as stream:  # a take and an ack each: waits, completions
            for _ in range(2000):
                job = stream.next(timeout=30)
                if job is None:
                    break
                job.ack()
        for _ in range(50):
            client.enqueue_workflow(pyqueue.Batch([pyqueue.Task({"type": "m", "queue": "batched"})] * 3))
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, server.address], stdout=subprocess.PIPE, stdin=subprocess.PIPE
    )
    assert holder.stdout is not None
    holder.stdout.readline()
    return [holder]


_HOLD = """
import sys, pyqueue
c = pyqueue.Client(sys.argv[1])
streams = [c.take(["idle-%d" % i], prefetch=10) for i in range(4)]
for s in streams:
    s.next(timeout=0.5)
print("open", flush=True)
sys.stdin.read()
"""


def phase(address: str, seconds: float, flooder: "subprocess.Popen[str] | None") -> list[float]:
    lat = latencies(address, seconds)
    if flooder is not None:
        flooder.wait(120)
    return lat


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--read-share", help="the server's --read-share (its default when not given)")
    parser.add_argument(
        "--flood", nargs=3, metavar=("KIND", "ADDRESS", "HTTP"), help="be the flooding process"
    )
    args = parser.parse_args()
    if args.flood:
        flood(*args.flood, args.seconds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        share = ["--read-share", args.read_share] if args.read_share else []
        server = ServerProcess(Path(tmp) / "data", *share).start()
        holders = fill(server)
        try:
            rows = []
            for kind in args.kinds.split(","):
                quiet: list[float] = []
                busy: list[float] = []
                quiet_calls = busy_calls = reads = 0
                for _ in range(args.rounds):  # quiet, flood, quiet, flood: interleaved
                    q = phase(server.address, args.seconds, None)
                    flooder = subprocess.Popen(
                        [sys.executable, __file__, "--seconds", str(args.seconds), "--flood", kind,
                         server.address, server.http_address],
                        stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
                    )  # fmt: skip
                    assert flooder.stdout is not None and flooder.stdin is not None
                    assert flooder.stdout.readline().strip() == "ready"
                    flooder.stdin.write("go\n")
                    flooder.stdin.flush()
                    b = phase(server.address, args.seconds, flooder)
                    reads += int(flooder.stdout.read().strip() or 0)
                    quiet += q
                    busy += b
                    quiet_calls += len(q)
                    busy_calls += len(b)
                rows.append(
                    {
                        "kind": kind,
                        "reads_in_flood": reads,
                        "quiet_calls": quiet_calls,
                        "flood_calls": busy_calls,
                        "quiet_p50_ms": round(pct(quiet, 0.5), 2),
                        "quiet_p99_ms": round(pct(quiet, 0.99), 2),
                        "flood_p50_ms": round(pct(busy, 0.5), 2),
                        "flood_p99_ms": round(pct(busy, 0.99), 2),
                        "p99_ratio": round(pct(busy, 0.99) / pct(quiet, 0.99), 2),
                        "calls_ratio": round(busy_calls / quiet_calls, 2),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
        finally:
            for holder in holders:
                holder.kill()
            server.close()


if __name__ == "__main__":
    main()
