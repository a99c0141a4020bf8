"""The public address's workflow calls on a sharded server: a workflow starts on the shard of its
first queue, a batch's calls go to its home (its id carries it), listings and changes span every
shard."""

import asyncio
import heapq
from typing import TYPE_CHECKING, Any, NoReturn, cast

import grpc

from pyqueue.cluster import Topology, shard_of_job
from pyqueue.server.status import Context, answered
from pyqueue.v1 import queue_pb2 as pb


def _not_found(answer: Any) -> bool:
    return isinstance(answer, grpc.aio.AioRpcError) and answer.code() == grpc.StatusCode.NOT_FOUND


class RouterWorkflowCalls:
    topology: Topology

    if TYPE_CHECKING:  # the Router's own (router.py)

        async def _forward(self, shard: int, method: str, request: Any, context: Context) -> Any: ...

        async def _fan_out(
            self, shards: list[int], method: str, request: Any, context: Context
        ) -> list[Any]: ...

        async def _call(self, shard: int, method: str, request: Any, context: Context) -> Any: ...

    def _home(self, batch_id: int) -> int:
        shard = shard_of_job(batch_id)
        return shard if shard < self.topology.shards else 0

    @answered
    async def EnqueueWorkflow(
        self, request: pb.EnqueueWorkflowRequest, context: Context
    ) -> pb.EnqueueWorkflowResponse:
        queues = [s.job.queue for s in request.steps if s.HasField("job")]
        shard = self.topology.shard_of_queue(queues[0]) if queues else 0
        return cast(
            pb.EnqueueWorkflowResponse, await self._forward(shard, "EnqueueWorkflow", request, context)
        )

    @answered
    async def AddToBatch(self, request: pb.AddToBatchRequest, context: Context) -> pb.AddToBatchResponse:
        return cast(
            pb.AddToBatchResponse,
            await self._forward(self._home(request.batch_id), "AddToBatch", request, context),
        )

    @answered
    async def GetBatch(self, request: pb.GetBatchRequest, context: Context) -> pb.Batch:
        return cast(pb.Batch, await self._forward(self._home(request.id), "GetBatch", request, context))

    @answered
    async def ListBatches(self, request: pb.ListBatchesRequest, context: Context) -> pb.ListBatchesResponse:
        pages = await self._fan_out(list(range(self.topology.shards)), "ListBatches", request, context)
        merged = heapq.merge(*(p.batches for p in pages), key=lambda b: -b.id)
        return pb.ListBatchesResponse(batches=list(merged)[: min(request.limit or 100, 1000)])

    @answered
    async def CancelWorkflow(self, request: pb.WorkflowRequest, context: Context) -> pb.ChangeResponse:
        return await self._everywhere("CancelWorkflow", request, context)

    @answered
    async def RetryWorkflow(self, request: pb.WorkflowRequest, context: Context) -> pb.ChangeResponse:
        return await self._everywhere("RetryWorkflow", request, context)

    # Shard to shard only: the supervisor's relay calls each shard itself (server/relay.py).
    async def PullOutbox(self, request: pb.PullOutboxRequest, context: Context) -> pb.PullOutboxResponse:
        await self._shards_only(context)

    async def ApplyInbox(self, request: pb.ApplyInboxRequest, context: Context) -> pb.ApplyInboxResponse:
        await self._shards_only(context)

    async def _shards_only(self, context: Context) -> NoReturn:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "shards answer this call, not the public address")
        raise AssertionError("abort raises")

    async def _everywhere(
        self, method: str, request: pb.WorkflowRequest, context: Context
    ) -> pb.ChangeResponse:
        """Every shard's part; NOT_FOUND when no shard knows the workflow. A cancel also marks the
        shards that do not know it yet (a step of it may reach them later)."""
        shards = list(range(self.topology.shards))
        first = await asyncio.gather(*(self._call(s, method, request, context) for s in shards))
        unknown = [s for s, a in zip(shards, first, strict=True) if _not_found(a)]
        if len(unknown) == len(shards):
            await context.abort(grpc.StatusCode.NOT_FOUND, first[0].details() or "")
        answers = [a for a in first if not _not_found(a)]
        refused = next((a for a in answers if isinstance(a, grpc.aio.AioRpcError)), None)
        if refused is not None:
            await context.abort(refused.code(), refused.details() or "")
        if unknown and method == "CancelWorkflow":
            marked = pb.WorkflowRequest(workflow_id=request.workflow_id, known_elsewhere=True)
            answers += await self._fan_out(unknown, method, marked, context)
        return pb.ChangeResponse(
            changed=[i for a in answers for i in a.changed], rejected=[r for a in answers for r in a.rejected]
        )
