"""The workflow calls of a shard's servicer: a workflow's steps from the wire (checked whole
before anything is written), batches to the wire, and the outbox's two ends for the relay."""

from typing import Any

from pyqueue.engine import Engine, EngineError, ranges
from pyqueue.engine.errors import FailedPrecondition, InvalidArgument
from pyqueue.engine.flows import GroupStep, JobStep, Step, job_to_dict
from pyqueue.engine.flows.plan import MAX_DEPTH, member_chain_problem
from pyqueue.engine.workflows import BatchStatus
from pyqueue.server.config import ServerConfig
from pyqueue.server.convert import change_response, new_job
from pyqueue.server.relayed import check_entries
from pyqueue.server.status import Context, abort, answered
from pyqueue.v1 import queue_pb2 as pb

MAX_PULL_WAIT_MS = 5_000
MAX_PULL = 2_000


class Plan:
    """EnqueueWorkflowRequest's steps as the engine's tree: every step reached from the start
    once, none leading back to itself, members and callbacks job steps."""

    def __init__(self, engine: Engine, request: pb.EnqueueWorkflowRequest) -> None:
        self.engine = engine
        self.steps = request.steps
        self.used: set[int] = set()
        if not self.steps:
            raise InvalidArgument("the workflow has no steps")
        if request.start >= len(self.steps):
            raise InvalidArgument(f"start {request.start} is not a step: there are {len(self.steps)}")
        self.root = self.step(request.start, frozenset(), "start")
        unused = sorted(set(range(len(self.steps))) - self.used)
        if unused:
            raise InvalidArgument(f"step {unused[0]} is not reached from the start: link it, or leave it out")

    def ref(self, plus_one: int, where: str, path: frozenset[int]) -> Step | None:
        if not plus_one:
            return None
        if plus_one > len(self.steps):
            raise InvalidArgument(f"{where} names step {plus_one - 1}, and there are {len(self.steps)}")
        return self.step(plus_one - 1, path, where)

    def step(self, i: int, path: frozenset[int], where: str) -> Step:
        if i in path:
            raise InvalidArgument(f"{where} leads back to step {i}: a workflow has no cycles")
        if len(path) >= MAX_DEPTH:
            raise InvalidArgument(
                f"{where}: the workflow's steps nest more than {MAX_DEPTH} deep (a chain of more than "
                f"{MAX_DEPTH} steps, say): let its last step start a workflow of its own for the rest"
            )
        if i in self.used:
            raise InvalidArgument(f"step {i} is named twice ({where}): a step runs once, in one place")
        self.used.add(i)
        path = path | {i}
        s = self.steps[i]
        if s.group:
            return self.group(i, s, path)
        if not s.HasField("job"):
            raise InvalidArgument(f"step {i} is neither a job nor a group: set its job, or group")
        if s.members or s.on_success or s.on_complete:
            raise InvalidArgument(f"step {i} is a job: only a group has members and callbacks")
        step: JobStep = {"job": self.job(i, s.job)}
        if s.job.delay_ms:
            # Counted from when the step starts, so checked now: a step made at a later ack
            # must not fail there (now + delay must fit its 64 bits).
            ranges.check("delay_ms", s.job.delay_ms, f"step {i}: ")
            step["delay_ms"] = s.job.delay_ms
        if s.fresh:
            step["fresh"] = True
        step["next"] = self.ref(s.next, f"step {i}'s next", path)
        return step

    def group(self, i: int, s: pb.Step, path: frozenset[int]) -> GroupStep:
        if s.HasField("job"):
            raise InvalidArgument(f"step {i} is both a job and a group: set one")
        limit = self.engine.config.limits.max_name_length
        if len(s.name.encode()) > limit or not s.name.isprintable():
            raise InvalidArgument(
                f"step {i}: the group's name {s.name[:40]!r} must be printable and at most {limit} bytes "
                "(--max-name-length)"
            )
        if s.HasField("keep_ms"):
            ranges.check("keep_ms", s.keep_ms, f"step {i}: ")
        members = [self.member(m, f"member {k} of step {i}", path) for k, m in enumerate(s.members)]
        group: GroupStep = {"members": members, "name": s.name}
        group["on_success"] = (
            self.job_step(s.on_success, f"step {i}'s on_success", path) if s.on_success else None
        )
        group["on_complete"] = (
            self.job_step(s.on_complete, f"step {i}'s on_complete", path) if s.on_complete else None
        )
        group["next"] = self.ref(s.next, f"step {i}'s next", path)
        group["keep_ms"] = s.keep_ms if s.HasField("keep_ms") else None
        return group

    def job_step(self, plus_one: int, where: str, path: frozenset[int]) -> JobStep:
        if not plus_one or plus_one > len(self.steps):
            raise InvalidArgument(f"{where} names step {plus_one - 1}, and there are {len(self.steps)}")
        target = self.steps[plus_one - 1]
        if target.group or not target.HasField("job"):
            raise InvalidArgument(f"{where} must be a job step (step {plus_one - 1} is not)")
        step = self.ref(plus_one, where, path)
        assert step is not None and "job" in step
        return step

    def member(self, plus_one: int, where: str, path: frozenset[int]) -> JobStep:
        """A group's member: a job, or a chain of jobs (done when its last job is)."""
        step = self.job_step(plus_one, where, path)
        problem = member_chain_problem(step)
        if problem:
            raise InvalidArgument(f"{where}: {problem}")
        return step

    def job(self, i: int, job: pb.NewJob) -> dict[str, Any]:
        return job_to_dict(new_job(self.engine, i, job, relative=True))


