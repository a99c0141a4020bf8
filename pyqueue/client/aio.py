"""`AsyncClient`: the Client's mirror for asyncio applications (FastAPI, aiohttp) and the worker."""

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, Unpack

import grpc
import grpc.aio

from pyqueue import tracing
from pyqueue.client import calls
from pyqueue.client.aio_take import AsyncMultiTakeStream, AsyncTakeStream
from pyqueue.client.answers import JobError
from pyqueue.client.batching import AsyncBatcher
from pyqueue.client.client import CHANNEL_OPTIONS, MOVED_CODES, default_address, jobs_from
from pyqueue.client.enqueue_stream import AsyncStreamedEnqueues
from pyqueue.client.failover import FAILOVER_S, Failover
from pyqueue.client.history import History
from pyqueue.client.job import Job
from pyqueue.client.routing import Routes, unimplemented
from pyqueue.client.security import Security
from pyqueue.client.spec import JobOptions, new_job_message
from pyqueue.client.steering import ChangeResult, CronInfo, FairKeys, QueueInfo, WorkerInfo
from pyqueue.client.workflows import BatchInfo, StepLike, WorkflowRun
from pyqueue.cluster import Topology
from pyqueue.errors import FailedPrecondition, Unavailable, from_rpc_error
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

T = TypeVar("T")


