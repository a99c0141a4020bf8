"""The transactional outbox on a real SQLite database and a real server: a job enqueued in the
app's transaction goes to the server only if the transaction commits, exactly once, through a
relay SIGKILLed at random and a server that is down for a while."""

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import ServerProcess
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, event, func, insert, select
from sqlalchemy.orm import Session

import pyqueue
from pyqueue.contrib.outbox import Outbox
from pyqueue.contrib.relay import OutboxRelay, RelayConfig

HERE = Path(__file__).parent
metadata = MetaData()
orders = Table("orders", metadata, Column("id", Integer, primary_key=True), Column("note", String(50)))


def database(path: Path) -> Any:
    engine = create_engine(f"sqlite:///{path}")

    @event.listens_for(engine, "connect")
    def _wal(connection: Any, _: Any) -> None:  # the app's choice: readers and one writer at once
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA busy_timeout=30000")

    metadata.create_all(engine)
    Outbox().create(engine)
    return engine


def _jobs(client: pyqueue.Client, queue: str = "outbox") -> list[Any]:
    return list(client.list_jobs(queue=queue))


def test_a_rollback_enqueues_nothing_and_a_commit_enqueues_once(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    engine = database(tmp_path / "app.db")
    outbox = Outbox()
    app = pyqueue.App(server.address)

    @app.job(queue="outbox", name="receipts.send")
    def send_receipt(order_id: int, to: str = "") -> None: ...

    try:
        with Session(engine) as session, session.begin():
            session.execute(insert(orders).values(id=1, note="kept"))
            outbox.enqueue(session, send_receipt, 1, to="ada@example.com")
            outbox.enqueue(session, send_receipt.options(priority=0, delay=3600), 1)
        with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
            session.execute(insert(orders).values(id=2, note="rolled back"))
            outbox.enqueue(session, send_receipt, 2)
            raise RuntimeError("the request failed after the enqueue")
        with pytest.raises(TypeError, match=r"missing a required argument"), Session(engine) as session:
            outbox.enqueue(session, send_receipt)  # checked against the signature at once
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(outbox.table)) == 2
        with pyqueue.Client(server.address) as client:
            assert _jobs(client) == [], "nothing reaches the server before the relay"
            relay = OutboxRelay(RelayConfig(database=str(engine.url)), client, engine)
            assert relay.run_once() == 2 and relay.run_once() == 0
            sent = sorted(_jobs(client), key=lambda j: j.priority)
            assert [(j.type, j.payload, j.status) for j in sent] == [
                ("receipts.send", {"args": [1], "kwargs": {}}, "scheduled"),
                ("receipts.send", {"args": [1], "kwargs": {"to": "ada@example.com"}}, "ready"),
            ]
            assert sent[0].run_at is not None and sent[0].run_at.timestamp() > time.time() + 3500
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(outbox.table)) == 0
            assert session.scalar(select(func.count()).select_from(orders)) == 1
    finally:
        server.close()


async def test_an_async_session_writes_on_its_own_connection(tmp_path: Path) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    server = ServerProcess(tmp_path / "data").start()
    database(tmp_path / "app.db")
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'app.db'}")
    outbox = Outbox()
    try:
        async with AsyncSession(engine) as session, session.begin():
            await session.execute(insert(orders).values(id=7))
            await outbox.enqueue_spec_async(
                session, {"type": "billing.sync", "payload": {"order": 7}, "queue": "outbox"}
            )
        try:
            async with AsyncSession(engine) as session, session.begin():
                await outbox.enqueue_spec_async(session, {"type": "billing.sync", "queue": "outbox"})
                raise LookupError("rolled back")
        except LookupError:
            pass
        with pyqueue.Client(server.address) as client:
            relay = OutboxRelay(RelayConfig(), client, create_engine(f"sqlite:///{tmp_path / 'app.db'}"))
            assert relay.run_once() == 1
            assert [(j.type, j.payload) for j in _jobs(client)] == [("billing.sync", {"order": 7})]
    finally:
        await engine.dispose()
        server.close()


