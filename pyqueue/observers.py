"""Integrations that watch jobs (Sentry's, in pyqueue.contrib.sentry): what they add to an
enqueue's headers, and what they do around a job's run in `pyqueue worker`.

An observer is registered once by its integration. With none registered (the default) both steps
cost one empty-list check. A run's watch spans the handler and the server's answer to its
outcome, so it learns whether a failure made the job dead (only the server knows its default
retries)."""

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol


class RunWatch(Protocol):
    def finished(self, outcome: Any, status: str | None) -> None:
        """The attempt's outcome (worker.execute.AttemptOutcome), and the job's status after
        the server took it ("completed", "ready", "scheduled", "dead"; None: no answer came)."""


class JobObserver(Protocol):
    def enqueue_headers(self) -> dict[str, str] | None:
        """Headers for the jobs of an enqueue made now (a trace to continue), or None."""

    def watch(self, job: Any) -> Any:
        """A context manager around one run of `job` (a client Job) that yields a RunWatch."""


_observers: list[JobObserver] = []


def register(observer: JobObserver) -> None:
    if observer not in _observers:
        _observers.append(observer)


def unregister(observer: JobObserver) -> None:
    if observer in _observers:
        _observers.remove(observer)


def enqueue_headers() -> dict[str, str] | None:
    if not _observers:
        return None
    merged: dict[str, str] = {}
    for observer in _observers:
        merged.update(observer.enqueue_headers() or {})
    return merged or None


class _Watches:
    def __init__(self, watches: list[RunWatch]) -> None:
        self.watches = watches

    def finished(self, outcome: Any, status: str | None) -> None:
        for watch in self.watches:
            watch.finished(outcome, status)


_NOBODY = _Watches([])


@contextmanager
def watching(job: Any) -> Iterator[RunWatch]:
    if not _observers:
        yield _NOBODY
        return
    with ExitStack() as stack:
        yield _Watches([stack.enter_context(observer.watch(job)) for observer in _observers])
