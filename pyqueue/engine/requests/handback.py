"""In flight back to the queue without an ack or a fail: how the attempt ended decides what counts.

- released (never started): the attempt is taken back (attempts - 1), nothing is recorded, and the
  job is ready at once, in its old place (or scheduled after a delay the worker asked for);
- interrupted (started, stopped on purpose): the attempt counts and an error entry says so, but it
  never kills the job: a deploy is not the job's fault;
- lost (started, the worker vanished): the attempt counts and so does the loss; a job that has
  taken down `max_worker_losses` workers is dead instead of looping forever;
- recovered (in flight when the server died: a clean stop hands everything back first): the record
  says whether the attempt had started (the worker's start is written). Started, it was lost with
  the server, and counts toward the cap like a lost worker: a job that crashes the server while
  it is handled cannot loop through restarts forever. Not started (prefetched), it is released:
  counting those made jobs at the front of a queue die after a few crashes without ever running.

The lease is not taken back: an answer from the attempt that ended stays refused.
"""

from collections.abc import Sequence

from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Ending
from pyqueue.engine.requests.base import Transitions, write_error
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.view import BatchView, indexed
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
            if ending == Ending.RELEASED:
                record.attempts = max(record.attempts - 1, 0)
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

    def _schedule(self, view: BatchView, record: JobRecord, run_at_ms: int) -> None:
        before = indexed(record)
        record.status = Status.SCHEDULED
        record.expires_ms = 0
        record.run_at_ms = run_at_ms
        view.save(record, before)
        self.scheduled.append(record)
