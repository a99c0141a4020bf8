"""A payload that is not what its content type says: refused at the door (gRPC, HTTP, a change),
and one already stored (written before the server checked) fails its own job, charged, while the
worker, the listing and the job API go on."""

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from harness import ServerProcess
from test_worker import start_worker, wait_for_lines

import pyqueue
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

TRUNCATED = b'{"a":'


def test_a_payload_that_is_not_its_content_type_is_refused_and_changes_nothing(
    server: ServerProcess, client: pyqueue.Client
) -> None:
    stub = pb_grpc.QueueStub(grpc.insecure_channel(server.address))
    for bad in (TRUNCATED, b"\xff\xfe", b"[" * 100_000):
        with pytest.raises(grpc.RpcError) as refused:
            stub.Enqueue(
                pb.EnqueueRequest(
                    jobs=[pb.NewJob(type="t", queue="q", payload=bad, content_type="application/json")]
                ),
                timeout=30,
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "application/json" in (refused.value.details() or "")
    request = urllib.request.Request(
        f"http://{server.http_address}/v1/jobs",
        data=json.dumps({"type": "t", "payload": "x"}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # a JSON string is a JSON payload
        assert answer.status == 200
    job = client.enqueue("t", {"ok": 1}, queue="q")
    with pytest.raises(grpc.RpcError) as changed:
        stub.UpdateJobs(
            pb.UpdateJobsRequest(
                filter=pb.JobFilter(ids=[job.id]),
                changes=pb.JobChanges(payload=TRUNCATED, content_type="application/json"),
            ),
            timeout=30,
        )
    assert changed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    answer = stub.UpdateJobs(
        pb.UpdateJobsRequest(filter=pb.JobFilter(ids=[job.id]), changes=pb.JobChanges(payload=TRUNCATED)),
        timeout=30,
    )
    assert [r.code for r in answer.rejected] == ["INVALID_ARGUMENT"]  # checked against its own type
    assert client.get_job(job.id).payload == {"ok": 1}
    assert client.count_jobs() == 2  # the one over HTTP and the one changed: nothing else


def test_a_stored_payload_that_does_not_decode_fails_its_job_and_nothing_else(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    with pyqueue.Client(server.address) as client:
        bad = client.enqueue("sample_app.add", {"args": [1, 2], "kwargs": {}}, queue="work", max_retries=0)
        good = [
            client.enqueue("sample_app.add", {"args": [i, i], "kwargs": {}}, queue="work") for i in range(5)
        ]
    assert server.stop() == 0
    damage = (  # the record's payload, as an older server let it in; in a process of its own, so
        # that RocksDB's lock goes with it
        "import sys; from pyqueue.store import RocksStore, keys; from pyqueue.store.contract import Family\n"
        "store = RocksStore(sys.argv[1]); batch = store.batch()\n"
        "batch.put(Family.DATA, keys.payload_key(int(sys.argv[2])), sys.argv[3].encode())\n"
        "store.write(batch); store.sync(); store.close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", damage, str(server.data_dir), str(bad.id), TRUNCATED.decode()],
        check=True,
        timeout=60,
    )
    server.start()
    try:
        with pyqueue.Client(server.address) as client:
            listed = {j.id: j for j in client.list_jobs(queues=["work"])}
            assert listed[bad.id].payload == TRUNCATED and "does not decode" in listed[bad.id].payload_error
            assert client.get_job(bad.id).payload_error
            log = tmp_path / "ran.log"
            worker = start_worker(server, log)
            try:
                ended = client.wait_job(bad.id, timeout=60)
                assert (ended.status, ended.attempts) == ("dead", 1), ended
                (error,) = client.job_errors(bad.id)
                assert error.error_type == "PayloadDecodeError" and "does not decode" in error.message
                assert len(wait_for_lines(log, len(good), timeout=60)) == len(good)
                assert worker.poll() is None, "the worker is still running"
            finally:
                worker.send_signal(signal.SIGTERM)
                out = worker.communicate(timeout=60)[0]
            assert worker.returncode == 0, out
    finally:
        server.close()
