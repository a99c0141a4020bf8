"""A server that stops tells its workers: a job they had prefetched is not started there any more
(it goes back with no attempt), and the answer of a job they had started is still taken."""

import threading

from harness import ServerProcess

import pyqueue


def test_a_stopping_server_takes_started_answers_and_keeps_prefetched_jobs_unstarted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            running = client.enqueue("t", b"a", keep_completed=600)
            prefetched = client.enqueue("t", b"b")
            with client.take("default", prefetch=2) as stream:
                job = stream.next(timeout=30, confirm_start=True)
                assert job is not None and job.id == running.id
                exit_code: list[int] = []
                stopper = threading.Thread(target=lambda: exit_code.append(server.stop(timeout=60)))
                stopper.start()
                stopped = threading.Event()
                while not stream.server_stopping and not stopped.wait(0.01):
                    assert stopper.is_alive(), "the server ended without telling the stream"
                job.ack()  # the started job's answer is still taken (committed before it returns)
                assert stream.next(timeout=30) is None, "a prefetched job was started after Stopping"
                stopper.join(timeout=60)
                assert exit_code == [0]
        server.restart()
        with pyqueue.Client(server.address) as client:
            assert client.get_job(running.id).status == "completed"
            again = client.get_job(prefetched.id)
            assert (again.status, again.attempts, again.lost) == ("ready", 0, 0)
    finally:
        server.close()