def batch_to_pb(status: BatchStatus) -> pb.Batch:
    return pb.Batch(
        id=status.id,
        workflow_id=status.workflow_id,
        name=status.name,
        total=status.total,
        **status.counts,
        fired=list(status.fired),
        created_at_ms=status.created_ms,
        finished_at_ms=status.finished_ms,
        expires_at_ms=status.expires_ms,
        workflow_cancelled=status.cancelled,
        problem=status.problem,
        dead_jobs=list(status.dead_jobs),
    )


class WorkflowCalls:
    engine: Engine
    config: ServerConfig

    @answered
    async def EnqueueWorkflow(
        self, request: pb.EnqueueWorkflowRequest, context: Context
    ) -> pb.EnqueueWorkflowResponse:
        try:
            self.engine.disk.check()
            flow_id, batch_id, job_id = await self.engine.workflows.start(Plan(self.engine, request).root)
        except EngineError as exc:
            await abort(context, exc)
        return pb.EnqueueWorkflowResponse(workflow_id=flow_id, batch_id=batch_id, job_id=job_id)

    @answered
    async def AddToBatch(self, request: pb.AddToBatchRequest, context: Context) -> pb.AddToBatchResponse:
        try:
            if not request.jobs:
                raise InvalidArgument("the request holds no jobs")
            members: list[JobStep] = [
                {"job": job_to_dict(new_job(self.engine, i, j, relative=True))}
                for i, j in enumerate(request.jobs)
            ]
            indexes = await self.engine.workflows.add(request.batch_id, members)
        except EngineError as exc:
            await abort(context, exc)
        return pb.AddToBatchResponse(indexes=indexes)

    @answered
    async def GetBatch(self, request: pb.GetBatchRequest, context: Context) -> pb.Batch:
        try:
            return batch_to_pb(self.engine.workflows.batch(request.id))
        except EngineError as exc:
            await abort(context, exc)

    @answered
    async def ListBatches(self, request: pb.ListBatchesRequest, context: Context) -> pb.ListBatchesResponse:
        limit = min(request.limit or 100, 1000)
        found = await self.engine.workflows.batches(limit, request.before)
        return pb.ListBatchesResponse(batches=[batch_to_pb(b) for b in found])

    @answered
    async def CancelWorkflow(self, request: pb.WorkflowRequest, context: Context) -> pb.ChangeResponse:
        try:
            return change_response(
                await self.engine.workflows.cancel(request.workflow_id, request.known_elsewhere)
            )
        except EngineError as exc:
            await abort(context, exc)

    @answered
    async def RetryWorkflow(self, request: pb.WorkflowRequest, context: Context) -> pb.ChangeResponse:
        try:
            return change_response(await self.engine.workflows.retry(request.workflow_id))
        except EngineError as exc:
            await abort(context, exc)

    def _between_shards(self, source: int | None = None) -> None:
        """The relay's calls: only on a sharded server, from another of its shards."""
        shards = self.config.shard_count
        if shards < 2:
            raise FailedPrecondition("this server has one shard: nothing is relayed between shards")
        if source is not None and (source >= shards or source == self.config.shard_index):
            raise InvalidArgument(f"source {source} is not another shard of this server's {shards}")

    @answered
    async def PullOutbox(self, request: pb.PullOutboxRequest, context: Context) -> pb.PullOutboxResponse:
        try:
            self._between_shards()
        except EngineError as exc:
            await abort(context, exc)
        wait_s = min(request.wait_ms, MAX_PULL_WAIT_MS) / 1000
        entries = await self.engine.workflows.pull(
            request.after, min(request.limit or MAX_PULL, MAX_PULL), wait_s
        )
        return pb.PullOutboxResponse(entries=[pb.OutboxEntry(seq=s, to=t, entry=e) for s, t, e in entries])

    @answered
    async def ApplyInbox(self, request: pb.ApplyInboxRequest, context: Context) -> pb.ApplyInboxResponse:
        entries = [(e.seq, e.entry) for e in request.entries]
        try:
            self._between_shards(request.source)
            check_entries(self.engine, self.config, list(request.entries))
            return pb.ApplyInboxResponse(applied=await self.engine.workflows.take_in(request.source, entries))
        except EngineError as exc:
            await abort(context, exc)
