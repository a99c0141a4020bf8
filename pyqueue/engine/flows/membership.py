"""What a workflow's job changing state means for its workflow, in the same write as the change:
its batch is told (here, or through the outbox), and a completed job starts the step after it,
given its result. A dead job stops its chain: the steps after it stay in its options, and
retrying it (`pyqueue retry`, or `retry_workflow`) takes the chain up again. A batch's member
that is a chain of jobs keeps its place in the batch from job to job; the batch is told when
the chain ends (its last job completes) or stops (a job of it goes dead, is cancelled or deleted)."""

from typing import Any

from pyqueue.engine.flows import batches, outbox
from pyqueue.engine.flows.context import Flows
from pyqueue.engine.flows.launch import Writes
from pyqueue.engine.retry import JobOptions
from pyqueue.engine.view import BatchView
from pyqueue.store.records import JobRecord, Status

_STATE = {Status.COMPLETED: "completed", Status.DEAD: "dead", Status.CANCELLED: "cancelled"}


def _flow(view: BatchView, record: JobRecord) -> tuple[Flows, dict[str, Any]] | None:
    if view.flows is None or not record.options:
        return None
    flow = JobOptions.decode(record.options).flow
    return None if not flow else (view.flows, flow)


def job_ended(
    view: BatchView, writes: Writes, record: JobRecord, status: Status, result: bytes | None
) -> None:
    found = _flow(view, record)
    if found is None:
        return
    flows, flow = found
    text = result.decode() if result is not None else None
    goes_on = status == Status.COMPLETED and bool(flow.get("n"))
    member: dict[str, Any] = {k: flow[k] for k in ("b", "i", "r") if k in flow}
    if member and not goes_on:  # a member that is a chain has finished with its last job
        passed = text if flow.get("r") and status == Status.COMPLETED else None
        tell_batch(view, writes, flows, flow, _STATE[status], record.id, passed)
    if goes_on:
        given = "null" if text is None else text
        batches.launch(view, writes, flows, flow["n"], flow["w"], given, member or None)


def job_revived(view: BatchView, writes: Writes, record: JobRecord) -> None:
    """A dead job retried: pending again in its batch."""
    found = _flow(view, record)
    if found is not None and "b" in found[1]:
        tell_batch(view, writes, found[0], found[1], "pending", record.id, None)


def job_deleted(view: BatchView, writes: Writes, record: JobRecord) -> None:
    """A job deleted by hand has finished, as far as its batch goes (unless it had completed)."""
    found = _flow(view, record)
    if found is not None and "b" in found[1] and record.status != Status.COMPLETED:
        tell_batch(view, writes, found[0], found[1], "deleted", record.id, None)


def passes_result(record: JobRecord) -> bool:
    """Whether the job's result is handed on (to the step after it, or its group's next step)."""
    if not record.options:
        return False
    flow = JobOptions.decode(record.options).flow
    return bool(flow and (flow.get("n") or flow.get("r")))


def tell_batch(
    view: BatchView,
    writes: Writes,
    flows: Flows,
    flow: dict[str, Any],
    state: str,
    job_id: int,
    result: str | None,
) -> None:
    batch_id, index = flow["b"], flow["i"]
    home = flows.home_of(batch_id)
    if home == flows.shard:
        batches.apply_event(view, writes, flows, batch_id, index, state, job_id, result)
    else:
        entry: dict[str, Any] = {"k": "ev", "b": batch_id, "i": index, "s": state, "j": job_id}
        if result is not None:
            entry["r"] = result
        outbox.put(view, writes, flows, home, entry)
