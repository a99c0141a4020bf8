"""Results: a handler's return value is kept with the completed job when the job asks for it, and
`result()` waits for it (the server answers when the job ends), from `pyqueue worker` and
`drain()`, with the sync and the async client; a dead job raises JobFailed, a slow one times out."""

import asyncio
import signal
import threading

import pytest
import sample_app
from test_worker import start_worker, wait_for_lines

import pyqueue
from pyqueue.testing import drain


def test_the_worker_keeps_return_values_for_result(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    product = sample_app.multiply.enqueue(6, 7)
    plain = sample_app.add.enqueue(1, 2)  # no keep_result: nothing kept, nothing sent
    broken = sample_app.unserialisable.enqueue()
    worker = start_worker(server, tmp_path / "ran.log")
    try:
        assert product.result(timeout=30) == {"product": 42}
        wait_for_lines(tmp_path / "ran.log", 1)  # add ran
        assert not client.get_job(product.id).headers
        with pytest.raises(pyqueue.JobFailed, match="not JSON-serialisable"):
            broken.result(timeout=30)
        with pytest.raises(pyqueue.NotFound):
            client.result(plain.id, timeout=5)  # completed and deleted: no result was asked for
        assert client.get_job(product.id).result() == {"product": 42}, "kept with the completed job"

        async def from_async() -> object:
            async with pyqueue.AsyncClient(server.address) as aclient:
                job = await aclient.enqueue(
                    sample_app.multiply.name, {"args": [2, 5], "kwargs": {}}, queue="work", keep_result=60
                )
                return await aclient.result(job.id, timeout=30)

        assert asyncio.run(from_async()) == {"product": 10}
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)


def test_result_waits_for_the_end_and_times_out_before_it(app, client) -> None:  # type: ignore[no-untyped-def]
    job = sample_app.multiply.enqueue(3, 3)
    with pytest.raises(TimeoutError, match="still ready"):
        job.result(timeout=0.5)
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(job.result(timeout=60)))
    waiter.start()  # waiting before the job runs: the end of the job wakes it
    drain(app, ["work"])
    waiter.join(timeout=60)
    assert got == [{"product": 9}]


def test_a_result_over_the_limit_completes_the_job_and_result_says_why(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from harness import ServerProcess

    server = ServerProcess(tmp_path / "data", "--max-payload-bytes", "1000").start()
    try:
        with pyqueue.Client(server.address) as client:
            job = client.enqueue("report", {"month": 11}, queue="r", keep_result=60)
            with client.take("r") as stream:
                taken = stream.next(timeout=30)
                assert taken is not None and taken.id == job.id
                taken.ack({"rows": "x" * 2000})  # its work is done: the job completes
            with pytest.raises(
                pyqueue.ResourceExhausted, match=r"its result was \d+ bytes, over .*1000.*not kept"
            ):
                client.result(job.id, timeout=30)
            stored = client.get_job(job.id)
            assert stored.status == "completed" and "not kept" in stored.result_problem
            with pytest.raises(pyqueue.ResourceExhausted, match="not kept"):
                stored.result()

            async def from_async() -> None:
                async with pyqueue.AsyncClient(server.address) as aclient:
                    with pytest.raises(pyqueue.ResourceExhausted, match="not kept"):
                        await aclient.result(job.id, timeout=30)

            asyncio.run(from_async())
        server.wait_for("not kept")
    finally:
        server.close()
