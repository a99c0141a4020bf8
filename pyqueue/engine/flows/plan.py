"""A workflow's steps as stored: plain JSON-able dicts, since they travel in a job's options, in a
batch's record and between shards.

    job step:   {"job": NEW_JOB, "delay_ms": 0, "fresh": False, "next": STEP | None}
    group step: {"members": [JOB_STEP, ...], "on_success": JOB_STEP | None,
                 "on_complete": JOB_STEP | None, "next": STEP | None, "keep_ms": int | None,
                 "name": ""}

A job step given an input (the result of the step before it, a group's results, a batch's status)
hands it to its job, unless it is `fresh` (Celery's immutable signature). NEW_JOB is a checked
`NewJob` (`job_to_dict`), payload and options in base64.
"""

import base64
import dataclasses
from typing import Any, NotRequired, TypedDict, final

from pyqueue.engine.errors import InvalidArgument, ResourceExhausted
from pyqueue.engine.model import NewJob


@final
class JobStep(TypedDict):
    job: dict[str, Any]
    delay_ms: NotRequired[int]
    fresh: NotRequired[bool]
    next: NotRequired["Step | None"]


@final
class GroupStep(TypedDict):
    members: list[JobStep]
    on_success: NotRequired[JobStep | None]
    on_complete: NotRequired[JobStep | None]
    next: NotRequired["Step | None"]
    keep_ms: NotRequired[int | None]
    name: NotRequired[str]


Step = JobStep | GroupStep

# Steps nested in steps, a chain's steps one after another above all: a job carries the steps
# after it nested in its options, which JSON (and the plan's reading) follow by recursion, so
# a chain of 500 steps failed inside the server (RecursionError). 256 leaves room to spare.
MAX_DEPTH = 256

_BYTES = ("payload", "options")


def job_to_dict(job: NewJob) -> dict[str, Any]:
    fields = dataclasses.asdict(job)
    for name in _BYTES:
        fields[name] = base64.b64encode(fields[name]).decode()
    return fields


def job_from_dict(fields: dict[str, Any]) -> NewJob:
    values = dict(fields)
    for name in _BYTES:
        values[name] = base64.b64decode(values[name])
    return NewJob(**values)


def every_job(step: Step | None) -> list[dict[str, Any]]:
    """Every job a plan may create, callbacks and later steps included."""
    if step is None:
        return []
    if "job" in step:
        return [step["job"], *every_job(step.get("next"))]
    jobs = [job for member in step["members"] for job in every_job(member)]
    for callback in (step.get("on_success"), step.get("on_complete")):
        jobs += every_job(callback)
    return jobs + every_job(step.get("next"))


def member_chain_problem(member: Step) -> str:
    """Why `member` cannot be a group's member ('' when it can): a member is a job, or a chain
    of jobs (the member has finished when its last job has; a group inside it is not kept)."""
    at: Step | None = member
    k = 0
    while at is not None:
        if "job" not in at:
            return f"its step {k} is a group: a member is a job or a chain of jobs"
        at, k = at.get("next"), k + 1
    return ""


def check_plan(step: Step, max_jobs: int) -> int:
    """Refuse what no server should start: a group member that is not a job or a chain of jobs,
    a workflow of more jobs than one call may enqueue, a unique key (a workflow's jobs are its
    own), a fold key (a folded job would stand for several steps). Returns the number of jobs the
    plan may create."""
    if "members" in step:
        for i, member in enumerate(step["members"]):
            problem = member_chain_problem(member)
            if problem:
                raise InvalidArgument(f"member {i} of a group: {problem}")
    jobs = every_job(step)
    if len(jobs) > max_jobs:
        raise ResourceExhausted(
            f"the workflow has {len(jobs)} jobs, over the {max_jobs} one call may enqueue "
            "(--max-workflow-jobs): open the batch with fewer and add the rest to it (AddToBatch)"
        )
    for job in jobs:
        if job["unique_key"]:
            raise InvalidArgument(
                "a workflow's jobs cannot have a unique key: make the workflow's first job unique"
            )
        if job["fold_key"]:
            raise InvalidArgument(
                "a workflow's jobs cannot be folded (fold_key): one folded job would stand for several "
                "steps; leave the key out of the workflow's jobs"
            )
    return len(jobs)
