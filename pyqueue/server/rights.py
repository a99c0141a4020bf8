"""The right each call needs, on which queues, checked before the call does anything.

Calls are checked where the request is decoded (handlers.py), so no servicer method runs for a
caller without the right: a refusal changes nothing. A call by id (get, errors, a change by ids)
is checked against the queues of those jobs, looked up first. Listings the caller may only partly
read (queues, periodic jobs) are cut to what it may read.

Every change (update, retry, cancel, delete, pause, resume, limit, periodic jobs) is logged on
`pyqueue.audit` with the token's name and the caller's address, whether or not tokens are on.
"""

import logging
from collections.abc import Callable
from typing import Any

from pyqueue.engine.errors import EngineError
from pyqueue.server.auth import Authority, PermissionDenied, Principal
from pyqueue.server.relay_secret import holds_secret
from pyqueue.v1 import queue_pb2 as pb

audit = logging.getLogger("pyqueue.audit")
FORWARDED_FOR = "x-pyqueue-forwarded-for"  # the client's address, on calls the router forwards

JobQueues = Callable[[list[int]], dict[int, str]]  # the queues of the jobs that exist, by id
CronQueue = Callable[[str], str | None]  # a periodic job's queue by name
BatchQueues = Callable[[int], "frozenset[str] | None"]  # a batch's queues ("*": every one)

CHANGES = frozenset(
    {
        "UpdateJobs",
        "RetryJobs",
        "CancelJobs",
        "DeleteJobs",
        "PauseQueue",
        "ResumeQueue",
        "SetQueueLimit",
        "SetFairWeight",
        "SetCron",
        "ChangeCron",
        "Backup",
        "CancelWorkflow",
        "RetryWorkflow",
    }
)
RELAY = frozenset({"PullOutbox", "ApplyInbox"})  # shard to shard: the relay's secret (relay_secret.py)
_FILTERED = {"UpdateJobs": "admin", "RetryJobs": "admin", "CancelJobs": "admin", "DeleteJobs": "admin"}
_FILTERED |= {"ListJobs": "read", "CountJobs": "read"}
_BY_QUEUE = {
    "PauseQueue": "admin",
    "ResumeQueue": "admin",
    "SetQueueLimit": "admin",
    "SetFairWeight": "admin",
}
_BY_QUEUE |= {"ListFairKeys": "read"}
_BY_ID = {"GetJob": ("produce", "read"), "WaitJob": ("produce", "read"), "ListErrors": ("read",)}


