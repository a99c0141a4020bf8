"""Engine errors to gRPC status codes: the one place where that mapping lives."""

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import grpc
import grpc.aio

from pyqueue.engine import errors
from pyqueue.store.contract import DamagedReadError
from pyqueue.store.records import CorruptRecordError

log = logging.getLogger("pyqueue.server")

Context = grpc.aio.ServicerContext[Any, Any]
EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from the stubs


def code_for(error: errors.EngineError) -> grpc.StatusCode:
    return grpc.StatusCode[error.code]


async def abort(context: Context, error: errors.EngineError) -> NoReturn:
    await context.abort(code_for(error), str(error))
    raise AssertionError("unreachable: abort raises")


def answered(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Every RPC ends with a status that says what to fix: engine refusals by their code, and
    anything unexpected as INTERNAL (logged with its traceback), never UNKNOWN with a stack's text."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: Context) -> Any:
        try:
            return await method(self, request, context)
        except (grpc.aio.AbortError, asyncio.CancelledError):
            raise
        except Exception as exc:
            await context.abort(*status_of(method.__name__, exc))

    return wrapper


def status_of(name: str, exc: Exception) -> tuple[grpc.StatusCode, str]:
    """The status a call `name` that raised `exc` ends with (logged unless a refusal)."""
    if isinstance(exc, errors.EngineError):
        return code_for(exc), str(exc)
    if isinstance(exc, (CorruptRecordError, DamagedReadError)):
        log.error("%s met damaged data: %s", name, exc)
        return code_for(damaged(exc)), str(damaged(exc))
    log.error("%s failed", name, exc_info=exc)
    return (
        grpc.StatusCode.INTERNAL,
        f"{name} failed inside the server ({type(exc).__name__}); the server logged it",
    )


def damaged(exc: Exception) -> errors.DataLoss:
    return errors.DataLoss(
        f"the store is damaged: {exc}; `pyqueue check` (on a stopped server) lists what is damaged, "
        "`pyqueue restore` puts a backup back. What is whole is served meanwhile"
    )


class Refused(grpc.aio.AbortError):
    """An abort on a stream that answers in-band: the status becomes the answer, not the end."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class _InBand:
    """The context one request of such a stream is handled with: `abort` raises `Refused`."""

    def __init__(self, context: Context) -> None:
        self._context = context

    async def abort(self, code: grpc.StatusCode, details: str = "", *args: Any) -> NoReturn:
        raise Refused(code, details)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class AnsweringStream:
    """One stream served by `answer_each`. `end()` (the server stops) ends it at once while it
    waits for a request, or right after the answer in hand: an idle stream must not hold a
    shutdown for its grace period."""

    def __init__(self) -> None:
        self.task = asyncio.current_task()
        self.busy = False
        self.ending = False

    def end(self) -> None:
        self.ending = True
        if not self.busy and self.task is not None:
            self.task.cancel()


class AnsweringStreams(set[AnsweringStream]):
    """The open streams of one kind. Once `end_all()` ran (the server stops), a stream that opens
    after it, accepted just before the stop refused new calls, ends at once without reading: its
    client sends the request again, elsewhere, instead of waiting on a server that is going."""

    ending = False

    def end_all(self) -> None:
        self.ending = True
        for stream in tuple(self):
            stream.end()

    def open_again(self) -> None:
        """The server serves again (a node's public address reopened): streams stay open."""
        self.ending = False


async def answer_each(
    unary: Callable[[Any, Any], Awaitable[Any]],
    context: Context,
    refusal: Callable[[grpc.StatusCode, str], Any],
    streams: AnsweringStreams,
) -> None:
    """Serve a stream of requests with a unary method, answering each in order; a refused
    request is answered with `refusal(code, message)` and the stream goes on."""
    in_band = _InBand(context)
    me = AnsweringStream()
    me.ending = streams.ending
    streams.add(me)
    try:
        while not me.ending and (request := await context.read()) is not EOF:
            me.busy = True
            try:
                answer = await unary(request, in_band)
            except Refused as exc:
                answer = refusal(exc.code, exc.message)
            await context.write(answer)
            me.busy = False
    except asyncio.CancelledError:
        if not me.ending:
            raise
    finally:
        streams.discard(me)
