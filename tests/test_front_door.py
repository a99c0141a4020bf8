"""The README's first command, as a newcomer types it: `make serve` in a fresh clone, then a job
enqueued, taken and acked through it, and jobs run by `pyqueue worker --processes 2 --pool process`
started in the clone (its children must import the installed package too, not the clone's sources).

The clone is what `git clone` of this checkout would give, with its uncommitted changes: the files
git tracks (and the untracked ones it does not ignore), copied as they are in the working tree, so
no build output of this checkout (its in-place extension, target/, .venv) is in it. The dev
virtualenv is off PATH, as on a machine that has never run `make test`.
"""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from harness import PYQUEUE_ROOT, ProcessOutput

import pyqueue

ROOT = Path(__file__).resolve().parent.parent
WORKER_APP = """
import os
from pathlib import Path

import pyqueue

app = pyqueue.App()


@app.job(queue="welcome")
def hello(path: str) -> None:
    Path(path).write_text(str(os.getpid()))
"""


def fresh_clone(into: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def newcomer_environment(home: Path) -> dict[str, str]:
    dev_bin = str(ROOT / ".venv" / "bin")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != dev_bin)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    return {
        **env,
        "PATH": path,
        "MAKEFLAGS": "",
        # Two shards (the bug needed more than one), on ports of their own: the defaults would
        # clash with a server the developer runs.
        "PYQUEUE_SERVE_SHARDS": "2",
        "PYQUEUE_SERVE_LISTEN": "127.0.0.1:0",
        "PYQUEUE_SERVE_HTTP_LISTEN": "127.0.0.1:0",
    }


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_serve_in_a_fresh_clone_serves_jobs(tmp_path: Path) -> None:
    assert PYQUEUE_ROOT is not None
    clone = fresh_clone(tmp_path / "clone")
    assert not list(clone.glob("pyqueue/_native*.so")), "the clone has no built extension"
    proc = subprocess.Popen(
        ["make", "serve"],
        cwd=clone,
        env=newcomer_environment(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # make, the supervisor and its shards: one group to stop
    )
    output = ProcessOutput(proc)
    try:
        # Installing builds the extension in release mode: minutes on a loaded 2-core machine.
        line = output.wait_lines("supervisor: pyqueue listening on", timeout=840)[0]
        address = line.split("listening on ", 1)[1].split()[0]
        with pyqueue.Client(address, timeout=30) as client:
            enqueued = client.enqueue("front.door", {"n": 1}, queue="welcome")
            with client.take("welcome", prefetch=1) as stream:
                job = stream.next(timeout=30)
                assert job is not None and job.id == enqueued.id
                stream.ack(job).result(30)
            assert client.count_jobs(queue="welcome") == 0
            run_jobs_with_a_worker_in(clone, address, client, tmp_path)
        assert "did not start" not in "".join(output.lines)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def run_jobs_with_a_worker_in(clone: Path, address: str, client: pyqueue.Client, tmp_path: Path) -> None:
    (clone / "front_door_app.py").write_text(WORKER_APP)
    pyqueue_cli = str(clone / ".venv-serve" / "bin" / "pyqueue")
    worker = subprocess.Popen(
        [
            pyqueue_cli,
            "--address",
            address,
            "worker",
            "--processes",
            "2",
            "--pool",
            "process",
            "front_door_app:app",
        ],
        cwd=clone,
        env=newcomer_environment(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = ProcessOutput(worker)
    try:
        markers = [tmp_path / f"ran-{i}" for i in range(4)]
        for marker in markers:
            client.enqueue("front_door_app.hello", {"args": [str(marker)], "kwargs": {}}, queue="welcome")
        deadline = time.monotonic() + 120
        while not all(m.exists() for m in markers) and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(m.exists() for m in markers), "".join(output.lines)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, "".join(output.lines)
