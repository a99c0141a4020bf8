"""The worker's end of a Take stream, for asyncio: jobs in, acks/failures/extensions out.

As in the sync stream, outgoing acks and failures are batched without a timer: the writer sends
the first one waiting together with all that queued meanwhile. `ack` and `fail` return futures
that resolve when the server has committed them.
"""

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import grpc
import grpc.aio

from pyqueue.client.identity import identity
from pyqueue.client.job import Job
from pyqueue.client.outbox import CLOSE, DRAINED, Started, drain
from pyqueue.client.per_shard import PerShard
from pyqueue.client.take_core import Answering, Answers, read
from pyqueue.errors import PyQueueError, Unavailable, from_rpc_error
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


class AsyncTakeStream(Answering["asyncio.Future[None]", "asyncio.Future[str]"]):
    answers_async = True

    def __init__(
        self,
        stub: pb_grpc.QueueStub,
        queues: list[str],
        prefetch: int,
        stale_after_s: float = 30.0,
        jobs: "asyncio.Queue[Job | None] | None" = None,
    ) -> None:
        self._outbox: asyncio.Queue[Any] = asyncio.Queue()
        self._jobs: asyncio.Queue[Job | None] = jobs if jobs is not None else asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._answers: Answers[asyncio.Future[None], asyncio.Future[str]] = Answers(
            loop.create_future, loop.create_future
        )
        self._error: PyQueueError | None = None
        self._closed = False
        self._stopping = False  # the server is stopping: start nothing more
        self._cancelled_jobs: Callable[[list[int]], None] = lambda job_ids: None
        self._stale_after_s = stale_after_s
        self.last_heard = time.monotonic()
        self._heard = asyncio.Event()  # the server has answered once: the stream is up
        subscribe = pb.TakeRequest(
            subscribe=pb.Subscribe(
                queues=queues,
                prefetch=prefetch,
                reports_starts=True,
                worker=identity(),
                drains=True,
                answers_with_jobs=True,
            )
        )
        # grpc's stubs type only the sync call; the aio stub takes and gives async iterators.
        self._call: Any = stub.Take(self._requests(subscribe))  # type: ignore[arg-type]
        self._reader = asyncio.get_running_loop().create_task(self._read())

    def _send(self, item: Any) -> None:
        self._outbox.put_nowait(item)

    async def _requests(self, subscribe: pb.TakeRequest) -> AsyncIterator[pb.TakeRequest]:
        yield subscribe
        while True:
            items = [await self._outbox.get()]
            while not self._outbox.empty():
                items.append(self._outbox.get_nowait())
            drained = drain(items)
            for message in drained.messages:
                yield message
            for sent in drained.sent:  # resumed: gRPC has written them
                sent()
            if drained.closing:
                return

    async def _read(self) -> None:
        try:
            async for response in self._call:
                self.last_heard = time.monotonic()
                if not self._heard.is_set():
                    self._heard.set()
                read(response, self._answers, self)
        except grpc.aio.AioRpcError as exc:
            if not self._closed:
                self._error = from_rpc_error(exc)
        except asyncio.CancelledError:
            pass
        finally:
            if self._error is None and not self._closed and not self._stopping:
                # The server ended it without saying it stops: a stream that yields nothing
                # more is dead, and its reader must hear so and take again.
                self._error = Unavailable("the server ended the take stream")
            self._answers.end(self._error or Unavailable("the take stream ended"))
            # Jobs delivered on it and not taken yet can no longer be started or answered: the
            # server hands them back (released), so they must not run here.
            while not self._jobs.empty():
                self._jobs.get_nowait()
            self._jobs.put_nowait(None)

    def _on_jobs(self, jobs: Iterable[pb.Job]) -> None:
        for message in jobs:
            self._jobs.put_nowait(Job.from_pb(message, self))

    def _on_cancel(self, job_ids: list[int]) -> None:
        self._cancelled_jobs(job_ids)

    def _on_stopping(self) -> None:
        self._stopping = True  # one event loop: no start can slip in between
        self._outbox.put_nowait(DRAINED)

    async def _start_all(self, jobs: list[Job], confirm: bool) -> list[Job]:
        """Tell the server these jobs start; with `confirm`, return once that is on the wire;
        raises if the stream died first (the job was not started: it must not run). Returns the
        jobs started: none once the server is stopping (they go back to the queue, and must not run)."""
        if self._stopping:
            return []
        if not confirm:
            for job in jobs:
                self._outbox.put_nowait(Started(job.id, job.lease, _nothing))
            return jobs
        sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        left = [len(jobs)]

        def one_sent() -> None:
            left[0] -= 1
            if not left[0]:
                _resolve(sent, None)

        for job in jobs:
            self._outbox.put_nowait(Started(job.id, job.lease, one_sent))
        await asyncio.wait({sent, self._reader}, return_when=asyncio.FIRST_COMPLETED)
        if not sent.done():  # the stream died first: the jobs were not started and must not run
            raise self._error or Unavailable("the take stream ended before the jobs could start")
        return jobs

    async def next(self, timeout: float | None = None, *, confirm_start: bool = False) -> Job | None:
        """The next job, or None after `timeout` seconds without one. Raises when the stream died.

        Taking a job starts it (see TakeStream.next): take only when you are ready to run it."""
        jobs = await self.next_batch(1, timeout, confirm_start=confirm_start)
        return jobs[0] if jobs else None

    async def next_batch(
        self, most: int, timeout: float | None = None, *, confirm_start: bool = False
    ) -> list[Job]:
        """The next job and up to `most - 1` more already here, started together (one message); []
        after `timeout` seconds without one. A worker with several free slots takes this way."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            first = await self._take(left)
            if first is None:
                return []
            jobs = [first]
            while len(jobs) < most and not self._jobs.empty():
                job = self._jobs.get_nowait()
                if job is None:
                    self._jobs.put_nowait(None)  # the end stays visible to the next call
                    break
                jobs.append(job)
            started = await self._start_all(jobs, confirm_start)
            if started:
                return started
            # Jobs of a stream whose server is stopping: not to run; wait for the next or the end.

    async def _take(self, timeout: float | None) -> Job | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = 1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()))
            try:
                if self._jobs.empty():
                    async with asyncio.timeout(wait):
                        job = await self._jobs.get()
                else:
                    job = self._jobs.get_nowait()
            except TimeoutError:
                self._check_alive()
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                continue
            if job is None:
                self._jobs.put_nowait(None)
                failure = self._failure()
                if failure is not None:
                    raise failure
                return None
            return job

    def on_cancel(self, callback: "Callable[[list[int]], None]") -> None:
        """Call `callback(job_ids)` when the server says jobs held here were cancelled (from the
        reader): a worker stops them if it can, then answers as usual."""
        self._cancelled_jobs = callback

    @property
    def server_stopping(self) -> bool:
        """The server said it is stopping (see TakeStream.server_stopping)."""
        return self._stopping

    async def connected(self) -> None:
        """Return once the server has sent something on this stream (jobs, or the heartbeat it
        sends within its heartbeat interval): the subscription was taken, not just the call made."""
        await self._heard.wait()

    def _check_alive(self) -> None:
        if time.monotonic() - self.last_heard > self._stale_after_s:
            self._error = Unavailable(f"no word from the server for {self._stale_after_s:.0f}s")
            self._call.cancel()
            raise self._error from None

    def _failure(self) -> PyQueueError | None:
        return self._error

    def __aiter__(self) -> AsyncIterator[Job]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Job]:
        while (job := await self.next()) is not None:
            yield job

    async def close(self, timeout: float = 5.0) -> None:
        """Half-close: answers already sent are committed; jobs not taken go back without an
        attempt, jobs taken but unanswered go back as interrupted."""
        if self._closed:
            return
        self._closed = True
        self._outbox.put_nowait(CLOSE)
        try:
            await asyncio.wait_for(asyncio.shield(self._reader), timeout)
        except TimeoutError:
            self._call.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def __aenter__(self) -> "AsyncTakeStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _nothing() -> None:
    pass


def _resolve(future: "asyncio.Future[Any] | None", value: Any) -> None:
    if future is not None and not future.done():
        future.set_result(value)


class AsyncMultiTakeStream(PerShard[AsyncTakeStream], AsyncTakeStream):
    """Queues on several shards: one stream per shard, all feeding one queue of jobs (see
    take.MultiTakeStream); acks go to the shard a job id names."""

    def __init__(
        self,
        stubs: dict[int, pb_grpc.QueueStub],
        queues: dict[int, list[str]],
        prefetch: int,
        stale_after_s: float = 30.0,
    ) -> None:
        self._jobs = asyncio.Queue()
        self._closed = False
        self._by_shard = {
            shard: AsyncTakeStream(stub, queues[shard], prefetch, stale_after_s, jobs=self._jobs)
            for shard, stub in stubs.items()
        }

    async def close(self, timeout: float = 5.0) -> None:
        if not self._closed:
            self._closed = True
            await asyncio.gather(*(s.close(timeout) for s in self.streams))
