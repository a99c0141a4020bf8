"""The transactional outbox on a real PostgreSQL server (tests/pg.py) and a real pyqueue server:
the relay wakes on the commit's NOTIFY, several relays share the table, relays SIGKILLed at random
leave every committed job enqueued once, and a database restart costs the relay its LISTEN, not
its rows."""

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import ServerProcess
from pg import PostgresServer, binaries
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, func, insert, select, text
from sqlalchemy.orm import Session

import pyqueue
from pyqueue.contrib.outbox import Outbox
from pyqueue.contrib.relay import OutboxRelay, RelayConfig, engine_url

pytestmark = pytest.mark.skipif(binaries() is None, reason="no PostgreSQL (apt-get install postgresql)")

metadata = MetaData()
orders = Table("orders", metadata, Column("id", Integer, primary_key=True))
_names = iter(range(1_000_000))


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def database(postgres: PostgresServer) -> str:
    """A fresh database (its URL) with the app's orders table and the outbox."""
    url = postgres.new_database(f"app_{next(_names)}")
    engine = create_engine(engine_url(url))
    metadata.create_all(engine)
    Outbox().create(engine)
    engine.dispose()
    return url


def _until(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _payloads(client: pyqueue.Client) -> list[int]:
    return sorted(int(j.payload) for j in client.list_jobs(queue="outbox"))


def _commit(engine: Any, n: int) -> None:
    with Session(engine) as session, session.begin():
        session.execute(insert(orders).values(id=n))
        Outbox().enqueue_spec(session, {"type": "receipt", "payload": n, "queue": "outbox"})


def test_a_commit_wakes_the_relay_by_notify_and_a_rollback_sends_nothing(
    tmp_path: Path, database: str
) -> None:
    server = ServerProcess(tmp_path / "data").start()
    engine = create_engine(engine_url(database))
    # A read every 10 minutes at most: a job relayed sooner was woken by its commit's NOTIFY.
    config = RelayConfig(database=database, listen_fallback_s=600)
    try:
        with pyqueue.Client(server.address) as client:
            relay = OutboxRelay(config, client)
            relay.start()
            try:
                _until(lambda: relay.listening, "the relay did not LISTEN")
                with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
                    session.execute(insert(orders).values(id=1))
                    Outbox().enqueue_spec(session, {"type": "receipt", "payload": 1, "queue": "outbox"})
                    raise RuntimeError("the request failed after the enqueue")
                _commit(engine, 2)
                _until(lambda: _payloads(client) == [2], "the commit's job did not reach the server")
                _commit(engine, 3)
                _until(
                    lambda: _payloads(client) == [2, 3], "the second commit's job did not reach the server"
                )
            finally:
                relay.stop()
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(Outbox().table)) == 0
            assert session.scalar(select(func.count()).select_from(orders)) == 2
    finally:
        engine.dispose()
        server.close()


def test_a_table_made_by_the_app_s_own_migration_gets_its_trigger_from_the_relay(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.new_database(f"app_{next(_names)}")
    engine = create_engine(engine_url(url))
    with engine.begin() as connection:  # as a migration tool would write it: no trigger
        connection.execute(
            text(
                "CREATE TABLE pyqueue_outbox (id BIGSERIAL PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL, "
                "spec TEXT NOT NULL, refused TEXT)"
            )
        )
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            relay = OutboxRelay(RelayConfig(database=url, listen_fallback_s=600), client)
            relay.start()
            try:
                _until(lambda: relay.listening, "the relay did not LISTEN")
                with Session(engine) as session, session.begin():
                    Outbox().enqueue_spec(session, {"type": "receipt", "payload": 7, "queue": "outbox"})
                _until(lambda: _payloads(client) == [7], "the row was not relayed on its NOTIFY")
            finally:
                relay.stop()
            OutboxRelay(RelayConfig(database=url), client).engine.dispose()  # a second start: no error
    finally:
        engine.dispose()
        server.close()


def test_a_second_relay_skips_the_rows_the_first_holds(tmp_path: Path, database: str) -> None:
    server = ServerProcess(tmp_path / "data").start()
    engine = create_engine(engine_url(database))
    try:
        for n in range(1, 11):
            _commit(engine, n)
        table = Outbox().table
        with pyqueue.Client(server.address) as client, engine.connect() as first:
            # The first relay's transaction, between its read and its delete: rows 1-4 locked.
            held = first.execute(
                select(table.c.id).order_by(table.c.id).limit(4).with_for_update(skip_locked=True)
            ).all()
            assert len(held) == 4
            second = OutboxRelay(RelayConfig(database=database), client)
            assert second.run_once() == 6 and second.run_once() == 0  # it never waits for the lock
            assert _payloads(client) == list(range(5, 11))
            first.rollback()
            assert second.run_once() == 4
            assert _payloads(client) == list(range(1, 11))
            second.engine.dispose()
    finally:
        engine.dispose()
        server.close()


def _relay_process(server: ServerProcess, database: str, log: Path, armed: Path) -> "subprocess.Popen[str]":
    with open(log, "a") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pyqueue", "--address", server.address, "relay", "--database", database],
            stdout=out,
            stderr=out,
            text=True,
            env={**os.environ, "PYQUEUE_FAILPOINT_RELAY_ANSWERED": str(armed)},
        )


