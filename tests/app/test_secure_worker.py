"""The everyday path on a secured server (TLS, tokens, two shards): `pyqueue worker` and the
clients take their TLS and token settings from the environment, and run jobs as usual."""

import asyncio
import signal
from pathlib import Path

import pytest
import sample_app
from auth_files import write_auth_file
from certs import Authority
from harness import ServerProcess
from test_worker import start_worker, wait_for_lines

import pyqueue


@pytest.fixture
def secured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    ca = Authority(tmp_path, "ours")
    pair = ca.issue("server", server=True)
    secrets = write_auth_file(tmp_path / "auth.toml")
    server = ServerProcess(
        tmp_path / "data",
        "--shards", "2", "--tls-cert", str(pair.cert), "--tls-key", str(pair.key),
        "--auth-file", str(tmp_path / "auth.toml"),
    ).start()  # fmt: skip
    monkeypatch.setenv("PYQUEUE_TLS_CA", str(ca.path))
    monkeypatch.setenv("PYQUEUE_TOKEN", secrets["root"])
    yield server
    server.close()


@pytest.mark.timeout(120)
def test_pyqueue_worker_runs_jobs_on_a_secured_server(secured: ServerProcess, tmp_path: Path) -> None:
    sample_app.app.address = secured.address
    sample_app.LOG = tmp_path / "ran.log"
    try:
        for i in range(6):
            sample_app.add.enqueue(i, 1)
        worker = start_worker(secured, tmp_path / "ran.log")
        try:
            lines = wait_for_lines(tmp_path / "ran.log", 6, timeout=60)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.communicate(timeout=60)
        assert sorted(lines) == sorted(f"add {i + 1}" for i in range(6))
        with pyqueue.Client(secured.address) as client:  # completed jobs are gone at their ack
            assert client.count_jobs(queues=["default"]) == 0
    finally:
        sample_app.app.close()


@pytest.mark.timeout(120)
def test_the_async_client_on_a_secured_server(secured: ServerProcess) -> None:
    async def scenario() -> None:
        async with pyqueue.AsyncClient(secured.address) as client:
            job = await client.enqueue("t", {"n": 1}, queue="aio")
            assert (await client.get_job(job.id)).payload == {"n": 1}
            async with client.take("aio") as stream:
                taken = await stream.next(timeout=30)
                assert taken is not None and taken.id == job.id
                await stream.ack(taken)
        async with pyqueue.AsyncClient(secured.address, token="pq_wrong") as stranger:
            with pytest.raises(pyqueue.Unauthenticated):
                await stranger.enqueue("t", queue="aio")

    asyncio.run(scenario())
