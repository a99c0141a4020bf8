"""The worker's end of a Take stream (synchronous API, one background reader thread).

Acks and failures leave batched with no timer: the request generator sends the first one waiting
together with every other one that queued meanwhile, in one message. The server's heartbeats prove
it is alive: a stream that hears nothing for `stale_after_s` is treated as dead.
"""

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any

import grpc

from pyqueue.client.identity import identity
from pyqueue.client.job import Job
from pyqueue.client.outbox import CLOSE, DRAINED, Started, drain
from pyqueue.client.per_shard import PerShard
from pyqueue.client.take_core import Answering, Answers, read
from pyqueue.errors import PyQueueError, Unavailable, from_rpc_error
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

_END = object()


class TakeStream(Answering["Future[None]", "Future[str]"]):
    """Iterate to receive jobs; `job.ack()` / `job.fail()` answer on the same stream."""

    def __init__(
        self,
        stub: pb_grpc.QueueStub,
        queues: list[str],
        prefetch: int,
        stale_after_s: float = 30.0,
        jobs: "queue.SimpleQueue[Any] | None" = None,
    ) -> None:
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._jobs: queue.SimpleQueue[Any] = jobs if jobs is not None else queue.SimpleQueue()
        self._answers: Answers[Future[None], Future[str]] = Answers(Future, Future)
        self._lock = threading.Lock()
        self._error: PyQueueError | None = None
        self._closed = False
        self._stopping = False  # the server is stopping: start nothing more
        self._cancelled_jobs: Callable[[list[int]], None] = lambda job_ids: None
        self._stale_after_s = stale_after_s
        self.last_heard = time.monotonic()
        subscribe = pb.TakeRequest(
            subscribe=pb.Subscribe(
                queues=queues, prefetch=prefetch, reports_starts=True, worker=identity(), drains=True
            )
        )
        self._call = stub.Take(self._requests(subscribe))
        self._reader = threading.Thread(target=self._read, name="pyqueue-take-reader", daemon=True)
        self._reader.start()

    # Outgoing.
    def _send(self, item: Any) -> None:
        self._outbox.put(item)

    def _requests(self, subscribe: pb.TakeRequest) -> Iterator[pb.TakeRequest]:
        yield subscribe
        while True:
            item = self._outbox.get()
            items = [item]
            while True:
                try:
                    items.append(self._outbox.get_nowait())
                except queue.Empty:
                    break
            drained = drain(items)
            yield from drained.messages
            for sent in drained.sent:  # resumed: gRPC has written them
                sent()
            if drained.closing:
                return

    def _start(self, job: Job, confirm: bool) -> bool:
        """Tell the server the job starts; with `confirm`, return once that is on the wire;
        raises if the stream died first (the job was not started: it must not run). False once
        the server is stopping: the job was not started, must not run, and goes back to the queue."""
        sent = threading.Event()
        with self._lock:  # against the reader's `drained`: no start may be queued after it
            if self._stopping:
                return False
            self._outbox.put(Started(job.id, job.lease, sent.set if confirm else _nothing))
        if not confirm:
            return True
        while not sent.wait(0.5) and self._error is None and self._reader.is_alive():
            pass
        if not sent.is_set():  # the stream died first: the job was not started and must not run
            raise self._error or Unavailable("the take stream ended before the job could start")
        return True

    def _read(self) -> None:
        try:
            for response in self._call:
                self.last_heard = time.monotonic()
                read(response, self._answers, self)
        except grpc.RpcError as exc:
            if not self._closed:
                self._error = from_rpc_error(exc)
        finally:
            if self._error is None and not self._closed and not self._stopping:
                # The server ended it without saying it stops: a stream that yields nothing
                # more is dead, and its reader must hear so and take again.
                self._error = Unavailable("the server ended the take stream")
            self._answers.end(self._error or Unavailable("the take stream ended"))
            # Jobs delivered on it and not taken yet can no longer be started or answered: the
            # server hands them back (released), so they must not run here.
            while True:
                try:
                    self._jobs.get_nowait()
                except queue.Empty:
                    break
            self._jobs.put(_END)

    def _on_jobs(self, jobs: Iterable[pb.Job]) -> None:
        for message in jobs:
            self._jobs.put(Job.from_pb(message, self))

    def _on_cancel(self, job_ids: list[int]) -> None:
        self._cancelled_jobs(job_ids)

    def _on_stopping(self) -> None:
        with self._lock:  # against _start: no start may be queued after `drained`
            self._stopping = True
            self._outbox.put(DRAINED)

    # The worker's view.
    def next(self, timeout: float | None = None, *, confirm_start: bool = False) -> Job | None:
        """The next job, or None if none came within `timeout` seconds. Raises when the stream died.

        Taking a job starts it: the server is told, its time limit runs from now, and from now on
        it is this worker's attempt (jobs still waiting here are handed back at a close). The
        start goes out with the next answers, in one message; with `confirm_start`, `next` returns
        only once it is on the wire, so that a job that kills its process at once is still
        counted as started (lost), which is what a worker does before running a handler."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = 1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()))
            try:
                item = self._jobs.get(timeout=wait)
            except queue.Empty:
                self._check_alive()
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                continue
            if item is _END:
                self._jobs.put(_END)
                failure = self._failure()
                if failure is not None:
                    raise failure
                return None
            job: Job = item
            if self._start(job, confirm_start):
                return job

    def on_cancel(self, callback: "Callable[[list[int]], None]") -> None:
        """Call `callback(job_ids)` when the server says jobs held here were cancelled (from the
        reader): a worker stops them if it can, then answers as usual."""
        self._cancelled_jobs = callback

    @property
    def server_stopping(self) -> bool:
        """The server said it is stopping: no job comes any more, and the jobs delivered here and
        not yet taken will not be (they go back to the queue); the stream ends once the jobs
        already taken are answered, or after a few seconds."""
        return self._stopping

    def _check_alive(self) -> None:
        if time.monotonic() - self.last_heard > self._stale_after_s:
            self._error = Unavailable(f"no word from the server for {self._stale_after_s:.0f}s")
            self._call.cancel()  # type: ignore[no-untyped-call]
            raise self._error from None

    def _failure(self) -> PyQueueError | None:
        return self._error

    def __iter__(self) -> Iterator[Job]:
        while True:
            job = self.next()
            if job is None:
                return
            yield job

    def close(self, timeout: float = 5.0) -> None:
        """Half-close: the server commits answers already sent, hands back the jobs not taken (no
        attempt) and the ones taken but unanswered (interrupted), and ends the stream."""
        if self._closed:
            return
        self._closed = True
        self._outbox.put(CLOSE)
        self._reader.join(timeout)
        if self._reader.is_alive():
            self._call.cancel()  # type: ignore[no-untyped-call]
            self._reader.join(timeout)

    def __enter__(self) -> "TakeStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _nothing() -> None:
    pass


class MultiTakeStream(PerShard[TakeStream], TakeStream):
    """Queues on several shards: one stream per shard, all feeding one queue of jobs.

    Each job keeps the stream that delivered it, so `job.ack()` goes back to its own shard. When
    any one of the streams ends, this one ends (a worker then reconnects them all)."""

    def __init__(
        self,
        stubs: dict[int, pb_grpc.QueueStub],
        queues: dict[int, list[str]],
        prefetch: int,
        stale_after_s: float = 30.0,
        jobs: "queue.SimpleQueue[Any] | None" = None,
    ) -> None:
        self._jobs = jobs if jobs is not None else queue.SimpleQueue()
        self._closed = False
        self._by_shard = {
            shard: TakeStream(stub, queues[shard], prefetch, stale_after_s, jobs=self._jobs)
            for shard, stub in stubs.items()
        }

    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        for stream in self.streams:
            stream.close(timeout)


class JoinedTakeStream(TakeStream):
    """Several subscriptions, each with its own prefetch, all feeding one queue of jobs: a Celery
    worker's tasks, and its control messages, which must never wait behind a full window of
    tasks (contrib/celery). Each job is started and answered on the stream that delivered it;
    when any one of the streams ends, this one ends."""

    def __init__(self, parts: "list[TakeStream]", jobs: "queue.SimpleQueue[Any]") -> None:
        self._parts = parts
        self._jobs = jobs
        self._closed = False

    def _start(self, job: Job, confirm: bool) -> bool:
        stream = job._stream
        assert isinstance(stream, TakeStream), "a job of a sync Take stream"
        return stream._start(job, confirm)

    @property
    def server_stopping(self) -> bool:
        return any(part.server_stopping for part in self._parts)

    def _check_alive(self) -> None:
        for part in self._parts:
            part._check_alive()

    def _failure(self) -> PyQueueError | None:
        return next((f for f in (part._failure() for part in self._parts) if f is not None), None)

    def on_cancel(self, callback: "Callable[[list[int]], None]") -> None:
        for part in self._parts:
            part.on_cancel(callback)

    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        for part in self._parts:
            part.close(timeout)
