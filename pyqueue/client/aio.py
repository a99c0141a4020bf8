"""`AsyncClient`: the Client's mirror for asyncio applications (FastAPI, aiohttp) and the worker."""

import time
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any, Unpack

import grpc
import grpc.aio

from pyqueue import tracing
from pyqueue.client.aio_take import AsyncMultiTakeStream, AsyncTakeStream
from pyqueue.client.batching import AsyncBatcher
from pyqueue.client.client import (
    CHANNEL_OPTIONS,
    ENDED,
    MAX_WAIT_S,
    MOVED_CODES,
    JobError,
    cron_message,
    default_address,
    error_from_pb,
    jobs_from,
    result_of,
)
from pyqueue.client.enqueue_stream import AsyncStreamedEnqueues
from pyqueue.client.history import History
from pyqueue.client.job import Job
from pyqueue.client.routing import Routes, unimplemented
from pyqueue.client.security import Security
from pyqueue.client.spec import JobOptions, new_job_message
from pyqueue.client.steering import (
    CRON_ACTIONS,
    ChangeResult,
    CronInfo,
    QueueInfo,
    WorkerInfo,
    job_changes,
    job_filter,
    limit_request,
)
from pyqueue.errors import FailedPrecondition, Unavailable, from_code_name, from_rpc_error
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


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
    ) -> None:
        """See Client: the same arguments, and the same environment variables."""
        self.address = address or default_address()
        self.timeout = timeout
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

    async def routes(self) -> "Routes[Any]":
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
            stub = (await self.routes()).stub(shard)
            stream = self._streams[shard] = AsyncStreamedEnqueues(
                stub, lambda m: self._send_to(shard, m), self.timeout
            )
        try:
            return await stream.send(messages)
        except (Unavailable, FailedPrecondition):
            if self._routes.sharded:
                await self._forget_routes()
            raise

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            return await method(request, timeout=self.timeout)
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
        stub = (await self.routes()).stub(shard)
        return list((await self._call(stub.Enqueue, pb.EnqueueRequest(jobs=messages))).jobs)

    async def enqueue(self, type: str, payload: Any = None, **options: Unpack[JobOptions]) -> Job:
        """Enqueue one job (see Client.enqueue); concurrent calls share requests."""
        message = [new_job_message({"type": type, "payload": payload, **options}, tracing.context_headers())]
        shard, _ = (await self.routes()).for_queue(message[0].queue)
        results = await (
            self._batcher(shard).submit(message) if self._batching else self._send_to(shard, message)
        )
        return jobs_from(message, results)[0]

    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        context = tracing.context_headers()
        messages = [new_job_message(j, context) for j in jobs]
        routes = await self.routes()
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

    async def get_job(self, job_id: int) -> Job:
        stub = (await self.routes()).for_job(job_id)
        return Job.from_pb(await self._call(stub.GetJob, pb.GetJobRequest(id=job_id)))

    async def wait_job(self, job_id: int, timeout: float | None = None) -> Job:
        """The job once it is completed or dead, or as it is after `timeout` (see Client.wait_job)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        stub = (await self.routes()).for_job(job_id)
        while True:
            left = MAX_WAIT_S if deadline is None else max(0.0, min(MAX_WAIT_S, deadline - time.monotonic()))
            request = pb.WaitJobRequest(id=job_id, timeout_ms=int(left * 1000))
            try:
                job = Job.from_pb(await stub.WaitJob(request, timeout=left + self.timeout))
            except grpc.aio.AioRpcError as exc:
                raise from_rpc_error(exc) from None
            if job.status in ENDED or (deadline is not None and time.monotonic() >= deadline):
                return job

    async def result(self, job_id: int, timeout: float | None = None) -> Any:
        """The job's result once it completed (see Client.result)."""
        job = await self.wait_job(job_id, timeout)
        return result_of(job, await self.job_errors(job_id) if job.status == "dead" else ())

    async def job_errors(self, job_id: int) -> list[JobError]:
        stub = (await self.routes()).for_job(job_id)
        response = await self._call(stub.ListErrors, pb.ListErrorsRequest(id=job_id))
        return [error_from_pb(e) for e in response.errors]

    async def list_jobs(
        self, *, page_size: int = 100, descending: bool = False, **filters: Any
    ) -> AsyncIterator[Job]:
        cursor = ""
        while True:
            request = pb.ListJobsRequest(
                filter=job_filter(**filters), limit=page_size, descending=descending, cursor=cursor
            )
            response = await self._call(self._stub.ListJobs, request)
            for message in response.jobs:
                yield Job.from_pb(message)
            cursor = response.next_cursor
            if not cursor:
                return

    async def count_jobs(self, **filters: Any) -> int:
        return int(
            (await self._call(self._stub.CountJobs, pb.CountJobsRequest(filter=job_filter(**filters)))).count
        )

    async def update_jobs(self, changes: Mapping[str, Any], **filters: Any) -> ChangeResult:
        request = pb.UpdateJobsRequest(filter=job_filter(**filters), changes=job_changes(**changes))
        return ChangeResult.from_pb(await self._call(self._stub.UpdateJobs, request))

    async def update_job(self, job_id: int, **changes: Any) -> Job:
        """Change one waiting job (see Client.update_job); the job as it now is."""
        result = await self.update_jobs(changes, ids=[job_id])
        if result.rejected:
            raise from_code_name(result.rejected[0].code, result.rejected[0].message)
        return await self.get_job(job_id)

    async def cancel(self, job_id: int) -> ChangeResult:
        """Cancel one job: see Client.cancel_jobs."""
        return await self.cancel_jobs(ids=[job_id])

    async def cancel_jobs(self, **filters: Any) -> ChangeResult:
        """Cancel jobs (see Client.cancel_jobs)."""
        request = pb.CancelJobsRequest(filter=job_filter(**filters))
        return ChangeResult.from_pb(await self._call(self._stub.CancelJobs, request))

    async def retry_jobs(self, **filters: Any) -> ChangeResult:
        """Run dead jobs again (see Client.retry_jobs)."""
        request = pb.RetryJobsRequest(filter=job_filter(**filters))
        return ChangeResult.from_pb(await self._call(self._stub.RetryJobs, request))

    async def delete_jobs(self, **filters: Any) -> ChangeResult:
        request = pb.DeleteJobsRequest(filter=job_filter(**filters))
        return ChangeResult.from_pb(await self._call(self._stub.DeleteJobs, request))

    async def delete_job(self, job_id: int) -> None:
        result = await self.delete_jobs(ids=[job_id])
        if result.rejected:
            raise from_code_name(result.rejected[0].code, result.rejected[0].message)

    async def queues(self) -> list[QueueInfo]:
        response = await self._call(self._stub.ListQueues, pb.ListQueuesRequest())
        return [QueueInfo.from_pb(q) for q in response.queues]

    async def workers(self) -> list[WorkerInfo]:
        """Every connected worker stream (on every shard), oldest first."""
        response = await self._call(self._stub.ListWorkers, pb.ListWorkersRequest())
        return [WorkerInfo.from_pb(w) for w in response.workers]

    async def set_cron(self, entries: Iterable[Mapping[str, Any]]) -> list[CronInfo]:
        """Declare periodic jobs (see Client.set_cron)."""
        request = pb.SetCronRequest(entries=[cron_message(e) for e in entries])
        return [CronInfo.from_pb(e) for e in (await self._call(self._stub.SetCron, request)).entries]

    async def pause_cron(self, name: str) -> CronInfo:
        return await self._change_cron(name, "pause")

    async def resume_cron(self, name: str) -> CronInfo:
        """Run again from the next tick (see Client.resume_cron)."""
        return await self._change_cron(name, "resume")

    async def delete_cron(self, name: str) -> CronInfo:
        return await self._change_cron(name, "delete")

    async def _change_cron(self, name: str, action: str) -> CronInfo:
        request = pb.ChangeCronRequest(name=name, action=CRON_ACTIONS[action])
        return CronInfo.from_pb(await self._call(self._stub.ChangeCron, request))

    async def cron_entries(self) -> list[CronInfo]:
        response = await self._call(self._stub.ListCron, pb.ListCronRequest())
        return [CronInfo.from_pb(e) for e in response.entries]

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
        request = limit_request(queue, max_running, rate, burst, key_max_running)
        return QueueInfo.from_pb(await self._call(self._stub.SetQueueLimit, request))

    async def backup(self, path: str, timeout: float = 600.0) -> list[int]:
        """See Client.backup."""
        try:
            answer = await self._stub.Backup(pb.BackupRequest(path=path), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None
        return list(answer.sequences)

    async def history(self) -> History:
        """The last hour of every queue in fixed steps (events and waits), as the dashboard charts
        it. Kept in the server's memory: it starts empty when the server starts."""
        return History.from_pb(await self._call(self._stub.History, pb.HistoryRequest()))

    async def metrics(self) -> str:
        """The server's Prometheus metrics, as its HTTP /metrics serves them (text format)."""
        return str((await self._call(self._stub.Metrics, pb.MetricsRequest())).text)

    async def pause(self, queue: str) -> QueueInfo:
        return QueueInfo.from_pb(await self._call(self._stub.PauseQueue, pb.QueueRequest(queue=queue)))

    async def resume(self, queue: str) -> QueueInfo:
        return QueueInfo.from_pb(await self._call(self._stub.ResumeQueue, pb.QueueRequest(queue=queue)))

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
        routes = await self.client.routes()
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
