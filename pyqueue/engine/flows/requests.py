"""The writes of workflows: start one, add to an open batch, apply another shard's outbox entries,
trim this shard's, cancel or retry a workflow's jobs here, and drop bookkeeping past its time."""

import json
from collections.abc import Sequence
from typing import Any

from pyqueue.engine.errors import FailedPrecondition, NotFound, ResourceExhausted
from pyqueue.engine.flows import batches
from pyqueue.engine.flows.context import Flows, inbox_meta
from pyqueue.engine.flows.launch import create_job, launch_job
from pyqueue.engine.flows.plan import JobStep, Step
from pyqueue.engine.memory import Memory
from pyqueue.engine.requests import CancelJobs, Request, RetryJobs, Transitions
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.view import BatchView
from pyqueue.store import keys
from pyqueue.store.contract import Family
from pyqueue.store.records import ENDED, Status


class StartWorkflow(Transitions):
    """Result: (workflow id, batch id if the first step is a group else 0, the first job's id if
    it was made on this shard else 0). A first group's batch id is the workflow's id."""

    def __init__(self, step: Step, flows: Flows, memory: Memory) -> None:
        super().__init__(memory)
        self.step = step
        self.flows = flows

    def apply(self, view: BatchView) -> None:
        flow_id = self.flows.ids.next(view.now_ms)
        if "members" in self.step:
            batches.open_batch(view, self, self.flows, self.step, flow_id, None, batch_id=flow_id)
            self.result = (flow_id, flow_id, 0)
        else:
            job_id = launch_job(view, self, self.flows, self.step, {"w": flow_id}, None)
            self.result = (flow_id, 0, job_id or 0)
        self.flows.count("workflows_started")


class AddToBatch(Transitions):
    """Jobs join a batch that is still open: one of its jobs (or a job of its own) adds them
    while at least one member is pending, so the callbacks cannot have fired."""

    def __init__(
        self, batch_id: int, members: list[JobStep], flows: Flows, memory: Memory, most: int = 100_000
    ) -> None:
        super().__init__(memory)
        self.batch_id = batch_id
        self.members = members
        self.flows = flows
        self.most = most  # members one batch may hold (--max-batch-jobs)

    def apply(self, view: BatchView) -> None:
        batch = batches.load(view, self.batch_id)
        if batch is None:
            raise NotFound(f"batch {self.batch_id} does not exist (it may have finished and been removed)")
        if not batch["counts"]["pending"]:
            raise FailedPrecondition(
                f"batch {self.batch_id} has finished (no job of it is pending): add jobs from one of its "
                "jobs while it runs, or start a new batch"
            )
        if view.get_meta(keys.cancelled_flow_key(batch["w"])) is not None:
            raise FailedPrecondition(f"batch {self.batch_id}'s workflow was cancelled")
        if batch["total"] + len(self.members) > self.most:
            raise ResourceExhausted(
                f"batch {self.batch_id} holds {batch['total']} jobs, and {len(self.members)} more would pass "
                f"the {self.most} one batch may hold (--max-batch-jobs): start another batch"
            )
        self.result = batches.add_members(view, self, self.flows, self.batch_id, self.members)


class ApplyInbox(Transitions):
    """Another shard's outbox entries, in order; those applied before are skipped. Result: the
    number applied now."""

    def __init__(
        self, source: int, entries: Sequence[tuple[int, bytes]], flows: Flows, memory: Memory
    ) -> None:
        super().__init__(memory)
        self.source = source
        self.entries = entries
        self.flows = flows

    def apply(self, view: BatchView) -> None:
        key = keys.meta_key(inbox_meta(self.source))
        applied = int(view.get_meta(key) or 0)
        new = self._in_order(applied)  # all checked before one is applied: a refusal writes nothing
        for seq, entry in new:
            self._apply_one(view, entry)
            applied = seq
        done = len(new)
        view.put_meta(key, str(applied).encode())
        self.flows.count("inbox_applied", done)
        self.result = done

    def _in_order(self, applied: int) -> list[tuple[int, dict[str, Any]]]:
        """The entries not applied before, each following the one applied before it: an entry
        whose predecessor (its "p") was never applied here means one was left out."""
        new = []
        at = applied
        for seq, raw in self.entries:
            if seq <= at:
                continue
            entry = json.loads(raw)
            if entry.get("p", 0) > at:
                raise FailedPrecondition(
                    f"entry {seq} from shard {self.source} follows its entry {entry['p']}, and this shard "
                    f"has applied up to {at}: entries are applied in order, none left out"
                )
            new.append((seq, entry))
            at = seq
        return new

    def _apply_one(self, view: BatchView, entry: dict[str, Any]) -> None:
        if entry["k"] == "job":
            create_job(view, self, self.flows, entry["job"], entry["flow"], entry.get("d", 0))
        elif entry["k"] == "ev":
            batches.apply_event(
                view, self, self.flows, entry["b"], entry["i"], entry["s"], entry["j"], entry.get("r")
            )


