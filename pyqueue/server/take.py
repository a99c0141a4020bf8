"""One Take stream: subscribe, then jobs out and acks/failures in, on the same stream.

Two tasks share the stream: the pusher sends jobs whenever the consumer has credit and work, and a
heartbeat whenever nothing was sent for `heartbeat_s`; the reader takes acks, failures, starts,
extensions and releases, each naming the attempt by its lease. Acks are not awaited one by one:
each is submitted at once, so acks from one stream share commits and fsyncs. A worker that
subscribes with `answers_with_jobs` gets its ack answers inside the next job batch when one
follows them (one message a round instead of two), and alone when none does. When the stream ends,
everything it still holds goes back to the queue by how it ended: a half-close by the worker or
the server's own shutdown is clean (started jobs were interrupted), anything else is abrupt
(started jobs were lost); jobs never started are released without an attempt either way.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import grpc.aio

from pyqueue.engine import Engine, EngineError, Failure
from pyqueue.engine.consumer import YIELD_EVERY, Consumer
from pyqueue.engine.model import RESULT_NOT_KEPT, JobView, Outcome, Rejection
from pyqueue.engine.ranges import clip_text
from pyqueue.server.convert import ack_result, fail_result, push_message
from pyqueue.server.status import EOF, Context, abort
from pyqueue.v1 import queue_pb2 as pb

log = logging.getLogger("pyqueue.take")

_ANSWERS = ("start", "ack", "fail", "extend", "release")
_CANCEL_GRACE_S = 0.2
SEND_TIMEOUT_S = 60.0
COST_BUDGET = 1024  # ids of one stream's messages being applied at once (one bigger message alone)
MAX_PENDING_MESSAGES = 16  # a stream's messages being applied at once; past it, reading waits
# A connection whose streams answer ids they do not hold pauses this long per id before any of
# them reads its next message: an honest worker sends one now and then (an attempt that timed
# out), a flood sends thousands a message, and each costs the event loop every client shares
# (3.5 ms for 10,000). 10,000 a message: 200 ms apart, under 2% of the loop for that connection,
# and other clients' p99 stays within 2x of its quiet value (bench/flood_acks.py).
STRAY_PAUSE_S = 2e-5
ANSWER_GRACE_S = 5.0  # at a server stop, how long started attempts may still be answered
BATCH_BYTES = 4 << 20  # a delivery message; the message limit is 64 MiB
_JOB_OVERHEAD = 1024  # the fields around a payload, generously (names are at most 128 bytes)


class StrayPacer:
    """When the streams of one client connection may read again, after answering ids they did
    not hold (see STRAY_PAUSE_S): the pauses add up across the connection's streams."""

    def __init__(self) -> None:
        self._not_before = 0.0

    def charge(self, ids: int) -> None:
        now = asyncio.get_running_loop().time()
        self._not_before = max(self._not_before, now) + ids * STRAY_PAUSE_S

    async def wait(self) -> None:
        delay = self._not_before - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(delay)


