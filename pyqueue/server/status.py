"""Engine errors to gRPC status codes: the one place where that mapping lives."""

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import grpc
import grpc.aio

from pyqueue.engine import errors

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
        except errors.EngineError as exc:
            await abort(context, exc)
        except (grpc.aio.AbortError, asyncio.CancelledError):
            raise
        except Exception as exc:
            log.exception("%s failed", method.__name__)
            await context.abort(
                grpc.StatusCode.INTERNAL,
                f"{method.__name__} failed inside the server ({type(exc).__name__}); the server logged it",
            )

    return wrapper
