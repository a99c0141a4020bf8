"""The durable marker's steps, driven directly: a step cancelled mid-write (a stop) and the stop's
own last step never write the mark beside each other, and the mark never goes back."""

import asyncio
import json
import threading
from pathlib import Path

from pyqueue.engine.services import DurableMarker
from pyqueue.store.durable_mark import MARK_FILE


class SlowStore:
    """A store whose sync waits for the test: the window in which a second step used to race."""

    def __init__(self) -> None:
        self.sequence = 0
        self.syncing = threading.Event()
        self.go_on = threading.Event()

    def latest_sequence(self) -> int:
        return self.sequence

    def sync(self) -> None:
        self.syncing.set()
        assert self.go_on.wait(30)


async def test_two_steps_at_once_write_one_whole_mark_that_never_goes_back(tmp_path: Path) -> None:
    store = SlowStore()
    marker = DurableMarker(store, tmp_path)  # type: ignore[arg-type]
    store.sequence = 10
    first = asyncio.ensure_future(marker.run_once())
    await asyncio.to_thread(store.syncing.wait, 30)  # the first step is inside its sync
    store.sequence = 20
    second = asyncio.ensure_future(marker.run_once())  # as stop() does, while the first writes
    await asyncio.sleep(0.05)
    store.go_on.set()
    await asyncio.gather(first, second)
    assert json.loads((tmp_path / MARK_FILE).read_text()) == {"sequence": 20}
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file left behind"
