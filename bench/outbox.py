"""The transactional outbox: what it adds to the app's transaction, the relay's throughput, and
commit-to-start latency, on SQLite or on a real PostgreSQL server.

    python bench/outbox.py [--database sqlite|postgresql] [--jobs 20000] [--rounds 3]
                           [--rate 200] [--seconds 10] [--relays 1]

Insert: the median time of a transaction (BEGIN, INSERT an order, COMMIT) against the same with
`outbox.enqueue_spec` in it, rounds interleaved. SQLite: a file database, WAL, synchronous=NORMAL;
PostgreSQL: a fresh cluster (tests/pg.py), fsync and synchronous_commit on (its defaults), over
loopback TCP with psycopg 3.

Relay: `--jobs` rows committed beforehand, then `--relays` OutboxRelay processes (batch 500) move
them to a real server (`--shards 1`, fsync): jobs/s from the first row sent to the table found
empty.

Latency: the app commits one order and its job per transaction at `--rate`, while a `pyqueue relay`
process and a `pyqueue worker` run; each job stamps when it starts. Commit-to-start is from the
app's COMMIT returning to the handler's first line (both time.time() on this machine):
it holds the relay's wake-up (NOTIFY on PostgreSQL, polling every 5-20 ms on SQLite), its read,
the durable enqueue and the push to the worker. Commit-to-ready is the part up to the server's
stamp of the job's creation (`created_at`, in ms).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE / "apps")]

from harness import PYQUEUE_ROOT, ServerProcess  # noqa: E402
from pg import PostgresServer  # noqa: E402
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, event, func, insert, select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.contrib.outbox import Outbox  # noqa: E402
from pyqueue.contrib.relay import engine_url  # noqa: E402

SPEC = {"type": "receipts.send", "payload": {"args": [42], "kwargs": {}}, "queue": "outbox"}


def sqlite_engine(path: Path) -> Any:
    engine = create_engine(f"sqlite:///{path}")

    @event.listens_for(engine, "connect")
    def _pragmas(connection: Any, _: Any) -> None:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA busy_timeout=30000")

    return engine


def transaction_us(engine: Any, orders: Table, outbox: Outbox | None, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        with Session(engine) as session, session.begin():
            session.execute(insert(orders).values())
            if outbox is not None:
                outbox.enqueue_spec(session, SPEC)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def _relay(address: str, url: str) -> "subprocess.Popen[bytes]":
    return subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "--address", address, "relay", "--database", url],
        stdout=subprocess.DEVNULL,
    )


def _count(engine: Any, table: Table) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(table)) or 0)


def relay_throughput(engine: Any, url: str, address: str, jobs: int, relays: int) -> float:
    outbox = Outbox()
    with Session(engine) as session, session.begin():
        session.execute(outbox.table.delete())
        for start in range(0, jobs, 1000):
            session.execute(insert(outbox.table), [outbox.row(SPEC) for _ in range(min(1000, jobs - start))])
    processes = [_relay(address, url) for _ in range(relays)]
    try:
        while _count(engine, outbox.table) == jobs:  # from the first rows moved
            time.sleep(0.001)
        started = time.perf_counter()
        while _count(engine, outbox.table):
            time.sleep(0.002)
        return jobs / (time.perf_counter() - started)
    finally:
        for process in processes:
            process.terminate()
            process.wait(60)


def latency(
    engine: Any, orders: Table, url: str, address: str, rate: float, seconds: float
) -> dict[str, Any]:
    import latency_app

    tmp = Path(tempfile.mkdtemp())
    stamps_path = tmp / "stamps.bin"
    env = {
        **os.environ,
        "PYQUEUE_ADDRESS": address,
        "PYQUEUE_BENCH_STAMPS": str(stamps_path),
        "PYTHONPATH": os.pathsep.join([str(HERE / "apps"), str(PYQUEUE_ROOT)]),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "latency_app:app", "--log-level", "warning"],
        env=env,
        cwd=HERE / "apps",
    )
    relay = _relay(address, url)
    outbox = Outbox()
    committed: dict[int, float] = {}

    def commit(n: int) -> None:
        with Session(engine) as session, session.begin():
            session.execute(insert(orders).values(id=n))
            spec = {
                "type": "latency_app.stamp",
                "payload": {"args": [float(n)], "kwargs": {}},
                "queue": "latency",
            }
            outbox.enqueue_spec(session, spec)
        committed[n] = time.time()

    def started() -> dict[int, float]:
        raw = stamps_path.read_bytes() if stamps_path.exists() else b""
        return {int(n): begun for n, begun in latency_app.STAMP.iter_unpack(raw)}

    try:
        n = 1_000_000
        deadline = time.monotonic() + 60
        while len(started()) < 50 and time.monotonic() < deadline:  # warm-up
            commit(n)
            n += 1
            time.sleep(0.01)
        warm = set(committed)
        sent, begun = 0, time.perf_counter()
        while (now := time.perf_counter()) - begun < seconds:
            wait = begun + sent / rate - now
            if wait > 0:
                time.sleep(wait)
            commit(sent)
            sent += 1
        held = sent / (time.perf_counter() - begun)
        deadline = time.monotonic() + 30
        while len(started()) < len(committed) and time.monotonic() < deadline:
            time.sleep(0.05)
        starts = started()
        with pyqueue.Client(address) as client:
            created = {
                int(j.payload["args"][0]): j.created_at.timestamp()
                for j in client.list_jobs(queue="latency")
                if j.created_at is not None
            }
    finally:
        for process in (relay, worker):
            process.terminate()
        for process in (relay, worker):
            process.wait(60)
    measured = [n for n in committed if n not in warm]
    to_start = sorted((starts[n] - committed[n]) * 1000 for n in measured if n in starts)
    to_ready = sorted((created[n] - committed[n]) * 1000 for n in measured if n in created)

    def pct(values: list[float], p: float) -> float:
        return round(values[min(len(values) - 1, int(len(values) * p))], 2) if values else float("nan")

    return {
        "rate_held": round(held),
        "sent": sent,
        "started": len(to_start),
        "commit_to_start_p50_ms": pct(to_start, 0.5),
        "commit_to_start_p99_ms": pct(to_start, 0.99),
        "commit_to_ready_p50_ms": pct(to_ready, 0.5),
        "commit_to_ready_p99_ms": pct(to_ready, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--relays", type=int, default=1)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    postgres = PostgresServer().start() if args.database == "postgresql" else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if postgres is not None:
                url = postgres.url()
                engine = create_engine(engine_url(url))
            else:
                url = f"sqlite:///{Path(tmp) / 'app.db'}"
                engine = sqlite_engine(Path(tmp) / "app.db")
            orders = Table("orders", MetaData(), Column("id", Integer, primary_key=True))
            orders.metadata.create_all(engine)
            outbox = Outbox()
            outbox.create(engine)
            plain, with_outbox = [], []
            for _ in range(args.rounds):
                plain.append(transaction_us(engine, orders, None, 2000))
                with_outbox.append(transaction_us(engine, orders, outbox, 2000))
            with engine.begin() as connection:
                connection.execute(orders.delete())
            server = ServerProcess(Path(tmp) / "data", "--shards", "1").start()
            try:
                relay_rates = [
                    relay_throughput(engine, url, server.address, args.jobs, args.relays)
                    for _ in range(args.rounds)
                ]
                lat = latency(engine, orders, url, server.address, args.rate, args.seconds)
            finally:
                server.close()
            engine.dispose()
    finally:
        if postgres is not None:
            postgres.stop()
    print(
        json.dumps(
            {
                "database": args.database,
                "transaction_us_plain": round(statistics.median(plain), 1),
                "transaction_us_with_outbox": round(statistics.median(with_outbox), 1),
                "relays": args.relays,
                "relay_jobs": args.jobs,
                "relay_jobs_per_s": [round(r) for r in relay_rates],
                **lat,
            }
        )
    )


if __name__ == "__main__":
    main()
