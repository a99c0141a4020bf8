"""Django's outbox (pyqueue.contrib.django.outbox and the backend's OUTBOX option) on a real
database (SQLite, and a real PostgreSQL server), a real server and `pyqueue worker --relay`: a task
enqueued in a rolled-back transaction never runs, a committed one runs once, and its result is
found before the relay moved it and after it ran."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import ServerProcess
from pg import PostgresServer, binaries

import pyqueue

HERE = Path(__file__).resolve().parent


@pytest.fixture(params=["sqlite", "postgresql"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The site's environment and the relay's database URL, on each database."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "django_site.settings",
        "SITE_TRACE": str(tmp_path / "trace.txt"),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    if request.param == "sqlite":
        env["SITE_DB"] = str(tmp_path / "site.sqlite3")
        yield {"env": env, "relay": f"sqlite:///{env['SITE_DB']}"}
        return
    if binaries() is None:
        pytest.skip("no PostgreSQL (apt-get install postgresql)")
    postgres = PostgresServer().start()
    try:
        env["SITE_PG"] = postgres.url()
        yield {"env": env, "relay": postgres.url()}
    finally:
        postgres.stop()


def _shop(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / "django_site" / "shop.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _result(env: dict[str, str], result_id: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(_shop(env, "result", result_id))
    return found


def test_a_task_enqueued_in_a_transaction_runs_once_if_it_commits(
    tmp_path: Path, site: dict[str, Any]
) -> None:
    server = ServerProcess(tmp_path / "data").start()
    env = {**site["env"], "PYQUEUE_ADDRESS": server.address}
    trace = Path(env["SITE_TRACE"])
    worker = None
    try:
        _shop(env, "migrate")
        kept = _shop(env, "order", "1", "commit")
        dropped = _shop(env, "order", "2", "rollback")
        assert kept.startswith("outbox/default/"), kept
        assert _result(env, kept)["status"] == "READY"  # the row, waiting for the relay
        with pytest.raises(AssertionError, match="TaskResultDoesNotExist"):
            _result(env, dropped)  # rolled back with the order: no row, no job
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pyqueue",
                "worker",
                "pyqueue.contrib.django:app",
                "--relay",
                site["relay"],
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        while _result(env, kept)["status"] != "SUCCESSFUL":
            assert time.monotonic() < deadline, "the committed task did not run"
            time.sleep(0.1)
        assert _result(env, kept) == {"status": "SUCCESSFUL", "return_value": "sent 1", "args": [1]}
        assert trace.read_text().splitlines() == ["receipt 1"]
        row = _shop(env, "spec", "3")
        with pyqueue.Client(server.address) as client:
            deadline = time.monotonic() + 60
            while not (jobs := list(client.list_jobs(queue="billing"))):
                assert time.monotonic() < deadline, "the spec's row was not relayed"
                time.sleep(0.05)
            assert [(j.type, j.payload, j.unique_key) for j in jobs] == [
                ("billing.sync", 3, f"outbox:pyqueue_outbox:{row}")
            ]
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            output, _ = worker.communicate(timeout=60)
            print(output)
        server.close()


@pytest.mark.parametrize("relayed", ["before", "after"])
def test_a_result_is_found_while_the_relay_moves_its_row(
    tmp_path: Path, site: dict[str, Any], relayed: str
) -> None:
    # The relay enqueues the job, then deletes the row. A result read beside it must find one or
    # the other, whichever side of the backend's question to the server the relay's step falls on.
    server = ServerProcess(tmp_path / "data").start()
    env = {**site["env"], "PYQUEUE_ADDRESS": server.address}
    try:
        _shop(env, "migrate")
        kept = _shop(env, "order", "1", "commit")
        found = json.loads(_shop(env, "result-relayed", kept, site["relay"], relayed))
        assert found == {"status": "READY", "return_value": None, "args": [1]}
        with pyqueue.Client(server.address) as client:
            assert [(j.queue, j.type) for j in client.list_jobs()] == [
                ("default", "django_site.tasks.receipt")
            ]
        assert _result(env, kept)["status"] == "READY"  # now the job, found by the row's key
    finally:
        server.close()
