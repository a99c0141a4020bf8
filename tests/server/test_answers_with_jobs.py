"""Ack answers carried in the next JobBatch, for a worker that subscribes with `answers_with_jobs`:
one message a round instead of two, and an answer alone whenever no jobs follow it."""

import contextlib
import queue
from collections.abc import Iterator

import grpc
from harness import ServerProcess

import pyqueue
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


class RawStream:
    """A Take stream driven by hand, to see each message the server sends."""

    def __init__(self, server: ServerProcess, prefetch: int, answers_with_jobs: bool) -> None:
        self.channel = grpc.insecure_channel(server.address)
        self.requests: queue.Queue[pb.TakeRequest | None] = queue.Queue()
        self.responses = pb_grpc.QueueStub(self.channel).Take(self._requests(), timeout=60)
        subscribe = pb.Subscribe(
            queues=["q"], prefetch=prefetch, reports_starts=True, answers_with_jobs=answers_with_jobs
        )
        self.requests.put(pb.TakeRequest(subscribe=subscribe))

    def _requests(self) -> Iterator[pb.TakeRequest]:
        while (message := self.requests.get()) is not None:
            yield message

    def next(self) -> pb.TakeResponse:
        for response in self.responses:
            if response.WhichOneof("kind") != "heartbeat":
                return response
        raise AssertionError("the stream ended")

    def finish(self, job: pb.Job, lease: int | None = None) -> None:
        lease = job.lease if lease is None else lease
        self.requests.put(
            pb.TakeRequest(
                start=pb.Start(ids=[job.id], leases=[job.lease]), ack=pb.Ack(ids=[job.id], leases=[lease])
            )
        )

    def close(self) -> None:
        self.requests.put(None)
        self.channel.close()


@contextlib.contextmanager
def stream_over(
    client: pyqueue.Client, server: ServerProcess, jobs: int, *, answers_with_jobs: bool
) -> Iterator[tuple[list[int], RawStream]]:
    """`jobs` queued jobs (their ids), and a stream of prefetch 1 to take them."""
    ids = [client.enqueue("t", {"n": n}, queue="q").id for n in range(jobs)]
    stream = RawStream(server, prefetch=1, answers_with_jobs=answers_with_jobs)
    try:
        yield ids, stream
    finally:
        stream.close()


def test_an_ack_answer_rides_with_the_next_jobs_and_goes_alone_when_none_follow(
    client: pyqueue.Client, server: ServerProcess
) -> None:
    with stream_over(client, server, 3, answers_with_jobs=True) as (ids, stream):
        first = stream.next()
        assert [j.id for j in first.jobs.jobs] == ids[:1] and not first.jobs.HasField("ack_result")
        stream.finish(first.jobs.jobs[0])
        second = stream.next()  # the next job, with the answer that freed its credit ahead of it
        assert second.WhichOneof("kind") == "jobs"
        assert [j.id for j in second.jobs.jobs] == ids[1:2]
        assert list(second.jobs.ack_result.acked) == ids[:1]
        stream.finish(second.jobs.jobs[0])
        third = stream.next()
        assert [j.id for j in third.jobs.jobs] == ids[2:] and list(third.jobs.ack_result.acked) == ids[1:2]
        stream.finish(third.jobs.jobs[0])
        last = stream.next()  # nothing left to deliver: the answer goes alone
        assert last.WhichOneof("kind") == "ack_result" and list(last.ack_result.acked) == ids[2:]
    assert client.count_jobs(queue="q") == 0


def test_a_refused_ack_is_answered_at_once_when_no_credit_opens(
    client: pyqueue.Client, server: ServerProcess
) -> None:
    with stream_over(client, server, 2, answers_with_jobs=True) as (ids, stream):
        job = stream.next().jobs.jobs[0]
        stream.finish(job, lease=job.lease + 7)  # names no current attempt: refused, still held
        refused = stream.next()
        assert refused.WhichOneof("kind") == "ack_result" and not refused.ack_result.acked
        assert [(r.id, r.code) for r in refused.ack_result.rejected] == [(ids[0], "FAILED_PRECONDITION")]
        stream.finish(job)
        after = stream.next()
        assert [j.id for j in after.jobs.jobs] == ids[1:] and list(after.jobs.ack_result.acked) == ids[:1]


def test_without_the_option_each_answer_is_its_own_message(
    client: pyqueue.Client, server: ServerProcess
) -> None:
    with stream_over(client, server, 2, answers_with_jobs=False) as (ids, stream):
        job = stream.next().jobs.jobs[0]
        stream.finish(job)
        answer, jobs = stream.next(), stream.next()
        assert answer.WhichOneof("kind") == "ack_result" and list(answer.ack_result.acked) == ids[:1]
        assert [j.id for j in jobs.jobs.jobs] == ids[1:] and not jobs.jobs.HasField("ack_result")
