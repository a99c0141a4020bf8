"""`pip wheel .` gives one wheel that installs and serves in a fresh virtualenv with nothing else."""

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from harness import ServerProcess

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_wheel_installs_and_serves_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    env = {**os.environ, "CARGO_TARGET_DIR": str(ROOT / "target")}  # reuse the compiled crates
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(tmp_path / "dist"), "-q"],
        check=True,
        env=env,
        timeout=540,
    )
    wheels = list((tmp_path / "dist").glob("pyqueue-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"{wheels[0]}[server]"], check=True, timeout=300
    )

    clean_env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    server = ServerProcess(tmp_path / "data")
    server_cmd = [str(venv / "bin" / "pyqueue")]
    server.command = server_cmd  # run the installed console script, not this checkout
    server.env = clean_env
    server.cwd = tmp_path
    server.start()
    try:
        script = "import pyqueue, sys; c = pyqueue.Client(sys.argv[1]); print(c.get_job(c.enqueue('t', {'a': 1}).id).payload)"
        out = subprocess.run(
            [str(python), "-c", script, server.address],
            capture_output=True,
            text=True,
            env=clean_env,
            cwd=tmp_path,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "{'a': 1}"
        # The wheel carries the dashboard page, and the metrics' library came with it.
        with urllib.request.urlopen(f"http://{server.http_address}/", timeout=30) as page:
            assert b"<title>pyqueue</title>" in page.read()
        with urllib.request.urlopen(f"http://{server.http_address}/metrics", timeout=30) as metrics:
            assert b"pyqueue_jobs_enqueued_total" in metrics.read()
        check_the_light_install(tmp_path, wheels[0], server.address)
        assert server.stop() == 0
    finally:
        server.close()


def check_the_light_install(tmp_path: Path, wheel: Path, address: str) -> None:
    """`pip install pyqueue` without the server extra: it enqueues and takes, it has no embedded
    store, and `pyqueue serve` says what to install."""
    light = tmp_path / "light"
    subprocess.run([sys.executable, "-m", "venv", str(light)], check=True)
    subprocess.run(
        [str(light / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=300
    )
    env = {"PATH": f"{light / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    script = (
        "import importlib.util, pyqueue, sys; c = pyqueue.Client(sys.argv[1]); j = c.enqueue('t', {'b': 2}); "
        "print(c.get_job(j.id).payload, importlib.util.find_spec('rocksdict') is None)"
    )
    out = subprocess.run(
        [str(light / "bin" / "python"), "-c", script, address],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.split() == ["{'b':", "2}", "True"], out.stdout + out.stderr
    serve = subprocess.run(
        [str(light / "bin" / "pyqueue"), "serve", "--data-dir", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert serve.returncode != 0 and "pip install 'pyqueue[server]'" in serve.stderr, serve.stderr
    assert not (tmp_path / "nope").exists(), "nothing was created"
