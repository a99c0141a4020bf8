"""`AsyncClient`: the Client's mirror for asyncio applications (FastAPI, aiohttp) and the worker."""

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import grpc
import grpc.aio

from pyqueue.client.aio_take import AsyncTakeStream
from pyqueue.client.batching import AsyncBatcher
from pyqueue.client.client import (
    CHANNEL_OPTIONS,
    JobError,
    default_address,
    error_from_pb,
    jobs_from,
    new_job_message,
)
from pyqueue.client.job import Job
from pyqueue.client.steering import ChangeResult, QueueInfo, job_changes, job_filter
from pyqueue.errors import from_code_name, from_rpc_error
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


class AsyncClient:
    """A connection to a pyqueue server for asyncio code; `async with AsyncClient() as client:`."""

    def __init__(self, address: str | None = None, *, timeout: float = 30.0, batching: bool = True) -> None:
        self.address = address or default_address()
        self.timeout = timeout
        self._channel = grpc.aio.insecure_channel(self.address, options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.QueueStub(self._channel)
        self._batcher = AsyncBatcher(self._send_enqueue) if batching else None

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            return await method(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None

    async def _send_enqueue(self, messages: list[pb.NewJob]) -> list[pb.Enqueued]:
        return list((await self._call(self._stub.Enqueue, pb.EnqueueRequest(jobs=messages))).jobs)

    async def enqueue(self, type: str, payload: Any = None, **options: Any) -> Job:
        """Enqueue one job (the keyword options of Client.enqueue); concurrent calls share requests."""
        message = [new_job_message({"type": type, "payload": payload, **options})]
        results = await (self._batcher.submit(message) if self._batcher else self._send_enqueue(message))
        return jobs_from(message, results)[0]

    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        messages = [new_job_message(j) for j in jobs]
        return jobs_from(messages, await self._send_enqueue(messages))

    async def get_job(self, job_id: int) -> Job:
        return Job.from_pb(await self._call(self._stub.GetJob, pb.GetJobRequest(id=job_id)))

    async def job_errors(self, job_id: int) -> list[JobError]:
        response = await self._call(self._stub.ListErrors, pb.ListErrorsRequest(id=job_id))
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

    async def pause(self, queue: str) -> QueueInfo:
        return QueueInfo.from_pb(await self._call(self._stub.PauseQueue, pb.QueueRequest(queue=queue)))

    async def resume(self, queue: str) -> QueueInfo:
        return QueueInfo.from_pb(await self._call(self._stub.ResumeQueue, pb.QueueRequest(queue=queue)))

    def take(self, queues: str | Iterable[str] = "default", *, prefetch: int = 1) -> AsyncTakeStream:
        """Open a Take stream (call from a running event loop); `async with` it and iterate for jobs."""
        names = [queues] if isinstance(queues, str) else list(queues)
        return AsyncTakeStream(self._stub, names, prefetch)

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
