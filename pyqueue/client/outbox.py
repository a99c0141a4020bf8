"""What a worker's Take stream sends: whatever queued since the last message, in one message
(starts, acks, failures, an extension and a release together). Shared by the sync and the asyncio
stream. Every item names the attempt it answers: a job id with its lease.

A start carries a callback the stream runs once the message is in gRPC's hands (the generator is
asked for the next one only after the last was written): a worker runs a job only after its start
is on the wire, so a job that kills its worker at once is still counted as having started.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from pyqueue.v1 import queue_pb2 as pb

CLOSE = object()
"""Queued last by `close()`: send what is left, then half-close the stream."""

DRAINED = object()
"""Queued when the server says it is stopping, after which no start is queued: the server learns
that every start of this worker has reached it."""


class Acked(NamedTuple):
    job_id: int
    lease: int
    result: bytes | None = None  # the return value (JSON) of a job that keeps its result


class Started(NamedTuple):
    job_id: int
    lease: int
    sent: Callable[[], None]


class Drained(NamedTuple):
    messages: list[pb.TakeRequest]
    sent: list[Callable[[], None]]  # run once the messages are written
    closing: bool


def drain(items: list[Any]) -> Drained:
    """The messages for a drained outbox; a second extension or release with other settings
    goes in a message of its own."""
    first = pb.TakeRequest()
    out = [first]
    starts = [i for i in items if type(i) is Started]
    if starts:
        first.start.ids.extend(s.job_id for s in starts)
        first.start.leases.extend(s.lease for s in starts)
    acks = [i for i in items if type(i) is Acked]
    if acks:
        first.ack.ids.extend(a.job_id for a in acks)
        first.ack.leases.extend(a.lease for a in acks)
        for a in acks:
            if a.result is not None:
                first.ack.results[a.job_id] = a.result
    fails = [i for i in items if isinstance(i, pb.Failure)]
    if fails:
        first.fail.failures.extend(fails)
    for n, extend in enumerate(i for i in items if isinstance(i, pb.Extend)):
        (first if n == 0 else _more(out)).extend.CopyFrom(extend)
    for n, release in enumerate(i for i in items if isinstance(i, pb.Release)):
        (first if n == 0 else _more(out)).release.CopyFrom(release)
    closing = any(i is CLOSE for i in items)
    first.closing = closing  # the server then knows the half-close is on purpose
    first.drained = any(i is DRAINED for i in items)
    if first.ByteSize() == 0:
        out.pop(0)
    return Drained(out, [s.sent for s in starts], closing)


def _more(out: list[pb.TakeRequest]) -> pb.TakeRequest:
    out.append(pb.TakeRequest())
    return out[-1]