def _app_committing(engine: Any, stop: threading.Event, committed: list[int]) -> None:
    n = 1
    while not stop.is_set():
        _commit(engine, n)
        committed.append(n)
        n += 1


@pytest.mark.timeout(300)
def test_two_relays_killed_20_times_under_load_enqueue_each_committed_job_once(
    tmp_path: Path, database: str
) -> None:
    server = ServerProcess(tmp_path / "data").start()
    engine = create_engine(engine_url(database))
    armed = tmp_path / "crash-after-answer"  # while it exists, a relay dies between answer and delete
    log = tmp_path / "relays.log"
    stop, committed = threading.Event(), []  # type: ignore[var-annotated]
    app = threading.Thread(target=_app_committing, args=(engine, stop, committed), daemon=True)
    app.start()
    rng = random.Random(int(os.environ.get("PYQUEUE_CRASH_SEED", "7")))
    relays = [_relay_process(server, database, log, armed) for _ in range(2)]
    in_the_window = 0
    try:
        for cycle in range(20):
            time.sleep(rng.uniform(0.05, 0.4))
            if cycle % 2:
                armed.write_text("")
                _until(
                    lambda rs=list(relays): any(r.poll() is not None for r in rs),
                    "no relay reached the window",
                    60,
                )
                armed.unlink()
                in_the_window += 1
            else:
                victim = rng.choice(relays)
                victim.send_signal(signal.SIGKILL)
                victim.wait(30)
            relays = [r if r.poll() is None else _relay_process(server, database, log, armed) for r in relays]
        _until(lambda: len(committed) > 200, "the app committed 200 orders", 120)  # however slow the machine
        stop.set()
        app.join(30)
        table = Outbox().table
        with Session(engine) as session:  # read committed: each count sees the relays' deletes
            _until(
                lambda: not session.scalar(select(func.count()).select_from(table)),
                "the outbox was not emptied",
                120,
            )
        with pyqueue.Client(server.address) as client:
            got = _payloads(client)
        assert in_the_window == 10
        assert len(committed) > 200, len(committed)
        assert got == sorted(committed), (
            f"{len(got)} jobs for {len(committed)} commits; "
            f"duplicates {len(got) - len(set(got))}, missing {len(set(committed) - set(got))}"
        )
    finally:
        stop.set()
        for relay in relays:
            relay.kill()
            relay.wait(30)
        engine.dispose()
        server.close()


def test_a_database_restart_costs_the_relay_its_listen_not_its_rows(
    tmp_path: Path, postgres: PostgresServer, database: str
) -> None:
    server = ServerProcess(tmp_path / "data").start()
    config = RelayConfig(database=database, listen_fallback_s=600, retry_s=0.2)
    try:
        with pyqueue.Client(server.address) as client:
            relay = OutboxRelay(config, client)
            relay.start()
            try:
                _until(lambda: relay.listening, "the relay did not LISTEN")
                postgres.crash()
                _until(lambda: not relay.listening, "the relay did not see its LISTEN connection go")
                postgres.restart()
                engine = create_engine(engine_url(database))
                _commit(engine, 1)  # may come before the new LISTEN: the polling meanwhile finds it
                _until(
                    lambda: _payloads(client) == [1], "the row committed after the restart was not relayed"
                )
                _until(lambda: relay.listening, "the relay did not LISTEN again")
                _commit(engine, 2)
                _until(lambda: _payloads(client) == [1, 2], "the row was not relayed on its NOTIFY")
                engine.dispose()
            finally:
                relay.stop()
    finally:
        server.close()