class ServerTakeStream:
    def __init__(
        self,
        engine: Engine,
        context: Context,
        heartbeat_s: float,
        check_owner: Callable[[str], None] = lambda queue: None,
        pacer: "StrayPacer | None" = None,
    ) -> None:
        self.engine = engine
        self.pacer = pacer or StrayPacer()  # shared by the streams of one client connection
        self.check_owner = check_owner
        self.context = context
        self.heartbeat_s = heartbeat_s
        self.consumer: Consumer | None = None
        self._send_lock = asyncio.Lock()
        self._last_sent = time.monotonic()
        self._pending: set[asyncio.Task[Any]] = set()
        self._pending_cost = 0  # ids of the messages being applied (see COST_BUDGET)
        self._ending = asyncio.Event()
        self._clean = False  # the worker half-closed, or the server is stopping
        self._drains = False  # the worker answers Stopping with `drained`
        self._answers_with_jobs = False  # ack answers ride in the next JobBatch when one follows
        self._held = pb.AckResult()  # ack answers waiting for that batch
        self._drained = asyncio.Event()
        self._stalled = False
        self._protocol_error = ""
        # What ListWorkers shows.
        self.identity = pb.WorkerIdentity()
        self.connected_at_ms = engine.clock()
        self.last_ack_at_ms = 0
        self.acked = self.failed = 0

    async def run(self) -> None:
        first = await self.context.read()
        if first is EOF:
            return
        if not first.HasField("subscribe") or any(first.HasField(part) for part in _ANSWERS):
            await self.context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "the first message on a Take stream must be a subscribe, alone",
            )
        try:
            for queue in first.subscribe.queues:
                self.check_owner(queue)
            subscribe = first.subscribe
            self.identity = _identity(subscribe.worker)
            self._drains = subscribe.drains
            self._answers_with_jobs = subscribe.answers_with_jobs
            self.consumer = self.engine.consumer(
                list(subscribe.queues), subscribe.prefetch, reports_starts=subscribe.reports_starts
            )
            self.consumer.on_cancel = self._tell_cancelled
            self.consumer.on_idle = self._flush_soon
        except EngineError as exc:
            await abort(self.context, exc)
        reader = asyncio.get_running_loop().create_task(self._read())
        try:
            await self._push(self.consumer)
            with contextlib.suppress(Exception):  # if the stream is gone, so are the answers' waiters
                await self._flush()  # no push comes any more
            if self._ending.is_set():
                await self._await_answers(reader)
        except TimeoutError:
            if not self._stalled:
                raise
        finally:
            # Acks already received are committed before the rest goes back to the queue.
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            self.consumer.close(clean=self._clean)
            if self._pending:
                await asyncio.gather(*self._pending, return_exceptions=True)
        if self._protocol_error:
            await self.context.abort(grpc.StatusCode.INVALID_ARGUMENT, self._protocol_error)
        if self._stalled:
            await self.context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"this worker read nothing for {SEND_TIMEOUT_S:.0f}s; its jobs went back to the queue",
            )

    async def _await_answers(self, reader: "asyncio.Task[None]") -> None:
        """The server is stopping: no job goes out any more, but the answers for attempts already
        started may still come in for a moment, so that a job that was just finishing is not run
        again after the restart for want of its ack. What is unanswered after that was interrupted.

        A worker that drains is told, and its `drained` answer marks the last start it sent:
        without waiting for it, a start already on its way (a job the worker began as the
        previous one finished) would be lost, its job handed back here and run twice."""
        assert self.consumer is not None
        held = self.consumer.held
        deadline = time.monotonic() + ANSWER_GRACE_S
        if self._drains:
            try:
                async with asyncio.timeout(ANSWER_GRACE_S):
                    await self._send(pb.TakeResponse(stopping=pb.Stopping()))
            except Exception:  # gone or stalled: nothing more will come from it
                return
        while not reader.done() and time.monotonic() < deadline:
            drained = self._drained.is_set() or not self._drains
            if drained and not any(h.started_ms and not h.answering for h in held.values()):
                return
            await asyncio.sleep(0.02)  # shutdown only: a short poll, not worth a wake-up channel

    def describe(self, shard: int) -> pb.WorkerStream:
        consumer = self.consumer
        held = consumer.held.values() if consumer is not None else ()
        return pb.WorkerStream(
            worker=self.identity,
            peer=self.context.peer() or "",
            queues=consumer.queues if consumer is not None else (),
            prefetch=consumer.prefetch if consumer is not None else 0,
            in_flight=len(held),
            running=sum(1 for h in held if h.started_ms),
            connected_at_ms=self.connected_at_ms,
            last_ack_at_ms=self.last_ack_at_ms,
            acked=self.acked,
            failed=self.failed,
            shard=shard,
        )

    def end(self) -> None:
        """Server shutdown: stop pushing, take the answers of started attempts for a moment, then
        let the stream finish; what it still holds then was interrupted."""
        self._ending.set()
        self._clean = True
        if self.consumer is not None:
            self.consumer.stop_delivering()

    async def _push(self, consumer: Consumer) -> None:
        while not consumer.closed and not self._ending.is_set():
            idle_left = self.heartbeat_s - (time.monotonic() - self._last_sent)
            jobs = await consumer.next_jobs(max(idle_left, 0.0))
            for batch in _by_bytes(jobs):
                # The held answers are taken as the message is built: nothing is sent between.
                await self._send(push_message(batch, self._take_held() if self._holding() else None))
            if not jobs and not consumer.closed and time.monotonic() - self._last_sent >= self.heartbeat_s:
                await self._send(pb.TakeResponse(heartbeat=pb.Heartbeat(server_time_ms=self.engine.clock())))

    async def _send(self, message: pb.TakeResponse | bytes) -> None:
        async with self._send_lock:
            try:
                async with asyncio.timeout(SEND_TIMEOUT_S):  # no task per message, unlike wait_for
                    await self.context.write(message)
            except TimeoutError:
                # A worker that stopped reading: its buffers are bounded (credit in bytes), and
                # after this long its stream ends and what it holds goes back to the queue.
                self._stalled = True
                self._clean = True
                if self.consumer is not None:
                    self.consumer.close(clean=True)
                raise
            self._last_sent = time.monotonic()

    async def _read(self) -> None:
        assert self.consumer is not None
        consumer = self.consumer
        try:
            while True:
                # Read only as fast as answers are applied: a stream that pipelines acks without
                # reading their answers is held here, and gRPC's flow control pushes back on it
                # (an unread flood of acks of 10,000 ids took a server to 6 GB).
                while len(self._pending) >= MAX_PENDING_MESSAGES:
                    await asyncio.wait(tuple(self._pending), return_when=asyncio.FIRST_COMPLETED)
                await self.pacer.wait()
                message = await self.context.read()
                if message is EOF:
                    # A dead peer's stream also reads as EOF, and is cancelled a moment later.
                    if not self._clean:
                        await asyncio.sleep(_CANCEL_GRACE_S)
                        self._clean = not self.context.cancelled()
                    break
                if message.HasField("subscribe"):
                    self._protocol_error = "a subscribe comes once, as the first message of a Take stream"
                    self._clean = True
                    break
                oversized = _oversized(message, consumer.prefetch)
                if oversized:
                    self._protocol_error = oversized
                    break
                # Cost-weighted: a stream has COST_BUDGET ids being applied at once, so a message of
                # 10,000 ids waits for the stream's others, and one stream's flood takes one turn of
                # the event loop among every client's calls, not sixteen.
                cost = _cost(message)
                while self._pending and self._pending_cost + cost > COST_BUDGET:
                    await asyncio.wait(tuple(self._pending), return_when=asyncio.FIRST_COMPLETED)
                self._pending_cost += cost
                self._handle(consumer, message, cost)
                if message.closing:
                    self._clean = True
                if message.drained:
                    self._drained.set()
        finally:
            if self._pending:
                await asyncio.gather(*self._pending, return_exceptions=True)
            consumer.close(clean=self._clean)

    def _handle(self, consumer: Consumer, message: pb.TakeRequest, cost: int) -> None:
        """One message's parts, in the order the worker lived them: starts, then answers. The
        message's cost goes with its first task (or is given back if it has none)."""
        if message.HasField("start"):
            consumer.start(_pairs(message.start))
        tasks: list[Any] = []
        if message.HasField("ack"):
            tasks.append(self._ack(message.ack))
        if message.HasField("fail"):
            tasks.append(self._fail(message.fail))
        if message.HasField("extend"):
            tasks.append(consumer.extend(_pairs(message.extend), message.extend.extend_ms))
        if message.HasField("release"):
            release = message.release
            tasks.append(consumer.hand_back(_pairs(release), release.delay_ms, release.unknown_type))
        if not tasks:
            self._pending_cost -= cost
        for i, coro in enumerate(tasks):
            self._spawn(coro, cost if i == 0 else 0)

    def _spawn(self, coro: Any, cost: int = 0) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._pending.add(task)

        def done(finished: "asyncio.Task[Any]") -> None:
            self._pending.discard(finished)
            self._pending_cost -= cost

        task.add_done_callback(done)

    async def _ack(self, ack: pb.Ack) -> None:
        assert self.consumer is not None
        if len(ack.leases) != len(ack.ids):
            await self._send(ack_result(_unnamed(ack.ids)))
            return
        outcome = await self.consumer.ack(list(zip(ack.ids, ack.leases, strict=True)), self._results(ack))
        await self._count_stray(outcome)
        if outcome.done:
            self.acked += len(outcome.done)
            self.last_ack_at_ms = self.engine.clock()
        if self._answers_with_jobs:
            # Held before the credit opens, so the jobs that use it carry this answer ahead of them.
            self._held.MergeFrom(ack_result(outcome).ack_result)  # repeated fields append
            self.consumer.release(outcome)
            if not self.consumer.push_follows():
                await self._flush()
            return
        try:
            await self._send(await _in_slices(ack_result, outcome))
        finally:
            # Only now: the worker must never see more than `prefetch` jobs it has not had confirmed.
            self.consumer.release(outcome)

    async def _count_stray(self, outcome: Outcome) -> None:
        """Counts what the next read pauses for, and gives the loop back before a long answer."""
        if outcome.stray:
            self.pacer.charge(len(outcome.stray))
            if len(outcome.stray) > YIELD_EVERY:
                await asyncio.sleep(0)

    def _holding(self) -> bool:
        return bool(self._held.acked or self._held.rejected)

    def _take_held(self) -> pb.AckResult:
        held, self._held = self._held, pb.AckResult()
        return held

    async def _flush(self) -> None:
        """Send the held ack answers alone: no jobs are coming to carry them."""
        if self._holding():
            await self._send(pb.TakeResponse(ack_result=self._take_held()))

    def _flush_soon(self) -> None:
        if self._holding():
            self._spawn(self._flush())

    def _tell_cancelled(self, job_ids: list[int]) -> None:
        self._spawn(self._send(pb.TakeResponse(cancel=pb.Cancel(ids=job_ids))))

    def _results(self, ack: pb.Ack) -> dict[int, bytes] | None:
        """The return values sent with an ack, each within the payload limit. A bigger one is not
        kept: the job completes (its work is done; running it again would do it twice), and a
        marker saying why is kept instead, so result() raises with that, never returns nothing."""
        if not ack.results:
            return None
        limit = self.engine.config.limits.max_payload_bytes
        kept = {}
        for job_id, value in ack.results.items():
            if len(value) <= limit:
                kept[job_id] = value
            else:
                why = (
                    f"its result was {len(value)} bytes, over the server's --max-payload-bytes ({limit}), "
                    "so it was not kept: return less (a key to where the data is, say)"
                )
                log.warning("job %d: %s", job_id, why)
                kept[job_id] = RESULT_NOT_KEPT + why.encode()
        return kept

    async def _fail(self, fail: pb.Fail) -> None:
        assert self.consumer is not None
        limits = self.engine.config.limits
        failures = [
            (
                Failure(
                    f.id,
                    clip_text(f.message, limits.max_error_bytes),
                    clip_text(f.error_type, limits.max_name_length),
                    clip_text(f.backtrace, limits.max_backtrace_bytes),
                    f.kill,
                    f.retry_at_ms,
                ),
                f.lease,
            )
            for f in fail.failures
        ]
        outcome = await self.consumer.fail(failures)
        await self._count_stray(outcome)
        self.failed += len(outcome.done)
        try:
            await self._send(await _in_slices(fail_result, outcome))
        finally:
            self.consumer.release(outcome)


