"""Wake-ups for waiting Take streams: "jobs are available in queue Q", with a claim token.

Runs on the server's event loop. An announcement hands one fresh ClaimToken to every stream that
serves the queue and has room for more jobs; only the stream that flips the token goes to claim,
the others go back to sleep. A winner that leaves jobs behind announces again, so the next stream
with room gets its turn. Wake-ups are direct calls, not a bounded channel, so no stream can fall
behind and miss one.
"""

from collections.abc import Iterable
from typing import Protocol

from pyqueue._native import ClaimToken


class Listener(Protocol):
    queues: tuple[str, ...]

    def wants_jobs(self) -> bool: ...

    def offer(self, token: ClaimToken | None) -> None:
        """Wake up; None means "look without a token" (the start-up rebuild finished)."""


class Dispatcher:
    def __init__(self) -> None:
        self._by_queue: dict[str, set[Listener]] = {}
        self.announcements = 0

    def register(self, listener: Listener) -> None:
        for queue in listener.queues:
            self._by_queue.setdefault(queue, set()).add(listener)

    def unregister(self, listener: Listener) -> None:
        for queue in listener.queues:
            listeners = self._by_queue.get(queue)
            if listeners is not None:
                listeners.discard(listener)
                if not listeners:
                    del self._by_queue[queue]

    def announce(self, queues: Iterable[str]) -> None:
        for queue in queues:
            listeners = self._by_queue.get(queue)
            if not listeners:
                continue
            self.announcements += 1
            token = ClaimToken()
            for listener in tuple(listeners):
                if listener.wants_jobs():
                    listener.offer(token)

    def listeners(self, queue: str) -> tuple[Listener, ...]:
        return tuple(self._by_queue.get(queue, ()))

    def wake_all(self) -> None:
        for listeners in tuple(self._by_queue.values()):
            for listener in tuple(listeners):
                listener.offer(None)
