"""One Take stream: subscribe, then jobs out and acks/failures in, on the same stream.

Two tasks share the stream: the pusher sends jobs whenever the consumer has credit and work, and a
heartbeat whenever nothing was sent for `heartbeat_s`; the reader takes acks and failures. Acks
are not awaited one by one: each is submitted at once, so acks from one stream share commits and
fsyncs. When the stream ends for any reason (the worker closed it, crashed, or its host went
silent past the keepalive), everything it still holds goes back to ready.
"""

import asyncio
import time
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from pyqueue.engine import Engine, EngineError, Failure
from pyqueue.engine.consumer import Consumer
from pyqueue.server.convert import ack_result, fail_result, job_to_pb
from pyqueue.server.status import EOF, Context, abort
from pyqueue.v1 import queue_pb2 as pb


class TakeStream:
    def __init__(
        self,
        engine: Engine,
        context: Context,
        heartbeat_s: float,
        check_owner: Callable[[str], None] = lambda queue: None,
    ) -> None:
        self.engine = engine
        self.check_owner = check_owner
        self.context = context
        self.heartbeat_s = heartbeat_s
        self.consumer: Consumer | None = None
        self._send_lock = asyncio.Lock()
        self._last_sent = time.monotonic()
        self._pending: set[asyncio.Task[Any]] = set()
        self._ending = asyncio.Event()

    async def run(self) -> None:
        first = await self.context.read()
        if first is EOF:
            return
        if first.WhichOneof("kind") != "subscribe":
            await self.context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the first message on a Take stream must be a subscribe"
            )
        try:
            for queue in first.subscribe.queues:
                self.check_owner(queue)
            self.consumer = self.engine.consumer(list(first.subscribe.queues), first.subscribe.prefetch)
        except EngineError as exc:
            await abort(self.context, exc)
        reader = asyncio.get_running_loop().create_task(self._read())
        try:
            await self._push(self.consumer)
        finally:
            # Acks already received are committed before the rest goes back to ready.
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            self.consumer.close()
            if self._pending:
                await asyncio.gather(*self._pending, return_exceptions=True)

    def end(self) -> None:
        """Server shutdown: stop pushing and let the stream finish."""
        self._ending.set()
        if self.consumer is not None:
            self.consumer.close()

    async def _push(self, consumer: Consumer) -> None:
        while not consumer.closed and not self._ending.is_set():
            idle_left = self.heartbeat_s - (time.monotonic() - self._last_sent)
            jobs = await consumer.next_jobs(max(idle_left, 0.0))
            if jobs:
                await self._send(pb.TakeResponse(jobs=pb.JobBatch(jobs=[job_to_pb(j) for j in jobs])))
            elif not consumer.closed and time.monotonic() - self._last_sent >= self.heartbeat_s:
                await self._send(pb.TakeResponse(heartbeat=pb.Heartbeat(server_time_ms=self.engine.clock())))

    async def _send(self, message: pb.TakeResponse) -> None:
        async with self._send_lock:
            await self.context.write(message)
            self._last_sent = time.monotonic()

    async def _read(self) -> None:
        assert self.consumer is not None
        try:
            while True:
                message = await self.context.read()
                if message is EOF:
                    break
                kind = message.WhichOneof("kind")
                if kind == "ack":
                    self._spawn(self._ack(list(message.ack.ids)))
                elif kind == "fail":
                    failures = [
                        Failure(f.id, f.message, f.error_type, f.backtrace, f.kill, f.retry_at_ms)
                        for f in message.fail.failures
                    ]
                    self._spawn(self._fail(failures))
                elif kind == "extend":
                    self._spawn(self.consumer.extend(list(message.extend.ids), message.extend.extend_ms))
                else:
                    break  # a second subscribe is a protocol error: end the stream
        finally:
            if self._pending:
                await asyncio.gather(*self._pending, return_exceptions=True)
            self.consumer.close()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _ack(self, job_ids: list[int]) -> None:
        assert self.consumer is not None
        outcome = await self.consumer.ack(job_ids)
        try:
            await self._send(ack_result(outcome))
        finally:
            # Only now: the worker must never see more than `prefetch` jobs it has not had confirmed.
            self.consumer.release(outcome)

    async def _fail(self, failures: list[Failure]) -> None:
        assert self.consumer is not None
        outcome = await self.consumer.fail(failures)
        try:
            await self._send(fail_result(outcome))
        finally:
            self.consumer.release(outcome)