def _by_bytes(jobs: list[JobView]) -> list[list[JobView]]:
    """Batches of at most BATCH_BYTES (a job bigger than that alone): any valid job can be
    delivered at any prefetch, well under the message limit."""
    batches: list[list[JobView]] = []
    size = BATCH_BYTES
    for job in jobs:
        weight = len(job.payload) + _JOB_OVERHEAD
        if size + weight > BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(job)
        size += weight
    return batches


def _cost(message: pb.TakeRequest) -> int:
    """What applying a message costs, in the ids it names (at least 1)."""
    return max(
        1,
        len(message.start.ids)
        + len(message.ack.ids)
        + len(message.fail.failures)
        + len(message.extend.ids)
        + len(message.release.ids),
    )


def _oversized(message: pb.TakeRequest, prefetch: int) -> str:
    """A part naming more jobs than the stream can hold is a protocol error (and a cheap attack)."""
    for part, n in (
        ("start", len(message.start.ids)),
        ("ack", len(message.ack.ids)),
        ("fail", len(message.fail.failures)),
        ("extend", len(message.extend.ids)),
        ("release", len(message.release.ids)),
    ):
        if n > prefetch:
            return f"{n} jobs in one {part}; a stream holds at most its prefetch ({prefetch})"
    return ""


def _pairs(message: pb.Start | pb.Extend | pb.Release) -> list[tuple[int, int]]:
    """(id, lease) pairs; a message whose lists differ in length names no attempt and is ignored."""
    if len(message.leases) != len(message.ids):
        return []
    return list(zip(message.ids, message.leases, strict=True))


def _unnamed(ids: Sequence[int]) -> Outcome:
    message = "an ack must name each job's attempt: give as many leases as ids (Job.lease)"
    return Outcome(done=[], rejected=[Rejection(i, "INVALID_ARGUMENT", message) for i in ids])


def _identity(worker: pb.WorkerIdentity) -> pb.WorkerIdentity:
    """What a worker says of itself is shown, not trusted: cut to a sane length."""
    return pb.WorkerIdentity(
        host=clip_text(worker.host, 255), pid=worker.pid, name=clip_text(worker.name, 255)
    )


async def _in_slices(build: Callable[[Outcome], pb.TakeResponse], outcome: Outcome) -> pb.TakeResponse:
    """An answer built a slice of refusals at a time, giving the event loop back between slices
    (10,000 refusals are about 30 ms of work; see Consumer._sort)."""
    if len(outcome.rejected) <= YIELD_EVERY:
        return build(outcome)
    answer = build(Outcome(outcome.done, [], stray=outcome.stray))
    for start in range(0, len(outcome.rejected), YIELD_EVERY):
        answer.MergeFrom(build(Outcome([], outcome.rejected[start : start + YIELD_EVERY])))
        await asyncio.sleep(0)
    return answer
