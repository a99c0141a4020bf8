"""The engine's workflow calls (engine/flows holds their rules): start a workflow, add to a
batch, read batches, cancel or retry a workflow here, and the outbox's two ends."""

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyqueue.engine.errors import NotFound, ResourceExhausted
from pyqueue.engine.flows import outbox
from pyqueue.engine.flows.batches import STATES
from pyqueue.engine.flows.context import Flows
from pyqueue.engine.flows.plan import JobStep, Step, check_plan
from pyqueue.engine.flows.requests import (
    AddToBatch,
    ApplyInbox,
    CancelFlow,
    RetryFlow,
    StartWorkflow,
    TrimOutbox,
)
from pyqueue.engine.limits import Limits
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Outcome
from pyqueue.engine.retry import RetryPolicy
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store


@dataclass(frozen=True, slots=True)
class BatchStatus:
    id: int
    workflow_id: int
    name: str
    total: int
    counts: dict[str, int]
    fired: tuple[str, ...]
    created_ms: int
    finished_ms: int
    expires_ms: int
    cancelled: bool
    problem: str
    dead_jobs: tuple[int, ...]

    @classmethod
    def read(cls, store: Store, batch_id: int, raw: bytes, with_jobs: bool) -> "BatchStatus":
        batch = json.loads(raw)
        dead: list[int] = []
        if with_jobs and batch["counts"]["dead"]:
            for _, member in store.scan(Family.DATA, *keys.member_range(batch_id)):
                fields = json.loads(member)
                if fields["s"] == "dead":
                    dead.append(fields.get("j", 0))
        return cls(
            batch_id,
            batch["w"],
            batch["name"],
            batch["total"],
            {state: batch["counts"][state] for state in STATES},
            tuple(batch["fired"]),
            batch["created_ms"],
            batch.get("finished_ms", 0),
            batch.get("expires_ms", 0),
            store.get(Family.DATA, keys.cancelled_flow_key(batch["w"])) is not None,
            batch.get("problem", ""),
            tuple(dead),
        )


class Workflows:
    def __init__(
        self,
        store: Store,
        flows: Flows,
        submit: Callable[[Any], Awaitable[Any]],
        memory: Memory,
        policy: RetryPolicy,
        limits: Limits,
    ) -> None:
        self.store = store
        self.flows = flows
        self._submit = submit
        self.memory = memory
        self.policy = policy
        self.max_jobs = limits.max_workflow_jobs
        self.max_batch_jobs = limits.max_batch_jobs

    def open(self) -> None:
        """At start: the outbox's sequence carries on, and what is on disk is durable."""
        last = outbox.last_seq(self.store)
        self.flows.next_seq = last + 1
        self.flows.durable_seq = last
        first = self.store.scan(Family.DATA, *keys.outbox_range())
        waiting = next(first, None)
        self.flows.trimmed_seq = keys.id_suffix(waiting[0]) - 1 if waiting else last
        batch = self.store.last_key(Family.DATA, *keys.batch_range())
        if batch is not None:  # a batch's id is never given again
            self.flows.ids.last = max(self.flows.ids.last, keys.id_suffix(batch))

    async def start(self, step: Step) -> tuple[int, int, int]:
        check_plan(step, self.max_jobs)
        result: tuple[int, int, int] = await self._submit(StartWorkflow(step, self.flows, self.memory))
        return result

    async def add(self, batch_id: int, members: list[JobStep]) -> list[int]:
        jobs = sum(check_plan(member, self.max_jobs) for member in members)
        if jobs > self.max_jobs:
            raise ResourceExhausted(
                f"the call adds {jobs} jobs, over the {self.max_jobs} one call may enqueue "
                "(--max-workflow-jobs): add them in several calls"
            )
        add = AddToBatch(batch_id, members, self.flows, self.memory, self.max_batch_jobs)
        indexes: list[int] = await self._submit(add)
        return indexes

    async def cancel(self, flow_id: int, known_elsewhere: bool = False) -> Outcome:
        """NotFound when this shard knows nothing of it, unless another shard does."""
        outcome: Outcome = await self._submit(CancelFlow(flow_id, self.memory, self.policy, known_elsewhere))
        return outcome

    async def retry(self, flow_id: int) -> Outcome:
        outcome: Outcome = await self._submit(RetryFlow(flow_id, self.memory, self.policy))
        return outcome

    def batch_queues(self, batch_id: int) -> frozenset[str] | None:
        """The queues a batch belongs to (None: no such batch here). A batch made before batches
        kept them says "*": it belongs to every queue."""
        raw = self.store.get(Family.DATA, keys.batch_key(batch_id))
        if raw is None:
            return None
        return frozenset(json.loads(raw).get("queues", ("*",)))

    def batch(self, batch_id: int) -> BatchStatus:
        raw = self.store.get(Family.DATA, keys.batch_key(batch_id))
        if raw is None:
            raise NotFound(
                f"batch {batch_id} does not exist here (a finished batch is removed after the jobs' "
                "retention: --keep-completed, or --keep-dead when some died)"
            )
        return BatchStatus.read(self.store, batch_id, raw, with_jobs=True)

    async def batches(self, limit: int, before: int = 0) -> list[BatchStatus]:
        """The newest batches first (ids below `before`, when given)."""

        def read() -> list[BatchStatus]:
            lo, hi = keys.batch_range()
            if before:
                hi = keys.batch_key(before)
            found = self.store.scan(Family.DATA, lo, hi, reverse=True)
            out = []
            for key, raw in found:
                out.append(BatchStatus.read(self.store, keys.id_suffix(key), raw, with_jobs=False))
                if len(out) >= limit:
                    break
            return out

        return await asyncio.to_thread(read)

    async def pull(self, after: int, limit: int, wait_s: float) -> list[tuple[int, int, bytes]]:
        """Durable outbox entries past `after`, waiting up to `wait_s` for one. The caller applied
        those up to `after` where they go: they are dropped first, but never one that no pull
        handed out (a relay cannot drop what nobody carried)."""
        upto = min(after, self.flows.pulled_seq)
        if upto > self.flows.trimmed_seq:
            await self.trim(upto)
        if not await self.flows.wait_durable(after, wait_s):
            return []
        entries = await asyncio.to_thread(outbox.read, self.store, after, self.flows.durable_seq, limit)
        if entries:
            self.flows.pulled_seq = max(self.flows.pulled_seq, entries[-1][0])
        return entries

    async def take_in(self, source: int, entries: Sequence[tuple[int, bytes]]) -> int:
        applied: int = await self._submit(ApplyInbox(source, entries, self.flows, self.memory))
        return applied

    async def trim(self, upto: int) -> int:
        dropped: int = await self._submit(TrimOutbox(upto, self.flows.trimmed_seq))
        self.flows.trimmed_seq = max(self.flows.trimmed_seq, upto)
        return dropped
