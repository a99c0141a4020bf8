"""The `pyqueue` command against a real server."""

import json
import subprocess
import sys

from harness import check_store

import pyqueue


def run(server, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    result = subprocess.run(
        [sys.executable, "-m", "pyqueue", "--address", server.address, *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (result.returncode == 0) == ok, result.stderr
    return result


def test_enqueue_prints_the_id_and_job_shows_it(server) -> None:  # type: ignore[no-untyped-def]
    job_id = int(
        run(
            server, "enqueue", "email.send", "--queue", "mail", "--payload", '{"to": "x"}', "--priority", "7"
        ).stdout
    )
    shown = json.loads(run(server, "job", str(job_id), "--json").stdout)
    assert shown["type"] == "email.send" and shown["queue"] == "mail" and shown["priority"] == 7
    assert shown["payload"] == {"to": "x"} and shown["status"] == "ready"
    assert shown["id"] == str(job_id), "ids are strings in JSON (they pass 2**53)"
    table = run(server, "job", str(job_id)).stdout
    assert "email.send" in table and "ready" in table


def test_address_comes_from_the_environment(server) -> None:  # type: ignore[no-untyped-def]
    result = subprocess.run(
        [sys.executable, "-m", "pyqueue", "enqueue", "t"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYQUEUE_ADDRESS": server.address, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    with pyqueue.Client(server.address) as client:
        assert client.get_job(int(result.stdout)).type == "t"


def test_errors_are_clear(server) -> None:  # type: ignore[no-untyped-def]
    assert "NOT_FOUND" in run(server, "job", "42", ok=False).stderr
    assert "not valid JSON" in run(server, "enqueue", "t", "--payload", "{", ok=False).stderr
    assert "INVALID_ARGUMENT" in run(server, "enqueue", "t", "--priority", "70000", ok=False).stderr
    for concurrency in ("0", "2501"):  # no slot at all; a prefetch past the server's --max-prefetch
        refused = run(server, "worker", "pyqueue:App", "--concurrency", concurrency, ok=False)
        assert "--concurrency" in refused.stderr and "1<=x<=2500" in refused.stderr, refused.stderr


def test_check_is_clean_on_a_store_with_a_paused_queue(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    client.enqueue_many([{"type": "t", "queue": "held"} for _ in range(3)])
    client.enqueue("t", queue="other")
    client.pause("held")
    server.stop()
    out = check_store(server.data_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok:" in out.stdout


def test_version_names_the_package_and_the_native_extension() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pyqueue", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"pyqueue {pyqueue.__version__} (native {pyqueue.native.__version__})"
