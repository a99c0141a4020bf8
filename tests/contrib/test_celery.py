"""Celery on pyqueue: Celery's own worker and beat (`celery -A proj worker`, `celery -A proj
beat`) against a real `pyqueue serve`, with Celery's sample project unchanged but for its broker
and backend URLs (tests/contrib/celery_proj). The test process is the producer."""

import importlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import ProcessOutput, ServerProcess

import pyqueue

PROJ = Path(__file__).parent / "celery_proj"
CELERY = [sys.executable, "-m", "celery", "-A", "proj"]


class Celery:
    """A `celery` command of the sample project, in its own process group (its pool with it)."""

    def __init__(self, env: dict[str, str], *args: str, ready: str) -> None:
        self.proc = subprocess.Popen(
            [*CELERY, *args],
            cwd=PROJ,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.output = ProcessOutput(self.proc)
        self.output.wait_lines(ready, timeout=60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class Site:
    def __init__(self, server: ServerProcess, marks: Path) -> None:
        self.server = server
        self.marks = marks
        url = f"pyqueue://{server.address}"
        self.env = {
            **os.environ,
            "CELERY_BROKER_URL": url,
            "CELERY_RESULT_BACKEND": url,
            "PROJ_MARKS": str(marks),
            "PYTHONPATH": os.pathsep.join([str(PROJ), os.environ.get("PYTHONPATH", "")]),
        }
        self.client = pyqueue.Client(server.address)
        self.started: list[Celery] = []

    def worker(self, *queues: str, concurrency: int = 2, more: tuple[str, ...] = ()) -> Celery:
        args = ["worker", "-l", "info", "-c", str(concurrency), "--without-mingle", "--without-gossip", *more]
        worker = Celery(self.env, *args, "-Q", ",".join(queues or ("celery",)), ready="ready.")
        self.started.append(worker)
        return worker

    def beat(self, tmp: Path) -> Celery:
        beat = Celery(self.env, "beat", "-l", "info", "-s", str(tmp / "schedule"), ready="beat: Starting")
        self.started.append(beat)
        return beat

    def runs(self, name: str) -> list[str]:
        path = self.marks / name
        return path.read_text().splitlines() if path.exists() else []

    def wait_runs(self, name: str, count: int, timeout: float = 60) -> list[str]:
        deadline = time.monotonic() + timeout
        while len(self.runs(name)) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.runs(name)) >= count, f"{name}: {len(self.runs(name))} runs, not {count}"
        return self.runs(name)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("celery")
    server = ServerProcess(root / "data", "--keep-completed", "600").start()
    site = Site(server, root / "marks")
    saved = {k: os.environ.get(k) for k in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "PROJ_MARKS")}
    os.environ.update({k: site.env[k] for k in saved})
    sys.path.insert(0, str(PROJ))
    try:
        yield site
    finally:
        for started in site.started:
            started.kill()
        site.client.close()
        server.close()
        sys.path.remove(str(PROJ))
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="module")
def tasks(site: Site) -> Any:
    """The sample project's tasks, as the producer imports them (after its URLs are set)."""
    return importlib.import_module("proj.tasks")


@pytest.fixture(scope="module")
def worker(site: Site) -> Celery:
    # A new pool process for every task: each is forked from a worker whose stream is running,
    # which is where a grpcio channel would hang (pyqueue/contrib/celery/calls.py).
    return site.worker("celery", more=("--max-tasks-per-child", "1"))


