"""One client floods the HTTP port, an honest producer enqueues over gRPC: the honest producer's
latency, quiet and during the flood, the server's RSS peak and its descriptors at their peak.

    python bench/flood_http.py --kind big|under|slow|connections [--seconds 5]

The kinds (each from a process of its own, 4 senders unless said):
- big: POST /v1/jobs bodies of 59 MiB (4.8M jobs) back to back, half of them claiming
  Content-Length: -1 (what once bypassed the body limit).
- under: bodies just under the body limit (--max-http-body-bytes, 16 MiB: 1.3M tiny jobs).
- slow: bodies that claim 1 MiB and trickle a byte every 100 ms.
- connections: 1,000 connections that send half a request line and sit.
The server runs with an open-file limit of 1,024 (what a default shell gives), 1 shard, fsync.
"""

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE)]

from flood_acks import compare, latencies, rss_mb  # noqa: E402
from harness import ServerProcess  # noqa: E402

JOB = b'{"type":"t"},'


def _post(http: str, body_len: int, claimed: str, body: bytes | None) -> None:
    host, port = http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(
            f"POST /v1/jobs HTTP/1.1\r\nHost: {http}\r\nContent-Type: application/json\r\n".encode()
            + f"Content-Length: {claimed}\r\n\r\n".encode()
        )
        try:
            if body is not None:
                s.sendall(body[:body_len])
            s.settimeout(60)
            s.recv(4096)  # the answer (a refusal), or the close
        except OSError:
            pass  # refused and closed before the whole body went: what a bound should do


def flood(kind: str, http: str, seconds: float) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    end = time.monotonic() + seconds
    if kind == "connections":
        host, port = http.rsplit(":", 1)
        held = []
        while time.monotonic() < end and len(held) < 1000:
            try:
                s = socket.create_connection((host, int(port)), timeout=5)
                s.sendall(b"GET /heal")
                held.append(s)
            except OSError:
                time.sleep(0.01)  # refused or reset: try again
        time.sleep(max(end - time.monotonic(), 0))
        return
    big = b"[" + JOB * (59 * (1 << 20) // len(JOB)) + b'{"type":"t"}]'
    under = b"[" + JOB * ((16 << 20) // len(JOB) - 2) + b'{"type":"t"}]'

    def sender(n: int) -> None:
        while time.monotonic() < end:
            if kind == "big":
                _post(http, len(big), "-1" if n % 2 else str(len(big)), big)
            elif kind == "under":
                _post(http, len(under), str(len(under)), under)
            else:  # slow
                host, port = http.rsplit(":", 1)
                try:
                    with socket.create_connection((host, int(port)), timeout=60) as s:
                        s.sendall(
                            f"POST /v1/jobs HTTP/1.1\r\nHost: {http}\r\nContent-Length: 1048576\r\n\r\n[".encode()
                        )
                        while time.monotonic() < end:
                            time.sleep(0.1)
                            s.sendall(b" ")
                except OSError:
                    pass  # timed out by the server: open the next

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def descriptors(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=("big", "under", "slow", "connections"), required=True)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--flood", metavar="HTTP_ADDRESS", help="be the flooding process")
    args = parser.parse_args()
    if args.flood:
        flood(args.kind, args.flood, args.seconds)
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data").start()
        try:
            assert server.proc is not None
            pid = server.proc.pid
            cpu_before = cpu_seconds(pid)
            quiet = latencies(server.address, args.seconds)
            cpu_quiet = cpu_seconds(pid) - cpu_before
            cpu_before = cpu_seconds(pid)
            flood_started = time.monotonic()
            quiet_fds = descriptors(pid)
            flooder = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--kind",
                    args.kind,
                    "--flood",
                    server.http_address,
                    "--seconds",
                    str(args.seconds),
                ]
            )
            peak_fds, done = 0, threading.Event()

            def watch() -> None:
                nonlocal peak_fds
                while not done.is_set():
                    peak_fds = max(peak_fds, descriptors(pid))
                    time.sleep(0.05)

            watcher = threading.Thread(target=watch)
            watcher.start()
            threading.Thread(target=lambda: (flooder.wait(), done.set()), daemon=True).start()
            during = latencies(server.address, args.seconds * 4, done)
            done.set()
            watcher.join()
            flood_seconds = time.monotonic() - flood_started
            cpu_flood = cpu_seconds(pid) - cpu_before
            result = {
                "kind": args.kind,
                **compare(quiet, during),
                # The server's CPU, as a share of one core, per phase: what the flood costs it
                # (the rest of a slowdown is the flooder's own CPU on this 2-core machine).
                "server_cpu_quiet": round(cpu_quiet / args.seconds, 2),
                "server_cpu_flood": round(cpu_flood / flood_seconds, 2),
                "server_rss_peak_mb": round(rss_mb(pid)),
                "descriptors_quiet": quiet_fds,
                "descriptors_peak": peak_fds,
                "server_alive": server.proc.poll() is None,
            }
            print(json.dumps(result))
        finally:
            server.close()


if __name__ == "__main__":
    main()