class TrimOutbox(Request):
    """Drop this shard's outbox entries up to `upto`: each reached its shard and was applied."""

    needs_sync = False

    def __init__(self, upto: int, after: int = 0) -> None:
        """`after`: entries up to it were dropped already; the scan starts past them, never
        over the tombstones of every entry dropped before."""
        super().__init__()
        self.upto = upto
        self.after = after

    def apply(self, view: BatchView) -> None:
        lo, _ = keys.outbox_range(self.after)
        dropped = 0
        for key, _ in view.store.scan(Family.DATA, lo, keys.outbox_key(self.upto + 1)):
            view.batch.delete(Family.DATA, key)
            dropped += 1
        self.result = dropped


def flow_jobs(view: BatchView, flow_id: int) -> list[int]:
    return [keys.id_suffix(k) for k, _ in view.store.scan(Family.INDEX, *keys.flow_jobs_range(flow_id))]


def check_known(view: BatchView, flow_id: int, ids: list[int]) -> None:
    """NotFound unless this shard holds a trace of the workflow: a job of it (`ids`), its first
    batch, its cancellation's mark, or a step of it on its way to another shard (in the outbox:
    the job before it may be gone already, and the step not yet made where it goes)."""
    if ids or view.get_meta(keys.batch_key(flow_id)) or view.get_meta(keys.cancelled_flow_key(flow_id)):
        return
    if any(_in_transit(raw, flow_id) for _, raw in view.store.scan(Family.DATA, *keys.outbox_range())):
        return
    raise NotFound(
        f"workflow {flow_id} is not known here: it never existed, or its jobs ended and their "
        "retention ran out (--keep-completed, --keep-dead)"
    )


def _in_transit(raw: bytes, flow_id: int) -> bool:
    entry = json.loads(raw)
    return bool(entry.get("k") == "job" and entry.get("flow", {}).get("w") == flow_id)


class CancelFlow(CancelJobs):
    """Cancel a workflow on this shard: its jobs that have not ended, and (a mark kept as long as
    dead jobs) every job of it that reaches this shard later, and the callbacks of its batches here."""

    def __init__(
        self, flow_id: int, memory: Memory, policy: RetryPolicy, known_elsewhere: bool = False
    ) -> None:
        super().__init__([], memory, policy)
        self.flow_id = flow_id
        self.known_elsewhere = known_elsewhere

    def apply(self, view: BatchView) -> None:
        ids = flow_jobs(view, self.flow_id)
        if not self.known_elsewhere:
            check_known(view, self.flow_id, ids)
        mark = keys.cancelled_flow_key(self.flow_id)
        if view.get_meta(mark) is None:
            expires = view.now_ms + self.policy.keep_dead_ms
            view.put_meta(mark, str(expires).encode())
            view.batch.put_index(keys.flow_expiry_key(expires, b"c", self.flow_id), b"")
        self.job_ids = [r.id for r in view.records(ids) if r is not None and r.status not in ENDED]
        super().apply(view)


class RetryFlow(RetryJobs):
    """Retry a workflow's dead jobs on this shard: their batches count them pending again, and a
    chain that stopped at one goes on once it completes."""

    def __init__(self, flow_id: int, memory: Memory, policy: RetryPolicy) -> None:
        super().__init__([], memory, policy)
        self.flow_id = flow_id

    def apply(self, view: BatchView) -> None:
        ids = flow_jobs(view, self.flow_id)
        check_known(view, self.flow_id, ids)
        self.job_ids = [r.id for r in view.records(ids) if r is not None and r.status == Status.DEAD]
        super().apply(view)


class SweepFlows(Request):
    """Drop finished batches and cancelled-workflow marks whose time ran out."""

    needs_sync = False

    def __init__(self, limit: int = 500) -> None:
        super().__init__()
        self.limit = limit

    def apply(self, view: BatchView) -> None:
        swept = 0
        for key, _ in view.store.scan(Family.INDEX, *keys.flow_expiry_range(view.now_ms)):
            if swept >= self.limit:
                break
            _, kind, some_id = keys.split_flow_expiry(key)
            if kind == b"b":
                batch = batches.load(view, some_id)
                if batch is not None:
                    batches.delete(view, some_id, batch)
            else:
                view.put_meta(keys.cancelled_flow_key(some_id), None)
            view.batch.delete_index(key)
            swept += 1
        self.result = swept
