"""A batch at its home shard: its record, one record per member, and the callbacks.

The batch record keeps a count per member state (pending, completed, dead, cancelled, deleted);
a member's record keeps its state, its job id and (when the step after the group takes the
results) its result. An event moves a member from its state to another, so applying the same
event twice, or a job that ran twice, changes nothing. When no member is pending, the callbacks
that apply fire, each at most once (`fired`): on_complete at the first time every member has
finished; on_success and the step after the group the first time every member has completed
(after a retry of the dead ones, say)."""

import json
from typing import Any

from pyqueue.engine.flows.context import Flows
from pyqueue.engine.flows.launch import Writes, launch_job
from pyqueue.engine.flows.plan import GroupStep, JobStep, Step, every_job
from pyqueue.engine.view import BatchView, dump_doc
from pyqueue.store import keys

STATES = ("pending", "completed", "dead", "cancelled", "deleted")


def launch(
    view: BatchView,
    writes: Writes,
    flows: Flows,
    step: Step,
    flow_id: int,
    given: str | None,
    member: dict[str, Any] | None = None,
) -> None:
    """Start `step` of workflow `flow_id`, handing it `given` (JSON text) unless it wants none.
    `member`: the step goes on a chain that is a batch's member (its batch, index, and whether
    the batch's next step takes results), so the job keeps the member's place."""
    if "job" in step:
        launch_job(view, writes, flows, step, {"w": flow_id, **(member or {})}, given)
    else:
        open_batch(view, writes, flows, step, flow_id, given)


def load(view: BatchView, batch_id: int) -> dict[str, Any] | None:
    """The batch's record as this request leaves it: change it, then `save` it."""
    batch: dict[str, Any] | None = view.get_doc(keys.batch_key(batch_id))
    return batch


def save(view: BatchView, batch_id: int, batch: dict[str, Any]) -> None:
    """Keep the batch's record (encoded once, when the request ends, however many events it had)."""
    view.put_doc(keys.batch_key(batch_id), batch)


def open_batch(
    view: BatchView,
    writes: Writes,
    flows: Flows,
    group: GroupStep,
    flow_id: int,
    given: str | None,
    batch_id: int = 0,
) -> int:
    """A new batch here, its members started wherever their queues are."""
    batch_id = batch_id or flows.ids.next(view.now_ms)
    batch: dict[str, Any] = {
        "w": flow_id,
        "name": group.get("name", ""),
        "total": 0,
        "counts": dict.fromkeys(STATES, 0),
        "on_success": group.get("on_success"),
        "on_complete": group.get("on_complete"),
        "next": group.get("next"),
        "keep_ms": group.get("keep_ms"),
        "fired": [],
        "created_ms": view.now_ms,
        # The queues it belongs to (rights: server/rights.py): its members', callbacks', next's.
        "queues": sorted({job["queue"] for job in every_job(group)}),
    }
    if given is not None:
        batch["in"] = given
    save(view, batch_id, batch)
    flows.count("batches_opened")
    add_members(view, writes, flows, batch_id, group["members"])
    return batch_id


def add_members(
    view: BatchView, writes: Writes, flows: Flows, batch_id: int, members: list[JobStep]
) -> list[int]:
    """Members join the batch (counted pending first, so a member that ends at once is counted
    against them), then start; the batch settles once they are in (an empty one fires now)."""
    batch = load(view, batch_id)
    assert batch is not None
    base = batch["total"]
    if "queues" in batch:
        batch["queues"] = sorted(
            set(batch["queues"]).union(job["queue"] for m in members for job in every_job(m))
        )
    batch["total"] += len(members)
    batch["counts"]["pending"] += len(members)
    _unfinish(view, batch_id, batch)
    save(view, batch_id, batch)
    for i in range(base, base + len(members)):
        view.put_meta(keys.member_key(batch_id, i), b'{"s":"pending"}')
    flow: dict[str, Any] = {"w": batch["w"], "b": batch_id}
    if batch.get("next"):
        flow["r"] = 1  # the step after the group takes its members' results
    for i, member in enumerate(members, start=base):
        launch_job(view, writes, flows, member, {**flow, "i": i}, batch.get("in"))
    settle(view, writes, flows, batch_id)
    return list(range(base, base + len(members)))


def apply_event(
    view: BatchView,
    writes: Writes,
    flows: Flows,
    batch_id: int,
    index: int,
    state: str,
    job_id: int,
    result: str | None,
) -> None:
    """A member's new state, at the batch's home."""
    batch = load(view, batch_id)
    if batch is None:
        flows.count("events_for_gone_batches")  # its bookkeeping ran out: nothing left to count
        return
    key = keys.member_key(batch_id, index)
    raw = view.get_meta(key)
    if raw is None:
        return
    member = json.loads(raw)
    member["j"] = job_id
    old = member["s"]
    if old != state:
        batch["counts"][old] -= 1
        batch["counts"][state] += 1
        member["s"] = state
        flows.count("events_counted")
    if state == "completed" and result is not None:
        member["r"] = result
    view.put_meta(key, dump_doc(member))
    if batch["counts"]["pending"]:
        save(view, batch_id, batch)
    settle(view, writes, flows, batch_id, batch)