class Guard:
    """Checks calls against the tokens (`authority`; None: no tokens, every call allowed), and
    writes the audit log. A shard's guard can look jobs and periodic jobs up; the router's cannot,
    so it checks the token only and forwards it: the shards check the rights."""

    def __init__(
        self,
        authority: Authority | None,
        job_queues: JobQueues | None = None,
        cron_queue: CronQueue | None = None,
        audits: bool = True,
        relay_secret: str | None = None,
        batch_queues: BatchQueues | None = None,
    ) -> None:
        """`audits`: log the changes here (a router does not: the shard that makes each change
        logs it, with the client's address the router passes on). `relay_secret`: what the
        relay's calls must carry (None: no one may make them, as on a lone server or a router)."""
        self.authority = authority
        self.relay_secret = relay_secret
        self.job_queues = job_queues
        self.cron_queue = cron_queue
        self.batch_queues = batch_queues
        self.audits = audits

    def watches(self, method: str) -> bool:
        """Whether calls of `method` pass the guard: all of them with tokens, else the changes."""
        return self.authority is not None or (self.audits and method in CHANGES)

    def check_relay(self, method: str, metadata: Any) -> None:
        """The relay's calls carry the server's secret, whatever token they carry (checked
        before the request is read)."""
        if not holds_secret(self.relay_secret, metadata):
            raise PermissionDenied(
                f"{method} is for this server's own relay between its shards, which alone holds its "
                "secret; no token gives it"
            )

    @property
    def checks_rights(self) -> bool:
        return self.authority is not None and self.job_queues is not None

    def principal(self, metadata: Any) -> Principal | None:
        return None if self.authority is None else self.authority.authenticate(metadata)

    def check(self, method: str, request: Any, who: Principal | None, peer: str) -> None:
        """Raise PermissionDenied (logged in the audit log: a refusal of rights leaves a trace).
        A router checks the rights that need no lookup too: its Backup writes before a shard
        would check, and its metrics are shared by every caller within a second."""
        if who is not None and method in _NEED_NO_LOOKUP and not self.checks_rights:
            self._check(method, request, who)
        if who is not None and self.checks_rights:
            try:
                self._check(method, request, who)
            except EngineError as exc:
                if self.audits:
                    audit.info("%s by %s from %s: refused %s: %s", method, who.name, peer, exc.code, exc)
                raise

    def audited(self, method: str) -> bool:
        return self.audits and method in CHANGES

    def record(self, method: str, request: Any, who: Principal | None, peer: str, outcome: str) -> None:
        """The audit line of a change, once its outcome is known (what it asked, never a payload)."""
        audit.info(
            "%s by %s from %s: %s: %s", method, who.name if who else "-", peer, outcome, _describe(request)
        )

    def _check(self, method: str, request: Any, who: Principal) -> None:
        if method == "Enqueue":
            who.require("produce", {job.queue or "default" for job in request.jobs})
        elif method in _FILTERED:
            role = _FILTERED[method]
            self._check_filter(who, role, request.filter, method)
            if method == "UpdateJobs" and request.changes.HasField("queue"):
                who.require("admin", [request.changes.queue])
        elif method in _BY_QUEUE:
            who.require(_BY_QUEUE[method], [request.queue])
        elif method in _BY_ID:
            # GetJob by unique key names its queue: the lookup answers only within it.
            by_key = method == "GetJob" and (request.unique_key or request.queue)
            queue = (request.queue or "default") if by_key else self._queues_of([request.id]).get(request.id)
            roles = _BY_ID[method]
            if queue is not None and not any(who.may(role, queue) for role in roles):
                who.require(roles[-1], [queue])
        elif method == "SetCron":
            who.require("admin", {entry.job.queue or "default" for entry in request.entries})
        elif method == "ChangeCron":
            assert self.cron_queue is not None
            queue = self.cron_queue(request.name)
            if queue is not None:
                who.require("admin", [queue])
        elif method in ("Metrics", "History"):
            who.require_everywhere("read", "the server's metrics span")
        elif method == "Backup":
            who.require_everywhere("admin", "a backup copies")
        elif method in _WORKFLOWS:
            self._check_workflow(method, request, who)
        elif method in (
            "ListQueues",
            "ListCron",
            "ListWorkers",
            "ListBatches",
        ) and not who.may_somewhere("read"):
            who.require("read", ["*"])
        # GetTopology: any known token (clients need the map to route). Take and EnqueueStream
        # are checked per message (check_subscribe, Enqueue).

    def check_subscribe(self, subscribe: pb.Subscribe, who: Principal | None) -> None:
        if who is not None and self.checks_rights:
            who.require("work", list(subscribe.queues))

    def _queues_of(self, job_ids: list[int]) -> dict[int, str]:
        assert self.job_queues is not None
        return self.job_queues(job_ids)

    def _check_workflow(self, method: str, request: Any, who: Principal) -> None:
        """A batch belongs to the queues of its jobs and callbacks."""
        if method == "EnqueueWorkflow":
            who.require("produce", {s.job.queue or "default" for s in request.steps if s.HasField("job")})
        elif method == "AddToBatch":  # the new jobs join the batch's callbacks and results
            who.require("produce", {job.queue or "default" for job in request.jobs})
            who.require("produce", self._queues_of_batch(request.batch_id))
        elif method == "GetBatch":
            who.require("read", self._queues_of_batch(request.id))
        else:  # CancelWorkflow, RetryWorkflow: every shard changes its part, so no part may be refused
            who.require_everywhere("admin", "a workflow's jobs span queues and shards, and changing them")

    def _queues_of_batch(self, batch_id: int) -> frozenset[str]:
        """A batch's queues; none for one that does not exist (the call answers NOT_FOUND)."""
        found = self.batch_queues(batch_id) if self.batch_queues is not None else None
        return found or frozenset()

    def _check_filter(self, who: Principal, role: str, f: pb.JobFilter, method: str) -> None:
        if f.queues:
            who.require(role, list(f.queues))
        elif f.ids:
            who.require(role, set(self._queues_of(list(f.ids)).values()))
        else:
            who.require_everywhere(role, f"{method} without --queue or ids touches")

    def cut(self, method: str, response: Any, who: Principal | None) -> None:
        """Cut a listing to the queues the caller may read (in place)."""
        if who is None or not self.checks_rights:
            return
        if method == "ListQueues":
            keep = [q for q in response.queues if who.may("read", q.name)]
            del response.queues[:]
            response.queues.extend(keep)
        elif method == "ListCron":
            kept = [e for e in response.entries if who.may("read", e.job.queue or "default")]
            del response.entries[:]
            response.entries.extend(kept)
        elif method == "ListBatches":  # a batch is shown if it may read every queue of the batch
            seen = [
                b for b in response.batches if all(who.may("read", q) for q in self._queues_of_batch(b.id))
            ]
            del response.batches[:]
            response.batches.extend(seen)
        elif method == "ListWorkers":  # a worker stream is shown if it serves a queue it may read
            shown = [w for w in response.workers if any(who.may("read", q) for q in w.queues)]
            del response.workers[:]
            response.workers.extend(shown)


_NEED_NO_LOOKUP = frozenset({"Backup", "Metrics", "History"})
_WORKFLOWS = frozenset({"EnqueueWorkflow", "AddToBatch", "GetBatch", "CancelWorkflow", "RetryWorkflow"})


def outcome_of(response: Any) -> str:
    """What a change did, from its answer."""
    if isinstance(response, pb.ChangeResponse):
        return f"done ({len(response.changed)} changed, {len(response.rejected)} refused)"
    return "done"


def _describe(request: Any) -> str:
    """The request as its fields, with every payload left out (it may hold personal data)."""
    shown = type(request)()
    shown.CopyFrom(request)
    if isinstance(shown, pb.UpdateJobsRequest) and shown.changes.HasField("payload"):
        shown.changes.payload = b"<left out>"
    if isinstance(shown, pb.SetCronRequest):
        for entry in shown.entries:
            if entry.job.payload:
                entry.job.payload = b"<left out>"
    text = str(shown).replace("\n", " ").strip()
    return text if len(text) <= 300 else text[:300] + "..."
