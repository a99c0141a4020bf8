"""One client floods, an honest producer enqueues: the honest producer's latency, quiet and during
the flood, and the server's RSS peak.

    python bench/flood_acks.py [--messages 100] [--ids 10000] [--seconds 3]

The honest producer makes single enqueues (fsync, 1 shard) back to back for `--seconds` with
nothing else running, then again while a Take stream sends `--messages` Ack messages of `--ids`
unknown ids back to back (reading their answers), from a process of its own (in one process the
flooder's decoding of its answers holds the producer's GIL). p50/p99 of each phase, and their
ratio.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE)]

import grpc  # noqa: E402
from harness import ServerProcess  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.v1 import queue_pb2 as pb  # noqa: E402


def latencies(address: str, seconds: float, stop: threading.Event | None = None) -> list[float]:
    out = []
    with pyqueue.Client(address) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (stop is not None and stop.is_set()):
            started = time.perf_counter()
            client.enqueue("t", queue="honest")
            out.append(time.perf_counter() - started)
    return out


def flood(address: str, messages: int, ids: int, done: threading.Event) -> None:
    ack = pb.TakeRequest(ack=pb.Ack(ids=list(range(1, ids + 1)), leases=[1] * ids))

    def requests():  # type: ignore[no-untyped-def]
        yield pb.TakeRequest(subscribe=pb.Subscribe(queues=["flood"], prefetch=10_000))
        for _ in range(messages):
            yield ack
        done.wait(120)

    channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20)])
    # Answers are taken as bytes, not decoded: on this 2-core machine a flooder that decodes
    # 10,000 refusals a message takes a core of its own, and the honest producer then measures
    # the machine's scheduler, not the server.
    take = channel.stream_stream(
        "/pyqueue.v1.Queue/Take",
        request_serializer=pb.TakeRequest.SerializeToString,
        response_deserializer=lambda raw: raw,
    )
    for answered, _ in enumerate(take(requests(), timeout=120), 1):
        if answered == messages:  # an AckResult per message (no job is ever delivered on this queue)
            break
    done.set()
    channel.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def compare(quiet: list[float], during: list[float]) -> dict[str, float]:
    """The honest producer's latencies, quiet and during the flood, in ms, and the p99 ratio."""
    return {
        "quiet_p50_ms": round(pct(quiet, 0.5), 2),
        "quiet_p99_ms": round(pct(quiet, 0.99), 2),
        "flood_p50_ms": round(pct(during, 0.5), 2),
        "flood_p99_ms": round(pct(during, 0.99), 2),
        "p99_ratio": round(pct(during, 0.99) / pct(quiet, 0.99), 2),
        "flood_calls": len(during),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--ids", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--flood", metavar="ADDRESS", help="be the flooding process")
    args = parser.parse_args()
    if args.flood:
        flood(args.flood, args.messages, args.ids, threading.Event())
        return
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data").start()
        try:
            assert server.proc is not None
            quiet = latencies(server.address, args.seconds)
            done = threading.Event()
            flooder = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--flood",
                    server.address,
                    "--messages",
                    str(args.messages),
                    "--ids",
                    str(args.ids),
                ]
            )
            threading.Thread(target=lambda: (flooder.wait(), done.set()), daemon=True).start()
            during = latencies(server.address, 120, done)
            flooder.wait(120)
            result = {**compare(quiet, during), "server_rss_peak_mb": round(rss_mb(server.proc.pid))}
            print(json.dumps(result))
        finally:
            server.close()


if __name__ == "__main__":
    main()