def settle(
    view: BatchView, writes: Writes, flows: Flows, batch_id: int, batch: dict[str, Any] | None = None
) -> None:
    """Fire what is due now that no member is pending; keep the bookkeeping for its retention.
    `batch`: the record as the caller holds it (saved already while members are pending)."""
    batch = batch or load(view, batch_id)
    assert batch is not None
    counts, fired = batch["counts"], batch["fired"]
    if counts["pending"]:
        if "expires_ms" in batch:  # revived: no longer finished
            _unfinish(view, batch_id, batch)
            save(view, batch_id, batch)
        return
    cancelled = view.get_meta(keys.cancelled_flow_key(batch["w"])) is not None
    succeeded = counts["completed"] == batch["total"]
    if not cancelled:
        if "complete" not in fired:
            fired.append("complete")
            if batch["on_complete"]:
                _fire(view, writes, flows, batch["on_complete"], batch, status(view, batch_id, batch))
        if succeeded and "success" not in fired:
            fired.append("success")
            if batch["on_success"]:
                _fire(view, writes, flows, batch["on_success"], batch, status(view, batch_id, batch))
            if batch["next"]:
                _then(view, writes, flows, batch_id, batch)
    batch["finished_ms"] = view.now_ms
    keep_ms = flows.policy.keep_dead_ms
    if succeeded and "problem" not in batch:
        keep = batch["keep_ms"]
        keep_ms = flows.policy.keep_completed_ms if keep is None else keep
    if keep_ms <= 0:
        delete(view, batch_id, batch)
        return
    _unfinish(view, batch_id, batch)
    batch["expires_ms"] = view.now_ms + keep_ms
    view.batch.put_index(keys.flow_expiry_key(batch["expires_ms"], b"b", batch_id), b"")
    save(view, batch_id, batch)


def _fire(
    view: BatchView, writes: Writes, flows: Flows, callback: JobStep, batch: dict[str, Any], given: str
) -> None:
    launch(view, writes, flows, callback, batch["w"], given)
    flows.count("callbacks_fired")


def _then(view: BatchView, writes: Writes, flows: Flows, batch_id: int, batch: dict[str, Any]) -> None:
    """The step after the group, given the results; results too large to hand on start nothing,
    and the batch says why."""
    results = _results(view, batch_id, batch)
    if len(results) > flows.max_input_bytes:
        batch["problem"] = (
            f"the members' results are {len(results)} bytes, over the {flows.max_input_bytes} bytes a "
            "workflow hands on (--max-payload-bytes): the step after the group was not started"
        )
        flows.count("inputs_too_large")
        return
    launch(view, writes, flows, batch["next"], batch["w"], results)
    flows.count("callbacks_fired")


def _unfinish(view: BatchView, batch_id: int, batch: dict[str, Any]) -> None:
    """A batch with pending members again (revived, or added to) is kept until it finishes anew."""
    expires = batch.pop("expires_ms", None)
    if expires is not None:
        view.batch.delete_index(keys.flow_expiry_key(expires, b"b", batch_id))
    if batch["counts"]["pending"]:
        batch.pop("finished_ms", None)


def delete(view: BatchView, batch_id: int, batch: dict[str, Any]) -> None:
    for i in range(batch["total"]):
        view.put_meta(keys.member_key(batch_id, i), None)
    view.put_meta(keys.batch_key(batch_id), None)
    expires = batch.get("expires_ms")
    if expires is not None:
        view.batch.delete_index(keys.flow_expiry_key(expires, b"b", batch_id))


def members(view: BatchView, batch_id: int, batch: dict[str, Any]) -> list[dict[str, Any]]:
    raws = [view.get_meta(keys.member_key(batch_id, i)) for i in range(batch["total"])]
    return [json.loads(raw) if raw else {"s": "deleted"} for raw in raws]


def status(view: BatchView, batch_id: int, batch: dict[str, Any]) -> str:
    """What a batch callback is given: the batch's counts and its jobs that did not complete."""
    not_completed: dict[str, list[int]] = {}
    for member in members(view, batch_id, batch):
        if member["s"] != "completed":
            not_completed.setdefault(member["s"], []).append(member.get("j", 0))
    return json.dumps(
        {
            "batch_id": batch_id,
            "workflow_id": batch["w"],
            "name": batch["name"],
            "total": batch["total"],
            **{state: batch["counts"][state] for state in STATES if state != "pending"},
            "dead_jobs": not_completed.get("dead", []),
            "cancelled_jobs": not_completed.get("cancelled", []),
            "deleted_jobs": not_completed.get("deleted", []),
        },
        separators=(",", ":"),
    )


def _results(view: BatchView, batch_id: int, batch: dict[str, Any]) -> str:
    """The members' results, in the order they were added (JSON text; null where none came)."""
    return "[" + ",".join(m.get("r", "null") for m in members(view, batch_id, batch)) + "]"
