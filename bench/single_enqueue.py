"""One job per call from one sequential producer, the way a web request enqueues: jobs/s, and CPU
per call on both ends.

    python bench/single_enqueue.py [--seconds 10] [--commit-mode fsync|buffered] [--shards 2]
                                   [--tls] [--tokens] [--no-native-front]

With --tls the server serves TLS (a CA and certificate made here) and the client trusts that CA;
with --tokens the server asks for a token (--auth-file) and the client sends one: what security
costs per call.

The producer is `fn.enqueue()` on a `pyqueue.App` job function (the everyday path, 100 B of
arguments). Client CPU is this process's CPU time (every thread, gRPC's included) per call;
server CPU is the server's processes' (supervisor and shards) per call, from /proc.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE / "apps")]

from harness import ServerProcess  # noqa: E402

import pyqueue  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children (the shards of a supervisor)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p, _ in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended meanwhile
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def context_switches(pid: int) -> int:
    """Context switches so far of every live thread of a process and its children: each is a
    thread put to sleep or woken, which is where a small message's cost goes (bench/README.md)."""
    total = 0
    for _, tasks in _tree(pid):
        for task in tasks:
            try:
                status = (task / "status").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            total += sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line)
    return total


def _tree(pid: int) -> list[tuple[int, list[Path]]]:
    """A process and its descendants, each with its threads' /proc directories."""
    found = []
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
            for task in tasks:  # children of every thread
                pids += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
        found.append((p, tasks))
    return found


def run(address: str, server_pid: int, seconds: float) -> dict[str, float]:
    import noop_app

    app = pyqueue.App(address)
    job = pyqueue.JobFunction(app, noop_app.noop.fn, "noop_app.noop", noop_app.noop.defaults)
    for _ in range(200):  # warm up: channels, routes, the server's caches
        job.enqueue()
    calls = 0
    server_before, client_before = cpu_seconds(server_pid), time.process_time()
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        job.enqueue()
        calls += 1
    server_cpu, client_cpu = cpu_seconds(server_pid) - server_before, time.process_time() - client_before
    app.close()
    return {
        "jobs_per_s": round(calls / elapsed),
        "server_cpu_ms_per_call": round(server_cpu / calls * 1000, 3),
        "client_cpu_ms_per_call": round(client_cpu / calls * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--commit-mode", default="fsync", choices=["fsync", "buffered"])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--tls", action="store_true", help="serve TLS; the client trusts its CA")
    parser.add_argument("--tokens", action="store_true", help="ask for a token; the client sends one")
    parser.add_argument(
        "--no-native-front", action="store_true", help="the server serves enqueues by grpcio only"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        extra = _security(Path(tmp), args.tls, args.tokens)
        extra += ["--no-native-front"] if args.no_native_front else []
        server = ServerProcess(
            Path(tmp) / "data", "--commit-mode", args.commit_mode, "--shards", str(args.shards), *extra
        ).start()
        try:
            assert server.proc is not None
            result = run(server.address, server.proc.pid, args.seconds)
        finally:
            server.stop()
    conditions = {"commit_mode": args.commit_mode, "shards": args.shards, "payload": "100 B"}
    conditions |= {"tls": args.tls, "tokens": args.tokens, "native_front": not args.no_native_front}
    print(json.dumps({**conditions, **result}))


def _security(tmp: Path, tls: bool, tokens: bool) -> list[str]:
    """Server flags for TLS and tokens; the client side goes through the environment."""
    args: list[str] = []
    if tls:
        from certs import Authority

        ca = Authority(tmp, "bench")
        pair = ca.issue("server", server=True)
        args += ["--tls-cert", str(pair.cert), "--tls-key", str(pair.key)]
        os.environ["PYQUEUE_TLS_CA"] = str(ca.path)
    if tokens:
        from auth_files import write_auth_file

        secrets = write_auth_file(tmp / "auth.toml")
        args += ["--auth-file", str(tmp / "auth.toml")]
        os.environ["PYQUEUE_TOKEN"] = secrets["root"]
    return args


if __name__ == "__main__":
    main()
