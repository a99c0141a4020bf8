"""The Queue servicer: protobuf in, engine calls, protobuf out."""

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable

import grpc

from pyqueue.cluster import Topology, slot_of
from pyqueue.engine import Engine, EngineError, FailedPrecondition
from pyqueue.engine.queue_limits import QueueLimit
from pyqueue.server import backup, history, metrics
from pyqueue.server.config import ServerConfig
from pyqueue.server.convert import (
    change_response,
    changes_from_pb,
    cron_to_pb,
    enqueue_refusal,
    enqueue_response,
    error_to_pb,
    fair_keys_message,
    filter_from_pb,
    job_to_pb,
    new_job,
    queue_info,
)
from pyqueue.server.fresh import Fresh
from pyqueue.server.front import FRONT_HEADER
from pyqueue.server.read_share import ReadShare, ReadShareConfig
from pyqueue.server.rights import FORWARDED_FOR
from pyqueue.server.status import AnsweringStreams, Context, abort, answer_each, answered
from pyqueue.server.take import ServerTakeStream, StrayPacer
from pyqueue.server.workflows import WorkflowCalls
from pyqueue.store.json_files import MetadataError, read_json
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


class QueueService(WorkflowCalls, pb_grpc.QueueServicer):
    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config
        self.streams: set[ServerTakeStream] = set()
        self._streams_of: Counter[str] = Counter()  # client connection -> its open worker streams
        self._pacers: dict[str, StrayPacer] = {}  # client connection -> its streams' stray pacing
        self.enqueue_streams = AnsweringStreams()
        self.address = config.listen  # the bound address, set once listening
        self.front_port = 0  # the native front's port for enqueues (front.py), once listening
        self.front_requests: Callable[[], int] = lambda: 0  # how many it took, for /metrics
        self._metrics = Fresh(self._build_metrics)
        # How reads share the loop with writes (the handlers' too).
        self.reads = ReadShare(ReadShareConfig(share=config.read_share))

    @answered
    async def Enqueue(self, request: pb.EnqueueRequest, context: Context) -> pb.EnqueueResponse:
        return await self.enqueue(request)

    async def enqueue(self, request: pb.EnqueueRequest) -> pb.EnqueueResponse:
        """An Enqueue; a refusal raises EngineError."""
        written = self.begin_enqueue(request)
        return enqueue_response(() if written is None else await written)

    def begin_enqueue(self, request: pb.EnqueueRequest) -> "asyncio.Future[list[tuple[int, bool]]] | None":
        """An Enqueue's checks (EngineError) and its write handed to the writer: the (id,
        duplicate) pairs once durable, None for a request only to validate (checked, nothing to
        write). The native front (front.py) calls it for each request of a batch."""
        engine = self.engine
        engine.check_batch(len(request.jobs))
        for queue in dict.fromkeys(job.queue for job in request.jobs):  # each name once, in order
            self._check_owner(queue)
        jobs = [new_job(engine, i, j) for i, j in enumerate(request.jobs)]
        if request.validate_only:
            engine.disk.check()
            return None
        return engine.submit_enqueue(jobs)

    async def EnqueueStream(self, request_iterator: object, context: Context) -> None:  # type: ignore[override]
        if self.front_port:  # the native client moves to the front once it reads this
            await context.send_initial_metadata(((FRONT_HEADER, str(self.front_port)),))
        await answer_each(self.Enqueue, context, enqueue_refusal, self.enqueue_streams)

    @answered
    async def ListErrors(self, request: pb.ListErrorsRequest, context: Context) -> pb.ListErrorsResponse:
        try:
            entries = self.engine.list_errors(request.id)
        except EngineError as exc:
            await abort(context, exc)
        return pb.ListErrorsResponse(errors=[error_to_pb(e) for e in entries])

    @answered
    async def ListJobs(self, request: pb.ListJobsRequest, context: Context) -> pb.ListJobsResponse:
        try:
            page = await self.engine.list_jobs(
                filter_from_pb(request.filter), request.limit, request.descending, request.cursor
            )
        except EngineError as exc:
            await abort(context, exc)
        response = pb.ListJobsResponse(next_cursor=page.next_cursor, prev_cursor=page.prev_cursor)
        for job in page.jobs:
            job_to_pb(job, response.jobs.add)
        return response

    @answered
    async def CountJobs(self, request: pb.CountJobsRequest, context: Context) -> pb.CountJobsResponse:
        try:
            return pb.CountJobsResponse(count=await self.engine.count_jobs(filter_from_pb(request.filter)))
        except EngineError as exc:
            await abort(context, exc)

    @answered
    async def ListQueues(self, request: pb.ListQueuesRequest, context: Context) -> pb.ListQueuesResponse:
        await self.engine.wait_rebuilt()  # the counts are whole once the start-up rebuild is done
        queues = self.engine.queues()
        events = self.engine.telemetry.event_counts()
        # Off the loop: the oldest ready job of each queue is a read of the store.
        oldest = await asyncio.to_thread(
            self._oldest_ready_seconds, [q for q, _, c, _ in queues if c.get("ready")]
        )
        return pb.ListQueuesResponse(
            queues=[
                queue_info(
                    name,
                    paused,
                    counts,
                    limit,
                    (
                        events.get(("enqueued", name), 0),
                        events.get(("completed", name), 0),
                        oldest.get(name, 0.0),
                    ),
                )
                for name, paused, counts, limit in queues
            ]
        )

    def _oldest_ready_seconds(self, queues: list[str]) -> dict[str, float]:
        now_ms = self.engine.clock()
        ages = {}
        for queue in queues:
            since = self.engine.oldest_ready_ms(queue)
            if since is not None:
                ages[queue] = max(now_ms - since, 0) / 1000
        return ages

    @answered
    async def UpdateJobs(self, request: pb.UpdateJobsRequest, context: Context) -> pb.ChangeResponse:
        try:
            changes = changes_from_pb(request.changes)
            if changes.queue is not None:
                self._check_move(changes.queue)
            outcome = await self.engine.update_jobs(filter_from_pb(request.filter), changes)
        except EngineError as exc:
            await abort(context, exc)
        return change_response(outcome)

    @answered
    async def RetryJobs(self, request: pb.RetryJobsRequest, context: Context) -> pb.ChangeResponse:
        try:
            outcome = await self.engine.retry_jobs(filter_from_pb(request.filter))
        except EngineError as exc:
            await abort(context, exc)
        return change_response(outcome)

    @answered
    async def CancelJobs(self, request: pb.CancelJobsRequest, context: Context) -> pb.ChangeResponse:
        try:
            outcome = await self.engine.cancel_jobs(filter_from_pb(request.filter))
        except EngineError as exc:
            await abort(context, exc)
        return change_response(outcome)

    @answered
    async def DeleteJobs(self, request: pb.DeleteJobsRequest, context: Context) -> pb.ChangeResponse:
        try:
            outcome = await self.engine.delete_jobs(filter_from_pb(request.filter))
        except EngineError as exc:
            await abort(context, exc)
        return change_response(outcome)

    @answered
    async def PauseQueue(self, request: pb.QueueRequest, context: Context) -> pb.QueueInfo:
        return await self._set_paused(request.queue, True, context)

    @answered
    async def ResumeQueue(self, request: pb.QueueRequest, context: Context) -> pb.QueueInfo:
        return await self._set_paused(request.queue, False, context)

    async def _set_paused(self, queue: str, paused: bool, context: Context) -> pb.QueueInfo:
        try:
            self._check_owner(queue)
            await self.engine.set_paused(queue, paused)
        except EngineError as exc:
            await abort(context, exc)
        return self._queue_info(queue)

    def _queue_info(self, queue: str) -> pb.QueueInfo:
        found = next((q for q in self.engine.queues() if q[0] == queue), None)
        return queue_info(*found) if found else pb.QueueInfo(name=queue)

    @answered
    async def SetQueueLimit(self, request: pb.SetQueueLimitRequest, context: Context) -> pb.QueueInfo:
        try:
            self._check_owner(request.queue)
            limit = QueueLimit(
                request.max_running, request.rate_per_s, request.burst, request.key_max_running
            )
            await self.engine.set_queue_limit(request.queue, limit)
        except EngineError as exc:
            await abort(context, exc)
        return self._queue_info(request.queue)

    @answered
    async def SetFairWeight(self, request: pb.SetFairWeightRequest, context: Context) -> pb.FairKeys:
        try:
            self._check_owner(request.queue)
            await self.engine.set_fair_weight(request.queue, request.fair_key, request.weight)
            return fair_keys_message(request.queue, *self.engine.fair_keys(request.queue, 0))
        except EngineError as exc:
            await abort(context, exc)

    @answered
    async def ListFairKeys(self, request: pb.ListFairKeysRequest, context: Context) -> pb.FairKeys:
        try:
            self._check_owner(request.queue)
            return fair_keys_message(request.queue, *self.engine.fair_keys(request.queue, request.limit))
        except EngineError as exc:
            await abort(context, exc)

    @answered
    async def Backup(self, request: pb.BackupRequest, context: Context) -> pb.BackupResponse:
        try:
            sequence = await asyncio.to_thread(backup.checkpoint, self.engine.store, request.path)
        except EngineError as exc:
            await abort(context, exc)
        return pb.BackupResponse(path=request.path, sequences=[sequence])

    async def GetTopology(self, request: pb.TopologyRequest, context: Context) -> pb.Topology:
        topology = self.topology()
        if topology is None:
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "this shard's supervisor has not published the topology yet; retry, or ask the "
                "public address",
            )
        return topology.to_pb()

    def topology(self) -> Topology | None:
        """Every shard's address; a lone server is its own topology. None until the supervisor wrote it."""
        if self.config.shard_count == 1:
            return Topology((self.address,))
        path = self.config.topology_file
        if path is None or not path.exists():
            return None
        try:
            return Topology(tuple(read_json(path, ("addresses",), "the supervisor rewrites it")["addresses"]))
        except MetadataError:
            return None

    def _check_move(self, queue: str) -> None:
        """A job moves only within its shard: a queue owned by another shard would strand it."""
        try:
            self._check_owner(queue)
        except FailedPrecondition:
            owner = slot_of(queue) % self.config.shard_count
            raise FailedPrecondition(
                f"queue {queue!r} belongs to shard {owner}, and jobs move between queues of one shard "
                "only; enqueue copies into it and delete these instead"
            ) from None

    def _check_owner(self, queue: str) -> None:
        """Refuse work for a queue another shard owns (a client with a stale slot map)."""
        if self.config.shard_count == 1:
            return
        owner = slot_of(queue) % self.config.shard_count
        if owner != self.config.shard_index:
            topology = self.topology()  # read only to say where to go: never on the accepting path
            where = topology.addresses[owner] if topology and owner < len(topology.addresses) else "unknown"
            raise FailedPrecondition(
                f"queue {queue or 'default'!r} belongs to shard {owner} at {where}; "
                "send it there (GetTopology gives the slot map)"
            )

    @answered
    async def GetJob(self, request: pb.GetJobRequest, context: Context) -> pb.Job:
        try:
            if request.unique_key or request.queue:
                return job_to_pb(self.engine.job_by_key(request.queue, request.unique_key))
            return job_to_pb(self.engine.get_job(request.id))
        except EngineError as exc:
            await abort(context, exc)

    @answered
    async def WaitJob(self, request: pb.WaitJobRequest, context: Context) -> pb.Job:
        timeout_s = min(request.timeout_ms, MAX_WAIT_MS) / 1000
        try:
            return job_to_pb(await self.engine.wait_job(request.id, timeout_s))
        except EngineError as exc:
            await abort(context, exc)

    @answered
    async def Take(self, request_iterator: object, context: Context) -> None:  # type: ignore[override]
        limit = self.engine.config.limits.max_streams
        if len(self.streams) >= limit:
            await _refuse_take(
                context,
                f"{limit} worker streams are open, the most this server takes (--max-streams); "
                "retry later, or share streams between fewer processes",
            )
        client = _client_of(context)
        share = self.engine.config.limits.max_streams_per_connection
        if self._streams_of[client] >= share:
            await _refuse_take(
                context,
                f"this connection holds {share} worker streams, the most one may "
                "(--max-streams-per-connection); close some, or open another connection",
            )
        pacer = self._pacers.setdefault(client, StrayPacer())
        stream = ServerTakeStream(self.engine, context, self.config.heartbeat_s, self._check_owner, pacer)
        self.streams.add(stream)
        self._streams_of[client] += 1
        try:
            await stream.run()
        finally:
            self.streams.discard(stream)
            self._streams_of[client] -= 1
            if not self._streams_of[client]:
                del self._streams_of[client]
                del self._pacers[client]

    @answered
    async def ListWorkers(self, request: pb.ListWorkersRequest, context: Context) -> pb.ListWorkersResponse:
        shard = self.config.shard_index
        streams = sorted(self.streams, key=lambda s: s.connected_at_ms)
        return pb.ListWorkersResponse(workers=[s.describe(shard) for s in streams if s.consumer is not None])

    @answered
    async def SetCron(self, request: pb.SetCronRequest, context: Context) -> pb.ListCronResponse:
        engine = self.engine
        try:
            entries = []
            for i, entry in enumerate(request.entries):
                self._check_owner(entry.job.queue)
                entries.append(
                    engine.cron_entry(
                        entry.name, entry.schedule, entry.timezone, new_job(engine, i, entry.job)
                    )
                )
            saved = await engine.set_cron(entries)
        except EngineError as exc:
            await abort(context, exc)
        return pb.ListCronResponse(entries=[cron_to_pb(e) for e in saved])

    @answered
    async def ListCron(self, request: pb.ListCronRequest, context: Context) -> pb.ListCronResponse:
        return pb.ListCronResponse(entries=[cron_to_pb(e) for e in self.engine.list_cron()])

    @answered
    async def ChangeCron(self, request: pb.ChangeCronRequest, context: Context) -> pb.CronEntry:
        try:
            entry = await self.engine.change_cron(request.name, _CRON_ACTIONS.get(request.action, ""))
        except EngineError as exc:
            await abort(context, exc)
        return cron_to_pb(entry)

    @answered
    async def Metrics(self, request: pb.MetricsRequest, context: Context) -> pb.MetricsResponse:
        return pb.MetricsResponse(text=(await self._metrics.get()).decode())  # the handler shares it

    @answered
    async def History(self, request: pb.HistoryRequest, context: Context) -> pb.HistoryResponse:
        # One queue's hour, or the total kept ready: a few thousand numbers, built on the loop in
        # well under a millisecond. Every queue's (neither asked) is megabytes: off the loop, though
        # a thread still holds the GIL while it builds them.
        if request.queue or request.total:
            return history.shard_history(self.engine.telemetry.history, request)
        return await asyncio.to_thread(history.shard_history, self.engine.telemetry.history, request)

    async def metrics_text(self, metadata: object = ()) -> bytes:
        """This server's metrics for the HTTP port (`metadata`, the caller's token, is checked
        before: see http.py), built at most once a second however many scrape it, and taking its
        share of the loop as the gRPC reads do (read_share.py)."""
        async with self.reads.read():
            return await self._metrics.get()

    async def _build_metrics(self) -> bytes:
        workers: dict[str, int] = {}
        for stream in tuple(self.streams):
            if stream.consumer is not None:
                for queue in stream.consumer.queues:
                    workers[queue] = workers.get(queue, 0) + 1
        # Off the event loop: the gauges read the store (the oldest ready job, the files' sizes),
        # and rendering a few thousand samples is tens of milliseconds.
        paused, front = self.reads.paused_s, self.front_requests()
        return await asyncio.to_thread(
            lambda: metrics.render(metrics.shard_families(self.engine, workers, paused, front))
        )

    def end_streams(self) -> None:
        for stream in tuple(self.streams):
            stream.end()
        self.enqueue_streams.end_all()  # idle between requests: end them now


