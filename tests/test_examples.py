"""Every example runs as written."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import ServerProcess

import pyqueue

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_plain_script_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "plain_script.py")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "scheduled for later: scheduled" in out.stdout
    assert "ran 4 jobs, 0 failed" in out.stdout
    assert "notified acme" in out.stdout


def test_fastapi_route_enqueues(server: ServerProcess, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYQUEUE_ADDRESS", server.address)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import fastapi_app
    from fastapi.testclient import TestClient

    fastapi_app.jobs.address = server.address
    with TestClient(fastapi_app.api) as http:
        response = http.post("/signup", json={"email": "ada@example.com"})
    assert response.status_code == 202
    with pyqueue.Client(server.address) as client:
        job = client.get_job(int(response.json()["job"]))
    assert (job.type, job.queue, job.payload) == (
        "fastapi_app.send_welcome",
        "mail",
        {"args": ["ada@example.com"], "kwargs": {}},
    )


def test_django_tasks_run_on_pyqueue(server: ServerProcess, tmp_path: Path) -> None:
    project = EXAMPLES / "django_project"
    outbox = tmp_path / "outbox.txt"
    env = {
        **os.environ,
        "PYQUEUE_ADDRESS": server.address,
        "DJANGO_SETTINGS_MODULE": "shop.settings",
        "SHOP_OUTBOX": str(outbox),
        "PYTHONPATH": str(project),
    }
    enqueued = subprocess.run(
        [sys.executable, "enqueue_order.py"], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    assert enqueued.returncode == 0, enqueued.stderr
    result_id, status = enqueued.stdout.split()
    assert status == "READY"
    with pyqueue.Client(server.address) as client:
        job = client.get_job(int(result_id))
        assert (job.type, job.queue, job.priority) == ("shop.tasks.send_receipt", "emails", 32768 - 10 * 300)
    worker = subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "pyqueue.contrib.django:app"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        check = (
            "import django; django.setup(); from shop.tasks import send_receipt; "
            "r = send_receipt.get_result(__import__('sys').argv[1]); "
            "print(r.status, r.attempts, __import__('json').dumps(r.return_value if r.status == 'SUCCESSFUL' else None))"
        )
        deadline = time.monotonic() + 30
        while True:  # polls Django's own result API, the thing under test
            out = subprocess.run(
                [sys.executable, "-c", check, result_id],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
            if out.stdout.split()[0] == "SUCCESSFUL" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        status, attempts, returned = out.stdout.split(maxsplit=2)
        assert (status, attempts) == ("SUCCESSFUL", "1")
        assert json.loads(returned) == {"order": 42, "sent_to": "ada@example.com"}
        assert outbox.read_text() == "receipt for order 42 to ada@example.com\n"
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)


def test_the_fastapi_example_runs_as_its_docstring_says(server: ServerProcess, tmp_path: Path) -> None:
    """uvicorn serves the app, `pyqueue worker fastapi_app:jobs` runs the job: the documented
    commands, each a real process."""
    import socket
    import urllib.request

    from harness import ProcessOutput

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYQUEUE_ADDRESS": server.address, "PYTHONUNBUFFERED": "1"}
    web = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "fastapi_app:api", "--port", str(port)],
        cwd=EXAMPLES, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "fastapi_app:jobs"],
        cwd=EXAMPLES, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    web_out, worker_out = ProcessOutput(web), ProcessOutput(worker)
    try:
        web_out.wait_lines("Uvicorn running on", timeout=60)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/signup",
            data=json.dumps({"email": "ada@example.com"}).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 202
            assert json.loads(answer.read())["status"] == "ready"
        worker_out.wait_lines("welcome mail to ada@example.com", timeout=60)
    finally:
        for proc in (web, worker):
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def test_photo_album_workflow_runs_across_two_shards() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "photo_album.py")], capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    assert "published summer: thumb-beach.jpg, thumb-dog.png, thumb-sunset.jpg" in out.stdout
    assert "batch upload: 1 completed, 1 dead" in out.stdout
    assert out.stdout.count("upload report:") == 1, "on_complete fired once, before the retry"
    assert "after the retry: 2 completed" in out.stdout