class AsyncClient:
    """A connection to a pyqueue server for asyncio code; `async with AsyncClient() as client:`."""

    def __init__(
        self,
        address: str | None = None,
        *,
        timeout: float = 30.0,
        batching: bool = True,
        tls: bool | None = None,
        ca: str | Path | None = None,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        token: str | None = None,
        routing: bool = True,
        failover_s: float = FAILOVER_S,
    ) -> None:
        """See Client: the same arguments, and the same environment variables."""
        self.address = address or default_address()
        self.timeout = timeout
        self.failover_s = failover_s  # how long an enqueue is sent again through a failover
        self.security = Security.resolve(tls, ca, cert, key, token)
        self._channel = self.security.aio_channel(self.address, CHANNEL_OPTIONS)
        self._stub = pb_grpc.QueueStub(self._channel)
        self._batching = batching
        self._batchers: dict[int, AsyncBatcher] = {}
        self._streams: dict[int, AsyncStreamedEnqueues] = {}
        self._channels: list[grpc.aio.Channel] = []
        self._routing = routing  # False: every call to `address`, a router that forwards it
        self._routes: Routes[Any] = Routes(self._stub, self._shard_stub)

    def _shard_stub(self, address: str) -> Any:
        channel = self.security.aio_channel(address, CHANNEL_OPTIONS)
        self._channels.append(channel)
        return pb_grpc.QueueStub(channel)

    async def topology(self) -> Topology:
        """The server's shards and the slot map (one shard with an empty address: not sharded),
        asked of the server on first use."""
        topology = (await self._known_routes()).topology
        assert topology is not None
        return topology

    async def _known_routes(self) -> "Routes[Any]":
        """Where calls go: learnt from the server's topology on first use."""
        if self._routes.topology is None and not self._routing:
            self._routes.learn(None)
        if self._routes.topology is None:
            try:
                self._routes.learn(await self._stub.GetTopology(pb.TopologyRequest(), timeout=self.timeout))
            except grpc.aio.AioRpcError as exc:
                if not unimplemented(exc):
                    raise from_rpc_error(exc) from None
                self._routes.learn(None)
        return self._routes

    def _batcher(self, shard: int) -> AsyncBatcher:
        if shard not in self._batchers:
            self._batchers[shard] = AsyncBatcher(lambda messages: self._send_streamed(shard, messages))
        return self._batchers[shard]

    async def _send_streamed(self, shard: int, messages: list[pb.NewJob]) -> list[pb.Enqueued]:
        """Single enqueues go on a stream kept open per shard (see client/enqueue_stream.py)."""
        stream = self._streams.get(shard)
        if stream is None:
            stub = (await self._known_routes()).stub(shard)
            stream = self._streams[shard] = AsyncStreamedEnqueues(
                stub, lambda m: self._send_to(shard, m), self.timeout
            )
        try:
            return await stream.send(messages)
        except (Unavailable, FailedPrecondition):
            if self._routes.sharded:
                await self._forget_routes()
            raise

    async def _call(self, method: Any, request: Any, timeout: float | None = None) -> Any:
        try:
            return await method(request, timeout=timeout if timeout is not None else self.timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in MOVED_CODES and self._routes.sharded:
                await self._forget_routes()
            raise from_rpc_error(exc) from None

    async def _forget_routes(self) -> None:
        """A shard went away or the map is stale: learn the topology again on the next call."""
        self._routes.forget()
        channels, self._channels = self._channels, []
        self._batchers.clear()
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream.close()
        for channel in channels:
            await channel.close(None)

    async def _send_to(self, shard: int, messages: list[pb.NewJob]) -> list[pb.Enqueued]:
        stub = (await self._known_routes()).stub(shard)
        return list((await self._call(stub.Enqueue, pb.EnqueueRequest(jobs=messages))).jobs)

    async def enqueue(self, type: str, payload: Any = None, **options: Unpack[JobOptions]) -> Job:
        """Enqueue one job (see Client.enqueue); concurrent calls share requests."""
        message = [new_job_message({"type": type, "payload": payload, **options}, tracing.context_headers())]
        failover = Failover(self.failover_s, message)
        while True:
            try:
                shard, _ = (await self._known_routes()).for_queue(message[0].queue)
                results = await (
                    self._batcher(shard).submit(message) if self._batching else self._send_to(shard, message)
                )
                return jobs_from(message, results)[0]
            except Unavailable as exc:
                delay = failover.next_delay(exc)
                if delay is None:
                    raise
                await asyncio.sleep(delay)

    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        context = tracing.context_headers()
        messages = [new_job_message(j, context) for j in jobs]
        failover = Failover(self.failover_s, messages)
        while True:
            try:
                return await self._enqueue_all(messages)
            except Unavailable as exc:
                delay = failover.next_delay(exc)
                if delay is None:
                    raise
                await asyncio.sleep(delay)

    async def _enqueue_all(self, messages: list[pb.NewJob]) -> list[Job]:
        routes = await self._known_routes()
        by_shard: dict[int, list[int]] = {}
        for i, message in enumerate(messages):
            by_shard.setdefault(routes.for_queue(message.queue)[0], []).append(i)
        results: list[pb.Enqueued | None] = [None] * len(messages)
        if len(by_shard) > 1:  # every shard checks its part first: a refusal changes nothing
            for shard, indexes in by_shard.items():
                request = pb.EnqueueRequest(jobs=[messages[i] for i in indexes], validate_only=True)
                await self._call(routes.stub(shard).Enqueue, request)
        for shard, indexes in by_shard.items():
            for i, result in zip(
                indexes, await self._send_to(shard, [messages[i] for i in indexes]), strict=True
            ):
                results[i] = result
        return jobs_from(messages, [r for r in results if r is not None])

    # Every call but enqueue and take is written once, in client/calls.py; these carry them.
    async def _run(self, call: calls.Call[T]) -> T:
        stub = (await self._known_routes()).for_job(call.job_id) if call.job_id is not None else self._stub
        timeout = call.timeout if call.timeout is not None else self.timeout + call.extra_timeout
        return call.read(await self._call(getattr(stub, call.method), call.request, timeout))

    async def _drive(self, steps: calls.Steps[T]) -> T:
        """Run a method of several calls: each answer goes back to it, until it returns."""
        try:
            call = next(steps)
            while True:
                call = steps.send(await self._run(call))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def get_job(self, job_id: int) -> Job:
        return await self._run(calls.get_job(job_id))

    async def job_by_key(self, queue: str, unique_key: str) -> Job:
        """The job that last took `unique_key` in `queue` (see Client.job_by_key)."""
        return await self._run(calls.job_by_key(queue, unique_key))

    async def wait_job(self, job_id: int, timeout: float | None = None) -> Job:
        """The job once it is completed or dead, or as it is after `timeout` (see Client.wait_job)."""
        return await self._drive(calls.wait_job(job_id, timeout))

    async def result(self, job_id: int, timeout: float | None = None) -> Any:
        """The job's result once it completed (see Client.result)."""
        return await self._drive(calls.result(job_id, timeout))

    async def job_errors(self, job_id: int) -> list[JobError]:
        return await self._run(calls.job_errors(job_id))

    async def list_page(
        self, *, cursor: str = "", limit: int = 50, descending: bool = False, **filters: Any
    ) -> tuple[list[Job], str, str]:
        """One page (see Client.list_page)."""
        return await self._run(calls.list_page(cursor, limit, descending, filters))

    async def list_jobs(
        self, *, page_size: int = 100, descending: bool = False, **filters: Any
    ) -> AsyncIterator[Job]:
        cursor = ""
        while True:
            jobs, cursor, _ = await self.list_page(
                cursor=cursor, limit=page_size, descending=descending, **filters
            )
            for job in jobs:
                yield job
            if not cursor:
                return

    async def count_jobs(self, **filters: Any) -> int:
        return await self._run(calls.count_jobs(filters))

    async def update_jobs(self, changes: Mapping[str, Any], **filters: Any) -> ChangeResult:
        return await self._run(calls.update_jobs(changes, filters))

    async def update_job(self, job_id: int, **changes: Any) -> Job:
        """Change one waiting job (see Client.update_job); the job as it now is."""
        return await self._drive(calls.update_job(job_id, changes))

    async def cancel(self, job_id: int) -> ChangeResult:
        """Cancel one job: see Client.cancel_jobs."""
        return await self.cancel_jobs(ids=[job_id])

    async def cancel_jobs(self, **filters: Any) -> ChangeResult:
        """Cancel jobs (see Client.cancel_jobs)."""
        return await self._run(calls.change("CancelJobs", filters))

    async def retry_jobs(self, **filters: Any) -> ChangeResult:
        """Run dead jobs again (see Client.retry_jobs)."""
        return await self._run(calls.change("RetryJobs", filters))

    async def delete_jobs(self, **filters: Any) -> ChangeResult:
        return await self._run(calls.change("DeleteJobs", filters))

    async def delete_job(self, job_id: int) -> None:
        await self._drive(calls.delete_job(job_id))

    # Workflows (docs/workflows.md).
    async def enqueue_workflow(self, workflow: StepLike) -> WorkflowRun:
        """Start a workflow (a Chain, a Group or Batch, or one Task): answered once its first step
        is committed; the server runs the rest."""
        return await self._run(calls.enqueue_workflow(workflow))

    async def add_to_batch(self, batch_id: int, jobs: Iterable[StepLike]) -> list[int]:
        """Add jobs to a batch that still has a pending job (from inside one of its jobs, say:
        `current_job().job.batch_id`); their indexes in the batch."""
        return await self._run(calls.add_to_batch(batch_id, jobs))

    async def batch(self, batch_id: int) -> BatchInfo:
        return await self._run(calls.batch(batch_id))

    async def batches(self, limit: int = 100, before: int = 0) -> list[BatchInfo]:
        """The newest batches first (ids below `before`, when given)."""
        return await self._run(calls.batches(limit, before))

    async def cancel_workflow(self, workflow_id: int) -> ChangeResult:
        """Cancel what has not run of a workflow (a batch's id is its workflow's); no callback of
        it fires."""
        return await self._run(calls.workflow_change("CancelWorkflow", workflow_id))

    async def retry_workflow(self, workflow_id: int) -> ChangeResult:
        """Retry a workflow's dead jobs: its batches count them pending again, and callbacks not
        fired yet fire once they complete; a chain that stopped at one goes on."""
        return await self._run(calls.workflow_change("RetryWorkflow", workflow_id))

    async def queues(self) -> list[QueueInfo]:
        return await self._run(calls.queues())

    async def workers(self) -> list[WorkerInfo]:
        """Every connected worker stream (on every shard), oldest first."""
        return await self._run(calls.workers())

    async def set_cron(self, entries: Iterable[Mapping[str, Any]]) -> list[CronInfo]:
        """Declare periodic jobs (see Client.set_cron)."""
        return await self._run(calls.set_cron(entries))

    async def pause_cron(self, name: str) -> CronInfo:
        return await self._run(calls.change_cron(name, "pause"))

    async def resume_cron(self, name: str) -> CronInfo:
        """Run again from the next tick (see Client.resume_cron)."""
        return await self._run(calls.change_cron(name, "resume"))

    async def delete_cron(self, name: str) -> CronInfo:
        return await self._run(calls.change_cron(name, "delete"))

    async def cron_entries(self) -> list[CronInfo]:
        return await self._run(calls.cron_entries())

    async def set_queue_limit(
        self,
        queue: str,
        *,
        max_running: int = 0,
        rate: float | str | None = None,
        burst: float = 0,
        key_max_running: int = 0,
    ) -> QueueInfo:
        """Limit a queue (see Client.set_queue_limit)."""
        return await self._run(calls.set_queue_limit(queue, max_running, rate, burst, key_max_running))

    async def set_fair_weight(self, queue: str, fair_key: str, weight: int) -> FairKeys:
        """A fair key's weight (see Client.set_fair_weight)."""
        return await self._run(calls.set_fair_weight(queue, fair_key, weight))

    async def fair_keys(self, queue: str, limit: int = 0) -> FairKeys:
        """A queue's busiest fair keys (see Client.fair_keys)."""
        return await self._run(calls.fair_keys(queue, limit))

    async def backup(self, path: str, timeout: float = 600.0) -> list[int]:
        """See Client.backup."""
        return await self._run(calls.backup(path, timeout))

    async def history(self, queue: str = "", *, total: bool = False) -> History:
        """The last hour of every queue in fixed steps (see Client.history)."""
        return await self._run(calls.history(queue, total))

    async def metrics(self) -> str:
        """The server's Prometheus metrics, as its HTTP /metrics serves them (text format)."""
        return await self._run(calls.metrics())

    async def pause(self, queue: str) -> QueueInfo:
        return await self._run(calls.pause(queue, True))

    async def resume(self, queue: str) -> QueueInfo:
        return await self._run(calls.pause(queue, False))

    def take(self, queues: str | Iterable[str] = "default", *, prefetch: int = 1) -> "OpenTake":
        """`async with client.take(...) as stream:` then iterate for jobs. Over queues of several
        shards it is one stream per shard behind this one (each with this prefetch)."""
        names = [queues] if isinstance(queues, str) else list(queues)
        return OpenTake(self, names, prefetch)

    async def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        for channel in self._channels:
            await channel.close(None)
        await self._channel.close(None)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class OpenTake:
    """Opens the right Take stream(s) on entry (learning the topology needs the event loop)."""

    def __init__(self, client: AsyncClient, queues: list[str], prefetch: int) -> None:
        self.client = client
        self.queues = queues
        self.prefetch = prefetch
        self.stream: AsyncTakeStream | None = None

    async def __aenter__(self) -> AsyncTakeStream:
        if self.client._routes.sharded:
            await self.client._forget_routes()  # a new stream is rare: learn where the shards are now
        routes = await self.client._known_routes()
        owners = routes.by_shard(self.queues)
        if len(owners) == 1:
            ((shard, owned),) = owners.items()
            self.stream = AsyncTakeStream(routes.stub(shard), owned, self.prefetch)
        else:
            self.stream = AsyncMultiTakeStream({s: routes.stub(s) for s in owners}, owners, self.prefetch)
        return self.stream

    async def __aexit__(self, *exc: object) -> None:
        if self.stream is not None:
            await self.stream.close()
