"""The pacing of a client connection whose streams answer ids they do not hold (server/take.py)."""

import asyncio
import time

from pyqueue.server.take import STRAY_PAUSE_S, StrayPacer


def test_stray_ids_delay_the_connections_next_read_and_the_pauses_add_up() -> None:
    async def scenario() -> tuple[float, float]:
        pacer = StrayPacer()
        started = time.monotonic()
        await pacer.wait()  # nothing owed: no pause
        free = time.monotonic() - started
        pacer.charge(5_000)  # one stream of the connection
        pacer.charge(5_000)  # another: the pauses add up
        started = time.monotonic()
        await pacer.wait()
        return free, time.monotonic() - started

    free, paused = asyncio.run(scenario())
    assert paused >= 10_000 * STRAY_PAUSE_S * 0.95  # the loop's clock is coarse by a hair
    assert free < paused
