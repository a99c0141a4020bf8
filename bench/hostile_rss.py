"""The server's memory under two client-controlled costs (RSS of the server process, MB):

- slow consumers: STREAMS worker streams with prefetch 10,000 that never read, over a backlog of
  JOBS jobs of PAYLOAD bytes;
- an ack flood: FLOODS streams each sending one Ack of a million ids.

    python bench/hostile_rss.py
"""

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import ServerProcess

import pyqueue
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

STREAMS, JOBS, PAYLOAD, FLOODS = 10, 8000, 64 << 10, 20


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def settle(pid: int, seconds: float = 5.0) -> float:
    """The RSS once it stopped growing (or after `seconds`)."""
    last, deadline = rss_mb(pid), time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = rss_mb(pid)
        if abs(now - last) < 1:
            return now
        last = now
    return last


def slow_consumers(tmp: Path) -> dict[str, float]:
    server = ServerProcess(tmp / "slow").start()
    assert server.proc is not None
    hold = threading.Event()
    try:
        with pyqueue.Client(server.address) as client:
            for _ in range(JOBS // 100):
                client.enqueue_many([{"type": "t", "payload": b"p" * PAYLOAD}] * 100)
        before = settle(server.proc.pid)
        channel = grpc.insecure_channel(server.address)
        stub = pb_grpc.QueueStub(channel)

        def never_reads() -> Iterator[pb.TakeRequest]:
            yield pb.TakeRequest(subscribe=pb.Subscribe(queues=["default"], prefetch=10_000))
            hold.wait(120)

        calls = [stub.Take(never_reads(), timeout=120) for _ in range(STREAMS)]
        time.sleep(3)  # a bench, not a test: let the server push what it will
        after = settle(server.proc.pid, 10)
        with pyqueue.Client(server.address) as client:
            in_flight = client.count_jobs(status="in_flight")
        hold.set()
        for call in calls:
            call.cancel()
        channel.close()
        return {"rss_before_mb": round(before), "rss_after_mb": round(after), "jobs_in_flight": in_flight}
    finally:
        hold.set()
        server.close()


def ack_flood(tmp: Path) -> dict[str, float]:
    server = ServerProcess(tmp / "flood").start()
    assert server.proc is not None
    try:
        before = settle(server.proc.pid)
        channel = grpc.insecure_channel(server.address, options=[("grpc.max_send_message_length", 64 << 20)])
        stub = pb_grpc.QueueStub(channel)
        ids = list(range(1, 1_000_001))
        ack = pb.Ack(ids=ids)
        if "leases" in pb.Ack.DESCRIPTOR.fields_by_name:  # (the protocol before answers named attempts)
            ack.leases.extend([1] * len(ids))
        flood = pb.TakeRequest(ack=ack)
        subscribe = pb.TakeRequest(subscribe=pb.Subscribe(queues=["default"], prefetch=10))
        started = time.monotonic()

        def one() -> None:
            try:
                for _ in stub.Take(iter([subscribe, flood]), timeout=60):
                    pass
            except grpc.RpcError:
                pass

        threads = [threading.Thread(target=one) for _ in range(FLOODS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        seconds = time.monotonic() - started
        after = settle(server.proc.pid, 10)
        with pyqueue.Client(server.address, timeout=60) as client:
            t0 = time.monotonic()
            client.enqueue("t")
            enqueue_ms = (time.monotonic() - t0) * 1000
        channel.close()
        return {
            "rss_before_mb": round(before),
            "rss_after_mb": round(after),
            "flood_seconds": round(seconds, 1),
            "enqueue_after_ms": round(enqueue_ms, 1),
        }
    finally:
        server.close()


if __name__ == "__main__":
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps({"slow_consumers": slow_consumers(Path(tmp)), "ack_flood": ack_flood(Path(tmp))}))
