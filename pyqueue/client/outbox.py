"""What a worker's Take stream sends: whatever queued since the last message, as few messages as
possible (all acks in one, all failures in one). Shared by the sync and the asyncio stream."""

from typing import Any

from pyqueue.v1 import queue_pb2 as pb

CLOSE = object()
"""Queued last by `close()`: send what is left, then half-close the stream."""


def messages(items: list[Any]) -> tuple[list[pb.TakeRequest], bool]:
    """The messages for a drained outbox (job ids are acks), and whether the stream should close."""
    out = []
    acks = [i for i in items if isinstance(i, int)]
    fails = [i for i in items if isinstance(i, pb.Failure)]
    if acks:
        out.append(pb.TakeRequest(ack=pb.Ack(ids=acks)))
    if fails:
        out.append(pb.TakeRequest(fail=pb.Fail(failures=fails)))
    out.extend(pb.TakeRequest(extend=i) for i in items if isinstance(i, pb.Extend))
    return out, any(i is CLOSE for i in items)
