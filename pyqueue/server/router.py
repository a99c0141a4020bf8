"""The public address of a sharded server: forwards each call to the shard that owns it, and merges
listings, counts, queue statistics and changes that span shards.

The official client sends hot-path calls (enqueue, get, take, acks) straight to the owning shard;
the router is for plain gRPC clients (grpcurl) and for calls that span shards. Pages merge by id:
ids grow with time across shards, so every shard's page after a cursor id, merged and cut, is the
cluster's page after it.
"""

import asyncio
import dataclasses
import heapq
from collections.abc import Sequence
from typing import Any, cast

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pyqueue import defaults
from pyqueue.cluster import Topology, shard_of_job
from pyqueue.engine.errors import EngineError
from pyqueue.engine.limits import Limits
from pyqueue.server import backup, history, metrics
from pyqueue.server.auth import METADATA_KEY
from pyqueue.server.convert import enqueue_refusal
from pyqueue.server.fan_out import take_across
from pyqueue.server.fresh import Fresh
from pyqueue.server.read_share import ReadShare, ReadShareConfig
from pyqueue.server.rights import FORWARDED_FOR
from pyqueue.server.router_workflows import RouterWorkflowCalls
from pyqueue.server.status import EOF, AnsweringStreams, Context, abort, answer_each, answered
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

HEALTH_CHECK_S = 2.0  # a shard that has not answered its health check by then is not serving


def forwarded(context: Context) -> tuple[tuple[str, str | bytes], ...]:
    """The caller's token, passed on (the shards check its rights; the router checks only that it
    is known), and the caller's address for the shard's audit log."""
    token = tuple((k, v) for k, v in context.invocation_metadata() or () if k == METADATA_KEY)
    return (*token, (FORWARDED_FOR, context.peer()))


