"""Workflows as the client builds them (docs/workflows.md): a `Task` is one job, `Chain` runs
steps one after another (each given the last one's result), `Group` (alias `Batch`) starts its
jobs together, with callbacks: `on_success` when every job completed, `on_complete` when every
job finished, each given the batch's status, and `.then(step)` after it, given the jobs'
results in order (Celery's chord). The server keeps all of it; `workflow_request` is the one
conversion to the wire."""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, Union

from pyqueue.client.spec import _seconds_ms, new_job_message
from pyqueue.v1 import queue_pb2 as pb

StepLike = Union["Step", Mapping[str, Any]]  # a Task, Chain or Group, or a job spec


class Starts(Protocol):
    """A Client (read as a protocol: the client imports this module)."""

    def enqueue_workflow(self, workflow: "StepLike") -> "WorkflowRun": ...


class StartsAsync(Protocol):
    """An AsyncClient."""

    async def enqueue_workflow(self, workflow: "StepLike") -> "WorkflowRun": ...


class Origin(Protocol):
    """Where a job function's tasks come from (an App): its clients."""

    @property
    def client(self) -> Starts: ...

    def async_client(self) -> StartsAsync: ...


class Step:
    def then(self, step: StepLike) -> "Chain":
        """This step, then `step`, given what this one gave."""
        return Chain(self, step)

    def enqueue(self, client: Starts | None = None) -> "WorkflowRun":
        """Start this workflow, on `client` or its job functions' app's."""
        return (client or _origin(self).client).enqueue_workflow(self)

    async def enqueue_async(self, client: StartsAsync | None = None) -> "WorkflowRun":
        return await (client or _origin(self).async_client()).enqueue_workflow(self)


@dataclass(frozen=True)
class Task(Step):
    """One job of a workflow: a job spec (type, payload and options, as for enqueue_many).
    `fresh`: it is not given the result of the step before it (Celery's immutable signature)."""

    spec: Mapping[str, Any]
    fresh: bool = False
    # Checks the call against its function's signature, told whether the job is handed an input
    # (then its first argument): known once the workflow around it is (job functions' .s()).
    check: Callable[[bool], None] | None = field(default=None, compare=False, repr=False)
    origin: Origin | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, init=False)
class Chain(Step):
    """Steps run one after another; each starts when the one before has completed, given its
    result. A step that goes dead stops the chain (retry it to go on)."""

    steps: tuple["Task | Group", ...]

    def __init__(self, *steps: StepLike) -> None:
        flat: list[Task | Group] = []
        for step in steps:
            item = as_step(step)
            flat += item.steps if isinstance(item, Chain) else [item]
        if not flat:
            raise ValueError("a chain needs at least one step")
        object.__setattr__(self, "steps", tuple(flat))


@dataclass(frozen=True)
class Group(Step):
    """Jobs started together, kept as one batch by the server. A member is a job, or a chain of
    jobs (Celery's group of chains: the member has finished once its last job has, and hands on
    that job's result). `name` is shown with it; `keep` (seconds) keeps its bookkeeping after it
    succeeded (default: as long as completed jobs)."""

    members: tuple["Task | Chain", ...]
    on_success: "Task | Chain | None" = None
    on_complete: "Task | Chain | None" = None
    name: str = ""
    keep: float | timedelta | None = None

    def __init__(
        self,
        members: Iterable[StepLike] = (),
        *,
        on_success: StepLike | None = None,
        on_complete: StepLike | None = None,
        name: str = "",
        keep: float | timedelta | None = None,
    ) -> None:
        tasks: list[Task | Chain] = []
        for i, member in enumerate(members):
            step = as_step(member)
            if isinstance(step, Group) or (
                isinstance(step, Chain) and not all(isinstance(s, Task) for s in step.steps)
            ):
                raise TypeError(f"member {i} of a group holds a group: a member is a job or a chain of jobs")
            tasks.append(step)
        object.__setattr__(self, "members", tuple(tasks))
        object.__setattr__(self, "on_success", _callback(on_success, "on_success"))
        object.__setattr__(self, "on_complete", _callback(on_complete, "on_complete"))
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "keep", keep)


Batch = Group  # Sidekiq's name: Batch(jobs, on_success=..., on_complete=...)


def as_step(step: object) -> "Task | Chain | Group":
    if isinstance(step, (Task, Chain, Group)):
        return step
    if isinstance(step, Mapping):
        return Task(step)
    raise TypeError(
        f"a workflow step must be a job (a spec mapping, or a job function's .s(...)), a chain or a "
        f"group, not {type(step).__name__}"
    )


