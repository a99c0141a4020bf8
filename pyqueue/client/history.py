"""The last hour of the server's queues, as `Client.history()` answers it (the dashboard's charts)."""

from dataclasses import dataclass

from pyqueue.v1 import queue_pb2 as pb


@dataclass(frozen=True)
class QueueHistory:
    """Counts per step, oldest first; `waits[i]` counts step i's waits per bound of `wait_bounds`
    (and one past the last)."""

    enqueued: list[int]
    completed: list[int]
    failed: list[int]
    dead: list[int]
    waits: list[list[int]]

    def wait_percentile(self, fraction: float, bounds: list[float]) -> list[float | None]:
        """Per step, the bound under which `fraction` of that step's waits fell (None: no wait;
        inf: past the last bound). A bucket's upper bound, so an estimate from above."""
        out: list[float | None] = []
        for counts in self.waits:
            total = sum(counts)
            if not total:
                out.append(None)
                continue
            rank, running = fraction * total, 0
            for bound, n in zip([*bounds, float("inf")], counts, strict=True):
                running += n
                if running >= rank:
                    out.append(bound)
                    break
        return out


@dataclass(frozen=True)
class History:
    """Each queue's steps. A shard keeps 256 queues by name; the events of any more are added up
    under the name "" (no queue has it), so a flood of queue names costs the server one more."""

    step_seconds: int
    last_step: int  # the step under way: unix seconds // step_seconds
    wait_bounds: list[float]
    queues: dict[str, QueueHistory]
    names: list[str]  # the queues with something in the window
    summed: "QueueHistory | None" = None  # every queue added up, by the server (asked with total)

    @property
    def first_step_start(self) -> float:
        """Unix seconds at which the oldest step began."""
        steps = len(next(iter(self.queues.values())).enqueued) if self.queues else 1
        return (self.last_step - steps + 1) * self.step_seconds

    def total(self) -> QueueHistory:
        """Every queue added up, step by step."""
        if self.summed is not None:
            return self.summed
        queues = list(self.queues.values())
        if not queues:
            return QueueHistory([], [], [], [], [])

        def add(field: str) -> list[int]:
            return [sum(values) for values in zip(*(getattr(q, field) for q in queues), strict=True)]

        waits = [
            [sum(ns) for ns in zip(*rows, strict=True)]
            for rows in zip(*(q.waits for q in queues), strict=True)
        ]
        return QueueHistory(add("enqueued"), add("completed"), add("failed"), add("dead"), waits)

    @classmethod
    def from_pb(cls, message: pb.HistoryResponse) -> "History":
        width = len(message.wait_bounds) + 1

        def steps(q: pb.QueueHistory) -> QueueHistory:
            return QueueHistory(
                list(q.enqueued),
                list(q.completed),
                list(q.failed),
                list(q.dead),
                [list(q.waits[i : i + width]) for i in range(0, len(q.waits), width)],
            )

        return cls(
            message.step_seconds,
            message.last_step,
            list(message.wait_bounds),
            {q.queue: steps(q) for q in message.queues},
            list(message.queue_names) or [q.queue for q in message.queues],
            steps(message.total) if message.HasField("total") else None,
        )
