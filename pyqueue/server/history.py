"""The History RPC: one shard's hour (engine/history.py) on the wire, and the shards' hours merged.

Steps are numbered from the wall clock, so two shards' answers line up by `last_step`; one that
answered a step earlier (the step turned between the two reads) is shifted into place. A queue
lives on one shard, but merging adds the counts, so a queue seen twice stays right.
"""

from collections.abc import Iterable
from typing import Any

from pyqueue.engine.history import QueueSteps, StepCounts
from pyqueue.v1 import queue_pb2 as pb

_EVENTS = ("enqueued", "completed", "failed", "dead")


def shard_history(history: StepCounts, request: pb.HistoryRequest) -> pb.HistoryResponse:
    """What the request asks for: the total, one queue, or (neither) every queue."""
    answer = pb.HistoryResponse(step_seconds=history.step_seconds, wait_bounds=history.wait_bounds)
    if request.total:
        answer.last_step, total, names = history.read_total()
        answer.total.CopyFrom(_queue_pb("", total))
        answer.queue_names.extend(names)
        return answer
    answer.last_step, queues = history.read(request.queue or None)
    answer.queues.extend(_queue_pb(name, q) for name, q in sorted(queues.items()))
    answer.queue_names.extend(history.names() if request.queue else sorted(queues))
    return answer


def _queue_pb(name: str, q: QueueSteps) -> pb.QueueHistory:
    return pb.QueueHistory(
        queue=name, waits=[n for row in q.waits for n in row], **{event: q.events[event] for event in _EVENTS}
    )


def merge(answers: Iterable[pb.HistoryResponse]) -> pb.HistoryResponse:
    answers = list(answers)
    if not answers:
        return pb.HistoryResponse()
    first = answers[0]
    width = len(first.wait_bounds) + 1
    last = max(a.last_step for a in answers)
    merged: dict[str, pb.QueueHistory] = {}
    total: pb.QueueHistory | None = None
    for answer in answers:
        late = last - answer.last_step  # steps this answer is behind the newest
        for q in answer.queues:
            merged[q.queue] = _add(merged.get(q.queue), q, late, width)
        if answer.HasField("total"):
            total = _add(total, answer.total, late, width)
    out = pb.HistoryResponse(
        step_seconds=first.step_seconds,
        last_step=last,
        wait_bounds=first.wait_bounds,
        queues=[merged[name] for name in sorted(merged)],
        queue_names=sorted({name for a in answers for name in a.queue_names}),
    )
    if total is not None:
        out.total.CopyFrom(total)
    return out


def _add(into: pb.QueueHistory | None, q: pb.QueueHistory, late: int, width: int) -> pb.QueueHistory:
    if into is None:
        into = pb.QueueHistory(queue=q.queue)
        for event in _EVENTS:
            getattr(into, event).extend([0] * len(getattr(q, event)))
        into.waits.extend([0] * len(q.waits))
    for event in _EVENTS:
        _add_shifted(getattr(into, event), getattr(q, event), late)
    _add_shifted(into.waits, q.waits, late * width)
    return into


def _add_shifted(into: Any, values: Any, shift: int) -> None:
    """Adds `values` into `into`, moved `shift` places towards the start (older steps drop off)."""
    for i, n in enumerate(values):
        if n and 0 <= i - shift < len(into):
            into[i - shift] += n