def _callback(step: StepLike | None, name: str) -> "Task | Chain | None":
    if step is None:
        return None
    item = as_step(step)
    if isinstance(item, Group) or (isinstance(item, Chain) and not isinstance(item.steps[0], Task)):
        raise TypeError(f"{name} must be a job (or a chain that starts with one), not a group")
    return item


def _origin(step: Step) -> Origin:
    tasks: list[Task] = []
    if isinstance(step, Task):
        tasks = [step]
    elif isinstance(step, Chain):
        tasks = [t for s in step.steps for t in ([s] if isinstance(s, Task) else _tasks_of(s))]
    elif isinstance(step, Group):
        tasks = _tasks_of(step)
    for task in tasks:
        if task.origin is not None:
            return task.origin
    raise TypeError("this workflow has no job function's task to find an app by: pass a client")


def _tasks_of(group: Group) -> list[Task]:
    return [
        t for m in group.members for t in ([m] if isinstance(m, Task) else m.steps) if isinstance(t, Task)
    ]


def workflow_request(step: StepLike) -> pb.EnqueueWorkflowRequest:
    """The wire form; each job function's call is checked against its signature here, knowing
    whether it is handed an input (every step but the first is)."""
    steps: list[pb.Step] = []
    first = _emit(steps, as_step(step), given=False)
    return pb.EnqueueWorkflowRequest(steps=steps, start=first - 1)


def _emit(steps: list[pb.Step], step: "Task | Chain | Group", given: bool) -> int:
    """Append a step (a chain: its steps, linked) to `steps`; its first index plus one."""
    items = step.steps if isinstance(step, Chain) else (step,)
    first = previous = 0
    for item in items:
        index = _emit_one(steps, item, given)
        given = True  # every step after the first is handed what the one before gave
        if previous:
            steps[previous - 1].next = index
        previous = index
        first = first or index
    return first


def _emit_one(steps: list[pb.Step], item: "Task | Group", given: bool) -> int:
    steps.append(pb.Step())
    index = len(steps)
    if isinstance(item, Task):
        if item.check is not None:
            item.check(given and not item.fresh)
        steps[index - 1].job.CopyFrom(new_job_message(item.spec))
        steps[index - 1].fresh = item.fresh
        return index
    message = steps[index - 1]
    message.group = True
    message.name = item.name
    if item.keep is not None:
        message.keep_ms = _seconds_ms(item.keep)
    for member in item.members:
        message.members.append(_emit(steps, member, given))
    if item.on_success is not None:
        message.on_success = _emit(steps, item.on_success, given=True)
    if item.on_complete is not None:
        message.on_complete = _emit(steps, item.on_complete, given=True)
    return index


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    """A started workflow: its id (cancel_workflow, retry_workflow), the batch of its first step
    when that is a group (its id is the workflow's), the first job when it was made at once."""

    workflow_id: int
    batch_id: int = 0
    job_id: int = 0

    @classmethod
    def from_pb(cls, message: pb.EnqueueWorkflowResponse) -> "WorkflowRun":
        return cls(message.workflow_id, message.batch_id, message.job_id)


_TIMES = ("created_at", "finished_at", "expires_at")


def _time(ms: int) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms else None


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A batch's progress: its jobs by state, the callbacks fired ("complete", "success")."""

    id: int
    workflow_id: int
    name: str
    total: int
    pending: int
    completed: int
    dead: int
    cancelled: int
    deleted: int
    fired: tuple[str, ...]
    created_at: datetime | None
    finished_at: datetime | None  # when no job of it was pending any more
    expires_at: datetime | None  # when its bookkeeping goes
    workflow_cancelled: bool
    problem: str = ""
    dead_jobs: tuple[int, ...] = field(default=())

    @property
    def finished(self) -> bool:
        return self.pending == 0

    def to_dict(self) -> dict[str, Any]:
        """The batch as JSON-ready values; ids are strings (they pass 2**53, as job ids do)."""
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "id": str(self.id),
            "workflow_id": str(self.workflow_id),
            "fired": list(self.fired),
            "dead_jobs": [str(j) for j in self.dead_jobs],
            **{t: getattr(self, t).isoformat() if getattr(self, t) else None for t in _TIMES},
        }

    @classmethod
    def from_pb(cls, m: pb.Batch) -> "BatchInfo":
        return cls(
            m.id,
            m.workflow_id,
            m.name,
            m.total,
            m.pending,
            m.completed,
            m.dead,
            m.cancelled,
            m.deleted,
            tuple(m.fired),
            _time(m.created_at_ms),
            _time(m.finished_at_ms),
            _time(m.expires_at_ms),
            m.workflow_cancelled,
            m.problem,
            tuple(m.dead_jobs),
        )
