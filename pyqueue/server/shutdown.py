"""Stopping a gRPC server: the calls in hand finish (within the grace period), then every
connection is closed at once.

grpc's graceful stop also waits for each connection to answer its goodbye (a GOAWAY and a ping).
A client whose process is not reading at that moment, an idle sync channel in a web app between
requests say, never answers, and the stop waited out the whole grace period (10 s, once on the
router and again on each shard) with new calls already refused: a restart's outage, for nothing.
So the stop waits on the calls it counts (handlers.py), not on the connections.
"""

import asyncio
import contextlib
from collections.abc import Callable

import grpc.aio


class CallsInHand:
    """The Queue service's calls in progress: unary calls and open streams alike."""

    def __init__(self) -> None:
        self.count = 0
        self._none_left = asyncio.Event()

    def enter(self) -> None:
        self.count += 1

    def leave(self) -> None:
        self.count -= 1
        if not self.count:
            self._none_left.set()

    async def finished(self) -> None:
        """Return once no call is in progress."""
        if self.count:
            self._none_left.clear()
            await self._none_left.wait()


async def stop_server(
    server: grpc.aio.Server, calls: CallsInHand, grace_s: float, end_streams: Callable[[], None]
) -> None:
    """Refuse new calls, end the streams that wait on nothing (`end_streams`), let the calls in
    hand finish within `grace_s`, then cancel what is left and close every connection."""
    stopping = asyncio.ensure_future(server.stop(grace_s))
    end_streams()
    await asyncio.sleep(0)  # let the stop begin: new calls are refused from here
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(grace_s):
            await calls.finished()
    await server.stop(0)
    await stopping