MAX_WAIT_MS = 60_000  # one WaitJob call; clients wait longer by calling again

_REFUSAL_READ_S = 5.0  # a refused Take waits this long for its subscribe (see _refuse_take)

_CRON_ACTIONS = {
    pb.CRON_ACTION_PAUSE: "pause",
    pb.CRON_ACTION_RESUME: "resume",
    pb.CRON_ACTION_DELETE: "delete",
}


def _client_of(context: Context) -> str:
    """The client connection a call came on. Every stream the router forwards shares its one
    connection to this shard, so the client's own, which the router passes on (FORWARDED_FOR), is
    taken instead, from a loopback peer only: the router always dials its shards on loopback."""
    peer = context.peer()
    forwarded = next((v for k, v in context.invocation_metadata() or () if k == FORWARDED_FOR), None)
    if forwarded and peer.startswith(("ipv4:127.", "ipv6:[::1]")):
        return f"{peer} for {forwarded!s}"
    return peer


async def _refuse_take(context: Context, message: str) -> None:
    """RESOURCE_EXHAUSTED, once the stream's subscribe is read (or a few seconds have passed).

    An asyncio grpcio client (the router's call to its shard, AsyncClient) whose first write is
    still on its way when the status arrives reports INTERNAL "Internal error from Core" instead
    of our status (grpc/grpc#36066); once the server has read that write, it cannot race."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(context.read(), _REFUSAL_READ_S)
    await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
