"""Starting a job step inside a write: its job on the shard of its queue, here or through the
outbox. (A group step opens a batch: batches.py.)"""

import json
from dataclasses import replace
from typing import Any, Protocol

from pyqueue.engine.flows import outbox
from pyqueue.engine.flows.context import Flows
from pyqueue.engine.flows.plan import JobStep, job_from_dict
from pyqueue.engine.model import new_record
from pyqueue.engine.retry import JobOptions
from pyqueue.engine.view import BatchView, dump_doc
from pyqueue.store import keys
from pyqueue.store.records import JobRecord, Status


class Writes(Protocol):
    """The write request a step starts in (a `Transitions`): where its new jobs are listed."""

    ready: list[JobRecord]
    scheduled: list[JobRecord]
    outbox_high: int
    outbox_of: Any

    def finish(
        self, view: BatchView, record: JobRecord, status: Status, keep_ms: int, result: bytes | None = None
    ) -> None: ...


def launch_job(
    view: BatchView, writes: Writes, flows: Flows, step: JobStep, flow: dict[str, Any], given: str | None
) -> int | None:
    """A job step's job, here or on its queue's shard; its id when it was made here."""
    flow = dict(flow)
    if step.get("next"):
        flow["n"] = step["next"]
    if given is not None and not step.get("fresh"):
        flow["in"] = given
    to = flows.shard_of_queue(step["job"]["queue"])
    delay_ms = step.get("delay_ms", 0)
    if to != flows.shard:
        outbox.put(view, writes, flows, to, {"k": "job", "job": step["job"], "flow": flow, "d": delay_ms})
        return None
    return create_job(view, writes, flows, step["job"], flow, delay_ms)


def create_job(
    view: BatchView, writes: Writes, flows: Flows, job: dict[str, Any], flow: dict[str, Any], delay_ms: int
) -> int:
    """A workflow's job, made on this shard. A job of a cancelled workflow is made cancelled, so
    its batch counts it."""
    new = job_from_dict(job)
    now = view.now_ms
    run_at_ms = new.run_at_ms or (now + delay_ms if delay_ms else 0)
    options = replace(JobOptions.decode(new.options), flow=flow).encode()
    record = new_record(new, flows.ids.next(now), now, run_at_ms, options)
    scheduled = record.status == Status.SCHEDULED
    view.create(record, new.payload)
    view.batch.put_index(keys.flow_job_key(flow["w"], record.id), b"")
    flows.count("jobs_created")
    if "b" in flow and flows.home_of(flow["b"]) == flows.shard:
        note_job(view, flow["b"], flow["i"], record.id)
    if view.get_meta(keys.cancelled_flow_key(flow["w"])) is not None:
        writes.finish(view, record, Status.CANCELLED, flows.policy.keep_dead_ms)
    else:
        (writes.scheduled if scheduled else writes.ready).append(record)
    return record.id


def note_job(view: BatchView, batch_id: int, index: int, job_id: int) -> None:
    """A member made on its batch's shard: the batch knows its job at once."""
    key = keys.member_key(batch_id, index)
    member = json.loads(view.get_meta(key) or b'{"s":"pending"}')
    member["j"] = job_id
    view.put_meta(key, dump_doc(member))
