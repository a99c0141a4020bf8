"""The transactional outbox on SQLite: what it adds to the app's transaction, and the relay.

    python bench/outbox.py [--jobs 20000] [--rounds 3]

Insert: the median time of a transaction (BEGIN, INSERT an order, COMMIT) against the same with
`outbox.enqueue_spec` in it, on a file database in WAL mode with synchronous=NORMAL, rounds
interleaved. Relay: `--jobs` rows committed beforehand, then one OutboxRelay (batch 500) moves
them to a real server (`--shards 1`, fsync): jobs/s. (Commit-to-enqueued latency is not
measured here yet: see bench/README.md.)
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

from harness import ServerProcess  # noqa: E402
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, event, insert  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.contrib.outbox import Outbox  # noqa: E402
from pyqueue.contrib.relay import OutboxRelay, RelayConfig  # noqa: E402

SPEC = {"type": "receipts.send", "payload": {"args": [42], "kwargs": {}}, "queue": "outbox"}


def engine_at(path: Path):  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{path}")

    @event.listens_for(engine, "connect")
    def _pragmas(connection, _):  # type: ignore[no-untyped-def]
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")

    return engine


def transaction_us(engine, orders: Table, outbox: Outbox | None, n: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        started = time.perf_counter()
        with Session(engine) as session, session.begin():
            session.execute(insert(orders).values())
            if outbox is not None:
                outbox.enqueue_spec(session, SPEC)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engine = engine_at(Path(tmp) / "app.db")
        orders = Table("orders", MetaData(), Column("id", Integer, primary_key=True))
        orders.metadata.create_all(engine)
        outbox = Outbox()
        outbox.create(engine)
        plain, with_outbox = [], []
        for _ in range(args.rounds):
            plain.append(transaction_us(engine, orders, None, 2000))
            with_outbox.append(transaction_us(engine, orders, outbox, 2000))
        with Session(engine) as session, session.begin():
            session.execute(outbox.table.delete())
            for start in range(0, args.jobs, 1000):
                session.execute(
                    insert(outbox.table), [outbox.row(SPEC) for _ in range(min(1000, args.jobs - start))]
                )
        server = ServerProcess(Path(tmp) / "data", "--shards", "1").start()
        try:
            with pyqueue.Client(server.address) as client:
                relay = OutboxRelay(RelayConfig(), client, engine)
                started = time.perf_counter()
                while relay.run_once():
                    pass
                relay_s = time.perf_counter() - started
        finally:
            server.close()
    print(
        json.dumps(
            {
                "transaction_us_plain": round(statistics.median(plain), 1),
                "transaction_us_with_outbox": round(statistics.median(with_outbox), 1),
                "relay_jobs": args.jobs,
                "relay_jobs_per_s": round(args.jobs / relay_s),
            }
        )
    )


if __name__ == "__main__":
    main()
