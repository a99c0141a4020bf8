"""A worker in another language, written from docs/protocol.md alone (examples/rust-worker): built
with cargo, run against a real 2-shard server with tokens, through the public address only. It
takes jobs Python enqueued from queues on both shards, acks them with results and fails the one it
cannot run; Python reads the results and the error back. Skipped only where cargo is absent."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from auth_files import write_auth_file
from harness import ServerProcess

import pyqueue
from pyqueue.cluster import Topology

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "rust-worker"


@pytest.fixture(scope="module")
def worker_binary() -> Path:
    if shutil.which("cargo") is None:
        pytest.skip("needs cargo to build the Rust worker")
    target = ROOT / "target" / "examples"
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "--manifest-path", str(EXAMPLE / "Cargo.toml")],
        env={**os.environ, "CARGO_TARGET_DIR": str(target)},
        check=True,
        capture_output=True,
        timeout=900,
    )
    return target / "release" / "pyqueue-rust-worker"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_rust_worker_runs_python_enqueued_jobs_through_the_public_address(
    worker_binary: Path, tmp_path: Path
) -> None:
    secrets = write_auth_file(tmp_path / "auth.toml")
    server = ServerProcess(
        tmp_path / "data", "--shards", "2", "--auth-file", str(tmp_path / "auth.toml")
    ).start()
    try:
        topology = Topology(("a", "b"))
        queues = [
            next(f"rust{i}" for i in range(50) if topology.shard_of_queue(f"rust{i}") == s) for s in (0, 1)
        ]
        with pyqueue.Client(server.address, token=secrets["root"]) as client:
            sums = {
                client.enqueue(
                    "add", {"args": [i, 0.5], "kwargs": {}}, queue=queues[i % 2], keep_result=300
                ).id: i + 0.5
                for i in range(10)
            }
            bad = client.enqueue("add", {"args": ["x", 1], "kwargs": {}}, queue=queues[0]).id
            refused = subprocess.run(  # a token without the work right on these queues
                [str(worker_binary), server.address, ",".join(queues), "11"],
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "PYQUEUE_TOKEN": secrets["worker"]},
            )
            assert refused.returncode != 0 and "lacks the work right" in refused.stderr, refused.stderr
            run = subprocess.run(
                [str(worker_binary), server.address, ",".join(queues), "11"],
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "PYQUEUE_TOKEN": secrets["root"]},
            )
            assert run.returncode == 0, run.stderr
            assert "done: 10 acked, 1 failed" in run.stdout, run.stdout
            for job_id, expected in sums.items():
                assert client.result(job_id, timeout=30) == expected
            with pytest.raises(pyqueue.JobFailed, match="add needs two numbers"):
                client.result(bad, timeout=30)
            assert client.job_errors(bad)[-1].error_type == "TypeError"
    finally:
        server.close()