def test_delay_and_its_result_and_the_task_s_name_on_the_server(
    site: Site, tasks: Any, worker: Celery
) -> None:
    result = tasks.add.delay(2, 3)
    assert result.get(timeout=60) == 5 and result.state == "SUCCESS" and result.ready()
    result.forget()
    assert result.state == "PENDING"
    failed = tasks.boom.delay()
    with pytest.raises(ValueError, match="boom"):
        failed.get(timeout=60)
    assert failed.state == "FAILURE"
    (job,) = site.client.list_jobs(queues=["celery"], types=["proj.tasks.add"])
    assert job.status == "completed"  # the task's name is the job's type
    listed = subprocess.run(
        [sys.executable, "-m", "pyqueue", "--address", site.server.address, "jobs", "--queue", "celery"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "proj.tasks.add" in listed and "proj.tasks.boom" in listed


def test_a_producer_that_never_imports_pyqueue_sends_tasks(site: Site, worker: Celery) -> None:
    # A web app's process: it imports its Celery app and calls delay(), nothing more. kombu names
    # the transport from the entry point it loads at start (_pyqueue_kombu).
    code = "from proj.tasks import add; print(add.delay(20, 1).get(timeout=60))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJ, env=site.env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "21"


def test_countdown_and_eta_wait_on_the_server_and_survive_the_worker(site: Site, tasks: Any) -> None:
    worker = site.worker("later")
    soon = tasks.add.apply_async((1, 1), countdown=3, queue="later")
    at = tasks.mul.apply_async((2, 3), eta=datetime.now(UTC) + timedelta(seconds=3), queue="later")
    waiting = site.client.list_jobs(queues=["later"], statuses=["scheduled"])
    assert sorted(j.type for j in waiting) == ["proj.tasks.add", "proj.tasks.mul"]  # kept by the server
    worker.kill()  # a worker that dies meanwhile held none of them
    site.worker("later")
    assert soon.get(timeout=60) == 2 and at.get(timeout=60) == 6


def test_queues_priorities_and_expires(site: Site, tasks: Any, tmp_path: Path) -> None:
    low = [tasks.slow.apply_async((f"low{i}", 0), queue="ranked", priority=0) for i in range(3)]
    high = tasks.slow.apply_async(("high", 0), queue="ranked", priority=9)
    expired = tasks.add.apply_async((1, 1), queue="ranked", expires=datetime.now(UTC) - timedelta(seconds=1))
    elsewhere = tasks.add.apply_async((1, 1), queue="unserved")
    site.worker("ranked", concurrency=1)
    assert [r.get(timeout=60) for r in (high, *low)] == ["high", "low0", "low1", "low2"]
    started = {name: (site.marks / f"{name}.started").stat().st_mtime_ns for name in ("high", "low0")}
    assert started["high"] < started["low0"]  # the higher priority ran first, though sent last
    with pytest.raises(Exception, match=r"revoked|expired"):
        expired.get(timeout=60)
    assert expired.state == "REVOKED"
    assert elsewhere.state == "PENDING"
    assert site.client.count_jobs(queues=["unserved"], statuses=["ready"]) == 1


def test_chain_group_and_chord(site: Site, tasks: Any, worker: Celery) -> None:
    from celery import chain, chord, group

    assert chain(tasks.add.s(2, 2), tasks.mul.s(8))().get(timeout=60) == 32
    assert group(tasks.add.s(i, i) for i in range(5))().get(timeout=60) == [0, 2, 4, 6, 8]
    assert chord((tasks.add.s(i, i) for i in range(5)), tasks.xsum.s())().get(timeout=60) == 20


def test_self_retry_with_a_countdown(site: Site, tasks: Any, worker: Celery) -> None:
    result = tasks.flaky.delay("flaky", 2)
    assert result.get(timeout=60) == 3
    assert len(site.runs("flaky")) == 3


def test_acks_late_task_of_a_killed_worker_runs_again_once(site: Site, tasks: Any) -> None:
    first = site.worker("fragile", concurrency=1)
    result = tasks.slow.apply_async(("fragile", 2), queue="fragile")
    site.wait_runs("fragile.started", 1)
    first.kill()  # SIGKILL, the pool with it, mid-task
    site.worker("fragile", concurrency=1)
    assert result.get(timeout=60) == "fragile"
    assert len(site.runs("fragile.started")) == 2 and len(site.runs("fragile.done")) == 1


def test_revoke_cancels_a_waiting_task(site: Site, tasks: Any, worker: Celery) -> None:
    doomed = tasks.slow.apply_async(("doomed", 0), countdown=1)
    doomed.revoke()
    assert doomed.state == "REVOKED"
    cancelled = site.client.list_jobs(queues=["celery"], types=["proj.tasks.slow"], statuses=["cancelled"])
    assert len(list(cancelled)) == 1
    # Absence by a positive signal: a task due after it has run, and the revoked one did not.
    assert tasks.slow.apply_async(("after", 0), countdown=2).get(timeout=60) == "after"
    assert site.runs("doomed.started") == []


def test_inspect_and_status_reach_the_worker(site: Site, worker: Celery) -> None:
    for command, expected in (
        (["inspect", "ping"], "pong"),
        (["status"], "online"),
        (["inspect", "stats"], "pool"),
    ):
        shown = subprocess.run(
            [*CELERY, *command], cwd=PROJ, env=site.env, capture_output=True, text=True, timeout=60
        )
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert expected in shown.stdout, shown.stdout


def test_revoke_with_terminate_stops_the_running_task(site: Site, tasks: Any, worker: Celery) -> None:
    running = tasks.slow.delay("terminated", 600)
    site.wait_runs("terminated.started", 1)
    app = importlib.import_module("proj.celery").app
    app.control.revoke(running.id, terminate=True)
    assert running.get(propagate=False, timeout=60) is not None and running.state == "REVOKED"
    deadline = time.monotonic() + 60
    while (job := site.client.job_by_key("celery", running.id)).status == "in_flight":  # its answer
        assert time.monotonic() < deadline, "the terminated task's job was never answered"
        time.sleep(0.05)
    assert job.status != "ready", "the terminated task went back to the queue"
    assert tasks.add.delay(2, 3).get(timeout=60) == 5  # the worker goes on
    assert site.runs("terminated.done") == []


def test_a_control_message_does_not_wait_behind_a_full_window_of_tasks(site: Site, tasks: Any) -> None:
    # One slot and a prefetch of one: a running acks_late task fills the tasks' window, and a
    # task waits behind it. The worker's mailbox has a window of its own.
    site.worker("full", concurrency=1, more=("-n", "full@%h", "--prefetch-multiplier", "1"))
    first = tasks.slow.apply_async(("full-first", 600), queue="full")
    tasks.slow.apply_async(("full-second", 0), queue="full")
    site.wait_runs("full-first.started", 1)
    app = importlib.import_module("proj.celery").app
    names = [name for reply in app.control.ping(timeout=5) for name in reply if name.startswith("full@")]
    assert len(names) == 1, names
    app.control.revoke(first.id, terminate=True, destination=names)
    site.wait_runs("full-second.done", 1)  # the window freed: the task behind it ran
    assert site.runs("full-first.done") == []


def test_events_reach_a_listener(site: Site, tasks: Any) -> None:
    dump = Celery(site.env, "events", "--dump", ready="starting capture")
    site.started.append(dump)
    deadline = time.monotonic() + 60  # its stream is on the server: events find it
    while not any(q.startswith("celeryev.") for w in site.client.workers() for q in w.queues):
        assert time.monotonic() < deadline, "the listener did not connect"
        time.sleep(0.05)
    site.worker("evented", more=("-E", "-n", "evented@%h"))
    done = tasks.add.apply_async((4, 5), queue="evented")
    assert done.get(timeout=60) == 9
    dump.output.wait_lines(f"task succeeded: proj.tasks.add({done.id})", timeout=60)
    dump.output.wait_lines("evented@", count=3, timeout=60)  # and its heartbeats, every 2 s
    assert dump.output.wait_lines("heartbeat", timeout=60)


def test_flower_shows_the_workers_and_the_tasks(site: Site, tasks: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**site.env, "FLOWER_UNAUTHENTICATED_API": "1"}
    site.started.append(Celery(env, "flower", f"--port={port}", "--address=127.0.0.1", ready="Visit me at"))
    site.worker("flowered", more=("-E", "-n", "flowered@%h"))
    done = tasks.add.apply_async((6, 7), queue="flowered")
    assert done.get(timeout=60) == 13
    api = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 60
    while (found := httpx.get(f"{api}/tasks", timeout=30).json().get(done.id, {})).get("state") != "SUCCESS":
        assert time.monotonic() < deadline, f"Flower did not see the task succeed: {found}"
        time.sleep(0.2)
    assert found["name"] == "proj.tasks.add" and found["worker"].startswith("flowered@")
    # Flower asks the workers (inspect) with a short timeout of its own: on a loaded machine a
    # reply may come too late for one refresh, so ask until it comes.
    while not any(
        name.startswith("flowered@") and "stats" in info
        for name, info in httpx.get(f"{api}/workers", params={"refresh": "1"}, timeout=60).json().items()
    ):
        assert time.monotonic() < deadline + 60, "Flower never had the worker's stats"
        time.sleep(0.5)


def test_beat_sends_the_periodic_task(site: Site, tasks: Any, worker: Celery, tmp_path: Path) -> None:
    site.beat(tmp_path)
    site.wait_runs("tick", 2)


def test_the_celery_command_shows_the_broker_s_queues(site: Site, worker: Celery) -> None:
    shown = subprocess.run(
        [*CELERY, "pyqueue"], cwd=PROJ, env=site.env, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert "celery.results" in shown.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_server_restart_under_the_worker_loses_nothing(
    site: Site, tasks: Any, worker: Celery, how: str
) -> None:
    waiting = tasks.add.apply_async((20, 22), countdown=1)
    site.server.stop() if how == "stop" else site.server.kill()
    site.server.restart()
    assert waiting.get(timeout=120) == 42  # kept on disk, delivered once the worker is back
    assert tasks.add.delay(1, 2).get(timeout=120) == 3
