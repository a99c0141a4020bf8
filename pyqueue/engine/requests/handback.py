"""In flight back to the queue without an ack or a fail: how the attempt ended decides what counts.

- released (never started): the attempt is taken back (attempts - 1), nothing is recorded, and the
  job is ready at once, in its old place (or scheduled after a delay the worker asked for);
- interrupted (started, stopped on purpose): the attempt counts and an error entry says so, but it
  never kills the job: a deploy is not the job's fault;
- lost (started, the worker vanished): the attempt counts and so does the loss; a job that has
  taken down `max_worker_losses` workers is dead instead of looping forever;
- handed back as of an unknown type (the worker has no function for it): released, and counted
  in the job's error history; at the policy's `max_unknown_handbacks` the job is dead, so a job no
  worker can run (a function defined in a script's __main__, say) does not circle forever;
- recovered (in flight when the server died: a clean stop hands everything back first): the record
  says whether the attempt had started (the worker's start is written). Started, it was lost with
  the server, and counts toward the cap like a lost worker: a job that crashes the server while
  it is handled cannot loop through restarts forever. Not started (prefetched), it is released:
  counting those made jobs at the front of a queue die after a few crashes without ever running.

The lease is not taken back: an answer from the attempt that ended stays refused.
"""

import json
from collections.abc import Sequence

from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Ending
from pyqueue.engine.requests.base import Transitions, write_error
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.view import BatchView, indexed
from pyqueue.store import keys
from pyqueue.store.contract import Family
from pyqueue.store.records import JobRecord, Status

_INTERRUPTED = "the attempt was interrupted: its worker stopped (or the server did) before it finished"


class HandBack(Transitions):
    needs_sync = False  # lost in a crash, the job is simply in flight again and recovered to ready

    def __init__(
        self,
        items: Sequence[tuple[int, int | None, Ending]],
        memory: Memory,
        policy: RetryPolicy,
        delay_ms: int = 0,
    ) -> None:
        super().__init__(memory)
        self.items = items
        self.policy = policy
        self.delay_ms = delay_ms

    def apply(self, view: BatchView) -> None:
        records = view.records([job_id for job_id, _, _ in self.items])
        for (_, lease, ending), record in zip(self.items, records, strict=True):
            if record is None or record.status != Status.IN_FLIGHT:
                continue
            if lease is not None and record.lease != lease:
                continue
            if self.bury(view, record, self.policy.keep_dead_ms):
                continue
            self.handling = record.id
            if self.cancelled(view, record, self.policy.keep_dead_ms):
                continue
            last = "its worker vanished"
            if ending == Ending.RECOVERED:
                ending = Ending.LOST if record.started_ms else Ending.RELEASED
                last = "the server stopped while it ran"
            if ending in (Ending.RELEASED, Ending.UNKNOWN_TYPE):
                record.attempts = max(record.attempts - 1, 0)
                if ending == Ending.UNKNOWN_TYPE and self._unknown_too_often(view, record):
                    self.finish(view, record, Status.DEAD, self.policy.keep_dead_ms)
                    continue
                if self.delay_ms:
                    self._schedule(view, record, view.now_ms + self.delay_ms)
                    continue
            elif ending == Ending.INTERRUPTED:
                write_error(view, record, "interrupted", _INTERRUPTED)
            elif ending == Ending.LOST:
                record.lost += 1
                view.events["lost", record.queue] += 1
                if record.lost >= self.policy.max_worker_losses:
                    write_error(
                        view,
                        record,
                        "lost",
                        f"{record.lost} attempts of this job were lost with their worker or the server "
                        f"(the last: {last}); it is dead so that it stops taking them down",
                    )
                    self.finish(view, record, Status.DEAD, self.policy.keep_dead_ms)
                    continue
            self.make_ready(view, record)
        self.result = [r.id for r in self.ready] + [r.id for r in self.scheduled]

    def _unknown_too_often(self, view: BatchView, record: JobRecord) -> bool:
        """Count a hand-back by a worker that lacks the job's type, in one error entry at attempt
        0 (no attempt is charged, so no other entry is there): it goes with the job's history.
        True once the count reaches the policy's cap: the job is then dead."""
        key = keys.error_key(record.id, 0)
        raw = view.store.get(Family.DATA, key)
        count = 1 + (json.loads(raw).get("count", 0) if raw else 0)
        cap = self.policy.max_unknown_handbacks
        dead = count >= cap
        entry = {
            "attempt": 0,
            "at_ms": view.now_ms,
            "kind": "unknown_type",
            "message": (
                f"handed back {count} time{'' if count == 1 else 's'} by workers that have no job "
                f"function named {record.type!r}"
                + (
                    f"; dead after {cap} (--max-unknown-handbacks): deploy a worker that has it, then "
                    "retry the job"
                    if dead
                    else ""
                )
            ),
            "error_type": "UnknownJobType",
            "backtrace": "",
            "count": count,
        }
        view.batch.put(Family.DATA, key, json.dumps(entry).encode())
        if raw is None:
            record.errors += 1
        return dead

    def _schedule(self, view: BatchView, record: JobRecord, run_at_ms: int) -> None:
        before = indexed(record)
        record.status = Status.SCHEDULED
        record.expires_ms = 0
        record.run_at_ms = run_at_ms
        view.save(record, before)
        self.scheduled.append(record)
