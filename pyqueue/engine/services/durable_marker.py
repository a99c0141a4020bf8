"""The durable marker: writes the store's durable mark (store/durable_mark.py) once a second while
commits come in, and once more at a clean stop, so that a lost write-ahead log is found at the next
start. `run_once` is one step: read the latest sequence, sync the log (so every commit up to that
sequence is on disk, in buffered mode too), then write the mark. A second of commits is what a log
deleted right after a write could lose unnoticed; the cost is one sync and one small file a second.
"""

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from pyqueue.engine.services.base import Service
from pyqueue.store.contract import Store
from pyqueue.store.durable_mark import read_mark, write_mark

log = logging.getLogger("pyqueue.durable")


@dataclass(frozen=True, slots=True)
class MarkerConfig:
    every_s: float = 1.0


class DurableMarker(Service):
    name = "durable-marker"

    def __init__(self, store: Store, store_dir: Path, config: MarkerConfig = MarkerConfig()) -> None:
        super().__init__()
        self._store = store
        self._dir = store_dir
        self.config = config
        self.marked: int | None = None
        # One mark written at a time: a step cancelled by stop() goes on in its thread, and the
        # last step of stop() must not write the same temporary file beside it (it did: the
        # second replace found the file gone, and the server exited 1 at its stop).
        self._writing = threading.Lock()
        self._written: int | None = None  # the last mark written (under the lock)

    def start(self) -> None:
        if not self.running:
            self.marked = read_mark(self._dir)
        super().start()

    async def stop(self) -> None:
        """Stop, after a last mark (the caller's writer has stopped: nothing commits after it)."""
        if self._task is None:
            return
        await super().stop()
        try:
            await self.run_once()
        except OSError as exc:  # a disk that refuses now: the next start checks the last mark
            log.warning("could not write the durable mark at the stop: %s", exc)

    async def run_once(self) -> bool:
        """Mark what is committed now, if it moved; whether a mark was written."""
        latest = self._store.latest_sequence()
        if latest == self.marked:
            return False
        await asyncio.to_thread(self._mark, latest)
        self.marked = latest
        return True

    def _mark(self, latest: int) -> None:
        with self._writing:
            if self._written is not None and latest <= self._written:
                return  # a later step got here first: the mark never goes back
            self._store.sync()
            write_mark(self._dir, latest)
            self._written = latest

    async def _idle(self, done: bool | None, failed: bool) -> None:
        await asyncio.sleep(self.config.every_s)

    def _failed(self, exc: Exception) -> None:
        if not isinstance(exc, OSError):  # a disk that refuses: the writer says so itself
            super()._failed(exc)
