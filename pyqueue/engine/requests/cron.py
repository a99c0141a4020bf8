"""Periodic jobs in the single writer: set (upsert) entries, pause, resume or delete one, and
enqueue one tick: the job and the entry's new last tick in one batch, so a tick goes in once."""

from collections.abc import Sequence
from dataclasses import replace

from pyqueue.engine.cron_entry import PREFIX, CronEntry
from pyqueue.engine.errors import NotFound
from pyqueue.engine.ids import IdGenerator
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import NewJob
from pyqueue.engine.requests.base import Request
from pyqueue.engine.requests.producers import Enqueue
from pyqueue.engine.view import BatchView
from pyqueue.store import keys


def stored(view: BatchView, name: str) -> CronEntry | None:
    raw = view.get_meta(keys.meta_key(PREFIX + name))
    return None if raw is None else CronEntry.decode(name, raw)


class SetCron(Request):
    """Upsert entries as declared: schedule, timezone and job change; whether the entry is paused
    (an operator's call) and its last tick stay. A new entry counts its ticks from now."""

    def __init__(self, entries: Sequence[CronEntry]) -> None:
        super().__init__()
        self.entries = entries

    def apply(self, view: BatchView) -> None:
        saved = []
        for entry in self.entries:
            old = stored(view, entry.name)
            if old is None:
                entry = replace(entry, created_ms=view.now_ms, last_tick_ms=0)
            else:
                entry = replace(
                    entry, paused=old.paused, created_ms=old.created_ms, last_tick_ms=old.last_tick_ms
                )
            view.put_meta(entry.key, entry.encode())
            saved.append(entry)
        self.result = saved


class ChangeCron(Request):
    """Pause, resume or delete one entry."""

    def __init__(self, name: str, action: str) -> None:
        super().__init__()
        self.name = name
        self.action = action

    def apply(self, view: BatchView) -> None:
        entry = stored(view, self.name)
        if entry is None:
            raise NotFound(f"no periodic job named {self.name!r} (see `pyqueue cron`)")
        if self.action == "delete":
            view.put_meta(entry.key, None)
        else:
            entry = replace(entry, paused=self.action == "pause")
            if self.action == "resume" and entry.last_tick_ms < view.now_ms:
                # Resumed: the ticks missed while paused are not caught up.
                entry = entry.with_tick(view.now_ms)
            view.put_meta(entry.key, entry.encode())
        self.result = entry


class CronTick(Enqueue):
    """Enqueue the job of one tick, if the stored entry has not had it yet (compare and set)."""

    def __init__(self, name: str, tick_ms: int, job: NewJob, ids: IdGenerator, memory: Memory) -> None:
        super().__init__([job], ids, memory)
        self.name = name
        self.tick_ms = tick_ms

    def apply(self, view: BatchView) -> None:
        entry = stored(view, self.name)
        if entry is None or entry.paused or entry.last_tick_ms >= self.tick_ms:
            self.result = None  # deleted, paused, or this tick (or a later one) is in already
            return
        super().apply(view)
        view.put_meta(entry.key, entry.with_tick(self.tick_ms).encode())