class Router(RouterWorkflowCalls, pb_grpc.QueueServicer):
    def __init__(
        self,
        topology: Topology,
        dial: Sequence[str],
        max_message_bytes: int = 64 << 20,
        read_share: float = defaults.READ_SHARE,
    ) -> None:
        self.topology = topology  # as clients are told (advertised addresses)
        # The same message limits as the public server and the shards: a job any of them accepts
        # passes through here too.
        self.options = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ]
        # Where the router itself reaches each shard: loopback, in plaintext (server/app.py).
        self.channels = [grpc.aio.insecure_channel(a, options=self.options) for a in dial]
        self.enqueue_streams = AnsweringStreams()
        self.stubs = [pb_grpc.QueueStub(c) for c in self.channels]
        self._metrics = Fresh(self._build_metrics)
        # How reads share the loop with writes (the handlers' too).
        self.reads = ReadShare(ReadShareConfig(share=read_share))
        self._metrics_metadata: tuple[tuple[str, str | bytes], ...] = ()

    async def moved(
        self, shard: int, address: str, dial: str, credentials: grpc.ChannelCredentials | None = None
    ) -> None:
        """A restarted shard could not have its old port back, or a cluster's shard has a new
        owner: calls and the topology that clients learn (GetTopology) follow it to its new
        address (`dial`: where the router reaches it; with `credentials`, over TLS: another node)."""
        addresses = list(self.topology.addresses)
        addresses[shard] = address
        self.topology = dataclasses.replace(self.topology, addresses=tuple(addresses))
        old = self.channels[shard]
        self.channels[shard] = (
            grpc.aio.secure_channel(dial, credentials, options=self.options)
            if credentials is not None
            else grpc.aio.insecure_channel(dial, options=self.options)
        )
        self.stubs[shard] = pb_grpc.QueueStub(self.channels[shard])
        await old.close(None)

    async def tls_refusal(self, shard: int) -> str:
        """Why this node's TLS to shard `shard`'s owner fails ('' when it does not): a health
        check's answer, or its handshake's refusal."""
        try:
            await health_pb2_grpc.HealthStub(self.channels[shard]).Check(
                health_pb2.HealthCheckRequest(), timeout=HEALTH_CHECK_S
            )
        except grpc.aio.AioRpcError as exc:
            details = exc.details() or ""
            return details if "handshake" in details.lower() or "certificate" in details.lower() else ""
        return ""

    async def unhealthy_shards(self) -> str:
        """'' when every shard answers the standard health check SERVING; else which do not."""

        async def check(shard: int) -> str:
            try:
                answer = await health_pb2_grpc.HealthStub(self.channels[shard]).Check(
                    health_pb2.HealthCheckRequest(), timeout=HEALTH_CHECK_S
                )
            except grpc.aio.AioRpcError as exc:
                return f"shard {shard} does not answer ({exc.code().name})"
            if answer.status != health_pb2.HealthCheckResponse.SERVING:
                return f"shard {shard} is {health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)}"
            return ""

        problems = await asyncio.gather(*(check(s) for s in range(len(self.channels))))
        return "; ".join(p for p in problems if p)

    def end_streams(self) -> None:
        self.enqueue_streams.end_all()

    async def close(self) -> None:
        await asyncio.gather(*(c.close(None) for c in self.channels))

    # Helpers.
    async def _forward(self, shard: int, method: str, request: Any, context: Context) -> Any:
        try:
            return await getattr(self.stubs[shard], method)(
                request, timeout=context.time_remaining(), metadata=forwarded(context)
            )
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")

    async def _fan_out(self, shards: Sequence[int], method: str, request: Any, context: Context) -> list[Any]:
        return await self._each({s: request for s in shards}, method, context)

    async def _each(self, requests: dict[int, Any], method: str, context: Context) -> list[Any]:
        """Each shard's answer to its request, in order; the first shard's refusal is the call's,
        given once. (Each shard aborting the call itself raised "Abort already called!" past the
        first, and grpc logged a 3 KB traceback per refused call: a refusal is an answer, not an
        error in the log.)"""
        answers = await asyncio.gather(*(self._call(s, method, r, context) for s, r in requests.items()))
        refused = next((a for a in answers if isinstance(a, grpc.aio.AioRpcError)), None)
        if refused is not None:
            await context.abort(refused.code(), refused.details() or "")
        return list(answers)

    async def _call(self, shard: int, method: str, request: Any, context: Context) -> Any:
        """A shard's answer, or its refusal (an AioRpcError, returned, not raised)."""
        try:
            return await getattr(self.stubs[shard], method)(
                request, timeout=context.time_remaining(), metadata=forwarded(context)
            )
        except grpc.aio.AioRpcError as exc:
            return exc

    def _job_shard(self, job_id: int) -> int:
        shard = shard_of_job(job_id)
        return shard if shard < self.topology.shards else 0

    def _shards_for(self, f: pb.JobFilter) -> list[int]:
        """The shards a filter can match: the owners of its queues or ids, else all."""
        if f.queues:
            return sorted(self.topology.by_shard(f.queues))
        if f.ids:
            return sorted({self._job_shard(i) for i in f.ids})
        return list(range(self.topology.shards))

    # Calls with one owner.
    @answered
    async def Enqueue(self, request: pb.EnqueueRequest, context: Context) -> pb.EnqueueResponse:
        by_shard: dict[int, list[int]] = {}
        for i, job in enumerate(request.jobs):
            by_shard.setdefault(self.topology.shard_of_queue(job.queue), []).append(i)
        if len(by_shard) > 1:
            return await self._enqueue_across(request, by_shard, context)
        return cast(
            pb.EnqueueResponse, await self._forward(next(iter(by_shard), 0), "Enqueue", request, context)
        )

    async def EnqueueStream(self, request_iterator: object, context: Context) -> None:  # type: ignore[override]
        await answer_each(self.Enqueue, context, enqueue_refusal, self.enqueue_streams)

    async def _enqueue_across(
        self, request: pb.EnqueueRequest, by_shard: dict[int, list[int]], context: Context
    ) -> pb.EnqueueResponse:
        """Jobs for queues on several shards: every shard checks its part first (validate_only), and
        only when all agree does each write it, so a refusal (rights, a bad field, a limit, a
        shard down) changes nothing. The answers are merged in the request's order. A shard lost
        between the check and the write is the one case where the others' jobs are in: the
        refusal says so."""
        parts = {s: pb.EnqueueRequest(jobs=[request.jobs[i] for i in idx]) for s, idx in by_shard.items()}
        checks = [
            self.stubs[s].Enqueue(
                pb.EnqueueRequest(jobs=part.jobs, validate_only=True),
                timeout=context.time_remaining(),
                metadata=forwarded(context),
            )
            for s, part in parts.items()
        ]
        refused = [
            a
            for a in await asyncio.gather(*checks, return_exceptions=True)
            if isinstance(a, grpc.aio.AioRpcError)
        ]
        if refused:
            await context.abort(
                refused[0].code(), f"{refused[0].details()} (nothing was enqueued on any shard)"
            )
        stub_calls = [
            self.stubs[s].Enqueue(part, timeout=context.time_remaining(), metadata=forwarded(context))
            for s, part in parts.items()
        ]
        answers = await asyncio.gather(*stub_calls, return_exceptions=True)
        failed = [a for a in answers if isinstance(a, grpc.aio.AioRpcError)]
        if failed:
            done = len(answers) - len(failed)
            await context.abort(
                failed[0].code(),
                f"{failed[0].details()} (the jobs span {len(answers)} shards and a call is all or nothing "
                f"per shard: {done} shard(s) took their jobs; GetTopology gives the slot map)",
            )
        merged: list[pb.Enqueued | None] = [None] * len(request.jobs)
        for (_shard, indexes), answer in zip(by_shard.items(), answers, strict=True):
            assert isinstance(answer, pb.EnqueueResponse)
            for i, enqueued in zip(indexes, answer.jobs, strict=True):
                merged[i] = enqueued
        return pb.EnqueueResponse(jobs=[e for e in merged if e is not None])

    @answered
    async def GetJob(self, request: pb.GetJobRequest, context: Context) -> pb.Job:
        by_key = request.unique_key or request.queue  # by unique key: the queue's shard holds it
        shard = self.topology.shard_of_queue(request.queue) if by_key else self._job_shard(request.id)
        return cast(pb.Job, await self._forward(shard, "GetJob", request, context))

    @answered
    async def WaitJob(self, request: pb.WaitJobRequest, context: Context) -> pb.Job:
        return cast(pb.Job, await self._forward(self._job_shard(request.id), "WaitJob", request, context))

    @answered
    async def ListErrors(self, request: pb.ListErrorsRequest, context: Context) -> pb.ListErrorsResponse:
        return cast(
            pb.ListErrorsResponse,
            await self._forward(self._job_shard(request.id), "ListErrors", request, context),
        )

    @answered
    async def PauseQueue(self, request: pb.QueueRequest, context: Context) -> pb.QueueInfo:
        return cast(
            pb.QueueInfo,
            await self._forward(self.topology.shard_of_queue(request.queue), "PauseQueue", request, context),
        )

    @answered
    async def ResumeQueue(self, request: pb.QueueRequest, context: Context) -> pb.QueueInfo:
        return cast(
            pb.QueueInfo,
            await self._forward(self.topology.shard_of_queue(request.queue), "ResumeQueue", request, context),
        )

    @answered
    async def SetQueueLimit(self, request: pb.SetQueueLimitRequest, context: Context) -> pb.QueueInfo:
        return cast(
            pb.QueueInfo,
            await self._forward(
                self.topology.shard_of_queue(request.queue), "SetQueueLimit", request, context
            ),
        )

    @answered
    async def SetFairWeight(self, request: pb.SetFairWeightRequest, context: Context) -> pb.FairKeys:
        shard = self.topology.shard_of_queue(request.queue)
        return cast(pb.FairKeys, await self._forward(shard, "SetFairWeight", request, context))

    @answered
    async def ListFairKeys(self, request: pb.ListFairKeysRequest, context: Context) -> pb.FairKeys:
        shard = self.topology.shard_of_queue(request.queue)
        return cast(pb.FairKeys, await self._forward(shard, "ListFairKeys", request, context))

    @answered
    async def GetTopology(self, request: pb.TopologyRequest, context: Context) -> pb.Topology:
        return self.topology.to_pb()

    @answered
    async def Backup(self, request: pb.BackupRequest, context: Context) -> pb.BackupResponse:
        """One copy per shard under `path`, beside a copy of the layout, so that `pyqueue restore`
        puts back a sharded data dir whole."""
        try:
            await asyncio.to_thread(backup.prepare_layout, request.path, self.topology.shards)
        except EngineError as exc:
            await abort(context, exc)
        parts = [
            await self._forward(s, "Backup", pb.BackupRequest(path=f"{request.path}/shard-{s}"), context)
            for s in range(self.topology.shards)
        ]
        return pb.BackupResponse(path=request.path, sequences=[s for p in parts for s in p.sequences])

    @answered
    async def Take(self, request_iterator: Any, context: Context) -> None:  # type: ignore[override]
        first = await context.read()
        if first is EOF:
            return
        owners = self.topology.by_shard(first.subscribe.queues) if first.HasField("subscribe") else {}
        most = Limits().max_queues_per_stream  # what each shard holds a stream to: checked whole here
        if len(first.subscribe.queues) > most:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{len(first.subscribe.queues)} queues on one stream; the limit is {most}",
            )
        if len(owners) > 1:
            await take_across(self.stubs, first, owners, context, forwarded(context))
            return
        outgoing: asyncio.Queue[Any] = asyncio.Queue()
        outgoing.put_nowait(first)

        async def requests() -> Any:
            while (message := await outgoing.get()) is not None:
                yield message

        async def pump() -> None:
            while (message := await context.read()) is not EOF:
                outgoing.put_nowait(message)
            outgoing.put_nowait(None)

        call = self.stubs[next(iter(owners), 0)].Take(requests(), metadata=forwarded(context))
        pumping = asyncio.ensure_future(pump())
        try:
            async for response in call:
                await context.write(response)
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
        finally:
            pumping.cancel()
            call.cancel()

    # Calls that span shards.
    @answered
    async def ListJobs(self, request: pb.ListJobsRequest, context: Context) -> pb.ListJobsResponse:
        pages = await self._fan_out(self._shards_for(request.filter), "ListJobs", request, context)
        limit = request.limit or 50
        backwards = request.cursor.startswith("b")
        key = (lambda j: -j.id) if request.descending else (lambda j: j.id)
        merged = list(heapq.merge(*(p.jobs for p in pages), key=key))
        if backwards:  # each page ends next to the cursor: keep the last `limit`
            more, jobs = len(merged) > limit or any(p.prev_cursor for p in pages), merged[-limit:]
            next_cursor = f"a{jobs[-1].id}" if jobs else ""
            prev_cursor = f"b{jobs[0].id}" if jobs and more else ""
        else:
            more, jobs = len(merged) > limit or any(p.next_cursor for p in pages), merged[:limit]
            next_cursor = f"a{jobs[-1].id}" if jobs and more else ""
            prev_cursor = f"b{jobs[0].id}" if jobs and request.cursor else ""
        return pb.ListJobsResponse(jobs=jobs, next_cursor=next_cursor, prev_cursor=prev_cursor)

    @answered
    async def CountJobs(self, request: pb.CountJobsRequest, context: Context) -> pb.CountJobsResponse:
        counts = await self._fan_out(self._shards_for(request.filter), "CountJobs", request, context)
        return pb.CountJobsResponse(count=sum(c.count for c in counts))

    @answered
    async def ListQueues(self, request: pb.ListQueuesRequest, context: Context) -> pb.ListQueuesResponse:
        answers = await self._fan_out(list(range(self.topology.shards)), "ListQueues", request, context)
        return pb.ListQueuesResponse(
            queues=sorted((q for a in answers for q in a.queues), key=lambda q: q.name)
        )

    @answered
    async def ListWorkers(self, request: pb.ListWorkersRequest, context: Context) -> pb.ListWorkersResponse:
        answers = await self._fan_out(list(range(self.topology.shards)), "ListWorkers", request, context)
        return pb.ListWorkersResponse(
            workers=sorted((w for a in answers for w in a.workers), key=lambda w: w.connected_at_ms)
        )

    @answered
    async def SetCron(self, request: pb.SetCronRequest, context: Context) -> pb.ListCronResponse:
        """Each entry goes to the shard that owns its job's queue."""
        by_shard: dict[int, list[pb.CronEntry]] = {}
        for entry in request.entries:
            by_shard.setdefault(self.topology.shard_of_queue(entry.job.queue or "default"), []).append(entry)
        answers = await self._each(
            {s: pb.SetCronRequest(entries=e) for s, e in by_shard.items()}, "SetCron", context
        )
        return pb.ListCronResponse(
            entries=sorted((e for a in answers for e in a.entries), key=lambda e: e.name)
        )

    @answered
    async def ListCron(self, request: pb.ListCronRequest, context: Context) -> pb.ListCronResponse:
        answers = await self._fan_out(list(range(self.topology.shards)), "ListCron", request, context)
        return pb.ListCronResponse(
            entries=sorted((e for a in answers for e in a.entries), key=lambda e: e.name)
        )

    @answered
    async def ChangeCron(self, request: pb.ChangeCronRequest, context: Context) -> pb.CronEntry:
        """The entry lives on one shard; the others do not know the name."""
        for shard in range(self.topology.shards):
            try:
                entry: pb.CronEntry = await self.stubs[shard].ChangeCron(
                    request, timeout=context.time_remaining(), metadata=forwarded(context)
                )
                return entry
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    await context.abort(exc.code(), exc.details() or "")
        await context.abort(
            grpc.StatusCode.NOT_FOUND, f"no periodic job named {request.name!r} (see `pyqueue cron`)"
        )

    @answered
    async def Metrics(self, request: pb.MetricsRequest, context: Context) -> pb.MetricsResponse:
        try:
            self._metrics_metadata = forwarded(context)
            return pb.MetricsResponse(text=(await self._metrics.get()).decode())  # the handler shares it
        except grpc.aio.AioRpcError as exc:  # a shard's refusal (a token's rights) is the answer
            await context.abort(exc.code(), exc.details() or "")

    @answered
    async def History(self, request: pb.HistoryRequest, context: Context) -> pb.HistoryResponse:
        try:
            answers = await asyncio.gather(
                *(
                    stub.History(request, timeout=10, metadata=forwarded(context))
                    for stub in self.stubs[: self.topology.shards]
                )
            )
        except grpc.aio.AioRpcError as exc:  # a shard's refusal (a token's rights) is the answer
            await context.abort(exc.code(), exc.details() or "")
        return await asyncio.to_thread(history.merge, answers)  # many numbers: off the loop

    async def metrics_text(self, metadata: Sequence[tuple[str, str | bytes]] = ()) -> bytes:
        """Every shard's metrics, added up into the server's one view, built at most once a second
        however many scrape it (`metadata`: the caller's token, whose right to read every queue
        the guard or the HTTP port checked before: the view is the same for every such caller)."""
        self._metrics_metadata = tuple(metadata)
        async with self.reads.read():
            return await self._metrics.get()

    async def _build_metrics(self) -> bytes:
        answers = await asyncio.gather(
            *(
                stub.Metrics(pb.MetricsRequest(), timeout=10, metadata=self._metrics_metadata)
                for stub in self.stubs[: self.topology.shards]
            )
        )
        # Parsing and adding up every shard's samples is tens of milliseconds: off the loop.
        return await asyncio.to_thread(lambda: metrics.render(metrics.merge(a.text for a in answers)))

    @answered
    async def UpdateJobs(self, request: pb.UpdateJobsRequest, context: Context) -> pb.ChangeResponse:
        return await self._change("UpdateJobs", request, context)

    @answered
    async def DeleteJobs(self, request: pb.DeleteJobsRequest, context: Context) -> pb.ChangeResponse:
        return await self._change("DeleteJobs", request, context)

    @answered
    async def CancelJobs(self, request: pb.CancelJobsRequest, context: Context) -> pb.ChangeResponse:
        return await self._change("CancelJobs", request, context)

    @answered
    async def RetryJobs(self, request: pb.RetryJobsRequest, context: Context) -> pb.ChangeResponse:
        return await self._change("RetryJobs", request, context)

    async def _change(self, method: str, request: Any, context: Context) -> pb.ChangeResponse:
        """Each shard is asked about its own ids only, so each id's outcome is its owner's."""
        per_shard = {shard: request for shard in self._shards_for(request.filter)}
        if request.filter.ids:
            mine: dict[int, list[int]] = {}
            for job_id in request.filter.ids:
                mine.setdefault(self._job_shard(job_id), []).append(job_id)
            for shard in list(per_shard):
                if shard not in mine:
                    del per_shard[shard]
                    continue
                narrowed = type(request)()
                narrowed.CopyFrom(request)
                del narrowed.filter.ids[:]
                narrowed.filter.ids.extend(mine[shard])
                per_shard[shard] = narrowed
        if method == "UpdateJobs" and request.changes.HasField("queue"):
            owner = self.topology.shard_of_queue(request.changes.queue)
            if set(per_shard) - {owner}:
                # Refused whole, before any shard changes anything.
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"queue {request.changes.queue!r} belongs to shard {owner}, and jobs move between "
                    "queues of one shard only; select jobs of that shard's queues, or enqueue copies "
                    "into it and delete these instead",
                )
        answers = await self._each(dict(per_shard), method, context)
        return pb.ChangeResponse(
            changed=[i for a in answers for i in a.changed], rejected=[r for a in answers for r in a.rejected]
        )
