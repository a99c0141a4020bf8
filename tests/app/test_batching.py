"""The client's batcher: a lone caller goes on the enqueue stream, a crowd shares unary calls.
(The batcher's choice only: the transports it is given record what they were sent.)"""

import threading
import time
from collections.abc import Callable

from pyqueue.client.batching import Batcher
from pyqueue.v1 import queue_pb2 as pb


class Recorder:
    def __init__(self, hold: threading.Event | None = None) -> None:
        self.batches: list[int] = []
        self.hold = hold

    def __call__(self, jobs: list[pb.NewJob]) -> list[pb.Enqueued]:
        if self.hold is not None:
            self.hold.wait(30)
        self.batches.append(len(jobs))
        return [pb.Enqueued(id=i) for i in range(len(jobs))]


def test_a_lone_caller_goes_on_the_stream() -> None:
    unary, stream = Recorder(), Recorder()
    batcher = Batcher(unary, stream)
    for _ in range(3):
        assert [e.id for e in batcher.submit([pb.NewJob(type="t")])] == [0]
    assert (stream.batches, unary.batches) == ([1, 1, 1], [])


def test_a_crowd_shares_unary_calls() -> None:
    release = threading.Event()
    unary, stream = Recorder(), Recorder(hold=release)
    batcher = Batcher(unary, stream)
    first = threading.Thread(target=batcher.submit, args=([pb.NewJob(type="t")],))
    first.start()  # alone: on the stream, held there while the crowd gathers
    wait_until(lambda: batcher._callers == 1)  # the choice depends on who is inside submit
    crowd = [threading.Thread(target=batcher.submit, args=([pb.NewJob(type="t")],)) for _ in range(10)]
    for t in crowd:
        t.start()
    wait_until(lambda: batcher._callers == 11)
    release.set()
    for t in (first, *crowd):
        t.join(30)
    assert stream.batches == [1]
    assert sum(unary.batches) == 10 and len(unary.batches) < 10, "the crowd shared calls"


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.001)