def test_rows_committed_after_the_relay_emptied_the_table_are_each_enqueued(tmp_path: Path) -> None:
    # Each row's id is its job's unique key: an id handed out again (SQLite without
    # AUTOINCREMENT starts again at 1 once the table is empty) would be dropped as a duplicate.
    server = ServerProcess(tmp_path / "data").start()
    engine = database(tmp_path / "app.db")
    try:
        with pyqueue.Client(server.address) as client:
            relay = OutboxRelay(RelayConfig(), client, engine)
            for n in range(3):
                with Session(engine) as session, session.begin():
                    Outbox().enqueue_spec(session, {"type": "receipt", "payload": n, "queue": "outbox"})
                assert relay.run_once() == 1
            assert _payloads(client) == [0, 1, 2]
    finally:
        server.close()


def test_the_relay_refuses_a_sqlite_table_whose_ids_come_back(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    with sqlite3.connect(db) as connection:  # as a hand-written migration might have made it
        connection.execute(
            "CREATE TABLE pyqueue_outbox (id INTEGER PRIMARY KEY, created_at FLOAT NOT NULL, spec TEXT NOT NULL, "
            "refused TEXT)"
        )
    done = subprocess.run(
        [sys.executable, "-m", "pyqueue", "relay", "--database", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "has no AUTOINCREMENT" in done.stderr and "Recreate it" in done.stderr, done.stderr


def test_a_row_the_server_refuses_is_kept_with_its_reason_and_the_rest_go_on(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    engine = database(tmp_path / "app.db")
    outbox = Outbox()
    try:
        with Session(engine) as session, session.begin():
            outbox.enqueue_spec(session, {"type": "a", "queue": "outbox"})
            outbox.enqueue_spec(session, {"type": "b", "queue": "no spaces allowed"})
            outbox.enqueue_spec(session, {"type": "c", "queue": "outbox"})
        with pyqueue.Client(server.address) as client:
            relay = OutboxRelay(RelayConfig(), client, engine)
            assert relay.run_once() == 3 and relay.run_once() == 0
            assert sorted(j.type for j in _jobs(client)) == ["a", "c"]
        with Session(engine) as session:
            (kept,) = session.execute(select(outbox.table.c.spec, outbox.table.c.refused)).all()
            assert '"b"' in kept.spec and kept.refused.startswith("INVALID_ARGUMENT"), kept.refused
    finally:
        server.close()


def _orders_committing(engine: Any, stop: threading.Event, committed: list[int], first: int) -> None:
    """The app: one order and its job per transaction, as fast as SQLite commits them."""
    outbox = Outbox()
    n = first
    while not stop.is_set():
        with Session(engine) as session, session.begin():
            session.execute(insert(orders).values(id=n))
            outbox.enqueue_spec(session, {"type": "receipt", "payload": n, "queue": "outbox"})
        committed.append(n)
        n += 1


def _relay(server: ServerProcess, db: Path) -> "subprocess.Popen[str]":
    with open(db.with_suffix(".relay.log"), "a") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pyqueue",
                "--address",
                server.address,
                "relay",
                "--database",
                f"sqlite:///{db}",
            ],
            stdout=log,
            stderr=log,
            text=True,
        )


def _kill_between_answer_and_delete(relay: "subprocess.Popen[str]", db: Path, client: pyqueue.Client) -> bool:
    """SIGKILL the relay after the server answered a batch and before its delete committed. The
    test holds SQLite's write lock, so nothing commits meanwhile: the relay is in that window
    once the server holds more jobs than the orders whose rows are gone (orders less rows).
    False when it did not get there in the time given (nothing to send): try again."""
    lock = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        lock.execute("BEGIN IMMEDIATE")  # the app's commits and the relay's delete wait for it
        (orders_now,) = lock.execute("SELECT count(*) FROM orders").fetchone()
        (rows,) = lock.execute("SELECT count(*) FROM pyqueue_outbox").fetchone()
        deadline = time.monotonic() + 3
        while client.count_jobs(queue="outbox") <= orders_now - rows:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        relay.send_signal(signal.SIGKILL)
        relay.wait(30)
        return True
    finally:
        if lock.in_transaction:
            lock.execute("ROLLBACK")
        lock.close()


def _relaying(client: pyqueue.Client, timeout: float = 60) -> None:
    """Wait until the server takes a job it did not hold: the relay just started is sending."""
    held, deadline = client.count_jobs(queue="outbox"), time.monotonic() + timeout
    while client.count_jobs(queue="outbox") <= held:
        assert time.monotonic() < deadline, f"the relay sent nothing in {timeout} s"
        time.sleep(0.01)


def _drained(engine: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    with Session(engine) as session:
        while session.scalar(select(func.count()).select_from(Outbox().table)):
            assert time.monotonic() < deadline, "the relay did not empty the outbox"
            time.sleep(0.05)
            session.rollback()  # a fresh read


def _payloads(client: pyqueue.Client) -> list[int]:
    return sorted(int(j.payload) for j in client.list_jobs(queue="outbox"))


@pytest.mark.timeout(300)
def test_a_relay_killed_20_times_under_load_enqueues_each_committed_job_once(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    db = tmp_path / "app.db"
    engine = database(db)
    stop, committed = threading.Event(), []  # type: ignore[var-annotated]
    app = threading.Thread(target=_orders_committing, args=(engine, stop, committed, 1), daemon=True)
    app.start()
    rng = random.Random(int(os.environ.get("PYQUEUE_CRASH_SEED", "7")))
    relay = _relay(server, db)
    in_the_window = 0
    try:
        with pyqueue.Client(server.address) as client:
            for cycle in range(20):
                _relaying(client)  # a relay started under load may take seconds to begin
                time.sleep(rng.uniform(0.05, 0.4))  # a random point in the relay's steps
                if cycle % 2 and _kill_between_answer_and_delete(relay, db, client):
                    in_the_window += 1  # the rows it sent are still in the table: sent again
                else:
                    relay.send_signal(signal.SIGKILL)
                    relay.wait(30)
                relay = _relay(server, db)
        print(f"\n{in_the_window} of 20 kills between the server's answer and the delete")
        assert in_the_window >= 5, in_the_window
        deadline = time.monotonic() + 120
        while len(committed) <= 200:  # enough orders to say something, however slow the machine
            assert app.is_alive() and time.monotonic() < deadline, f"the app committed {len(committed)}"
            time.sleep(0.01)
        stop.set()
        app.join(30)
        _drained(engine)
        with pyqueue.Client(server.address) as client:
            got = _payloads(client)
        assert len(committed) > 200, len(committed)
        assert got == sorted(committed), (
            f"{len(got)} jobs for {len(committed)} commits; "
            f"duplicates {len(got) - len(set(got))}, missing {len(set(committed) - set(got))}"
        )
    finally:
        stop.set()
        relay.kill()
        relay.wait(30)
        server.close()


@pytest.mark.timeout(300)
def test_rows_wait_while_the_server_is_down_and_go_once_it_is_back(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    db = tmp_path / "app.db"
    engine = database(db)
    stop, committed = threading.Event(), []  # type: ignore[var-annotated]
    relay = _relay(server, db)
    app = threading.Thread(target=_orders_committing, args=(engine, stop, committed, 1), daemon=True)
    app.start()
    try:
        while len(committed) < 50:
            time.sleep(0.01)
        server.stop()
        down_from = len(committed)
        down_until = time.monotonic() + 30
        while time.monotonic() < down_until:  # the app's transactions go on committing
            time.sleep(0.1)
        assert len(committed) > down_from + 50, "commits stalled while the server was down"
        server.restart()
        stop.set()
        app.join(30)
        _drained(engine)
        with pyqueue.Client(server.address) as client:
            assert _payloads(client) == sorted(committed)
    finally:
        stop.set()
        relay.kill()
        relay.wait(30)
        server.close()


def test_pyqueue_worker_relays_and_runs_the_app_s_committed_jobs(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    db = tmp_path / "app.db"
    engine = database(db)
    done = tmp_path / "done.txt"
    with Session(engine) as session, session.begin():
        Outbox().enqueue_spec(
            session,
            {"type": "outbox_app.note", "payload": {"args": [str(done)], "kwargs": {}}, "queue": "outbox"},
        )
    worker = subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "outbox_app:app", "--relay", f"sqlite:///{db}"],
        cwd=HERE,
        env={**os.environ, "PYQUEUE_ADDRESS": server.address},
    )
    try:
        deadline = time.monotonic() + 60
        while not done.exists():
            assert time.monotonic() < deadline, "the committed job did not run"
            time.sleep(0.05)
        assert done.read_text() == "ran"
    finally:
        worker.terminate()
        worker.wait(60)
        server.close()
