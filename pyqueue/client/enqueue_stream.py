"""Single enqueues on one EnqueueStream kept open per shard, instead of one unary RPC each.

A message on an open stream costs both ends far less than an RPC (no new HTTP/2 stream, headers,
trailers), which is most of what one job per call costs. The batcher (client/batching.py) sends one
request at a time per shard, so requests and answers pair up in order. The caller's thread sends
and reads the answer itself: no thread hand-off on the way back.

A stream that breaks fails the request in flight with UNAVAILABLE (it may or may not have been
committed, as with a unary call whose connection broke) and is opened again on the next request.
That includes a stream the server cancels (a stopping server cancels the calls its grace period
did not see finish): only a cancel by the client's own watchdog is a timeout.
A server without EnqueueStream (UNIMPLEMENTED) is remembered, and unary calls are used instead.
The call's timeout is kept by a watchdog thread that cancels a stream whose answer is overdue.
"""

import asyncio
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

from pyqueue.errors import PyQueueError, Unavailable, from_code_name, from_rpc_error
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

Unary = Callable[[list[pb.NewJob]], list[pb.Enqueued]]
_WATCH_EVERY_S = 1.0


class _EndedUnread(Exception):
    """The server ended the stream cleanly before answering: it never read the request."""


class StreamedEnqueues:
    def __init__(self, stub: pb_grpc.QueueStub, unary: Unary, timeout: float) -> None:
        self._stub = stub
        self._unary = unary
        self._timeout = timeout
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[pb.EnqueueRequest | None] | None = None
        self._answers: Any = None  # the call's iterator of answers (also a grpc.Call: cancel())
        self._supported = True
        self._deadline = 0.0
        self._timed_out = False  # the watchdog cancelled the stream: its answer was overdue
        self._closed = False
        self._watchdog: threading.Thread | None = None

    def send(self, jobs: list[pb.NewJob]) -> list[pb.Enqueued]:
        if not self._supported:
            return self._unary(jobs)
        request = pb.EnqueueRequest(jobs=jobs)
        with self._lock:
            try:
                answer = self._exchange(request)
            except _EndedUnread:
                # The server ended the stream without reading the request (it was stopping, and
                # ends idle streams so): nothing was written, so a new stream carries it, once.
                try:
                    answer = self._exchange(request)
                except _EndedUnread:
                    raise Unavailable("the server ended the enqueue stream") from None
        if answer is None:  # the server has no EnqueueStream
            return self._unary(jobs)
        if answer.HasField("error"):
            raise from_code_name(answer.error.code, answer.error.message)
        return list(answer.jobs)

    def _exchange(self, request: pb.EnqueueRequest) -> pb.EnqueueResponse | None:
        if self._answers is not None and self._answers.done():
            self._drop()  # ended while idle (the server restarted, say): a new stream, nothing lost
        if self._answers is None:
            self._open()
        assert self._requests is not None and self._answers is not None
        self._timed_out = False
        self._requests.put(request)
        self._deadline = time.monotonic() + self._timeout
        try:
            answer: pb.EnqueueResponse = next(self._answers)
            return answer
        except grpc.RpcError as exc:
            self._drop()
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._supported = False
                return None
            if exc.code() == grpc.StatusCode.CANCELLED and self._timed_out:
                raise PyQueueError(f"no answer to an enqueue within {self._timeout}s") from None
            if exc.code() == grpc.StatusCode.CANCELLED and not self._closed:
                raise Unavailable("the server cancelled the enqueue stream") from None
            raise from_rpc_error(exc) from None
        except StopIteration:
            self._drop()
            raise _EndedUnread from None
        finally:
            self._deadline = 0.0

    def _open(self) -> None:
        self._requests = queue.SimpleQueue()
        self._answers = self._stub.EnqueueStream(iter(self._requests.get, None))
        if self._watchdog is None:
            self._watchdog = threading.Thread(
                target=self._watch, name="pyqueue-enqueue-watchdog", daemon=True
            )
            self._watchdog.start()

    def _drop(self) -> None:
        requests, answers = self._requests, self._answers
        self._requests = self._answers = None
        if requests is not None:
            requests.put(None)
        if answers is not None:
            answers.cancel()

    def _watch(self) -> None:
        while not self._closed:
            time.sleep(_WATCH_EVERY_S)
            deadline, answers = self._deadline, self._answers
            if deadline and time.monotonic() > deadline and answers is not None:
                self._timed_out = True
                answers.cancel()  # the waiting caller gets CANCELLED

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._drop()


AsyncUnary = Callable[[list[pb.NewJob]], Awaitable[list[pb.Enqueued]]]


class AsyncStreamedEnqueues:
    """The same for the asyncio client: one EnqueueStream per shard, one request at a time (the
    async batcher sends them so), the answer awaited within the client's timeout."""

    def __init__(self, stub: pb_grpc.QueueStub, unary: AsyncUnary, timeout: float) -> None:
        self._stub = stub
        self._unary = unary
        self._timeout = timeout
        self._call: Any = None
        self._supported = True

    async def send(self, jobs: list[pb.NewJob], retry: bool = True) -> list[pb.Enqueued]:
        if not self._supported:
            return await self._unary(jobs)
        try:
            call = await self._write(pb.EnqueueRequest(jobs=jobs))
            async with asyncio.timeout(self._timeout):
                answer = await call.read()
        except grpc.aio.AioRpcError as exc:
            self._call = None
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._supported = False
                return await self._unary(jobs)
            if exc.code() == grpc.StatusCode.CANCELLED:  # by the server: the stream broke
                raise Unavailable("the server cancelled the enqueue stream") from None
            raise from_rpc_error(exc) from None
        except TimeoutError:
            self._drop()
            raise PyQueueError(f"no answer to an enqueue within {self._timeout}s") from None
        if answer is grpc.aio.EOF:  # type: ignore[attr-defined]
            # Ended cleanly without reading it (the server was stopping): nothing was written.
            self._call = None
            if retry:
                return await self.send(jobs, retry=False)
            raise Unavailable("the server ended the enqueue stream")
        if answer.HasField("error"):
            raise from_code_name(answer.error.code, answer.error.message)
        return list(answer.jobs)

    async def _write(self, request: pb.EnqueueRequest) -> Any:
        """Write on the open stream, or on a new one if that one was over before the request went
        out (the server restarted while it sat idle): nothing was sent on it, nothing is lost."""
        if self._call is not None and not self._call.done():
            try:
                await self._call.write(request)
                return self._call
            except Exception:  # grpc.aio raises more than AioRpcError on a call already over
                pass
        self._call = self._stub.EnqueueStream()  # type: ignore[call-arg]  # aio: written to
        await self._call.write(request)
        return self._call

    def _drop(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            call.cancel()

    def close(self) -> None:
        self._drop()
